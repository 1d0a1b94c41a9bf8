"""gemm: ONNX Gemm, Y = act(alpha * A' B' + beta * C), float32.

Kernel: csrc/kernels/ref/gemm.c on the shared SGEMM (csrc/kernels/ref/sgemm.c).

gemm
    inputs:  A (float32, rank 2: [M, K], or [K, M] when trans_a)
             B (float32, rank 2: [K, N], or [N, K] when trans_b)
             C (float32, optional; unidirectionally broadcastable to [M, N], rank <= 2)
    outputs: Y (float32, [M, N])
    attrs:   trans_a, trans_b (bool, default False), alpha, beta (float, default 1.0),
             act, act_a, act_b (fused activation, see ert_act)
    params:  [trans_a, trans_b, alpha f, beta f, act, act_a f, act_b f]
    scratch: sgemm_scratch_bytes(M, N, K, False)

The ONNX lowering stores a constant B that Gemm reads transposed as its transpose
(trans_b False), the layout the kernel packs fastest.

This module also holds the converter's copy of the SGEMM scratch rule, which
csrc/kernels/ref/sgemm.c (ert_sgemm_scratch_bytes) must match.
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register
from .activation import act_apply, act_words

F32 = np.dtype(np.float32)

# Blocking of csrc/kernels/ref/sgemm.h (ERT_SGEMM_*).
SGEMM_MR, SGEMM_NR, SGEMM_KC, SGEMM_MC, SGEMM_NC, SGEMM_SLOTS = 4, 16, 256, 64, 128, 4


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def align64(x: int) -> int:
    return _round_up(x, 64)


def sgemm_scratch_bytes(m: int, n: int, k: int, im2col: bool) -> int:
    """Scratch bytes of one SGEMM call of C[m, n] = A[m, k] B[k, n]: none for the
    matrix-vector path (m == 1 or n == 1 with B a matrix), else SLOTS slots each holding
    a packed A block and a packed B block."""
    if m <= 0 or n <= 0 or k <= 0 or (not im2col and (m == 1 or n == 1)):
        return 0
    kc = min(k, SGEMM_KC)
    mc = _round_up(min(m, SGEMM_MC), SGEMM_MR)
    nc = _round_up(min(n, SGEMM_NC), SGEMM_NR)
    return SGEMM_SLOTS * (align64(mc * kc * 4) + align64(kc * nc * 4))


def gemm_s8():
    """The int8 form of gemm, edgert/converter/ops/gemm_s8.py."""
    from . import gemm_s8 as mod
    return mod


def _f32_input(node, graph, i: int, what: str):
    t = graph.tensors[node.inputs[i]]
    if t.dtype != F32:
        raise OpUnsupported(f"{node.op}: {what} has dtype {t.dtype}, supported: float32")
    return t


def _dims(node, graph) -> tuple[int, int, int]:
    a = _f32_input(node, graph, 0, "A").shape
    b = _f32_input(node, graph, 1, "B").shape
    if len(a) != 2 or len(b) != 2:
        raise OpUnsupported("gemm: A and B must have rank 2")
    ta, tb = bool(node.attrs.get("trans_a", False)), bool(node.attrs.get("trans_b", False))
    m, k = (a[1], a[0]) if ta else (a[0], a[1])
    kb, n = (b[1], b[0]) if tb else (b[0], b[1])
    if k != kb:
        raise OpUnsupported(f"gemm: inner dimensions differ ({k} and {kb})")
    return m, n, k


def _infer(node, graph):
    if not 2 <= len(node.inputs) <= 3 or not node.inputs[0] or not node.inputs[1]:
        raise OpUnsupported("gemm takes inputs A, B and an optional C")
    if gemm_s8().applies(node, graph):
        return gemm_s8().infer(node, graph)
    m, n, _ = _dims(node, graph)
    if len(node.inputs) > 2 and node.inputs[2]:
        c = _f32_input(node, graph, 2, "C").shape
        if len(c) > 2:
            raise OpUnsupported("gemm: C must have rank <= 2")
        full = (1,) * (2 - len(c)) + tuple(c)
        if full[0] not in (1, m) or full[1] not in (1, n):
            raise OpUnsupported(f"gemm: C of shape {list(c)} does not broadcast to [{m}, {n}]")
    act_words(node.attrs)
    return [((m, n), F32)]


def _pack(node, graph):
    if gemm_s8().applies(node, graph):
        return gemm_s8().pack(node, graph)
    a = node.attrs
    return [int(bool(a.get("trans_a", False))), int(bool(a.get("trans_b", False))),
            float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))] + act_words(a)


def _scratch(node, graph) -> int:
    if gemm_s8().applies(node, graph):
        return gemm_s8().scratch(node, graph)
    m, n, k = _dims(node, graph)
    return sgemm_scratch_bytes(m, n, k, False)


def gemm_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, trans_a: bool, trans_b: bool,
                   alpha: float, beta: float) -> np.ndarray:
    a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
    b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
    y = alpha * (a64 @ b64)
    if c is not None:
        y = y + beta * c.astype(np.float64)
    return y.astype(np.float32)


def _reference(node, inputs):
    if inputs[0].dtype == np.int8:
        return gemm_s8().reference(node, inputs)
    a = node.attrs
    c = inputs[2] if len(inputs) > 2 else None
    y = gemm_reference(inputs[0], inputs[1], c, bool(a.get("trans_a", False)), bool(a.get("trans_b", False)),
                       float(a.get("alpha", 1.0)), float(a.get("beta", 1.0)))
    kind, fa, fb = act_words(a)
    return [act_apply(kind, fa, fb, y)]


register("gemm", infer=_infer, pack=_pack, reference=_reference, scratch=_scratch)
