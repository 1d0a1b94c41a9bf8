"""ONNX lowerings: element-wise unary and binary ops, Where, variadic Sum/Mean/Max/Min,
Cast/CastLike, Clip, Identity and Dropout (inference).

Unary and binary ops map one-to-one onto edgert ops (edgert/converter/ops/unary.py, binary.py);
dtype support is decided by those ops' `infer`. Special cases:
  Clip        bounds are attributes (opset < 11) or scalar inputs; absent is unbounded.
              Constant bounds become clip's attributes; bounds known only at run time
              lower to min(max(x, lo), hi)
  Pow         a float32 base takes an integer exponent through a cast; an integer base
              needs an integer exponent (a constant integral float exponent is cast)
  Sum Mean Max Min   chains of add / max / min; Mean then divides by the input count
  BitwiseNot  bitwise_xor with all ones
  Swish       silu (alpha 1) or x * sigmoid(alpha * x)
  Identity, Dropout  the output is the input (no node); Dropout's mask, when requested,
              is all true (inference; opset >= 10 only); training_mode must be absent or
              constant false
  Cast        to the same type is the input itself
"""
from __future__ import annotations

import numpy as np

from .... import dtypes
from ...ops.unary import SELU_ALPHA, SELU_GAMMA
from ..onnx_import import LowerCtx, lower

F32 = np.dtype(np.float32)

# ONNX op type -> (edgert op, {ONNX attribute: (edgert attribute, default)}).
_UNARY = {
    "Relu": ("relu", {}),
    "Sigmoid": ("sigmoid", {}),
    "Tanh": ("tanh", {}),
    "Exp": ("exp", {}),
    "Log": ("log", {}),
    "Abs": ("abs", {}),
    "Neg": ("neg", {}),
    "Sqrt": ("sqrt", {}),
    "Reciprocal": ("reciprocal", {}),
    "Floor": ("floor", {}),
    "Ceil": ("ceil", {}),
    "Round": ("round", {}),
    "Erf": ("erf", {}),
    "Sin": ("sin", {}),
    "Cos": ("cos", {}),
    "Tan": ("tan", {}),
    "Asin": ("asin", {}),
    "Acos": ("acos", {}),
    "Atan": ("atan", {}),
    "Sinh": ("sinh", {}),
    "Cosh": ("cosh", {}),
    "Asinh": ("asinh", {}),
    "Acosh": ("acosh", {}),
    "Atanh": ("atanh", {}),
    "Softplus": ("softplus", {}),
    "Softsign": ("softsign", {}),
    "Elu": ("elu", {"alpha": ("alpha", 1.0)}),
    "Selu": ("selu", {"alpha": ("alpha", SELU_ALPHA), "gamma": ("gamma", SELU_GAMMA)}),
    "Celu": ("celu", {"alpha": ("alpha", 1.0)}),
    "LeakyRelu": ("leaky_relu", {"alpha": ("alpha", 0.01)}),
    "ThresholdedRelu": ("thresholded_relu", {"alpha": ("alpha", 1.0)}),
    "HardSigmoid": ("hard_sigmoid", {"alpha": ("alpha", 0.2), "beta": ("beta", 0.5)}),
    "HardSwish": ("hard_swish", {}),
    "Gelu": ("gelu", {"approximate": ("approximate", "none")}),
    "Mish": ("mish", {}),
    "Not": ("not", {}),
    "Sign": ("sign", {}),
    "Shrink": ("shrink", {"lambd": ("lambd", 0.5), "bias": ("bias", 0.0)}),
    "IsNaN": ("isnan", {}),
    "IsInf": ("isinf", {"detect_positive": ("detect_positive", 1),
                        "detect_negative": ("detect_negative", 1)}),
}

_BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_or_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_or_equal", "And": "and", "Or": "or", "Xor": "xor",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
}


@lower(*_UNARY)
def _unary(ctx: LowerCtx) -> None:
    op, attrs = _UNARY[ctx.op_type]
    ctx.only_attrs(*attrs)
    values = {name: ctx.attr(onnx_name, default) for onnx_name, (name, default) in attrs.items()}
    ctx.emit(op, [ctx.input(0)], values, outputs=ctx.outputs)


