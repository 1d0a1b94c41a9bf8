"""LayerNormalization fusion over the last axis, from the decomposed form:

    m = reduce_mean(x, [-1]);  d = x - m;  v = reduce_mean(d^2, [-1])   (d^2: pow(d, 2) or d*d)
    y = d / sqrt(v + eps)  [* gamma]  [+ beta]

becomes layer_norm(x, gamma, beta; axis=-1, epsilon=eps)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ._util import Uses, is_scalar, other_input, remove_nodes, scalar


def _last_axis_mean(g: Graph, node) -> bool:
    if node is None or node.op != "reduce_mean" or not node.attrs.get("keepdims", True):
        return False
    rank = len(g.tensors[node.inputs[0]].shape)
    axes = [a % rank for a in node.attrs.get("axes", [])]
    return axes == [rank - 1]


def _affine_const(g: Graph, name: str, n: int) -> np.ndarray | None:
    c = g.const(name)
    if c is None or c.dtype != np.float32 or c.size not in (1, n):
        return None
    if c.ndim > 1 and any(d != 1 for d in c.shape[:-1]):
        return None
    return np.broadcast_to(c.reshape(-1), (n,)).astype(np.float32)


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for mean in list(g.nodes):
        if not _last_axis_mean(g, mean):
            continue
        x = mean.inputs[0]
        subs = [c for c in u.consumers.get(mean.outputs[0], []) if c.op == "sub" and c.inputs == [x, mean.outputs[0]]]
        if len(subs) != 1 or not u.single_use(mean.outputs[0]):
            continue
        sub = subs[0]
        d = sub.outputs[0]
        users = list({id(c): c for c in u.consumers.get(d, [])}.values())
        if len(users) != 2:
            continue
        sq = next((c for c in users if (c.op == "pow" and c.inputs[0] == d and is_scalar(g, c.inputs[1], 2.0))
                   or (c.op == "mul" and c.inputs == [d, d])), None)
        div = next((c for c in users if c.op == "div" and c.inputs[0] == d), None)
        if sq is None or div is None or d in u.outputs:
            continue
        var = u.only_consumer(sq.outputs[0])
        if not _last_axis_mean(g, var):
            continue
        add = u.only_consumer(var.outputs[0])
        if add is None or add.op != "add" or add.attrs.get("act", 0):
            continue
        eps = scalar(g, other_input(add, var.outputs[0]) or "")
        if eps is None:
            continue
        sqrt = u.only_consumer(add.outputs[0])
        if sqrt is None or sqrt.op != "sqrt" or div.inputs[1] != sqrt.outputs[0] or not u.single_use(sqrt.outputs[0]):
            continue
        n = g.tensors[x].shape[-1]
        chain = [mean, sub, sq, var, add, sqrt, div]
        last = div
        gamma = np.ones(n, np.float32)
        beta = None
        nxt = u.only_consumer(last.outputs[0])
        if nxt is not None and nxt.op == "mul":
            c = _affine_const(g, other_input(nxt, last.outputs[0]) or "", n)
            if c is not None and g.tensors[nxt.outputs[0]].shape == g.tensors[x].shape:
                gamma, last = c, nxt
                chain.append(nxt)
                nxt = u.only_consumer(last.outputs[0])
        if nxt is not None and nxt.op == "add" and not nxt.attrs.get("act", 0):
            c = _affine_const(g, other_input(nxt, last.outputs[0]) or "", n)
            if c is not None and g.tensors[nxt.outputs[0]].shape == g.tensors[x].shape:
                beta, last = c, nxt
                chain.append(nxt)
        ins = [x, g.add_const(gamma, last.name + "_gamma")]
        if beta is not None:
            ins.append(g.add_const(beta, last.name + "_beta"))
        g.add_node("layer_norm", ins, list(last.outputs), {"axis": -1, "epsilon": float(eps)}, name=last.name)
        dead += chain
    if dead:
        remove_nodes(g, dead)
        g.toposort()
        g.remove_unused_tensors()
    return bool(dead)
