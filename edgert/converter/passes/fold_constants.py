"""Constant folding on the edgert graph: a node whose inputs are all constants is
replaced by its outputs, computed with the op's numpy reference. (The ONNX importer
already folds constant ONNX nodes; this catches what later passes create.)"""
from __future__ import annotations

import numpy as np

from .. import ops as edgert_ops
from ..ir import Graph


def run(g: Graph) -> bool:
    changed = False
    keep = []
    for node in g.nodes:
        ins = [g.tensors[i] if i else None for i in node.inputs]
        if ins and all(t is None or t.is_const for t in ins) and any(t is not None for t in ins):
            outs = edgert_ops.get(node.op).reference(node, [t.data if t is not None else None for t in ins])
            for name, val in zip(node.outputs, outs):
                t = g.tensors[name]
                t.data = np.require(np.asarray(val).astype(t.dtype, copy=False).reshape(t.shape), requirements="C")
            changed = True
        else:
            keep.append(node)
    g.nodes = keep
    return changed
