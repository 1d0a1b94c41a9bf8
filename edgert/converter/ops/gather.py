"""Indexing ops: gather, gather_elements, scatter_elements, one_hot (ONNX semantics).

Index tensors are int32 or int64 and may be runtime data. Negative indices count from
the end of the indexed dim (ONNX). A runtime index outside [-n, n) is an error of
the run in gather, gather_elements and scatter_elements, as in onnxruntime (the C
runtime returns EDGERT_ERR_INDEX naming the node; the references raise IndexError);
one_hot follows ONNX, where such an index is valid and leaves its row at the off
value. Constant indices outside the range are rejected at convert time and by the C
prepare.

gather (inputs: data, indices)
    attrs  axis: int (0 <= axis < rank(data))
    out    data.shape[:axis] + indices.shape + data.shape[axis+1:], data's dtype
    words  0 axis

gather_elements (inputs: data, indices; rank(indices) == rank(data) >= 1,
                 indices.shape[d] <= data.shape[d] for d != axis)
    attrs  axis: int
    out    indices.shape; out[i] = data[i with coordinate axis replaced by indices[i]]
    words  0 axis

scatter_elements (inputs: data, indices, updates; updates.shape == indices.shape, the
                  same rank and bounds as gather_elements; in-place: the output may
                  share data's buffer)
    attrs  axis: int, reduction: "none" | "add" | "mul" | "max" | "min"
    out    a copy of data where, for each i in order, out[i with coordinate axis
           replaced by indices[i]] = updates[i] (or combined with it by the reduction)
    words  0 axis, 1 reduction (0 none, 1 add, 2 mul, 3 max, 4 min)
    dtypes any for "none"; float32 and the integer types for reductions

one_hot (inputs: indices, int32 / int64 / float32 (truncated toward zero))
    attrs  axis: int (0 <= axis <= rank(indices)), depth: int >= 1, off, on: numbers,
           dtype: str (output dtype name)
    out    indices.shape with depth inserted at axis; out[..., j, ...] = on where
           j == indices[...] (negative indices add depth), else off
    words  0 axis, 1 depth, 2-3 off value bytes, 4-5 on value bytes (see pad in
           shape_ops: little endian, zero-extended to 8 bytes)
"""
from __future__ import annotations

import numpy as np

from ... import dtypes
from .registry import OpUnsupported, in_shapes, register, require_dtype
from .shape_ops import data_dtype, value_words

INDEX_DTYPES = (np.int32, np.int64)
REDUCTIONS = ("none", "add", "mul", "max", "min")
_REDUCIBLE = tuple(np.dtype(d) for d in (np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64))


def _check_const_indices(node, graph, idx: int, n: int) -> None:
    v = graph.const(node.inputs[idx])
    if v is not None and v.size and (v.min() < -n or v.max() >= n):
        raise OpUnsupported(f"{node.op}: constant indices outside [{-n}, {n})")


def _check_range(node, idx: np.ndarray, n: int) -> None:
    """Raises IndexError, as the C kernels fail the run, for an index outside [-n, n)."""
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        v = int(idx[bad].flat[0])
        raise IndexError(f"node '{node.name}' ({node.op}): index {v} out of range [{-n}, {n})")


