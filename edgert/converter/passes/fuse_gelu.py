"""GELU fusion: the exact decomposed form x * 0.5 * (1 + erf(x / sqrt(2))) (with the
division written as a multiplication by 1/sqrt(2), and the factor 0.5 applied before
or after the product) becomes gelu(x)."""
from __future__ import annotations

import math

from ..ir import Graph
from ._util import Uses, is_scalar, other_input, remove_nodes

SQRT2 = math.sqrt(2.0)


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for erf in list(g.nodes):
        if erf.op != "erf":
            continue
        scale = u.made_by(erf.inputs[0], "div") or u.made_by(erf.inputs[0], "mul")
        if scale is None or not u.single_use(erf.inputs[0]):
            continue
        x = scale.inputs[0]
        if scale.op == "div" and not is_scalar(g, scale.inputs[1], SQRT2, 1e-4):
            continue
        if scale.op == "mul":
            x = other_input(scale, next((i for i in scale.inputs if is_scalar(g, i, 1 / SQRT2, 1e-4)), ""))
            if x is None:
                continue
        add = u.only_consumer(erf.outputs[0])
        if add is None or add.op != "add" or add.attrs.get("act", 0) or \
                not is_scalar(g, other_input(add, erf.outputs[0]) or "", 1.0):
            continue
        m1 = u.only_consumer(add.outputs[0])
        if m1 is None or m1.op != "mul":
            continue
        o = other_input(m1, add.outputs[0])
        chain = [scale, erf, add, m1]
        if o == x:  # x * (1 + erf) then * 0.5
            m2 = u.only_consumer(m1.outputs[0])
            if m2 is None or m2.op != "mul" or not is_scalar(g, other_input(m2, m1.outputs[0]) or "", 0.5):
                continue
            last = m2
        else:  # (x * 0.5) * (1 + erf)
            half = u.made_by(o, "mul") if o else None
            if half is None or not u.single_use(o) or other_input(half, x) is None or \
                    not is_scalar(g, other_input(half, x), 0.5):
                continue
            chain.append(half)
            last = m1
        chain.append(last)
        if g.tensors[x].shape != g.tensors[last.outputs[0]].shape:
            continue
        g.add_node("gelu", [x], list(last.outputs), {"approximate": "none"}, name=last.name)
        dead += chain
    if dead:
        remove_nodes(g, dead)
        g.toposort()
        g.remove_unused_tensors()
    return bool(dead)
