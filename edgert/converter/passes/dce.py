"""Dead-code removal: drops nodes none of whose outputs reach a graph output, and
tensors nothing refers to."""
from __future__ import annotations

from ..ir import Graph


def run(g: Graph) -> bool:
    needed = set(g.outputs)
    keep = []
    for node in reversed(g.nodes):
        if any(o in needed for o in node.outputs):
            keep.append(node)
            needed.update(i for i in node.inputs if i)
    changed = len(keep) != len(g.nodes)
    g.nodes = list(reversed(keep))
    before = len(g.tensors)
    g.remove_unused_tensors()
    return changed or before != len(g.tensors)
