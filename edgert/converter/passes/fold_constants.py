"""Constant folding on the edgert graph: a node whose inputs are all constants is
replaced by its outputs, computed with the op's numpy reference. (The ONNX importer
already folds constant ONNX nodes; this catches what later passes create.) A
convolution or product costlier than MAX_FOLDED_MACS stays a node and runs in the
runtime."""
from __future__ import annotations

import math

import numpy as np

from .. import ops as edgert_ops
from ..ir import Graph

MAX_FOLDED_MACS = 1 << 26  # also the importer's limit (it folds through fold_nodes)
_PRODUCTS = {"conv2d", "conv_transpose2d", "gemm", "matmul"}


def _macs(g: Graph, node) -> int:
    """Multiply-adds of a convolution or product node: its output elements times the
    weight elements per output channel (the reduction length for products)."""
    if node.op not in _PRODUCTS or len(node.inputs) < 2 or not node.inputs[1]:
        return 0
    out = math.prod(g.tensors[node.outputs[0]].shape)
    w = g.tensors[node.inputs[1]].shape
    if node.op == "conv_transpose2d":
        return math.prod(g.tensors[node.inputs[0]].shape) // max(w[0], 1) * math.prod(w)
    if node.op == "conv2d":
        return out * (math.prod(w) // max(w[0], 1))
    return out * (g.tensors[node.inputs[0]].shape[-1] if g.tensors[node.inputs[0]].shape else 1)


def fold_nodes(g: Graph, nodes: list) -> list:
    """Folds, in order, each of `nodes` whose inputs are all constants (and that is not
    too costly); returns the ones left. The importer uses it on the nodes it has just
    lowered from an ONNX node with constant inputs."""
    keep = []
    for node in nodes:
        ins = [g.tensors[i] if i else None for i in node.inputs]
        if ins and all(t is None or t.is_const for t in ins) and any(t is not None for t in ins) and \
                _macs(g, node) <= MAX_FOLDED_MACS:
            outs = edgert_ops.get(node.op).reference(node, [t.data if t is not None else None for t in ins])
            for name, val in zip(node.outputs, outs):
                t = g.tensors[name]
                t.data = np.require(np.asarray(val).astype(t.dtype, copy=False).reshape(t.shape), requirements="C")
        else:
            keep.append(node)
    return keep


def run(g: Graph) -> bool:
    n = len(g.nodes)
    g.nodes = fold_nodes(g, g.nodes)
    return len(g.nodes) != n
