"""Example feeds for a session: what `run`, `bench`, `verify` and the report use when the
user gives no inputs."""
from __future__ import annotations

import numpy as np


def example_inputs(sess, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in sess.get_inputs():
        shape = [hi for _, hi in t.bounds] if t.bounds else t.shape  # bounded dimensions: the upper bounds
        if t.dtype.kind == "f":
            feeds[t.name] = rng.standard_normal(shape).astype(t.dtype)
        elif t.dtype.kind == "b":
            feeds[t.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[t.name] = rng.integers(0, 10, shape).astype(t.dtype)
    return feeds
