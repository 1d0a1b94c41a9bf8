"""Example feeds for a session: what `run`, `bench`, `verify` and the report use when the
user gives no inputs."""
from __future__ import annotations

import numpy as np


def example_inputs(sess, seed: int = 0, shapes: dict[str, list[int]] | None = None) -> dict[str, np.ndarray]:
    """Random inputs of the session's inputs; a bounded input at shapes[name] when given,
    else at its upper bounds (InputError for an unknown name)."""
    from ..errors import InputError
    rng = np.random.default_rng(seed)
    feeds = {}
    names = [t.name for t in sess.get_inputs()]
    unknown = sorted(set(shapes or ()) - set(names))
    if unknown:
        raise InputError(f"--input-shape names {unknown}; the model's inputs are {names}")
    for t in sess.get_inputs():
        shape = [hi for _, hi in t.bounds] if t.bounds else t.shape  # bounded dimensions: the upper bounds
        shape = (shapes or {}).get(t.name, shape)
        if t.dtype.kind == "f":
            feeds[t.name] = rng.standard_normal(shape).astype(t.dtype)
        elif t.dtype.kind == "b":
            feeds[t.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[t.name] = rng.integers(0, 10, shape).astype(t.dtype)
    return feeds
