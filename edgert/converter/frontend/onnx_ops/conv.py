"""ONNX lowerings: Conv, ConvTranspose, Gemm, MatMul and pooling.

Conv / ConvTranspose / MaxPool / AveragePool / LpPool take 1-D (rank-3) and 2-D
(rank-4) inputs; 1-D becomes the edgert op's height-1 form (attr rank1d). auto_pad is
resolved here into explicit pads. Gemm stores a constant B that it reads transposed
as the transposed constant (trans_b False).
"""
from __future__ import annotations

import numpy as np

from ..onnx_import import LowerCtx, lower

F32 = np.dtype(np.float32)


def _require_f32(ctx: LowerCtx, *idx: int) -> None:
    for i in idx:
        if ctx.has(i) and ctx.dtype(i) != F32:
            ctx.fail(f"input {i} has dtype {ctx.dtype(i)}; only float32 is supported")


def _spatial_rank(ctx: LowerCtx) -> int:
    rank = len(ctx.shape(0))
    if rank == 5:
        ctx.fail("3-D (rank-5) inputs are not supported")
    if rank not in (3, 4):
        ctx.fail(f"input rank {rank} is not supported (3 for 1-D, 4 for 2-D)")
    return rank - 2


def _int_list(ctx: LowerCtx, name: str, default: list[int], n: int) -> list[int]:
    v = ctx.attr(name, None)
    if v is None:
        return list(default)
    v = [int(x) for x in v]
    if len(v) != n:
        ctx.fail(f"attribute {name} has {len(v)} values, expected {n}")
    return v


