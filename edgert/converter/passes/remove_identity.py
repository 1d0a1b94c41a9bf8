"""Identity removal: `copy` nodes whose output is not a graph output, and reshapes of
reshapes (only the last shape matters), are bypassed."""
from __future__ import annotations

from ..ir import Graph
from ._util import Uses, remove_nodes


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for node in g.nodes:
        if node.op == "copy" and node.outputs[0] not in u.outputs:
            g.replace_uses(node.outputs[0], node.inputs[0])
            dead.append(node)
        elif node.op == "reshape":
            src = u.made_by(node.inputs[0], "reshape")
            if src is not None and node.inputs[0] != src.inputs[0]:
                node.inputs = [src.inputs[0]] + node.inputs[1:]
                _merge_sym(node, src)
                dead_src = u.single_use(src.outputs[0])
                if dead_src:
                    dead.append(src)
    if dead:
        remove_nodes(g, dead)
        g.remove_unused_tensors()
    return bool(dead)


def _merge_sym(node, src) -> None:
    """The reshape's dims as expressions (bounded conversions: attrs["sym"], over its
    input's dims) rewritten over src's input, or dropped when src has none."""
    sym = (node.attrs.get("sym") or {}).get("shape")
    if sym is None:
        return
    inner = (src.attrs.get("sym") or {}).get("shape")
    node.attrs = dict(node.attrs)
    if inner is None:
        del node.attrs["sym"]
        node.attrs["from_size"] = True  # its dims are not followed (symshape)
        return
    from .. import symdim
    node.attrs["sym"] = {"shape": [symdim.substitute(e, lambda i, d: inner[d]) for e in sym]}
