"""Folding of int8 add/mul by a constant into the table lookup before them.

A table lookup (hard_swish, sigmoid, ... on int8: y = T[x + 128]) followed by an int8 add
or mul whose other operand is one constant value is again a function of x alone; its
table is the add or mul applied to the 256 entries of T, with the same integer
reference (edgert/converter/ops/binary_s8.py) that the C kernel matches byte for byte. So the
pair becomes one lookup with the same output bytes, one pass over the tensor instead
of two. PP-LCNetV3 (the PP-OCRv4 backbones) follows each hard_swish with a scalar scale
and shift; where the next convolution is padded they cannot fold into it
(edgert/converter/passes/fold_conv_input.py) and fold into the table here."""
from __future__ import annotations

import numpy as np

from .. import ops as edgert_ops
from ..ir import Graph
from .rewrite import LUT_OPS

S8 = np.dtype(np.int8)


def _table_node(g: Graph, producers: dict, x: str):
    """The int8 table lookup producing x, or None."""
    p = producers.get(x)
    if p is None or p.op not in LUT_OPS or len(p.inputs) != 2 or len(p.outputs) != 1:
        return None
    t = g.tensors[p.inputs[1]]
    if not t.is_const or t.dtype != S8 or tuple(t.shape) != (256,):
        return None
    return p


def fold_into_tables(g: Graph) -> int:
    """Folds every eligible add/mul into the lookup before it; returns how many. One pass
    in node order: a fold makes the lookup the producer of the add/mul's output, so a
    following add/mul (mul then add) folds into the same table."""
    producers = g.producers()
    consumers = g.consumers()
    outputs = set(g.outputs)
    dead = set()
    for n in g.nodes:
        if n.op not in ("add", "mul") or len(n.inputs) != 2 or "y_zp" not in n.attrs:
            continue
        consts = [k for k, i in enumerate(n.inputs) if g.tensors[i].is_const]
        if len(consts) != 1:
            continue
        ci = consts[0]
        x, c = n.inputs[1 - ci], g.tensors[n.inputs[ci]]
        xt = g.tensors[x]
        if xt.dtype != S8 or c.dtype != S8 or c.data.size == 0:
            continue
        flat = np.asarray(c.data).reshape(-1)
        if not np.all(flat == flat[0]):
            continue
        if np.broadcast_shapes(tuple(c.shape), tuple(xt.shape)) != tuple(xt.shape):
            continue
        p = _table_node(g, producers, x)
        if p is None or x in outputs or len(consumers.get(x, [])) != 1:
            continue
        table = np.asarray(g.tensors[p.inputs[1]].data).reshape(-1)
        cval = np.broadcast_to(flat[:1], table.shape)
        args = [cval, table] if ci == 0 else [table, cval]
        new = np.asarray(edgert_ops.get(n.op).reference(n, args)[0]).astype(np.int8).reshape(256)
        p.inputs = [p.inputs[0], g.add_const(new, p.name + "_table")]
        p.outputs = list(n.outputs)
        producers[n.outputs[0]] = p
        dead.add(id(n))
    if dead:
        g.nodes = [m for m in g.nodes if id(m) not in dead]
        g.remove_unused_tensors()
    return len(dead)
