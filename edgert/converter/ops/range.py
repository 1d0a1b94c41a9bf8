"""range: start, limit, delta (one value each, of one dtype: float32, int32 or int64) ->
the 1-D sequence start, start + delta, ... short of limit (ONNX Range). Kernel:
csrc/kernels/ref/range.c.

Length max(ceil((limit - start) / delta), 0): limit - start in the dtype, the division in
double for float32 (as onnxruntime computes it), exact for the integer dtypes. Each value
is the previous one plus delta in the dtype, as the loop of the ONNX definition
accumulates. Only bounded conversions emit it (constant operands are folded), where the
length follows the input size: the runtime computes the length from the operands'
values (docs/runtime.md, "Shape programs").

attrs  length: int, the length at the size converted (the output's shape in the file)
words  none
"""
from __future__ import annotations

import math

import numpy as np

from .registry import OpUnsupported, register

DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64))


def range_length(start, limit, delta) -> int:
    """The length (the kernel's formula); OpUnsupported when delta is 0 or the length is
    not a number below 2^31."""
    dt = np.asarray(start).dtype
    if dt.kind == "f":
        s, lim, d = (np.float32(np.asarray(v).reshape(-1)[0]) for v in (start, limit, delta))
        with np.errstate(all="ignore"):
            q = float(np.float32(lim - s)) / float(d) if d != 0 else math.nan
        if d == 0 or math.isnan(q) or q > 2**31 - 1:
            raise OpUnsupported(f"range({s}, {lim}, {d}) has no length below 2^31")
        return 0 if q <= 0 else math.ceil(q)
    s, lim, d = (int(np.asarray(v).reshape(-1)[0]) for v in (start, limit, delta))
    if d == 0:
        raise OpUnsupported("range: delta is 0")
    n = max(0, -((s - lim) // d))
    if n > 2**31 - 1:
        raise OpUnsupported(f"range({s}, {lim}, {d}) has more than 2^31 - 1 values")
    return n


def range_values(start, limit, delta) -> np.ndarray:
    dt = np.asarray(start).dtype
    n = range_length(start, limit, delta)
    s, d = np.asarray(start).reshape(-1)[0], np.asarray(delta).reshape(-1)[0]
    if dt.kind == "f":  # each value the previous one plus delta, in float32
        steps = np.full(n, d, np.float32)
        if n:
            steps[0] = s
        return np.cumsum(steps, dtype=np.float32)
    with np.errstate(over="ignore"):
        return (np.int64(s) + np.arange(n, dtype=np.int64) * np.int64(d)).astype(dt)


def _infer(node, graph):
    ts = [graph.tensors[i] for i in node.inputs] if len(node.inputs) == 3 and all(node.inputs) else None
    if ts is None:
        raise OpUnsupported("range: needs start, limit and delta")
    dt = ts[0].dtype
    if dt not in DTYPES or any(t.dtype != dt for t in ts):
        raise OpUnsupported(f"range: operands of dtypes {[str(t.dtype) for t in ts]}; supported: one of "
                            f"float32, int32, int64")
    if any(math.prod(t.shape) != 1 for t in ts):
        raise OpUnsupported("range: each operand must hold one value")
    if all(t.is_const for t in ts) and range_length(*(t.data for t in ts)) != int(node.attrs["length"]):
        raise OpUnsupported("range: its length attribute differs from its operands'")
    return [((int(node.attrs["length"]),), dt)]


register("range", infer=_infer, pack=lambda node, graph: [], reference=lambda node, ins: [range_values(*ins)])
