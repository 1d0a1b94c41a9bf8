"""cast: element type conversion between float32, float16, uint8, int8, int16, int32,
int64 and bool. Kernel: csrc/kernels/ref/cast.c.

Attribute: to (the target dtype: a numpy dtype, its name, or an edgert/ONNX dtype code).
Parameter words: [target dtype code].

Semantics: float -> integer truncates toward zero and saturates to the target's range
(NaN gives 0; ONNX leaves out-of-range values undefined); integer -> narrower integer
keeps the low bits; anything -> bool is "nonzero" (NaN is true); bool -> anything is 0
or 1; conversions to float round to nearest even (float16 overflow gives infinity).
"""
from __future__ import annotations

import numpy as np

from ... import dtypes
from .registry import OpUnsupported, register


def target_dtype(to) -> np.dtype:
    """The numpy dtype named by a `to` attribute, or OpUnsupported."""
    try:
        dt = dtypes.np_of(int(to)) if isinstance(to, (int, np.integer)) else np.dtype(to)
    except (KeyError, TypeError):
        raise OpUnsupported(f"cast: target type {to!r} is not supported") from None
    if not dtypes.supported(dt):
        raise OpUnsupported(f"cast: target type {dt} is not supported")
    return dt


def cast_reference(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """numpy meaning of cast(x) to dtype `to`."""
    x = np.asarray(x)
    to = np.dtype(to)
    if to == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and to.kind in "iu":
        info = np.iinfo(to)
        with np.errstate(invalid="ignore"):
            v = np.trunc(x.astype(np.float64))
            v = np.where(np.isnan(v), 0.0, v)
            lo = v <= float(info.min)
            hi = v >= float(info.max)
            mid = np.where(lo | hi, 0.0, v).astype(to)
        return np.where(lo, to.type(info.min), np.where(hi, to.type(info.max), mid)).astype(to)
    with np.errstate(over="ignore"):
        if to == np.float16 and x.dtype != np.float32:
            x = x.astype(np.float32)  # the kernel goes through float32 too
        return x.astype(to)


def _infer(node, graph):
    x = graph.tensors[node.inputs[0]]
    if not dtypes.supported(x.dtype):
        raise OpUnsupported(f"cast: input type {x.dtype} is not supported")
    return [(x.shape, target_dtype(node.attrs.get("to")))]


def _pack(node, graph):
    return [dtypes.code_of(target_dtype(node.attrs.get("to")))]


def _reference(node, inputs):
    return [cast_reference(inputs[0], target_dtype(node.attrs.get("to")))]


register("cast", infer=_infer, pack=_pack, reference=_reference)
