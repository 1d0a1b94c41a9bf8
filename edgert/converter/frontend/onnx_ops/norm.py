"""ONNX lowerings: normalisation, softmax family, reductions, argmax / argmin.

BatchNormalization (inference only), InstanceNormalization, LayerNormalization,
GroupNormalization (opset 18: scale and bias per group; opset 21: per channel), LRN,
Softmax / LogSoftmax / Hardmax (before opset 13 over every dimension from `axis`),
Reduce* (axes as attribute, or as a constant input from opset 13 (ReduceSum) / 18),
ArgMax / ArgMin, MeanVarianceNormalization and LpNormalization (lowered to reductions
and element-wise ops).
"""
from __future__ import annotations

import numpy as np

from ...ops.reduce import normalize_axes
from ..onnx_import import LowerCtx, lower

F32 = np.dtype(np.float32)


def _rank(ctx: LowerCtx, i: int = 0) -> int:
    return len(ctx.shape(i))


def _single_output(ctx: LowerCtx) -> None:
    if any(o for o in ctx.outputs[1:]):
        ctx.fail("only the first output is supported (inference)")


def _check_stash_type(ctx: LowerCtx) -> None:
    st = ctx.attr("stash_type", 1)
    if st != 1:
        ctx.fail(f"stash_type {st} is not supported (only 1, float32)")


@lower("BatchNormalization")
def _batch_norm(ctx: LowerCtx) -> None:
    ctx.only_attrs("epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs")
    if ctx.attr("training_mode", 0):
        ctx.fail("training_mode=1 is not supported (inference only)")
    if ctx.attr("spatial", 1) != 1:
        ctx.fail("spatial=0 is not supported")
    if ctx.n_inputs != 5 or not all(ctx.has(i) for i in range(5)):
        ctx.fail("expects 5 inputs (X, scale, B, mean, var)")
    _single_output(ctx)
    ctx.emit("batch_norm", [ctx.input(i) for i in range(5)],
             {"epsilon": ctx.attr("epsilon", 1e-5)}, outputs=ctx.outputs[:1])


@lower("InstanceNormalization")
def _instance_norm(ctx: LowerCtx) -> None:
    ctx.only_attrs("epsilon")
    ctx.emit("instance_norm", [ctx.input(0), ctx.input(1), ctx.input(2)],
             {"epsilon": ctx.attr("epsilon", 1e-5)}, outputs=ctx.outputs)


def _to_normalized(ctx: LowerCtx, i: int, norm_shape: tuple[int, ...], what: str) -> str:
    """Input i as a tensor of exactly prod(norm_shape) values: constants are broadcast."""
    name = ctx.input(i)
    n = int(np.prod(norm_shape, dtype=np.int64))
    if int(np.prod(ctx.shape(i), dtype=np.int64)) == n:
        try:
            if int(np.prod(np.broadcast_shapes(tuple(ctx.shape(i)), norm_shape), dtype=np.int64)) == n:
                return name  # the same values in the same order (extra dims of size 1)
        except ValueError:
            pass
    v = ctx.const(i)
    if v is None:
        ctx.fail(f"{what} of shape {ctx.shape(i)} must match the normalized shape {norm_shape} "
                 "(or be a constant broadcastable to it)")
    try:
        full = np.broadcast_to(np.asarray(v), norm_shape)
    except ValueError:
        ctx.fail(f"{what} of shape {tuple(v.shape)} does not broadcast to {norm_shape}")
    return ctx.add_const(np.ascontiguousarray(full), f"{ctx.name}_{what}")


