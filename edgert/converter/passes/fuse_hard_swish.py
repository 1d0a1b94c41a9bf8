"""HardSwish pattern fusion: x * clip(x + 3, 0, 6) / 6 (the decomposed form exporters
emit; the division may also be a multiplication by 1/6, before or after the product)
becomes one hard_swish node; x * hard_sigmoid(x) with alpha 1/6, beta 1/2 too."""
from __future__ import annotations

from ..ir import Graph
from ._util import Uses, is_scalar, other_input, remove_nodes


def _scale_by_sixth(g, node, src) -> bool:
    o = other_input(node, src)
    if node.op == "div" and node.inputs[0] == src:
        return is_scalar(g, node.inputs[1], 6.0)
    return node.op == "mul" and o is not None and is_scalar(g, o, 1 / 6)


def run(g: Graph) -> bool:
    u = Uses(g)
    dead, changed = set(), False
    for node in list(g.nodes):
        if id(node) in dead:
            continue
        # Form 1: add(x, 3) -> clip(0, 6) -> mul(x, .) -> div(., 6) / mul(., 1/6)
        if node.op == "add" and not node.attrs.get("act", 0) and len(node.inputs) == 2:
            x = node.inputs[0] if is_scalar(g, node.inputs[1], 3.0) else (
                node.inputs[1] if is_scalar(g, node.inputs[0], 3.0) else None)
            if x is None or g.tensors[x].shape != g.tensors[node.outputs[0]].shape:
                continue
            clip = u.only_consumer(node.outputs[0])
            if clip is None or clip.op != "clip" or clip.attrs.get("min") != 0.0 or clip.attrs.get("max") != 6.0:
                continue
            mul = u.only_consumer(clip.outputs[0])
            if mul is None or mul.op != "mul" or other_input(mul, clip.outputs[0]) != x:
                continue
            last = u.only_consumer(mul.outputs[0])
            if last is None or not _scale_by_sixth(g, last, mul.outputs[0]):
                continue
            chain = [node, clip, mul, last]
        # Form 2: mul(x, hard_sigmoid(x; 1/6, 1/2))
        elif node.op == "hard_sigmoid" and is_close(node.attrs.get("alpha"), 1 / 6) and \
                is_close(node.attrs.get("beta"), 0.5):
            x = node.inputs[0]
            mul = u.only_consumer(node.outputs[0])
            if mul is None or mul.op != "mul" or other_input(mul, node.outputs[0]) != x:
                continue
            chain, last = [node, mul], mul
        else:
            continue
        g.add_node("hard_swish", [x], list(last.outputs), {}, name=last.name)
        dead.update(id(n) for n in chain)
        changed = True
    if changed:
        remove_nodes(g, [n for n in g.nodes if id(n) in dead])
        g.toposort()
        g.remove_unused_tensors()
    return changed


def is_close(v, want: float) -> bool:
    return v is not None and abs(float(v) - want) <= 1e-6
