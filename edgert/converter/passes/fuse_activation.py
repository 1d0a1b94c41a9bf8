"""Activation fusion: an activation that is the only reader of a conv2d, gemm, matmul
or add output is applied by that op's output pass instead (attrs act, act_a, act_b).

Fused kinds (csrc/src/internal.h ert_act): relu, clip, hard_sigmoid, hard_swish,
sigmoid, silu, leaky_relu, tanh, gelu (exact)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ._util import Uses, remove_nodes

PRODUCERS = {"conv2d", "conv_transpose2d", "gemm", "matmul", "add"}


def act_of(node) -> tuple[int, float, float] | None:
    """(kind, a, b) of an activation node, or None when it cannot be fused."""
    a = node.attrs
    if node.op == "relu":
        return 1, 0.0, 0.0
    if node.op == "clip":
        lo, hi = a.get("min", -np.inf), a.get("max", np.inf)
        if lo is None or hi is None:
            return None
        return 2, float(lo), float(hi)
    if node.op == "hard_sigmoid":
        return 3, float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if node.op == "hard_swish":
        return 4, 0.0, 0.0
    if node.op == "sigmoid":
        return 5, 0.0, 0.0
    if node.op == "silu":
        return 6, 0.0, 0.0
    if node.op == "leaky_relu":
        return 7, float(a.get("alpha", 0.01)), 0.0
    if node.op == "tanh":
        return 8, 0.0, 0.0
    if node.op == "gelu" and a.get("approximate", "none") == "none":
        return 9, 0.0, 0.0
    return None


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for node in g.nodes:
        if node.op not in PRODUCERS or node.attrs.get("act", 0) or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        if g.tensors[out].dtype != np.float32:
            continue
        act_node = u.only_consumer(out)
        if act_node is None or len(act_node.inputs) < 1 or act_node.inputs[0] != out:
            continue
        if any(i for i in act_node.inputs[1:]):
            continue
        act = act_of(act_node)
        if act is None:
            continue
        node.attrs.update(act=act[0], act_a=act[1], act_b=act[2])
        node.outputs = list(act_node.outputs)
        dead.append(act_node)
    if dead:
        remove_nodes(g, dead)
        g.remove_unused_tensors()
    return bool(dead)