@lower("LayerNormalization")
def _layer_norm(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis", "epsilon", "stash_type")
    _check_stash_type(ctx)
    rank = _rank(ctx)
    axis = ctx.attr("axis", -1)
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    norm_shape = tuple(ctx.shape(0)[axis:])
    ins = [ctx.input(0), _to_normalized(ctx, 1, norm_shape, "scale")]
    if ctx.has(2):
        ins.append(_to_normalized(ctx, 2, norm_shape, "bias"))
    outs = list(ctx.outputs)
    while len(outs) > 1 and not outs[-1]:
        outs.pop()
    ctx.emit("layer_norm", ins, {"axis": axis, "epsilon": ctx.attr("epsilon", 1e-5)}, outputs=outs)


@lower("GroupNormalization")
def _group_norm(ctx: LowerCtx) -> None:
    ctx.only_attrs("num_groups", "epsilon", "stash_type")
    _check_stash_type(ctx)
    if not ctx.has_attr("num_groups"):
        ctx.fail("num_groups is required")
    ctx.emit("group_norm", [ctx.input(0), ctx.input(1), ctx.input(2)],
             {"num_groups": ctx.attr("num_groups"), "epsilon": ctx.attr("epsilon", 1e-5),
              "per_group": ctx.opset < 21}, outputs=ctx.outputs)


@lower("LRN")
def _lrn(ctx: LowerCtx) -> None:
    ctx.only_attrs("size", "alpha", "beta", "bias")
    if not ctx.has_attr("size"):
        ctx.fail("size is required")
    ctx.emit("lrn", [ctx.input(0)],
             {"size": ctx.attr("size"), "alpha": ctx.attr("alpha", 1e-4),
              "beta": ctx.attr("beta", 0.75), "bias": ctx.attr("bias", 1.0)}, outputs=ctx.outputs)


@lower("Softmax", "LogSoftmax", "Hardmax")
def _softmax(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis")
    op = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Hardmax": "hardmax"}[ctx.op_type]
    old = ctx.opset < 13
    ctx.emit(op, [ctx.input(0)], {"axis": ctx.attr("axis", 1 if old else -1), "flatten": old},
             outputs=ctx.outputs)


_REDUCE = {
    "ReduceSum": ("reduce_sum", 13), "ReduceMean": ("reduce_mean", 18),
    "ReduceMax": ("reduce_max", 18), "ReduceMin": ("reduce_min", 18),
    "ReduceProd": ("reduce_prod", 18), "ReduceL1": ("reduce_l1", 18),
    "ReduceL2": ("reduce_l2", 18), "ReduceLogSum": ("reduce_log_sum", 18),
    "ReduceLogSumExp": ("reduce_log_sum_exp", 18), "ReduceSumSquare": ("reduce_sum_square", 18),
}


def reduce_axes(ctx: LowerCtx) -> list[int]:
    """The reduced axes (normalized) under ONNX rules: axes from the attribute or the
    constant second input; none given means all axes unless noop_with_empty_axes."""
    rank = _rank(ctx)
    if ctx.has(1):
        axes = [int(a) for a in np.asarray(ctx.require_const(1, "axes")).reshape(-1)]
    else:
        axes = ctx.attr("axes", None) or []
    if not axes:
        return [] if ctx.attr("noop_with_empty_axes", 0) else list(range(rank))
    return normalize_axes(axes, rank, "axes")


@lower(*_REDUCE)
def _reduce(ctx: LowerCtx) -> None:
    ctx.only_attrs("axes", "keepdims", "noop_with_empty_axes")
    op = _REDUCE[ctx.op_type][0]
    axes = reduce_axes(ctx)
    ctx.emit(op, [ctx.input(0)], {"axes": axes, "keepdims": bool(ctx.attr("keepdims", 1))},
             outputs=ctx.outputs)


@lower("ArgMax", "ArgMin")
def _arg(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis", "keepdims", "select_last_index")
    ctx.emit(ctx.op_type.lower(), [ctx.input(0)],
             {"axis": ctx.attr("axis", 0), "keepdims": bool(ctx.attr("keepdims", 1)),
              "select_last_index": bool(ctx.attr("select_last_index", 0))}, outputs=ctx.outputs)


def _scalar(ctx: LowerCtx, v: float) -> str:
    return ctx.add_const(np.array([v], F32))


@lower("MeanVarianceNormalization")
def _mvn(ctx: LowerCtx) -> None:
    # y = (x - mean) / (sqrt(var) + 1e-9), mean and biased variance over `axes`
    # (the ONNX function body, with the variance computed as mean((x - mean)^2)).
    ctx.only_attrs("axes")
    if ctx.dtype(0) != F32:
        ctx.fail(f"dtype {ctx.dtype(0)} is not supported (float32)")
    axes = normalize_axes(ctx.attr("axes", [0, 2, 3]), _rank(ctx), "axes")
    x = ctx.input(0)
    red = {"axes": axes, "keepdims": True}
    mean = ctx.emit("reduce_mean", [x], red)[0]
    d = ctx.emit("sub", [x, mean])[0]
    var = ctx.emit("reduce_mean", [ctx.emit("mul", [d, d])[0]], red)[0]
    den = ctx.emit("add", [ctx.emit("sqrt", [var])[0], _scalar(ctx, 1e-9)])[0]
    ctx.emit("div", [d, den], outputs=ctx.outputs)


@lower("LpNormalization")
def _lp_norm(ctx: LowerCtx) -> None:
    # y = x / norm_p(x) along `axis`, and 0 where the norm is 0: dividing by
    # max(norm, FLT_MIN) gives exactly that, since a zero norm means x is 0 there.
    ctx.only_attrs("axis", "p")
    if ctx.dtype(0) != F32:
        ctx.fail(f"dtype {ctx.dtype(0)} is not supported (float32)")
    p = ctx.attr("p", 2)
    if p not in (1, 2):
        ctx.fail(f"p={p} is not supported (1 or 2)")
    axis = normalize_axes([ctx.attr("axis", -1)], _rank(ctx), "axis")
    x = ctx.input(0)
    norm = ctx.emit("reduce_l1" if p == 1 else "reduce_l2", [x], {"axes": axis, "keepdims": True})[0]
    den = ctx.emit("max", [norm, _scalar(ctx, float(np.finfo(np.float32).tiny))])[0]
    ctx.emit("div", [x, den], outputs=ctx.outputs)
