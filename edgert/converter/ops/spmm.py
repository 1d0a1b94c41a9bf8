"""spmm: constant sparse weights in CSR form times a dense float32 tensor, with fused
bias and activation. The converter's sparse pass (edgert/converter/sparse.py) rewrites 1x1
conv2d, gemm and matmul nodes whose constant weights are sparse enough into it
(docs/sparse.md).

Kernel: csrc/kernels/ref/spmm.c.

spmm
    inputs:  X (float32, any shape with numel = N*K*P; viewed as [N, K, P])
             values (float32, [nnz], constant): the stored weights, row by row
             cols (int32, [nnz], constant): column of each value, in [0, K)
             rows (int32, [R + 1], constant): row r holds values[rows[r]:rows[r+1]];
               rows[0] = 0, non-decreasing, rows[R] = nnz
             bias (float32, [R], constant, optional)
    outputs: Y (float32, numel = N*R*P; viewed as [N, R, P]; its shape is the shape of
             the node it replaces)
             Y[n, r, p] = act(bias[r] + sum_j values[j] * X[n, cols[j], p]), j in row r
    attrs:   k, p (ints >= 1), out_shape (tuple), act, act_a, act_b (ert_act)
    params:  [K, P, act, act_a f, act_b f]
    scratch: none

Views: a 1x1 conv2d (stride 1, no padding, group 1) on X [N, C, H, W] is K = C,
P = H*W, R = M; a gemm or matmul with a constant right operand B [K, R] on rows of
A [..., K] is P = 1, with the CSR matrix B transposed (row r = output feature r).
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register
from .activation import act_apply, act_words

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)


def _check(node, graph) -> tuple[int, int, int, int]:
    """(N, K, P, R) of a spmm node, checked."""
    if not 4 <= len(node.inputs) <= 5 or not all(node.inputs[:4]):
        raise OpUnsupported("spmm takes inputs X, values, cols, rows and an optional bias")
    x, vals, cols, rows = (graph.tensors[i] for i in node.inputs[:4])
    if x.dtype != F32 or vals.dtype != F32 or cols.dtype != I32 or rows.dtype != I32:
        raise OpUnsupported("spmm: X and values must be float32, cols and rows int32")
    k, p = int(node.attrs["k"]), int(node.attrs["p"])
    if k < 1 or p < 1 or x.numel % (k * p):
        raise OpUnsupported(f"spmm: X of shape {list(x.shape)} is not a multiple of K*P = {k}*{p}")
    if len(rows.shape) != 1 or rows.shape[0] < 2 or vals.shape != cols.shape or len(vals.shape) != 1:
        raise OpUnsupported("spmm: values, cols and rows must be vectors (rows of length R + 1 >= 2)")
    r = rows.shape[0] - 1
    if len(node.inputs) > 4 and node.inputs[4] and graph.tensors[node.inputs[4]].shape != (r,):
        raise OpUnsupported(f"spmm: bias must have shape [{r}]")
    return x.numel // (k * p), k, p, r


def _infer(node, graph):
    n, _, p, r = _check(node, graph)
    shape = tuple(int(d) for d in node.attrs["out_shape"])
    if int(np.prod(shape, dtype=np.int64)) != n * r * p:
        raise OpUnsupported(f"spmm: output shape {list(shape)} does not hold N*R*P = {n}*{r}*{p}")
    act_words(node.attrs)
    return [(shape, F32)]


def _pack(node, graph):
    _, k, p, _ = _check(node, graph)
    return [k, p] + act_words(node.attrs)


def spmm_reference(x: np.ndarray, values: np.ndarray, cols: np.ndarray, rows: np.ndarray,
                   bias: np.ndarray | None, k: int, p: int) -> np.ndarray:
    """[N, R, P] result in float64 of the CSR product on X viewed as [N, K, P]."""
    r = rows.size - 1
    dense = np.zeros((r, k), np.float64)
    for i in range(r):
        dense[i, cols[rows[i]:rows[i + 1]]] += values[rows[i]:rows[i + 1]]
    xv = x.astype(np.float64).reshape(-1, k, p)
    y = np.einsum("rk,nkp->nrp", dense, xv)
    if bias is not None:
        y += bias.astype(np.float64).reshape(1, r, 1)
    return y


def _reference(node, inputs):
    a = node.attrs
    bias = inputs[4] if len(inputs) > 4 else None
    y = spmm_reference(inputs[0], inputs[1], inputs[2], inputs[3], bias, int(a["k"]), int(a["p"]))
    y = y.astype(np.float32).reshape(tuple(a["out_shape"]))
    kind, fa, fb = act_words(a)
    return [act_apply(kind, fa, fb, y)]


register("spmm", infer=_infer, pack=_pack, reference=_reference)
