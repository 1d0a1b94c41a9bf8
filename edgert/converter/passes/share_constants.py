"""One tensor per distinct constant: constants with the same dtype, shape, quantization
and bytes become one tensor, whatever produced the copies (an exporter repeating an
initializer, a weight transposed or quantized once per node that uses it). The writer
then stores each constant once (docs/format.md, "Shared constants").

A gemm or matmul that reads the transpose of a constant also stored as is (a tied
embedding: Gather on E, then Gemm(h, E, transB=1) or MatMul(h, Transpose(E))) reads E
itself with trans_b instead of a copy."""
from __future__ import annotations

import hashlib

import numpy as np

from ..ir import Graph, Node, Tensor


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


def _stored_source(g: Graph, name: str, read: set[str]) -> str | None:
    """The constant that `name` (a 2-D constant) is the transpose of, when that one is
    also read by some node as is, else None."""
    b = g.tensors[name]
    src = g.tensors.get((g.metadata.get("const_sources") or {}).get(name, ""))
    if (b.is_const and src is not None and src.is_const and src.name in read and b.data.ndim == 2
            and src.data.shape == b.data.shape[::-1] and src.dtype == b.dtype and src.quant is None
            and b.quant is None and np.array_equal(src.data.T, b.data)):
        return src.name
    return None


def _reuse_stored_layout(g: Graph) -> bool:
    """gemm B and matmul B (a 2-D constant, A of rank >= 2: flattened into a gemm)
    that are the transpose of a constant read as is elsewhere read that one with
    trans_b."""
    read = {i for n in g.nodes for i in n.inputs if i}
    out: list[Node] = []
    changed = False
    for n in g.nodes:
        arity_ok = len(n.inputs) in ((2, 3) if n.op == "gemm" else (2,))
        if n.op not in ("gemm", "matmul") or n.attrs.get("trans_b") or not arity_ok:
            out.append(n)
            continue
        src = _stored_source(g, n.inputs[1], read)
        a_shape = g.tensors[n.inputs[0]].shape
        if src is None or (n.op == "matmul" and len(a_shape) < 2):
            out.append(n)
            continue
        changed = True
        if n.op == "gemm":
            n.inputs[1] = src
            n.attrs["trans_b"] = True
            out.append(n)
            continue
        attrs = {k: v for k, v in n.attrs.items() if k in ("act", "act_a", "act_b")}
        attrs.update(trans_a=False, trans_b=True, alpha=1.0, beta=1.0)
        y = n.outputs[0]
        cols, depth = g.tensors[src].shape  # B = src^T is [depth, cols]
        if len(a_shape) == 2:
            out.append(Node("gemm", [n.inputs[0], src], [y], attrs, n.name))
            continue
        rows = int(np.prod(a_shape[:-1]))
        a2, y2 = g.unique_name(f"{n.inputs[0]}_2d"), g.unique_name(f"{y}_2d")
        g.add_tensor(a2, (rows, depth), g.tensors[n.inputs[0]].dtype)
        g.add_tensor(y2, (rows, cols), g.tensors[y].dtype)
        out += [Node("reshape", [n.inputs[0]], [a2], {"shape": [rows, depth]}, f"{n.name}_flatten"),
                Node("gemm", [a2, src], [y2], attrs, n.name),
                Node("reshape", [y2], [y], {"shape": list(g.tensors[y].shape)}, f"{n.name}_unflatten")]
    if changed:
        g.nodes = out
        g.remove_unused_tensors()
    return changed
