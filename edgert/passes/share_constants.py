"""One tensor per distinct constant: constants with the same dtype, shape, quantization
and bytes become one tensor, whatever produced the copies (an exporter repeating an
initializer, a weight transposed or quantized once per node that uses it). The writer
then stores each constant once (docs/format.md, "Shared constants").

A gemm that reads the transpose of a constant also stored as is (a tied embedding:
Gather on E, Gemm(h, E, transB=1)) reads E itself with trans_b instead of a copy."""
from __future__ import annotations

import hashlib

import numpy as np

from ..ir import Graph, Tensor


def _raw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _key(t: Tensor) -> tuple:
    data = _raw(t.data)
    q = t.quant
    qkey = None if q is None else (q.axis, np.asarray(q.scale, np.float32).tobytes(),
                                   np.asarray(q.zero_point, np.int32).tobytes())
    return (np.dtype(t.dtype).str, np.asarray(t.data).dtype.str, tuple(t.shape), qkey, data.nbytes,
            hashlib.sha256(data).digest())


def run(g: Graph) -> bool:
    """Rewires every use of a duplicate constant to the first one with equal content
    (equal bytes, not just an equal digest) and drops the duplicate."""
    first: dict[tuple, str] = {}
    same: dict[str, str] = {}
    for name, t in g.tensors.items():
        if not t.is_const or name in g.outputs:
            continue
        key = _key(t)
        keep = first.setdefault(key, name)
        if keep != name and np.array_equal(_raw(g.tensors[keep].data), _raw(t.data)):
            same[name] = keep
    changed = _reuse_stored_layout(g)
    if not same:
        return changed
    for n in g.nodes:
        n.inputs = [same.get(i, i) for i in n.inputs]
    for name in same:
        del g.tensors[name]
    sparse_names = g.metadata.get("sparse_tensors")
    if sparse_names:
        g.metadata["sparse_tensors"] = {same.get(s, s) for s in sparse_names}
    return True


def _reuse_stored_layout(g: Graph) -> bool:
    sources = g.metadata.get("const_sources") or {}
    read = {i for n in g.nodes for i in n.inputs if i}
    changed = False
    for n in g.nodes:
        if n.op != "gemm" or n.attrs.get("trans_b") or len(n.inputs) < 2:
            continue
        b = g.tensors[n.inputs[1]]
        src = g.tensors.get(sources.get(b.name, ""))
        if (b.is_const and src is not None and src.is_const and src.name in read and b.data.ndim == 2
                and src.data.shape == b.data.shape[::-1] and src.dtype == b.dtype and src.quant is None
                and b.quant is None and np.array_equal(src.data.T, b.data)):
            n.inputs[1] = src.name
            n.attrs["trans_b"] = True
            changed = True
    if changed:
        g.remove_unused_tensors()
    return changed
