"""Element-wise unary ops on int8 by table lookup (sigmoid, tanh, hard_swish,
hard_sigmoid, silu, gelu, elu, leaky_relu, relu, ... : every float32 op of the unary
family). edgert/converter/ops/unary.py dispatches here when the op has a second input.
Kernel: csrc/kernels/ref/lut.c (ert_lut_s8__ref).

<unary op> (int8)
    inputs:  X (int8), T (int8 constant, [256])
    outputs: Y (int8, the shape of X)
    meaning: y = T[x + 128]. The converter fills T by running the op's float meaning on
             the 256 dequantized input values and quantizing the results with the
             output's scale and zero point (build_table). Params: the float op's
             (unused). May run in place.
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, get
from ..quant.fixedpoint import quantize_values

S8 = np.dtype(np.int8)


def applies(node, graph) -> bool:
    return len(node.inputs) == 2


def infer(node, graph):
    x, t = (graph.tensors[i] if i else None for i in node.inputs)
    if x is None or t is None or x.dtype != S8 or t.dtype != S8 or tuple(t.shape) != (256,) or not t.is_const:
        raise OpUnsupported(f"{node.op} (int8): needs an int8 input and a constant int8 [256] table")
    return [(x.shape, S8)]


def reference(node, inputs):
    x, t = (np.asarray(v) for v in inputs)
    return [t[x.astype(np.int64) + 128].astype(np.int8)]


def build_table(node, s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """The 256-entry table of float unary op `node` (its attrs) between two int8
    quantizations."""
    q = np.arange(-128, 128, dtype=np.int32)
    x = ((q - zp_in).astype(np.float32) * np.float32(s_in)).astype(np.float32)
    float_node = type(node)(node.op, node.inputs[:1], node.outputs, dict(node.attrs), node.name)
    y = get(node.op).reference(float_node, [x])[0]
    return quantize_values(y, s_out, zp_out)