def _wrap(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(wrapped indices clipped into range, validity mask)."""
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + n, idx)
    ok = (idx >= 0) & (idx < n)
    return np.where(ok, idx, 0), ok


# ---- gather -------------------------------------------------------------------

def _gather_infer(node, graph):
    dt = data_dtype(node, graph)
    require_dtype(node, graph, 1, INDEX_DTYPES)
    ds, ixs = in_shapes(node, graph)
    axis = int(node.attrs["axis"])
    if not 0 <= axis < len(ds):
        raise OpUnsupported(f"gather: axis {axis} out of range for rank {len(ds)}")
    if len(ds) + len(ixs) - 1 > 8:
        raise OpUnsupported("gather: output rank exceeds 8")
    _check_const_indices(node, graph, 1, ds[axis])
    return [(tuple(ds[:axis]) + tuple(ixs) + tuple(ds[axis + 1:]), dt)]


def _gather_ref(node, ins):
    data, idx = ins
    axis = node.attrs["axis"]
    _check_range(node, idx, data.shape[axis])
    w, ok = _wrap(idx, data.shape[axis])
    if data.shape[axis] == 0:
        shape = data.shape[:axis] + idx.shape + data.shape[axis + 1:]
        return [np.zeros(shape, data.dtype)]
    y = np.take(data, w, axis=axis)
    mask = ok.reshape((1,) * axis + ok.shape + (1,) * (data.ndim - axis - 1))
    return [np.ascontiguousarray(np.where(mask, y, np.zeros((), data.dtype)))]


register("gather", infer=_gather_infer, pack=lambda node, graph: [int(node.attrs["axis"])],
         reference=_gather_ref)


# ---- gather_elements / scatter_elements ------------------------------------------

def _elements_check(node, ds, ixs, axis) -> None:
    if len(ds) != len(ixs) or len(ds) == 0:
        raise OpUnsupported(f"{node.op}: data {ds} and indices {ixs} must have the same rank >= 1")
    if not 0 <= axis < len(ds):
        raise OpUnsupported(f"{node.op}: axis {axis} out of range for rank {len(ds)}")
    for d in range(len(ds)):
        if d != axis and ixs[d] > ds[d]:
            raise OpUnsupported(f"{node.op}: indices {ixs} exceed data {ds} off axis {axis}")


def _gather_elements_infer(node, graph):
    dt = data_dtype(node, graph)
    require_dtype(node, graph, 1, INDEX_DTYPES)
    ds, ixs = in_shapes(node, graph)
    axis = int(node.attrs["axis"])
    _elements_check(node, ds, ixs, axis)
    if ds[axis] == 0 and int(np.prod(ixs)) > 0 and graph.const(node.inputs[1]) is not None:
        raise OpUnsupported("gather_elements: constant indices into an empty dim")
    _check_const_indices(node, graph, 1, ds[axis])
    return [(tuple(ixs), dt)]


def _elements_coords(data_shape, idx, axis):
    w, ok = _wrap(idx, data_shape[axis])
    coords = list(np.indices(idx.shape, sparse=True))
    coords[axis] = w
    return tuple(coords), ok


def _gather_elements_ref(node, ins):
    data, idx = ins
    axis = node.attrs["axis"]
    _check_range(node, idx, data.shape[axis])
    if data.shape[axis] == 0:
        return [np.zeros(idx.shape, data.dtype)]
    coords, ok = _elements_coords(data.shape, idx, axis)
    return [np.where(ok, data[coords], np.zeros((), data.dtype)).astype(data.dtype)]


register("gather_elements", infer=_gather_elements_infer, pack=lambda node, graph: [int(node.attrs["axis"])],
         reference=_gather_elements_ref)


def _scatter_infer(node, graph):
    dt = data_dtype(node, graph)
    require_dtype(node, graph, 1, INDEX_DTYPES)
    if graph.tensors[node.inputs[2]].dtype != dt:
        raise OpUnsupported("scatter_elements: updates and data dtypes differ")
    ds, ixs, us = in_shapes(node, graph)
    axis = int(node.attrs["axis"])
    red = node.attrs.get("reduction", "none")
    if red not in REDUCTIONS:
        raise OpUnsupported(f"scatter_elements: reduction {red!r} is not supported")
    if red != "none" and dt not in _REDUCIBLE:
        raise OpUnsupported(f"scatter_elements: reduction {red!r} on {dt} is not supported")
    if tuple(us) != tuple(ixs):
        raise OpUnsupported(f"scatter_elements: updates {us} and indices {ixs} differ")
    _elements_check(node, ds, ixs, axis)
    _check_const_indices(node, graph, 1, ds[axis])
    return [(tuple(ds), dt)]


def _scatter_ref(node, ins):
    data, idx, upd = ins
    axis = node.attrs["axis"]
    red = node.attrs.get("reduction", "none")
    out = data.copy()
    n = data.shape[axis]
    _check_range(node, idx, n)
    it = np.nditer(idx, flags=["multi_index"])
    for v in it:
        i = int(v)
        if i < 0:
            i += n
        if not 0 <= i < n:
            continue
        src = it.multi_index
        dst = list(src)
        dst[axis] = i
        dst = tuple(dst)
        u = upd[src]
        if red == "none":
            out[dst] = u
        elif red == "add":
            out[dst] = (out[dst] + u).astype(data.dtype)
        elif red == "mul":
            out[dst] = (out[dst] * u).astype(data.dtype)
        elif red == "max":
            out[dst] = max(out[dst], u)
        else:
            out[dst] = min(out[dst], u)
    return [out]


register("scatter_elements", infer=_scatter_infer,
         pack=lambda node, graph: [int(node.attrs["axis"]), REDUCTIONS.index(node.attrs.get("reduction", "none"))],
         reference=_scatter_ref, inplace=True)


# ---- one_hot ------------------------------------------------------------------

def _one_hot_infer(node, graph):
    require_dtype(node, graph, 0, (np.int32, np.int64, np.float32))
    ixs = in_shapes(node, graph)[0]
    axis = int(node.attrs["axis"])
    depth = int(node.attrs["depth"])
    dt = np.dtype(node.attrs["dtype"])
    if not dtypes.supported(dt):
        raise OpUnsupported(f"one_hot: output dtype {dt} is not an edgert dtype")
    if not 0 <= axis <= len(ixs) or len(ixs) + 1 > 8:
        raise OpUnsupported(f"one_hot: axis {axis} out of range for rank {len(ixs)}")
    if not 1 <= depth < 2**31:
        raise OpUnsupported(f"one_hot: depth {depth} out of range")
    return [(tuple(ixs[:axis]) + (depth,) + tuple(ixs[axis:]), dt)]


def _one_hot_pack(node, graph):
    dt = np.dtype(node.attrs["dtype"])
    return [int(node.attrs["axis"]), int(node.attrs["depth"]), *value_words(node.attrs["off"], dt),
            *value_words(node.attrs["on"], dt)]


def _one_hot_ref(node, ins):
    idx = ins[0]
    depth, axis = node.attrs["depth"], node.attrs["axis"]
    dt = np.dtype(node.attrs["dtype"])
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(idx) if idx.dtype.kind == "f" else np.ones(idx.shape, bool)
        iv = np.where(finite, idx, 0).astype(np.int64)
    iv = np.where(iv < 0, iv + depth, iv)
    iv = np.where(finite, iv, -1)
    j = np.arange(depth).reshape((1,) * axis + (depth,) + (1,) * (idx.ndim - axis))
    hit = np.expand_dims(iv, axis) == j
    on = np.array(node.attrs["on"]).astype(dt)
    off = np.array(node.attrs["off"]).astype(dt)
    return [np.where(hit, on, off).astype(dt)]


register("one_hot", infer=_one_hot_infer, pack=_one_hot_pack, reference=_one_hot_ref)
