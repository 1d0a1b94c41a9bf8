"""Gemms that read the same constant weight, of rows independent of each other, become one
Gemm over their stacked rows: the input projections of an unrolled recurrence (an
LSTMCell loop exported as a Gemm per step on the same weight_ih, docs/design.md) then
read the weight once for all steps instead of once per step.

    gemm(A_1, B, C) ... gemm(A_n, B, C)  ->  split(gemm(concat(A_1 .. A_n), B, C))

for float32 gemm nodes with equal B, C and attributes, A not transposed, C absent or one
row broadcast to every row, where no A_j depends on another member's output (the
recurrent Gemms on the same weight_hh form a chain and stay as they are). Not applied to
bounded conversions (g.metadata["bounded"]): the row counts could differ between their
sample graphs."""
from __future__ import annotations

import numpy as np

from ..ir import Graph

F32 = np.dtype(np.float32)


def _key(g: Graph, n) -> tuple | None:
    """The grouping key of a gemm that may join a batch, else None."""
    if n.op != "gemm" or len(n.inputs) < 2 or not n.inputs[0] or not n.inputs[1]:
        return None
    a = g.tensors[n.inputs[0]]
    b = g.tensors[n.inputs[1]]
    if not b.is_const or a.dtype != F32 or b.dtype != F32 or len(a.shape) != 2 or a.quant or b.quant:
        return None
    if n.attrs.get("trans_a", False):
        return None
    c = n.inputs[2] if len(n.inputs) > 2 else ""
    if c:
        ct = g.tensors[c]
        if len(ct.shape) == 2 and ct.shape[0] != 1:
            return None  # per-row bias: would need stacking too
    attrs = tuple(sorted((k, str(v)) for k, v in n.attrs.items()))
    return (n.inputs[1], c, attrs)


def run(g: Graph) -> bool:
    if g.metadata.get("bounded"):
        return False
    groups: dict[tuple, list] = {}
    for n in g.nodes:
        k = _key(g, n)
        if k is not None:
            groups.setdefault(k, []).append(n)
    consumers = g.consumers()
    changed = False
    for members in groups.values():
        if len(members) < 2:
            continue
        # members in graph order; one joins when its A does not depend on an earlier
        # member's output (a later member's output cannot reach an earlier node's input)
        batch, reach = [], set()
        for n in members:
            if n.inputs[0] in reach:
                continue
            batch.append(n)
            todo = list(n.outputs)
            while todo:
                t = todo.pop()
                if t in reach:
                    continue
                reach.add(t)
                for c in consumers.get(t, []):
                    todo.extend(c.outputs)
        if len(batch) < 2:
            continue
        rows = [g.tensors[n.inputs[0]].shape[0] for n in batch]
        k = g.tensors[batch[0].inputs[0]].shape[1]
        ncols = g.tensors[batch[0].outputs[0]].shape[1]
        first = g.nodes.index(batch[0])
        stacked = g.unique_name(f"{batch[0].name}_rows")
        product = g.unique_name(f"{batch[0].name}_batched")
        g.add_tensor(stacked, (sum(rows), k), F32)
        g.add_tensor(product, (sum(rows), ncols), F32)
        ids = {id(n) for n in batch}
        g.nodes = [n for n in g.nodes if id(n) not in ids]
        g.add_node("concat", [n.inputs[0] for n in batch], [stacked], {"axis": 0}, name=stacked)
        g.add_node("gemm", [stacked] + batch[0].inputs[1:], [product], dict(batch[0].attrs), name=product)
        g.add_node("split", [product], [n.outputs[0] for n in batch], {"axis": 0, "sizes": rows},
                   name=f"{product}_split")
        new = g.nodes[-3:]
        g.nodes = g.nodes[:-3]
        g.nodes[first:first] = new
        changed = True
    if changed:
        g.toposort()
    return changed