@lower(*_BINARY)
def _binary(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    ctx.emit(_BINARY[ctx.op_type], [ctx.input(0), ctx.input(1)], outputs=ctx.outputs)


@lower("Mod")
def _mod(ctx: LowerCtx) -> None:
    ctx.only_attrs("fmod")
    fmod = ctx.attr("fmod", 0)
    if fmod not in (0, 1):
        ctx.fail(f"fmod={fmod} is not supported")
    ctx.emit("mod", [ctx.input(0), ctx.input(1)], {"fmod": fmod}, outputs=ctx.outputs)


@lower("BitShift")
def _bitshift(ctx: LowerCtx) -> None:
    ctx.only_attrs("direction")
    direction = str(ctx.attr("direction", "")).lower()
    if direction not in ("left", "right"):
        ctx.fail(f"direction {ctx.attr('direction')!r} is not supported")
    ctx.emit("bitshift", [ctx.input(0), ctx.input(1)], {"direction": direction}, outputs=ctx.outputs)


@lower("PRelu")
def _prelu(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    ctx.emit("prelu", [ctx.input(0), ctx.input(1)], outputs=ctx.outputs)


@lower("Where")
def _where(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    ctx.emit("where", [ctx.input(0), ctx.input(1), ctx.input(2)], outputs=ctx.outputs)


def _as_dtype(ctx: LowerCtx, i: int, dt: np.dtype) -> str:
    """Input i converted to dtype dt: a converted constant, or a cast node."""
    if ctx.dtype(i) == dt:
        return ctx.input(i)
    c = ctx.const(i)
    if c is not None:
        return ctx.add_const(np.asarray(c).astype(dt))
    return ctx.emit("cast", [ctx.input(i)], {"to": dt.name})[0]


@lower("Pow")
def _pow(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    base, exp = ctx.dtype(0), ctx.dtype(1)
    if base == F32:
        if exp.kind not in "iuf" or not dtypes.supported(exp):
            ctx.fail(f"exponent type {exp} is not supported")
        e = _as_dtype(ctx, 1, F32)
        c = ctx.graph.const(e)
        if c is not None and c.size == 1 and float(c.reshape(-1)[0]) == 2.0 and len(c.shape) <= len(ctx.shape(0)):
            ctx.emit("mul", [ctx.input(0), ctx.input(0)], outputs=ctx.outputs)  # x*x is powf(x, 2)
            return
        ctx.emit("pow", [ctx.input(0), e], outputs=ctx.outputs)
        return
    if base.kind in "iu":
        if exp.kind == "f":
            c = ctx.const(1)
            if c is None or not np.all(np.isfinite(c)) or not np.all(np.trunc(c) == c):
                ctx.fail(f"integer base ({base}) with a float exponent is supported only for constant "
                         "integral exponents")
        elif exp.kind not in "iu" or not dtypes.supported(exp):
            ctx.fail(f"exponent type {exp} is not supported")
        ctx.emit("pow", [ctx.input(0), _as_dtype(ctx, 1, base)], outputs=ctx.outputs)
        return
    ctx.fail(f"base type {base} is not supported")


def _inputs(ctx: LowerCtx) -> list[str]:
    ins = [ctx.input(i) for i in range(ctx.n_inputs) if ctx.has(i)]
    if not ins:
        ctx.fail("needs at least one input")
    return ins


def _chain(ctx: LowerCtx, op: str, ins: list[str], last_outputs: list[str] | None) -> str:
    cur = ins[0]
    for k, nxt in enumerate(ins[1:]):
        outs = last_outputs if k == len(ins) - 2 else None
        cur = ctx.emit(op, [cur, nxt], outputs=outs)[0]
    return cur


def _same_as_input(ctx: LowerCtx, name: str) -> None:
    """ONNX output 0 is tensor `name` (no node)."""
    ctx.alias(0, name)


@lower("Max", "Min", "Sum")
def _variadic(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    ins = _inputs(ctx)
    if len(ins) == 1:
        _same_as_input(ctx, ins[0])
        return
    _chain(ctx, {"Max": "max", "Min": "min", "Sum": "add"}[ctx.op_type], ins, ctx.outputs)


@lower("Mean")
def _mean(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    ins = _inputs(ctx)
    if len(ins) == 1:
        _same_as_input(ctx, ins[0])
        return
    dt = ctx.graph.tensors[ins[0]].dtype
    if dt != F32:
        ctx.fail(f"dtype {dt} is not supported")
    total = _chain(ctx, "add", ins, None)
    ctx.emit("div", [total, ctx.add_const(np.array(len(ins), F32))], outputs=ctx.outputs)


@lower("BitwiseNot")
def _bitwise_not(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    dt = ctx.dtype(0)
    if dt.kind not in "iu":
        ctx.fail(f"dtype {dt} is not supported")
    ones = ctx.add_const(np.array(~np.zeros((), dt)))
    ctx.emit("bitwise_xor", [ctx.input(0), ones], outputs=ctx.outputs)


@lower("Clip")
def _clip(ctx: LowerCtx) -> None:
    dt = ctx.dtype(0)
    if ctx.opset < 11:
        ctx.only_attrs("min", "max")
        lo, hi = ctx.attr("min"), ctx.attr("max")
    else:
        ctx.only_attrs()
        lo = hi = None
        for i in (1, 2):
            if not ctx.has(i):
                continue
            what = ("min", "max")[i - 1]
            if int(np.prod(ctx.shape(i), dtype=np.int64)) != 1 or len(ctx.shape(i)) > len(ctx.shape(0)):
                ctx.fail(f"{what} must be a scalar, got shape {list(ctx.shape(i))}")
            if ctx.dtype(i) != dt:
                ctx.fail(f"{what} has dtype {ctx.dtype(i)}, input has {dt}")
        if any(ctx.has(i) and ctx.const(i) is None for i in (1, 2)):
            # Bounds computed at run time: min(max(x, lo), hi) with broadcast scalars.
            cur = ctx.input(0)
            if ctx.has(1):
                cur = ctx.emit("max", [cur, ctx.input(1)], outputs=None if ctx.has(2) else ctx.outputs)[0]
            if ctx.has(2):
                ctx.emit("min", [cur, ctx.input(2)], outputs=ctx.outputs)
            return
        if ctx.has(1):
            lo = np.asarray(ctx.const(1)).reshape(-1)[0]
        if ctx.has(2):
            hi = np.asarray(ctx.const(2)).reshape(-1)[0]
    conv = float if dt.kind == "f" else int
    attrs = {"min": None if lo is None else conv(lo), "max": None if hi is None else conv(hi)}
    ctx.emit("clip", [ctx.input(0)], attrs, outputs=ctx.outputs)


@lower("Swish")
def _swish(ctx: LowerCtx) -> None:
    ctx.only_attrs("alpha")
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 1.0:
        ctx.emit("silu", [ctx.input(0)], outputs=ctx.outputs)
        return
    if ctx.dtype(0) != F32:
        ctx.fail(f"dtype {ctx.dtype(0)} is not supported")
    ax = ctx.emit("mul", [ctx.input(0), ctx.add_const(np.array(alpha, F32))])[0]
    s = ctx.emit("sigmoid", [ax])[0]
    ctx.emit("mul", [ctx.input(0), s], outputs=ctx.outputs)


@lower("Identity")
def _identity(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    _same_as_input(ctx, ctx.input(0))


@lower("Dropout")
def _dropout(ctx: LowerCtx) -> None:
    ctx.only_attrs("ratio", "seed", "is_test")
    if ctx.has(2):
        tm = ctx.const(2)
        if tm is None:
            ctx.fail("training_mode depends on runtime data; only inference (false) is supported")
        if bool(np.asarray(tm).reshape(-1)[0]):
            ctx.fail("training_mode=true is not supported (inference only)")
    _same_as_input(ctx, ctx.input(0))
    if len(ctx.outputs) > 1 and ctx.outputs[1]:
        if ctx.opset < 10:
            ctx.fail("the mask output is supported from opset 10 (bool mask) only")
        # In inference the mask is all true; a copy makes it a node output.
        ones = ctx.add_const(np.ones(ctx.shape(0), np.bool_))
        ctx.emit("copy", [ones], outputs=[ctx.outputs[1]])


def _cast_to(ctx: LowerCtx, to: np.dtype) -> None:
    src = ctx.dtype(0)
    if not dtypes.supported(src):
        ctx.fail(f"input type {src} is not supported")
    if src == to:
        _same_as_input(ctx, ctx.input(0))
        return
    ctx.emit("cast", [ctx.input(0)], {"to": to.name}, outputs=ctx.outputs)


def _onnx_type_name(code: int) -> str:
    import onnx

    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return str(code)


@lower("Cast")
def _cast(ctx: LowerCtx) -> None:
    ctx.only_attrs("to", "saturate", "round_mode")
    code = ctx.attr("to")
    if code is None:
        ctx.fail("attribute 'to' is required")
    if code not in dtypes.CODE_TO_NP:
        ctx.fail(f"cast to {_onnx_type_name(code)} is not supported")
    _cast_to(ctx, dtypes.np_of(code))


@lower("CastLike")
def _cast_like(ctx: LowerCtx) -> None:
    ctx.only_attrs("saturate", "round_mode")
    to = ctx.dtype(1)
    if not dtypes.supported(to):
        ctx.fail(f"cast to {to} is not supported")
    _cast_to(ctx, np.dtype(to))
