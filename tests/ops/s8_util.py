"""Runs one edgert node built directly in the IR (no ONNX), for the int8 op tests:
the C kernel's output next to the numpy reference's."""
from __future__ import annotations

import numpy as np

from edgert.converter import ops
from edgert.converter.pipeline import serialize
from edgert.converter.ir import Graph
from edgert.runtime.session import Session


def run_node(op: str, inputs: list[tuple[np.ndarray, bool]], attrs: dict | None = None,
             threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """inputs: (array, is_constant) in order. Returns (edgert output, reference output)."""
    g = Graph()
    names = []
    feeds = {}
    for k, (arr, const) in enumerate(inputs):
        arr = np.ascontiguousarray(arr)
        name = f"in{k}"
        g.add_tensor(name, arr.shape, arr.dtype, arr if const else None)
        if not const:
            g.inputs.append(name)
            feeds[name] = arr
        names.append(name)
    node = g.add_node(op, names, ["y"], dict(attrs or {}))
    (shape, dt), = ops.get(op).infer(node, g)
    g.add_tensor("y", shape, dt)
    g.outputs = ["y"]
    data = serialize(g)
    got = Session(data, threads=threads).run(None, feeds)[0]
    want = ops.get(op).reference(node, [a for a, _ in inputs])[0]
    return got, want


def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        i = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} of {got.size} differ, first at {i}: {got[i]} != {want[i]}")


def rand_s8(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def rand_qp(rng, channels: int, bias_max: int = 5000, m_lo: float = 1e-4,
            m_hi: float = 0.05) -> tuple[np.ndarray, int]:
    """A random (bias, mult) table with real multipliers in [m_lo, m_hi], and its shift."""
    from edgert.converter.quant.fixedpoint import shared_shift_multipliers

    mult, shift = shared_shift_multipliers(np.exp(rng.uniform(np.log(m_lo), np.log(m_hi), channels)))
    bias = rng.integers(-bias_max, bias_max + 1, channels)
    return np.stack([bias, mult], axis=1).astype(np.int32), shift
