"""add and mul on int8 tensors (the ops are `add` and `mul`; edgert/converter/ops/binary.py
dispatches here when the inputs are int8 and the node carries quantization attrs;
without them int8 add/mul keep their wrapping integer meaning). Kernel:
csrc/kernels/ref/binary_s8.c. Broadcasting is numpy's (output rank <= 8).

add (int8)
    attrs:   a_zp, b_zp, y_zp, a_mult, b_mult, shift, out_min, out_max (int); act none
    params:  [act 0, 0.0, 0.0, a_zp, b_zp, y_zp, a_mult, b_mult, shift, out_min, out_max]
    meaning: y = clamp(y_zp + floor(((a - a_zp) * a_mult + (b - b_zp) * b_mult
                                      + 2**(shift-1)) / 2**shift), out_min, out_max)
             with a_mult * 2**-shift ~= sa / sy and b_mult * 2**-shift ~= sb / sy
             (one shift for both, so the sum is rounded once); a_mult, b_mult in
             [0, 2**15) (15-bit multipliers: every term fits int32).
mul (int8)
    attrs:   a_zp, b_zp, y_zp, mult, shift, out_min, out_max (int)
    params:  [a_zp, b_zp, y_zp, mult, shift, out_min, out_max]
    meaning: y = clamp(y_zp + floor(((a - a_zp) * (b - b_zp) * mult + 2**(shift-1))
             / 2**shift), out_min, out_max) with mult * 2**-shift ~= sa * sb / sy and
             mult in [0, 2**14).
shift is in [1, 31]; all sums fit int32. add may run in place.
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported
from .activation import act_kind
from .shapes import broadcast_shape
from ..quant.fixedpoint import saturate

S8 = np.dtype(np.int8)
ADD_KEYS = ("a_zp", "b_zp", "y_zp", "a_mult", "b_mult", "shift", "out_min", "out_max")
MUL_KEYS = ("a_zp", "b_zp", "y_zp", "mult", "shift", "out_min", "out_max")


def applies(node, graph) -> bool:
    return (node.op in ("add", "mul") and len(node.inputs) == 2 and all(node.inputs)
            and graph.tensors[node.inputs[0]].dtype == S8 and "y_zp" in node.attrs)


def _words(node) -> list[int]:
    a = node.attrs
    keys = ADD_KEYS if node.op == "add" else MUL_KEYS
    try:
        w = [int(a[k]) for k in keys]
    except KeyError as e:
        raise OpUnsupported(f"{node.op} (int8): attribute {e.args[0]} missing") from None
    v = dict(zip(keys, w))
    if any(not -128 <= v[k] <= 127 for k in ("a_zp", "b_zp", "y_zp", "out_min", "out_max")):
        raise OpUnsupported(f"{node.op} (int8): zero points and range must be int8")
    if v["out_min"] > v["out_max"] or not 1 <= v["shift"] <= 31:
        raise OpUnsupported(f"{node.op} (int8): bad range or shift")
    limit = 2**15 if node.op == "add" else 2**14
    if any(not 0 <= v[k] < limit for k in ("a_mult", "b_mult", "mult") if k in v):
        raise OpUnsupported(f"{node.op} (int8): multipliers must be in [0, {limit})")
    return w


def infer(node, graph):
    a, b = (graph.tensors[i] for i in node.inputs)
    if a.dtype != S8 or b.dtype != S8:
        raise OpUnsupported(f"{node.op} (int8): both inputs must be int8")
    if node.op == "add" and act_kind(node.attrs.get("act")) != 0:
        raise OpUnsupported("add (int8): activations are folded into out_min/out_max")
    _words(node)
    return [(broadcast_shape([a.shape, b.shape], node.op), S8)]


def pack(node, graph):
    w = _words(node)
    return ([0, 0.0, 0.0] + w) if node.op == "add" else w


def reference(node, inputs):
    a, b = (np.asarray(x).astype(np.int64) for x in inputs)
    v = dict(zip(ADD_KEYS if node.op == "add" else MUL_KEYS, _words(node)))
    da, db = a - v["a_zp"], b - v["b_zp"]
    s = v["shift"]
    if node.op == "add":
        r = (da * v["a_mult"] + db * v["b_mult"] + (1 << (s - 1))) >> s
    else:
        r = (da * db * v["mult"] + (1 << (s - 1))) >> s
    return [saturate(v["y_zp"] + r, v["out_min"], v["out_max"])]