def _same_pads(size: int, k: int, s: int, d: int, upper: bool) -> tuple[int, int]:
    """Pads (begin, end) giving ceil(size / s) outputs (ONNX SAME_UPPER / SAME_LOWER)."""
    out = -(-size // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


def _window_pads(ctx: LowerCtx, spatial: tuple[int, ...], kernel: list[int], strides: list[int],
                 dilations: list[int]) -> list[int]:
    """Explicit pads [begin..., end...] from auto_pad / pads."""
    n = len(spatial)
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pairs = [_same_pads(spatial[i], kernel[i], strides[i], dilations[i], auto == "SAME_UPPER") for i in range(n)]
        return [p[0] for p in pairs] + [p[1] for p in pairs]
    if auto == "VALID":
        return [0] * (2 * n)
    if auto != "NOTSET":
        ctx.fail(f"auto_pad {auto!r} is not supported")
    pads = _int_list(ctx, "pads", [0] * (2 * n), 2 * n)
    if min(pads) < 0:
        ctx.fail(f"negative pads {pads} are not supported")
    return pads


def _same(ctx: LowerCtx) -> dict:
    """{"same_pad": "SAME_UPPER" | "SAME_LOWER"} for a window op whose pads follow its input
    size (bounded dimensions recompute them at run time: bounds.py, RULE_SAME), else {}."""
    auto = ctx.attr("auto_pad", "NOTSET")
    return {"same_pad": auto} if auto in ("SAME_UPPER", "SAME_LOWER") else {}


def _to_2d(values: list[int], one: int) -> list[int]:
    """A 1-D window value as its height-1 2-D form."""
    return [one] + list(values)


def _pads_2d(pads: list[int]) -> list[int]:
    """ONNX pads [begin..., end...] as [top, left, bottom, right] (1-D: height 0)."""
    if len(pads) == 2:
        return [0, pads[0], 0, pads[1]]
    return list(pads)


def _window_attrs(kernel, strides, dilations, pads) -> dict:
    if len(kernel) == 1:
        return {"kernel": _to_2d(kernel, 1), "strides": _to_2d(strides, 1), "dilations": _to_2d(dilations, 1),
                "pads": _pads_2d(pads), "rank1d": True}
    return {"kernel": list(kernel), "strides": list(strides), "dilations": list(dilations), "pads": list(pads)}


# ---- convolution ---------------------------------------------------------------------

@lower("Conv")
def _conv(ctx: LowerCtx) -> None:
    ctx.only_attrs("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
    n = _spatial_rank(ctx)
    _require_f32(ctx, 0, 1, 2)
    w_shape = ctx.shape(1)
    if len(w_shape) != n + 2:
        ctx.fail(f"W has rank {len(w_shape)}, expected {n + 2}")
    kernel = _int_list(ctx, "kernel_shape", list(w_shape[2:]), n)
    if kernel != list(w_shape[2:]):
        ctx.fail(f"kernel_shape {kernel} does not match W {list(w_shape)}")
    strides = _int_list(ctx, "strides", [1] * n, n)
    dilations = _int_list(ctx, "dilations", [1] * n, n)
    if min(strides + dilations) < 1:
        ctx.fail("strides and dilations must be >= 1")
    pads = _window_pads(ctx, ctx.shape(0)[2:], kernel, strides, dilations)
    attrs = {"group": int(ctx.attr("group", 1)), **_window_attrs(kernel, strides, dilations, pads), **_same(ctx)}
    inputs = [ctx.input(0), ctx.input(1)] + ([ctx.input(2)] if ctx.has(2) else [])
    ctx.emit("conv2d", inputs, attrs, outputs=ctx.outputs[:1])


@lower("ConvTranspose")
def _conv_transpose(ctx: LowerCtx) -> None:
    ctx.only_attrs("auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                   "strides")
    n = _spatial_rank(ctx)
    _require_f32(ctx, 0, 1, 2)
    x_shape, w_shape = ctx.shape(0), ctx.shape(1)
    if len(w_shape) != n + 2:
        ctx.fail(f"W has rank {len(w_shape)}, expected {n + 2}")
    kernel = _int_list(ctx, "kernel_shape", list(w_shape[2:]), n)
    if kernel != list(w_shape[2:]):
        ctx.fail(f"kernel_shape {kernel} does not match W {list(w_shape)}")
    strides = _int_list(ctx, "strides", [1] * n, n)
    dilations = _int_list(ctx, "dilations", [1] * n, n)
    out_pad = _int_list(ctx, "output_padding", [0] * n, n)
    if min(strides + dilations) < 1 or min(out_pad) < 0:
        ctx.fail("strides and dilations must be >= 1, output_padding >= 0")
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        ctx.fail(f"auto_pad {auto!r} is not supported")
    out_shape = ctx.attr("output_shape", None)
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape]
        if len(out_shape) == n + 2:
            out_shape = out_shape[2:]
        if len(out_shape) != n:
            ctx.fail(f"output_shape {out_shape} does not have {n} spatial values")
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [x_shape[2 + i] * strides[i] for i in range(n)]
    grow = None  # zero rows/columns (before, after) per spatial dim around the natural output
    if out_shape is not None:
        begin, end, grow = [], [], []
        for i in range(n):
            natural = strides[i] * (x_shape[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
            total = natural - out_shape[i]
            first = total // 2 if auto == "SAME_UPPER" else total - total // 2
            if total < 0 and auto in ("SAME_UPPER", "SAME_LOWER"):
                # negative pads (the spec's total_padding below 0: a stride longer than the
                # kernel): zeros on both sides, split as the positive pads would be
                begin.append(0)
                end.append(0)
                grow.append((-first, -(total - first)))
            elif total < 0:  # output_shape larger than the natural output: zeros at the end
                begin.append(0)
                end.append(0)
                out_pad[i] += -total
                grow.append((0, 0))
            else:
                begin.append(first)
                end.append(total - first)
                grow.append((0, 0))
        pads = begin + end
    elif auto == "VALID":
        pads = [0] * (2 * n)
    else:
        pads = _int_list(ctx, "pads", [0] * (2 * n), 2 * n)
        if min(pads) < 0:
            ctx.fail(f"negative pads {pads} are not supported")
    attrs = {"group": int(ctx.attr("group", 1)), **_window_attrs(kernel, strides, dilations, pads),
             "output_padding": _to_2d(out_pad, 0) if n == 1 else out_pad}
    inputs = [ctx.input(0), ctx.input(1)] + ([ctx.input(2)] if ctx.has(2) else [])
    if 0 in x_shape:  # no input element reaches the output: it is B (or 0) everywhere, a constant
        dims = [strides[i] * (x_shape[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - pads[i] - pads[n + i]
                + (grow[i][0] + grow[i][1] if grow else 0) for i in range(n)]
        if min(dims) < 0:
            ctx.fail(f"the output length {dims} of an empty input is negative")
        b = ctx.require_const(2, "B of a ConvTranspose of an empty input") if ctx.has(2) else np.zeros(1, np.float32)
        c_out = w_shape[1] * int(ctx.attr("group", 1))
        y = np.zeros([x_shape[0], c_out] + dims, np.float32) + np.asarray(b, np.float32).reshape([-1] + [1] * n)
        ctx.alias(0, ctx.add_const(y, "empty_input"))
        return
    if not grow or not any(b or e for b, e in grow):
        ctx.emit("conv_transpose2d", inputs, attrs, outputs=ctx.outputs[:1])
        return
    # The zeros of the extension get the bias too (the spec adds B to every output): the
    # transposed convolution without it, the zeros, then B added.
    bias = None
    if ctx.has(2):
        ctx.require_const(2, "B of a ConvTranspose whose SAME padding is negative")
        bias = ctx.derived_const(2, "channels_last_axes", lambda v: v.reshape([-1] + [1] * (1 if n == 1 else n)),
                                 "bias")
    y, = ctx.emit("conv_transpose2d", inputs[:2], attrs)
    full = [0] * (n + 2) + [0] * (n + 2)
    for i, (b, e) in enumerate(grow):
        full[2 + i], full[n + 2 + 2 + i] = b, e
    if n == 1:  # the edgert op's height-1 form keeps rank 3
        full = [0, 0, grow[0][0], 0, 0, grow[0][1]]
    if bias is None:
        ctx.emit("pad", [y], {"mode": "constant", "pads": full, "value": 0.0}, outputs=ctx.outputs[:1])
        return
    z, = ctx.emit("pad", [y], {"mode": "constant", "pads": full, "value": 0.0})
    ctx.emit("add", [z, bias], {}, outputs=ctx.outputs[:1])


# ---- dense ---------------------------------------------------------------------------

@lower("Gemm")
def _gemm(ctx: LowerCtx) -> None:
    ctx.only_attrs("alpha", "beta", "transA", "transB", "broadcast")
    _require_f32(ctx, 0, 1, 2)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    b = ctx.input(1)
    bc = ctx.const(1)
    if trans_b and bc is not None and bc.ndim == 2:
        b = ctx.derived_const(1, "T", lambda v: np.ascontiguousarray(v.T), f"{b}_T")
        trans_b = False
    inputs = [ctx.input(0), b]
    if ctx.has(2) and beta != 0.0:
        inputs.append(ctx.input(2))
    ctx.emit("gemm", inputs, {"trans_a": trans_a, "trans_b": trans_b, "alpha": alpha, "beta": beta},
             outputs=ctx.outputs[:1])


@lower("MatMul")
def _matmul(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    _require_f32(ctx, 0, 1)
    ctx.emit("matmul", [ctx.input(0), ctx.input(1)], {}, outputs=ctx.outputs[:1])


# ---- pooling -------------------------------------------------------------------------

def _pool(ctx: LowerCtx, op: str, extra: dict) -> None:
    n = _spatial_rank(ctx)
    _require_f32(ctx, 0)
    kernel = ctx.attr("kernel_shape", None)
    if kernel is None or len(kernel) != n:
        ctx.fail(f"kernel_shape must have {n} values")
    kernel = [int(k) for k in kernel]
    strides = _int_list(ctx, "strides", [1] * n, n)
    dilations = _int_list(ctx, "dilations", [1] * n, n)
    if min(kernel + strides + dilations) < 1:
        ctx.fail("kernel_shape, strides and dilations must be >= 1")
    pads = _window_pads(ctx, ctx.shape(0)[2:], kernel, strides, dilations)
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    if ctx.attr("auto_pad", "NOTSET") != "NOTSET":
        ceil_mode = False
    attrs = {**_window_attrs(kernel, strides, dilations, pads), "ceil_mode": ceil_mode, **extra, **_same(ctx)}
    ctx.emit(op, [ctx.input(0)], attrs, outputs=ctx.outputs[:1])


@lower("MaxPool")
def _max_pool(ctx: LowerCtx) -> None:
    ctx.only_attrs("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides")
    if len(ctx.outputs) > 1 and ctx.outputs[1]:
        ctx.fail("the Indices output is not supported")
    _pool(ctx, "max_pool2d", {})


@lower("AveragePool")
def _avg_pool(ctx: LowerCtx) -> None:
    ctx.only_attrs("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides")
    _pool(ctx, "avg_pool2d", {"count_include_pad": bool(ctx.attr("count_include_pad", 0))})


@lower("LpPool")
def _lp_pool(ctx: LowerCtx) -> None:
    ctx.only_attrs("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides")
    p = ctx.attr("p", 2)
    if isinstance(p, float):
        if p != int(p):
            ctx.fail(f"p = {p} is not supported (integers >= 1)")
        p = int(p)
    if p < 1:
        ctx.fail(f"p = {p} is not supported (integers >= 1)")
    _pool(ctx, "lp_pool2d", {"p": p})


@lower("GlobalAveragePool")
def _global_avg_pool(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    _require_f32(ctx, 0)
    ctx.emit("global_avg_pool", [ctx.input(0)], {}, outputs=ctx.outputs[:1])


@lower("GlobalMaxPool")
def _global_max_pool(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    _require_f32(ctx, 0)
    ctx.emit("global_max_pool", [ctx.input(0)], {}, outputs=ctx.outputs[:1])
