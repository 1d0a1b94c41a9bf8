"""Shape arithmetic shared by ops of every dtype: broadcasting."""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported


def broadcast_shape(shapes, what: str) -> tuple[int, ...]:
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise OpUnsupported(f"{what}: shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast") from None
    if len(out) > 8:
        raise OpUnsupported(f"{what}: output rank {len(out)} is above 8")
    return out
