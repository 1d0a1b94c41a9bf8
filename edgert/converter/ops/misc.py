"""cumsum, trilu, topk (ONNX semantics, static attributes).

cumsum (inputs: x, float32 / int32 / int64)
    attrs  axis: int (0 <= axis < rank), exclusive: 0 | 1, reverse: 0 | 1
    out    running sums along axis (integers wrap around on overflow)
    words  0 axis, 1 exclusive, 2 reverse

trilu (inputs: x, rank >= 2, any dtype)
    attrs  upper: 0 | 1, k: int (diagonal offset)
    out    x where (upper: j - i >= k; lower: j - i <= k) over the last two dims
           (row i, column j), else 0
    words  0 upper, 1 k (clamped to the int32 range)

topk (inputs: x, float32 or an integer dtype; outputs: values, indices (int64))
    attrs  axis: int, k: int (0 <= k <= x.shape[axis]), largest: 0 | 1, sorted: 0 | 1
    out    the k largest (or smallest) elements along axis, best first; equal values
           come in increasing index order; NaN counts as larger than every number.
           Output is always sorted (sorted=0 leaves the order unspecified in ONNX).
    words  0 axis, 1 k, 2 largest, 3 sorted
    scratch  4*k bytes (the positions of the current best k)
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, in_shapes, register, require_dtype
from .shape_ops import data_dtype

_I32 = 2**31 - 1


# ---- cumsum -------------------------------------------------------------------

def _cumsum_infer(node, graph):
    dt = require_dtype(node, graph, 0, (np.float32, np.int32, np.int64))
    xs = in_shapes(node, graph)[0]
    axis = int(node.attrs["axis"])
    if not 0 <= axis < len(xs):
        raise OpUnsupported(f"cumsum: axis {axis} out of range for rank {len(xs)}")
    return [(tuple(xs), dt)]


def _cumsum_ref(node, ins):
    x = ins[0]
    axis = node.attrs["axis"]
    if node.attrs.get("reverse", 0):
        x = np.flip(x, axis)
    with np.errstate(over="ignore"):
        y = np.cumsum(x, axis=axis, dtype=x.dtype)
    n = x.shape[axis]
    if node.attrs.get("exclusive", 0) and n:
        # Shift by one along axis: element k holds the sum of the elements before it.
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis=axis)), np.take(y, np.arange(n - 1), axis=axis)],
                           axis=axis)
    if node.attrs.get("reverse", 0):
        y = np.flip(y, axis)
    return [np.ascontiguousarray(y.astype(ins[0].dtype))]


register("cumsum", infer=_cumsum_infer,
         pack=lambda node, graph: [int(node.attrs["axis"]), int(node.attrs.get("exclusive", 0)),
                                   int(node.attrs.get("reverse", 0))],
         reference=_cumsum_ref)


# ---- trilu --------------------------------------------------------------------

def _trilu_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    if len(xs) < 2:
        raise OpUnsupported(f"trilu: rank {len(xs)} < 2")
    return [(tuple(xs), dt)]


def _trilu_k(node) -> int:
    return max(-_I32, min(_I32, int(node.attrs.get("k", 0))))


def _trilu_ref(node, ins):
    x = ins[0]
    k = _trilu_k(node)
    f = np.triu if node.attrs.get("upper", 1) else np.tril
    return [np.ascontiguousarray(f(x, k))]


register("trilu", infer=_trilu_infer,
         pack=lambda node, graph: [int(bool(node.attrs.get("upper", 1))), _trilu_k(node)],
         reference=_trilu_ref)


# ---- topk ---------------------------------------------------------------------

_TOPK_DTYPES = (np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64)


def _topk_infer(node, graph):
    dt = require_dtype(node, graph, 0, _TOPK_DTYPES)
    xs = in_shapes(node, graph)[0]
    axis = int(node.attrs["axis"])
    k = int(node.attrs["k"])
    if not 0 <= axis < len(xs):
        raise OpUnsupported(f"topk: axis {axis} out of range for rank {len(xs)}")
    if not 0 <= k <= xs[axis]:
        raise OpUnsupported(f"topk: k={k} outside [0, {xs[axis]}]")
    out = list(xs)
    out[axis] = k
    return [(tuple(out), dt), (tuple(out), np.dtype(np.int64))]


def _topk_ref(node, ins):
    x = ins[0]
    axis, k = node.attrs["axis"], node.attrs["k"]
    largest = node.attrs.get("largest", 1)
    xm = np.moveaxis(x, axis, -1)
    n = xm.shape[-1]
    pos = np.broadcast_to(np.arange(n), xm.shape)
    if x.dtype.kind == "f":
        nan = np.isnan(xm)
        key = np.where(nan, 0, xm).astype(np.float64)
        # NaN ranks above every number: sort by (is-NaN, value, index).
        nan = nan.astype(np.int8)
        keys = (pos, -key, -nan) if largest else (pos, key, nan)
    else:
        key = xm.astype(np.int64)
        keys = (pos, ~key) if largest else (pos, key)  # ~v orders like -v, without overflow
    order = np.lexsort(keys, axis=-1)[..., :k]
    vals = np.take_along_axis(xm, order, axis=-1)
    return [np.ascontiguousarray(np.moveaxis(vals, -1, axis)),
            np.ascontiguousarray(np.moveaxis(order.astype(np.int64), -1, axis))]


register("topk", infer=_topk_infer,
         pack=lambda node, graph: [int(node.attrs["axis"]), int(node.attrs["k"]),
                                   int(bool(node.attrs.get("largest", 1))), int(bool(node.attrs.get("sorted", 1)))],
         reference=_topk_ref, scratch=lambda node, graph: 4 * max(int(node.attrs["k"]), 1))
