"""quantize_linear and dequantize_linear: float32 <-> 8-bit affine quantization, per
tensor or per channel (ONNX QuantizeLinear / DequantizeLinear without blocks).

Kernels: csrc/kernels/ref/quantize.c.

quantize_linear
    inputs:  X (float32)
    outputs: Y (int8 or uint8, attrs dtype; the shape of X)
    y = saturate(round_half_even(x / scale[c]) + zero_point[c]), x / scale computed in
    float32; NaN becomes zero_point[c]; saturate clamps to the output type's range.
dequantize_linear
    inputs:  X (int8, uint8 or int32)
    outputs: Y (float32, the shape of X)
    y = (float32(x) - float32(zero_point[c])) * scale[c], in float32.

attrs:   scale (list of float > 0), zero_point (list of int, same length; in the range
         of the quantized type), axis (int, or None for per-tensor: one scale), dtype
         ("int8" | "uint8", quantize_linear only; default "int8")
         c is the index along `axis` of the element (0 when per-tensor).
params:  [axis (normalized; -1 per tensor), count, scale f x count, zero_point x count]

The converter also sets the quantized tensor's quant record (Tensor.quant) to the same
values, so that readers of the file see them; the kernels use the parameter words.
"""
from __future__ import annotations

import math

import numpy as np

from .registry import OpUnsupported, register

F32 = np.dtype(np.float32)
QTYPES = {"int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8)}
DQ_INPUTS = [np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)]


def _qparams(node, graph, qdtype: np.dtype) -> tuple[int, list[float], list[int]]:
    """(normalized axis or -1, scales, zero points), checked against the data input."""
    a = node.attrs
    x = graph.tensors[node.inputs[0]]
    scale = [float(v) for v in np.asarray(a.get("scale", []), np.float64).reshape(-1)]
    zp = [int(v) for v in np.asarray(a.get("zero_point", [0] * len(scale)), np.int64).reshape(-1)]
    if not scale or len(zp) != len(scale):
        raise OpUnsupported(f"{node.op}: needs as many zero points as scales (got {len(scale)} and {len(zp)})")
    for s in scale:
        if not (math.isfinite(s) and s > 0) or not (np.float32(s) > 0):
            raise OpUnsupported(f"{node.op}: scale {s} must be finite and > 0")
    info = np.iinfo(qdtype)
    if any(not info.min <= z <= info.max for z in zp):
        raise OpUnsupported(f"{node.op}: zero points must be in the range of {qdtype}")
    axis = a.get("axis")
    if axis is None or (len(scale) == 1 and len(x.shape) == 0):
        if len(scale) != 1:
            raise OpUnsupported(f"{node.op}: {len(scale)} scales need an axis")
        return -1, scale, zp
    axis = int(axis)
    r = len(x.shape)
    if not -r <= axis < r:
        raise OpUnsupported(f"{node.op}: axis {axis} out of range for rank {r}")
    axis %= r
    if len(scale) == 1:
        return -1, scale, zp
    if x.shape[axis] != len(scale):
        raise OpUnsupported(f"{node.op}: {len(scale)} scales for dimension {axis} of size {x.shape[axis]}")
    return axis, scale, zp


def _q_dtype(node) -> np.dtype:
    name = node.attrs.get("dtype", "int8")
    if name not in QTYPES:
        raise OpUnsupported(f"quantize_linear: output type {name!r} is not supported (int8, uint8)")
    return QTYPES[name]


def _infer_q(node, graph):
    if len(node.inputs) != 1 or not node.inputs[0]:
        raise OpUnsupported("quantize_linear takes one input")
    x = graph.tensors[node.inputs[0]]
    if x.dtype != F32:
        raise OpUnsupported(f"quantize_linear: input dtype {x.dtype} is not supported (float32)")
    qt = _q_dtype(node)
    _qparams(node, graph, qt)
    return [(x.shape, qt)]


def _infer_dq(node, graph):
    if len(node.inputs) != 1 or not node.inputs[0]:
        raise OpUnsupported("dequantize_linear takes one input")
    x = graph.tensors[node.inputs[0]]
    if x.dtype not in DQ_INPUTS:
        raise OpUnsupported(f"dequantize_linear: input dtype {x.dtype} is not supported (int8, uint8, int32)")
    _qparams(node, graph, x.dtype)
    return [(x.shape, F32)]


def _pack_with(qdtype_of):
    def pack(node, graph):
        axis, scale, zp = _qparams(node, graph, qdtype_of(node, graph))
        return [axis, len(scale)] + [float(s) for s in scale] + [int(z) for z in zp]
    return pack


def _broadcast(values, dtype, x: np.ndarray, axis) -> np.ndarray:
    v = np.asarray(values, dtype).reshape(-1)
    if axis is None or v.size == 1:
        return v.reshape(())
    shape = [1] * x.ndim
    shape[int(axis) % x.ndim] = -1
    return v.reshape(shape)


def quantize_reference(x: np.ndarray, scale, zp, axis, qdtype) -> np.ndarray:
    x = np.asarray(x, np.float32)
    s = _broadcast(scale, np.float32, x, axis)
    z = _broadcast(zp, np.float64, x, axis)
    with np.errstate(all="ignore"):
        v = np.rint(x / s).astype(np.float64) + z
    v = np.where(np.isnan(v), np.broadcast_to(z, v.shape), v)
    info = np.iinfo(qdtype)
    return np.clip(v, info.min, info.max).astype(qdtype)


def dequantize_reference(x: np.ndarray, scale, zp, axis) -> np.ndarray:
    x = np.asarray(x)
    s = _broadcast(scale, np.float32, x, axis)
    z = _broadcast(zp, np.float32, x, axis)
    return ((x.astype(np.float32) - z) * s).astype(np.float32)


def _ref_q(node, inputs):
    a = node.attrs
    return [quantize_reference(inputs[0], a["scale"], a.get("zero_point", [0] * len(a["scale"])), a.get("axis"),
                               _q_dtype(node))]


def _ref_dq(node, inputs):
    a = node.attrs
    return [dequantize_reference(inputs[0], a["scale"], a.get("zero_point", [0] * len(a["scale"])), a.get("axis"))]


register("quantize_linear", infer=_infer_q, pack=_pack_with(lambda n, g: _q_dtype(n)), reference=_ref_q)
register("dequantize_linear", infer=_infer_dq, pack=_pack_with(lambda n, g: g.tensors[n.inputs[0]].dtype),
         reference=_ref_dq)
