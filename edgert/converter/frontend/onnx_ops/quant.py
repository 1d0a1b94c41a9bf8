"""QuantizeLinear and DequantizeLinear -> quantize_linear / dequantize_linear.

Scales and zero points must be constants; block quantization (block_size) and types
other than int8/uint8 (and int32 for DequantizeLinear) are rejected. Graphs whose
QuantizeLinear/DequantizeLinear pairs describe an int8 model are normally turned into
native int8 ops before import (edgert/converter/quant/qdq.py); the nodes that reach these
lowerings run as the ops themselves.
"""
from __future__ import annotations

import numpy as np

from ...ir import Quant
from ..onnx_import import LowerCtx, lower

_Q_TYPES = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8"}


def _params(ctx: LowerCtx, quantized_dtype=None) -> dict:
    ctx.only_attrs("axis", "block_size", "saturate", "output_dtype")
    if ctx.attr("block_size", 0):
        ctx.fail("block quantization (block_size) is not supported")
    scale = ctx.require_const(1, "scale")
    if scale.dtype != np.float32:
        ctx.fail(f"scale of type {scale.dtype} is not supported (float32)")
    zp = ctx.const(2) if ctx.has(2) else None
    if ctx.has(2) and zp is None:
        ctx.fail("zero point (input 2) must be constant after folding")
    if zp is None:
        zp = np.zeros(scale.shape, quantized_dtype or np.uint8)
    if zp.shape != scale.shape or scale.ndim > 1:
        ctx.fail("scale and zero point must be scalars or 1-D of one shape")
    attrs = {"scale": [float(v) for v in scale.reshape(-1)], "zero_point": [int(v) for v in zp.reshape(-1)]}
    if scale.size > 1 or scale.ndim == 1:
        attrs["axis"] = int(ctx.attr("axis", 1))
    return attrs, zp.dtype


@lower("QuantizeLinear")
def _quantize(ctx: LowerCtx) -> None:
    if ctx.dtype(0) != np.float32:
        ctx.fail(f"input of type {ctx.dtype(0)} is not supported (float32)")
    attrs, zdt = _params(ctx)
    out_dt = ctx.attr("output_dtype", 0)
    if out_dt:
        from .... import dtypes
        try:
            zdt = dtypes.np_of(int(out_dt))
        except KeyError:
            ctx.fail(f"output type {out_dt} is not supported")
    if zdt not in _Q_TYPES:
        ctx.fail(f"quantized type {zdt} is not supported (int8, uint8)")
    attrs["dtype"] = _Q_TYPES[zdt]
    out = ctx.emit("quantize_linear", [ctx.input(0)], attrs, outputs=ctx.outputs)[0]
    t = ctx.graph.tensors[out]
    if "axis" not in attrs:
        t.quant = Quant(np.array(attrs["scale"], np.float32), np.array(attrs["zero_point"], np.int32), None)


@lower("DequantizeLinear")
def _dequantize(ctx: LowerCtx) -> None:
    dt = ctx.dtype(0)
    if dt not in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)):
        ctx.fail(f"input of type {dt} is not supported (int8, uint8, int32)")
    attrs, zdt = _params(ctx, dt)
    if zdt != dt:
        ctx.fail("zero point and input types differ")
    ctx.emit("dequantize_linear", [ctx.input(0)], attrs, outputs=ctx.outputs)
