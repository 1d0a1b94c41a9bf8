"""gemm on int8 tensors (the op is `gemm`; edgert/converter/ops/gemm.py dispatches here when A is
int8). Kernel: csrc/kernels/ref/gemm_s8.c (ert_gemm_s8__ref). The quantizer turns a
float matmul with a constant 2-D B into this form (with reshapes around it when A has
rank > 2).

gemm (int8)
    inputs:  A  (int8, [M, K]), real = sa * (a - a_zp)
             B  (int8, [K, N], or [N, K] when trans_b), real = sb[n] * b
             QP (int32 constant, [N, 2]): per output column (bias, mult); bias in
                accumulator units sa * sb[n]; mult[n] * 2**-shift ~= sa * sb[n] / sy
    outputs: Y  (int8, [M, N]), real = sy * (y - y_zp)
    attrs:   trans_b (bool), a_zp, y_zp, out_min, out_max, shift (int); trans_a, alpha,
             beta and act must keep their defaults (False, 1, 1, none)
    params:  the 7 float-op words + [a_zp, y_zp, out_min, out_max, shift]
    meaning: acc[m, n] = bias[n] + sum_k (a[m, k] - a_zp) * b[k, n];
             y = clamp(y_zp + requant(acc, mult[n], shift), out_min, out_max);
             prepare requires K * 255 * 128 + |bias| < 2**31.
    scratch: SLOTS * align64(2 * K) (one int16 row of A - a_zp per slot)
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported
from .activation import act_kind
from ..quant.fixedpoint import requant, saturate

S8 = np.dtype(np.int8)
I32 = np.dtype(np.int32)
SLOTS = 4
TERM_MAX = 255 * 128


def applies(node, graph) -> bool:
    return bool(node.inputs) and bool(node.inputs[0]) and graph.tensors[node.inputs[0]].dtype == S8


def dims(node, graph) -> tuple[int, int, int]:
    a = node.attrs
    if len(node.inputs) != 3 or not all(node.inputs):
        raise OpUnsupported("gemm (int8) takes inputs A, B and QP")
    ta, tb = (graph.tensors[i] for i in node.inputs[:2])
    qp = graph.tensors[node.inputs[2]]
    if ta.dtype != S8 or tb.dtype != S8 or len(ta.shape) != 2 or len(tb.shape) != 2:
        raise OpUnsupported("gemm (int8): A and B must be int8 matrices")
    if bool(a.get("trans_a", False)) or float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
        raise OpUnsupported("gemm (int8): trans_a, alpha and beta must keep their defaults")
    if act_kind(a.get("act")) != 0:
        raise OpUnsupported("gemm (int8): activations are folded into out_min/out_max")
    m, k = ta.shape
    kb, n = (tb.shape[1], tb.shape[0]) if a.get("trans_b", False) else tb.shape
    if k != kb:
        raise OpUnsupported(f"gemm (int8): inner dimensions differ ({k} and {kb})")
    if qp.dtype != I32 or tuple(qp.shape) != (n, 2) or not qp.is_const or int(qp.data[:, 1].min(initial=0)) < 0:
        raise OpUnsupported(f"gemm (int8): QP must be a constant int32 [{n}, 2], multipliers >= 0")
    if not 1 <= int(a.get("shift", 0)) <= 62:
        raise OpUnsupported("gemm (int8): shift must be in [1, 62]")
    bias_max = int(np.abs(qp.data[:, 0].astype(np.int64)).max()) if n else 0
    if k * TERM_MAX + bias_max >= 2**31:
        raise OpUnsupported(f"gemm (int8): K = {k} could overflow the int32 accumulator")
    for key, d in (("a_zp", 0), ("y_zp", 0), ("out_min", -128), ("out_max", 127)):
        if not -128 <= int(a.get(key, d)) <= 127:
            raise OpUnsupported(f"gemm (int8): {key} outside int8")
    if int(a.get("out_min", -128)) > int(a.get("out_max", 127)):
        raise OpUnsupported("gemm (int8): out_min > out_max")
    return m, n, k


def infer(node, graph):
    m, n, _ = dims(node, graph)
    return [((m, n), S8)]


def pack(node, graph):
    dims(node, graph)
    a = node.attrs
    return [0, int(bool(a.get("trans_b", False))), 1.0, 1.0, 0, 0.0, 0.0, int(a.get("a_zp", 0)),
            int(a.get("y_zp", 0)), int(a.get("out_min", -128)), int(a.get("out_max", 127)), int(a["shift"])]


def scratch(node, graph) -> int:
    _, _, k = dims(node, graph)
    return SLOTS * ((2 * k + 63) // 64 * 64)


def reference(node, inputs):
    a = node.attrs
    x, w, qp = (np.asarray(v) for v in inputs)
    w64 = w.astype(np.int64)
    if a.get("trans_b", False):
        w64 = w64.T
    acc = (x.astype(np.int64) - int(a.get("a_zp", 0))) @ w64
    qp = qp.astype(np.int64)
    acc = acc + qp[:, 0]
    y = requant(acc, qp[:, 1], int(a["shift"])) + int(a.get("y_zp", 0))
    return [saturate(y, int(a.get("out_min", -128)), int(a.get("out_max", 127)))]
