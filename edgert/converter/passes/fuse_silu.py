"""SiLU (Swish) fusion: mul(x, sigmoid(x)) becomes silu(x)."""
from __future__ import annotations

from ..ir import Graph
from ._util import Uses, other_input, remove_nodes


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for node in list(g.nodes):
        if node.op != "sigmoid":
            continue
        x = node.inputs[0]
        mul = u.only_consumer(node.outputs[0])
        if mul is None or mul.op != "mul" or other_input(mul, node.outputs[0]) != x:
            continue
        if g.tensors[x].shape != g.tensors[mul.outputs[0]].shape:
            continue
        g.add_node("silu", [x], list(mul.outputs), {}, name=mul.name)
        dead += [node, mul]
    if dead:
        remove_nodes(g, dead)
        g.toposort()
        g.remove_unused_tensors()
    return bool(dead)
