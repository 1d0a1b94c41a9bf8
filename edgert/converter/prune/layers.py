"""What pruning works on: the weighted layers of a converted graph, and their cost.

A prunable layer is a conv2d, gemm or matmul node whose weight (input 1) is a float32
constant. Its "weight" is that tensor; MACs are counted from the node's shapes (dense)
and from its nonzero weights (what a sparse kernel would do).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node

WEIGHTED = ("conv2d", "gemm", "matmul")


def prunable(g: Graph) -> list[Node]:
    """Weighted layers in execution order."""
    out = []
    for n in g.nodes:
        if n.op in WEIGHTED and len(n.inputs) > 1 and n.inputs[1]:
            w = g.const(n.inputs[1])
            if w is not None and w.dtype == np.float32 and w.ndim >= 2:
                out.append(n)
    return out


def default_exclusions(g: Graph) -> set[str]:
    """The first and the last weighted layer: pruning them costs the most accuracy for
    the least saving."""
    layers = prunable(g)
    return {layers[0].name, layers[-1].name} if layers else set()


def node_macs(g: Graph, n: Node, nonzero: bool = False) -> int:
    """Multiply-adds of one node: conv2d, gemm, matmul and spmm; 0 for other ops.
    nonzero counts only the stored (nonzero) weights."""
    out = g.tensors[n.outputs[0]].shape
    if n.op == "spmm":
        p = int(n.attrs["p"])
        rows = int(np.prod(out, dtype=np.int64)) // p // (g.tensors[n.inputs[3]].shape[0] - 1)
        return rows * p * g.tensors[n.inputs[1]].shape[0]
    if n.op not in WEIGHTED or len(n.inputs) < 2 or not n.inputs[1]:
        return 0
    w = g.tensors[n.inputs[1]]
    wd = g.const(n.inputs[1])
    density = 1.0
    if nonzero and wd is not None and wd.size:
        density = float(np.count_nonzero(wd)) / wd.size
    if n.op == "conv2d":
        # Each output element reads one kernel window of C/group channels.
        per_out = int(np.prod(w.shape[1:], dtype=np.int64))
        dense = int(np.prod(out, dtype=np.int64)) * per_out
    else:
        a = g.tensors[n.inputs[0]].shape
        k = a[0] if (n.op == "gemm" and n.attrs.get("trans_a")) else a[-1]
        dense = int(np.prod(out, dtype=np.int64)) * int(k)
    return int(round(dense * density))


def graph_macs(g: Graph, nonzero: bool = False) -> int:
    return sum(node_macs(g, n, nonzero) for n in g.nodes)


def weight_count(g: Graph, names: list[str] | None = None) -> tuple[int, int]:
    """(nonzero, total) weights of the named layers (all prunable layers by default)."""
    nz = total = 0
    for n in prunable(g):
        if names is None or n.name in names:
            w = g.const(n.inputs[1])
            nz += int(np.count_nonzero(w))
            total += w.size
    return nz, total
