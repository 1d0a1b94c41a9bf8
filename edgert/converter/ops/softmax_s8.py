"""softmax on int8 (the op is `softmax`; edgert/converter/ops/softmax.py dispatches here when X is
int8). Kernel: csrc/kernels/ref/softmax_s8.c.

softmax (int8)
    inputs:  X (int8), E (int32 constant, [256]): E[d] ~= 2**20 * exp(-sx * d), in
             [0, 2**20] with E[0] > 0 (exp_table builds it)
    outputs: Y (int8, X's shape), quantized with scale 1/256 and zero point -128
    attrs, params: the float op's (axis, flatten)
    meaning: along each softmax line, with m the line's maximum, d_i = m - x_i and
             S = sum_i E[d_i] (exact, 64-bit):
             y_i = min(127, -128 + floor((256 * E[d_i] + floor(S / 2)) / S))
"""
from __future__ import annotations

import math

import numpy as np

from .registry import OpUnsupported

S8 = np.dtype(np.int8)
I32 = np.dtype(np.int32)
E_ONE = 1 << 20
OUT_SCALE, OUT_ZP = 1.0 / 256.0, -128


def applies(node, graph) -> bool:
    return bool(node.inputs) and bool(node.inputs[0]) and graph.tensors[node.inputs[0]].dtype == S8


def exp_table(s_in: float) -> np.ndarray:
    d = np.arange(256, dtype=np.float64)
    return np.rint(E_ONE * np.exp(-float(s_in) * d)).astype(np.int32)


def infer(node, graph, axis_of):
    if node.op != "softmax" or len(node.inputs) != 2 or not all(node.inputs):
        raise OpUnsupported(f"{node.op} (int8): only softmax, with inputs X and E")
    x, e = (graph.tensors[i] for i in node.inputs)
    if e.dtype != I32 or tuple(e.shape) != (256,) or not e.is_const:
        raise OpUnsupported("softmax (int8): E must be a constant int32 [256]")
    if int(e.data.min()) < 0 or int(e.data.max()) > E_ONE or int(e.data[0]) <= 0:
        raise OpUnsupported("softmax (int8): E values must lie in [0, 2**20], E[0] > 0")
    if len(x.shape) == 0:
        raise OpUnsupported("softmax (int8): input must have rank >= 1")
    axis_of(node, len(x.shape))
    return [(x.shape, S8)]


def reference(node, inputs, axis: int, flatten: bool):
    x, e = np.asarray(inputs[0]), np.asarray(inputs[1], np.int64)
    shape = x.shape
    outer = math.prod(shape[:axis])
    n, inner = (math.prod(shape[axis:]), 1) if flatten else (shape[axis], math.prod(shape[axis + 1:]))
    v = x.astype(np.int64).reshape(outer, n, inner)
    if v.size == 0:
        return [x.copy()]
    ev = e[v.max(axis=1, keepdims=True) - v]
    s = ev.sum(axis=1, keepdims=True)
    y = np.minimum(127, -128 + (256 * ev + s // 2) // s)
    return [y.reshape(shape).astype(np.int8)]
