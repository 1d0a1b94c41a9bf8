"""matmul: numpy matmul semantics, float32, with a fused activation.

Kernel: csrc/kernels/ref/matmul.c on the shared SGEMM (csrc/kernels/ref/sgemm.c).

matmul
    inputs:  A (float32, rank >= 1), B (float32, rank >= 1)
    outputs: Y (float32): a rank-1 A is [1, K] with that 1 removed from Y; a rank-1 B
             is [K, 1] with that 1 removed; batch dimensions (all but the last two)
             broadcast as numpy does; output rank <= 8.
    attrs:   act, act_a, act_b (fused activation, see ert_act)
    params:  [act, act_a f, act_b f]
    scratch: sgemm_scratch_bytes(Mf, N, K, False) with Mf and the batch as in
             matmul_plan: when B has no batch elements beyond one (prod of its batch
             dimensions is 1), A's batch is folded into the rows (Mf = batch(A) * M,
             one problem); otherwise Mf = M and one problem per output batch element.
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register
from .activation import act_apply, act_words
from .gemm import sgemm_scratch_bytes

F32 = np.dtype(np.float32)


def matmul_plan(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> dict:
    """Output shape and the GEMM the kernel runs: keys out, m, n, k, rows (GEMM rows
    after folding), problems (GEMM count)."""
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise OpUnsupported("matmul: operands must have rank >= 1")
    a2 = (1,) + tuple(a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if len(b_shape) == 1 else tuple(b_shape)
    m, k = a2[-2:]
    kb, n = b2[-2:]
    if k != kb:
        raise OpUnsupported(f"matmul: inner dimensions differ ({list(a_shape)} x {list(b_shape)})")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise OpUnsupported(
            f"matmul: batch dimensions of {list(a_shape)} and {list(b_shape)} do not broadcast") from None
    out = batch + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    if len(out) > 8 or len(a_shape) > 8 or len(b_shape) > 8:
        raise OpUnsupported("matmul: rank above 8")
    if int(np.prod(b2[:-2], dtype=np.int64)) == 1:
        rows, problems = int(np.prod(a2[:-2], dtype=np.int64)) * m, 1
    else:
        rows, problems = m, int(np.prod(batch, dtype=np.int64))
    return {"out": out, "m": m, "n": n, "k": k, "rows": rows, "problems": problems}


def _infer(node, graph):
    if len(node.inputs) != 2 or not all(node.inputs):
        raise OpUnsupported("matmul takes two inputs")
    for i in range(2):
        dt = graph.tensors[node.inputs[i]].dtype
        if dt != F32:
            raise OpUnsupported(f"matmul: input {i} has dtype {dt}, supported: float32")
    act_words(node.attrs)
    p = matmul_plan(graph.tensors[node.inputs[0]].shape, graph.tensors[node.inputs[1]].shape)
    return [(p["out"], F32)]


def _pack(node, graph):
    return act_words(node.attrs)


def _scratch(node, graph) -> int:
    p = matmul_plan(graph.tensors[node.inputs[0]].shape, graph.tensors[node.inputs[1]].shape)
    if p["rows"] * p["n"] == 0:
        return 0
    return sgemm_scratch_bytes(p["rows"], p["n"], p["k"], False)


def _reference(node, inputs):
    y = np.matmul(inputs[0].astype(np.float64), inputs[1].astype(np.float64)).astype(np.float32)
    kind, fa, fb = act_words(node.attrs)
    return [act_apply(kind, fa, fb, np.asarray(y, np.float32))]


register("matmul", infer=_infer, pack=_pack, reference=_reference, scratch=_scratch)
