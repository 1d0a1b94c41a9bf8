"""Exploiting zero weights (docs/sparse.md): the converter's last graph step before
planning.

Two independent choices, per tensor:
- kernels: a 1x1 conv2d, gemm or matmul whose constant weight has at least
  KERNEL_BREAK_EVEN (VECTOR_BREAK_EVEN for gemm and matmul) zeros becomes an `spmm` node (CSR weights;
  edgert/converter/ops/spmm.py),
  which only visits the stored weights. Below that sparsity the dense kernels are
  faster, so the node is left alone (tools/bench_sparse.py measures the break-even).
- storage: any other constant whose bitmap encoding (one bit per element plus the
  nonzero values) is smaller than its dense bytes by at least STORAGE_MIN_SAVING is
  written to the SPARSE section; the runtime decodes it once at model load, so
  kernels and outputs are exactly those of the dense file.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .ir import Graph, Node
from ..fileformat import _RECORD, ENC_BITMAP

# Fractions of zero weights from which spmm beats the dense kernels on the host
# (tools/bench_sparse.py, "breakeven"): with P >= 8 columns per weight row (1x1 conv on
# a feature map) dense wins below ~55-60 %; with P < 8 (gemm, matmul, 1x1 conv on a
# tiny map: gathers against a vectorized matrix-vector product) below ~90 %.
KERNEL_BREAK_EVEN = 0.65
VECTOR_BREAK_EVEN = 0.92
STORAGE_MIN_SAVING = 0.125  # fraction of a tensor's dense bytes the encoding must save
STORAGE_MIN_BYTES = 256  # smaller constants are not worth a record



# ---- storage -----------------------------------------------------------------------

def nonzero_mask(data: np.ndarray) -> np.ndarray:
    """Elements to store: those not equal to zero. A float -0.0 is not stored and decodes
    as +0.0, which changes no product sum (pruned weights scaled by a negative folded
    BatchNorm factor are -0.0); NaN is stored."""
    flat = np.ascontiguousarray(data).reshape(-1)
    if flat.dtype.kind == "f":
        return flat != 0
    if flat.dtype.itemsize == 0 or flat.size == 0:
        return np.zeros(flat.size, bool)
    return flat.view(np.uint8).reshape(flat.size, flat.dtype.itemsize).any(axis=1)


def encoded_bytes(data: np.ndarray) -> int:
    """Bytes of the bitmap encoding: ceil(n / 8) bitmap bytes plus the nonzero values."""
    nnz = int(nonzero_mask(data).sum())
    return (data.size + 7) // 8 + nnz * data.dtype.itemsize


def worth_storing(data: np.ndarray) -> bool:
    dense = data.size * data.dtype.itemsize
    return dense >= STORAGE_MIN_BYTES and encoded_bytes(data) <= dense * (1.0 - STORAGE_MIN_SAVING)


def encode_record(consts, tensor_index: int, data: np.ndarray) -> bytes:
    """Adds the bitmap (8-aligned) and the values (aligned to the element size) of
    `data` to the CONSTANTS pool (format.ConstantPool, which stores equal blobs once)
    and returns its SPARSE record."""
    mask = nonzero_mask(data)
    bitmap = np.packbits(mask, bitorder="little").tobytes()
    values = np.ascontiguousarray(data).reshape(-1)[mask].tobytes()
    bm_off = consts.add(bitmap, 8)
    val_off = consts.add(values, max(data.dtype.itemsize, 1))
    return _RECORD.pack(tensor_index, ENC_BITMAP, bm_off, val_off, int(mask.sum()))


def decode_record(consts: bytes, record: bytes, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The dense tensor of one SPARSE record (for the reader and tests)."""
    _, enc, bm_off, val_off, nnz = _RECORD.unpack(record)
    n = int(np.prod(shape, dtype=np.int64))
    mask = np.unpackbits(np.frombuffer(consts, np.uint8, (n + 7) // 8, bm_off), count=n, bitorder="little")
    out = np.zeros(n, dtype)
    out[mask.astype(bool)] = np.frombuffer(consts, dtype, nnz, val_off)
    return out.reshape(shape)


# ---- kernels -----------------------------------------------------------------------

def sparsity(w: np.ndarray) -> float:
    return 1.0 - float(np.count_nonzero(w)) / max(w.size, 1)


def _csr(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, cols, rows) of a [R, K] matrix."""
    w = np.ascontiguousarray(w, np.float32)
    nzr, nzc = np.nonzero(w)
    rows = np.zeros(w.shape[0] + 1, np.int32)
    np.cumsum(np.bincount(nzr, minlength=w.shape[0]), out=rows[1:])
    return w[nzr, nzc].astype(np.float32), nzc.astype(np.int32), rows


def _plan(g: Graph, n: Node) -> dict[str, Any] | None:
    """How node n maps onto spmm: weight [R, K] (float32), X, k, p, bias, or None."""
    f32 = np.dtype(np.float32)
    if any(not i for i in n.inputs[:2]) or g.tensors[n.inputs[0]].dtype != f32:
        return None
    w = g.const(n.inputs[1])
    if w is None or w.dtype != f32:
        return None
    a = n.attrs
    bias_name = n.inputs[2] if len(n.inputs) > 2 else ""
    x = g.tensors[n.inputs[0]]
    if n.op == "conv2d":
        if (int(a.get("group", 1)) != 1 or a.get("rank1d") or w.ndim != 4 or w.shape[2:] != (1, 1)
                or tuple(a.get("strides", (1, 1))) != (1, 1) or any(a.get("pads", (0, 0, 0, 0)))
                or tuple(a.get("kernel", (1, 1))) != (1, 1)):
            return None
        bias = g.const(bias_name) if bias_name else None
        if bias_name and bias is None:
            return None
        return dict(w=w.reshape(w.shape[0], w.shape[1]), k=x.shape[1], p=x.shape[2] * x.shape[3], bias=bias)
    if n.op == "gemm":
        if a.get("trans_a") or w.ndim != 2:
            return None
        wt = w if a.get("trans_b") else w.T
        r = wt.shape[0]
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        bias = None
        if bias_name:
            c = g.const(bias_name)
            if c is None or c.size not in (1, r) or (c.ndim == 2 and c.shape[0] != 1) or c.dtype != f32:
                return None
            bias = (beta * np.broadcast_to(c.reshape(-1), (r,)).astype(np.float64)).astype(np.float32)
        return dict(w=(wt * np.float32(alpha)) if alpha != 1.0 else wt, k=wt.shape[1], p=1, bias=bias)
    if n.op == "matmul":
        if w.ndim != 2 or len(x.shape) < 1 or len(n.inputs) != 2:
            return None
        return dict(w=w.T, k=w.shape[0], p=1, bias=None)
    return None


def use_sparse_kernels(g: Graph, threshold: float | None = None, only: set[str] | None = None) -> list[str]:
    """Rewrites eligible nodes with weights at least `threshold` sparse into spmm
    (default: the measured break-even of the node's shape); returns their names.
    only: the node names that may become spmm (None: any)."""
    done = []
    for k, n in enumerate(g.nodes):
        if n.op not in ("conv2d", "gemm", "matmul") or (only is not None and n.name not in only):
            continue
        plan = _plan(g, n)
        if plan is None:
            continue
        limit = threshold if threshold is not None else (
            KERNEL_BREAK_EVEN if plan["p"] >= 8 else VECTOR_BREAK_EVEN)
        if sparsity(plan["w"]) < limit:
            continue
        values, cols, rows = _csr(plan["w"])
        w = n.inputs[1]
        inputs = [n.inputs[0], g.add_derived_const(values, w, n.name + "_spvalues"),
                  g.add_derived_const(cols, w, n.name + "_spcols"), g.add_derived_const(rows, w, n.name + "_sprows")]
        if plan["bias"] is not None:
            inputs.append(g.add_const(np.ascontiguousarray(plan["bias"], np.float32), n.name + "_spbias"))
        attrs = {key: n.attrs[key] for key in ("act", "act_a", "act_b") if key in n.attrs}
        attrs.update(k=int(plan["k"]), p=int(plan["p"]), out_shape=tuple(g.tensors[n.outputs[0]].shape))
        g.nodes[k] = Node("spmm", inputs, list(n.outputs), attrs, n.name)
        done.append(n.name)
    if done:
        g.remove_unused_tensors()
    return done


def mark_storage(g: Graph) -> list[str]:
    """Records in g.metadata["sparse_tensors"] the constants the writer stores sparse."""
    payloads = {n.inputs[-1] for n in g.nodes if n.op == "partition"}  # handed to a backend as stored
    names = [name for name, t in g.tensors.items()
             if t.is_const and name not in payloads and worth_storing(np.asarray(t.data, t.dtype))]
    g.metadata["sparse_tensors"] = set(names)
    return names


def apply(g: Graph, kernels: bool = True, storage: bool = True,
          threshold: float | None = None, only: set[str] | None = None) -> dict[str, list[str]]:
    """Both steps; returns {"spmm": node names, "sparse_storage": tensor names}.
    only: the nodes that may use the sparse kernel (None: any)."""
    spmm = use_sparse_kernels(g, threshold, only) if kernels else []
    stored = mark_storage(g) if storage else []
    if not storage:
        g.metadata.pop("sparse_tensors", None)
    return {"spmm": spmm, "sparse_storage": stored}
