"""concat of int8 tensors with different quantizations (the op is `concat`;
edgert/converter/ops/shape_ops.py dispatches here when the node carries y_zp). Kernel:
csrc/kernels/ref/concat_s8.c. Without these attrs int8 concat copies bytes (inputs
sharing the output's quantization).

concat (int8, requantizing)
    attrs:   axis; in_zp, in_mult, in_shift (lists, one entry per input); y_zp
    params:  [axis, then per input (zp, mult, shift), then y_zp]
    meaning: input k is copied unchanged when in_shift[k] is 0 (it has the output's
             scale and zero point), else each value becomes
             clamp(y_zp + requant(x - in_zp[k], in_mult[k], in_shift[k]), -128, 127)
             with in_mult * 2**-in_shift ~= s_k / s_y.
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported
from ..quant.fixedpoint import requant, saturate

S8 = np.dtype(np.int8)


def applies(node, graph) -> bool:
    return "y_zp" in node.attrs


def words(node, graph) -> list[int]:
    a = node.attrs
    n = len(node.inputs)
    zps, mults, shifts = (list(a.get(k, [])) for k in ("in_zp", "in_mult", "in_shift"))
    if not (len(zps) == len(mults) == len(shifts) == n):
        raise OpUnsupported("concat (int8): in_zp, in_mult, in_shift need one entry per input")
    out = []
    for i, z, m, s in zip(node.inputs, zps, mults, shifts):
        if graph.tensors[i].dtype != S8:
            raise OpUnsupported("concat (int8): every input must be int8")
        if not (-128 <= int(z) <= 127 and 0 <= int(m) < 2**31 and (int(s) == 0 or 1 <= int(s) <= 62)):
            raise OpUnsupported("concat (int8): bad zero point, multiplier or shift")
        out += [int(z), int(m), int(s)]
    if not -128 <= int(a["y_zp"]) <= 127:
        raise OpUnsupported("concat (int8): y_zp outside int8")
    return out + [int(a["y_zp"])]


def reference(node, inputs, axis: int):
    a = node.attrs
    parts = []
    for x, z, m, s in zip(inputs, a["in_zp"], a["in_mult"], a["in_shift"]):
        x = np.asarray(x)
        parts.append(x if int(s) == 0 else saturate(int(a["y_zp"]) + requant(x.astype(np.int64) - int(z), m, s)))
    return [np.concatenate(parts, axis=axis).astype(np.int8)]
