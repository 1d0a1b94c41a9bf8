"""ONNX lowerings: data movement and indexing.

Reshape, Flatten, Squeeze, Unsqueeze -> reshape; Transpose, Concat, Split, Slice,
Gather, GatherElements, ScatterElements, Expand, Tile, Pad, Resize / Upsample,
DepthToSpace, SpaceToDepth, CumSum, Trilu, OneHot, TopK -> the edgert op of the same
meaning (edgert/converter/ops/shape_ops.py, gather.py, resize.py, misc.py).

Every shape-like input (shapes, axes, starts/ends/steps, pads, repeats, split sizes,
roi/scales/sizes, k, depth, ...) must be constant after folding; its value becomes an
attribute and output shapes are static. Data inputs, and the indices of Gather,
GatherElements, ScatterElements and OneHot, may be runtime tensors.

Shape programs (bounded conversions, docs/runtime.md): a value computed from the input
size that the importer keeps for run time (LowerCtx.computed) gives shape-like inputs
its value at the size converted, whose variation the bounds' rules follow, except for
Range (-> range), Expand's target and Tile's repeats (-> their data input) and
ConstantOfShape (-> expand of the value to the computed shape), whose output shapes the
runtime takes from the values.
"""
from __future__ import annotations

import numpy as np

from ... import symdim
from ...ir import check_shape
from ...ops.range import range_length
from ...ops.registry import OpUnsupported
from ...ops.shape_ops import normalize_slice
from ..onnx_import import LowerCtx, lower


def _ints(ctx: LowerCtx, i: int, what: str) -> list[int]:
    v = np.asarray(ctx.require_const(i, what))
    if v.dtype.kind not in "iu":
        ctx.fail(f"{what} must be integers, got {v.dtype}")
    return [int(x) for x in v.reshape(-1)]


def _scalar_int(ctx: LowerCtx, i: int, what: str) -> int:
    v = np.asarray(ctx.require_const(i, what))
    if v.size != 1:
        ctx.fail(f"{what} must hold one value, got shape {v.shape}")
    if v.dtype.kind not in "iuf":
        ctx.fail(f"{what} must be a number, got {v.dtype}")
    return int(v.reshape(-1)[0])


def _axis(ctx: LowerCtx, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _axes_list(ctx: LowerCtx, axes, rank: int) -> list[int]:
    out = [_axis(ctx, int(a), rank, "axes entry") for a in axes]
    if len(set(out)) != len(out):
        ctx.fail(f"repeated axes {list(axes)}")
    return out


def _reshape_to(ctx: LowerCtx, shape, sym=None) -> None:
    """A reshape to `shape`; sym: its dims as expressions of the input's (symdim.dim_ref),
    by the ONNX op's meaning (bounded conversions: symshape, OUTDIM_EXPR rules)."""
    attrs = {"shape": [int(d) for d in shape]}
    if sym is not None and ctx.bounded:
        attrs["sym"] = {"shape": list(sym)}
    ctx.emit("reshape", [ctx.input(0)], attrs, outputs=ctx.outputs[:1])


def _dims(ctx: LowerCtx) -> list:
    return [symdim.dim_ref(0, d) for d in range(len(ctx.shape(0)))]


def _prod(exprs) -> "symdim.Expr":
    out = symdim.const(1)
    for e in exprs:
        out = out * e
    return out


# ---- reshape family ---------------------------------------------------------------

@lower("Reshape")
def _reshape(ctx: LowerCtx) -> None:
    ctx.only_attrs("allowzero", "shape")
    xs = ctx.shape(0)
    if ctx.opset < 5:
        spec = ctx.attr("shape", None)
        if spec is None:
            ctx.fail("shape attribute is required")
    else:
        spec = _ints(ctx, 1, "shape")
    allowzero = ctx.attr("allowzero", 0)
    out = []
    for k, d in enumerate(spec):
        if d == 0 and not allowzero:
            if k >= len(xs):
                ctx.fail(f"shape {spec}: 0 at position {k} has no input dim to copy")
            d = xs[k]
        out.append(int(d))
    if out.count(-1) > 1 or any(d < -1 for d in out):
        ctx.fail(f"invalid shape {spec}")
    total = int(np.prod(xs, dtype=np.int64))
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if rest == 0 or total % rest:
            ctx.fail(f"cannot reshape {xs} to {spec}")
        out[out.index(-1)] = total // rest
    if int(np.prod(out, dtype=np.int64)) != total:
        ctx.fail(f"cannot reshape {xs} to {spec}")
    sym = ctx.sym_const(1) if ctx.opset >= 5 else None
    if sym is None and ctx.bounded and not ctx.from_size(1):
        sym = np.array([symdim.const(int(d)) for d in spec], dtype=object)  # a constant shape
    if sym is not None and ctx.bounded:
        # The output dims as expressions, by ONNX Reshape: 0 copies the input's dim, -1 takes
        # the elements left (bounds.derive_rules makes them OUTDIM_EXPR rules).
        exprs = []
        for k, e in enumerate(sym.reshape(-1)):
            exprs.append(symdim.dim_ref(0, k) if spec[k] == 0 and not allowzero else e)
        if -1 in spec:
            k = spec.index(-1)
            numel, rest = symdim.const(1), symdim.const(1)
            for d in range(len(xs)):
                numel = numel * symdim.dim_ref(0, d)
            for j, e in enumerate(exprs):
                if j != k:
                    rest = rest * e
            exprs[k] = symdim.floordiv(numel, rest)
        ctx.emit("reshape", [ctx.input(0)], {"shape": [int(d) for d in out], "sym": {"shape": exprs}},
                 outputs=ctx.outputs[:1])
        return
    _reshape_to(ctx, out)


@lower("Flatten")
def _flatten(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis")
    xs = ctx.shape(0)
    r = len(xs)
    axis = ctx.attr("axis", 1)
    if not -r <= axis <= r:
        ctx.fail(f"axis {axis} out of range for rank {r}")
    if axis < 0:
        axis += r
    d = _dims(ctx)
    _reshape_to(ctx, [int(np.prod(xs[:axis], dtype=np.int64)), int(np.prod(xs[axis:], dtype=np.int64))],
                [_prod(d[:axis]), _prod(d[axis:])])


@lower("Squeeze")
def _squeeze(ctx: LowerCtx) -> None:
    ctx.only_attrs("axes")
    xs = ctx.shape(0)
    if ctx.opset >= 13:
        axes = _ints(ctx, 1, "axes") if ctx.has(1) else None
    else:
        axes = ctx.attr("axes", None)
    if axes is None:
        axes = [k for k, d in enumerate(xs) if d == 1]
    axes = _axes_list(ctx, axes, len(xs))
    for a in axes:
        if xs[a] != 1:
            ctx.fail(f"cannot squeeze dim {a} of size {xs[a]}")
    _reshape_to(ctx, [d for k, d in enumerate(xs) if k not in axes], [e for k, e in enumerate(_dims(ctx)) if k not in axes])


@lower("Unsqueeze")
def _unsqueeze(ctx: LowerCtx) -> None:
    ctx.only_attrs("axes")
    xs = ctx.shape(0)
    axes = _ints(ctx, 1, "axes") if ctx.opset >= 13 else ctx.attr("axes", None)
    if axes is None:
        ctx.fail("axes are required")
    r = len(xs) + len(axes)
    axes = _axes_list(ctx, axes, r)
    it, sym = iter(xs), iter(_dims(ctx))
    _reshape_to(ctx, [1 if k in axes else next(it) for k in range(r)],
                [symdim.const(1) if k in axes else next(sym) for k in range(r)])


# ---- transpose, concat, split ------------------------------------------------------

@lower("Transpose")
def _transpose(ctx: LowerCtx) -> None:
    ctx.only_attrs("perm")
    r = len(ctx.shape(0))
    perm = ctx.attr("perm", None)
    perm = list(range(r))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(r)):
        ctx.fail(f"perm {perm} is not a permutation of rank {r}")
    ctx.emit("transpose", [ctx.input(0)], {"perm": perm}, outputs=ctx.outputs)


@lower("Concat")
def _concat(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis")
    if not ctx.has_attr("axis"):
        ctx.fail("axis attribute is required")
    ins = [ctx.input(i) for i in range(ctx.n_inputs)]
    if not ins or any(not i for i in ins):
        ctx.fail("inputs must all be present")
    axis = _axis(ctx, ctx.attr("axis"), len(ctx.shape(0)))
    ctx.emit("concat", ins, {"axis": axis}, outputs=ctx.outputs)


@lower("Split")
def _split(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis", "split", "num_outputs")
    xs = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis", 0), len(xs))
    n_out = len(ctx.outputs)
    dim = xs[axis]
    sym = None  # the sizes as expressions (bounds.derive_rules: PARAM_EXPR rules)
    D = symdim.dim_ref(0, axis)
    if ctx.opset >= 13 and ctx.has(1):
        sizes = _ints(ctx, 1, "split")
        sym = ctx.sym_const(1)
        sym = list(sym.reshape(-1)) if sym is not None else None
    elif ctx.opset < 13 and ctx.has_attr("split"):
        sizes = ctx.attr("split")
    elif ctx.has_attr("num_outputs"):
        num = ctx.attr("num_outputs")
        if num < 1 or num != n_out:
            ctx.fail(f"num_outputs {num} does not match {n_out} outputs")
        chunk = -(-dim // num)
        sizes = [min(chunk, max(dim - chunk * k, 0)) for k in range(num)]
        sym_chunk = symdim.ceildiv(D, num)
        sym = [symdim.min_(sym_chunk, symdim.max_(D - sym_chunk * k, 0)) for k in range(num)]
    else:
        if dim % n_out:
            ctx.fail(f"dim {dim} does not split evenly into {n_out} parts")
        sizes = [dim // n_out] * n_out
        sym = [symdim.floordiv(D, n_out)] * n_out
    if len(sizes) != n_out:
        ctx.fail(f"{len(sizes)} split sizes for {n_out} outputs")
    if any(s < 0 for s in sizes) or sum(sizes) != dim:
        ctx.fail(f"split sizes {sizes} do not add up to {dim}")
    attrs = {"axis": axis, "sizes": [int(s) for s in sizes]}
    if sym is not None and len(sym) == len(sizes) and ctx.bounded:
        attrs["sym"] = {"sizes": sym}
    ctx.emit("split", [ctx.input(0)], attrs, outputs=ctx.outputs)


# ---- slice ----------------------------------------------------------------------

@lower("Slice")
def _slice(ctx: LowerCtx) -> None:
    xs = ctx.shape(0)
    if ctx.opset < 10:
        ctx.only_attrs("starts", "ends", "axes")
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        if starts is None or ends is None:
            ctx.fail("starts and ends are required")
        axes = ctx.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        ctx.only_attrs()
        starts = _ints(ctx, 1, "starts")
        ends = _ints(ctx, 2, "ends")
        axes = _ints(ctx, 3, "axes") if ctx.has(3) else list(range(len(starts)))
        steps = _ints(ctx, 4, "steps") if ctx.has(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail("starts, ends, axes and steps must have the same length")
    st, sp, sz = normalize_slice(xs, starts, ends, axes, steps)
    # The ONNX starts and ends per dim (clamped to int32, which keeps their meaning for
    # any dim): bounded dimensions recompute start and size from them at run time.
    onnx_se = [[0, 2**31 - 1] for _ in xs]
    for a, b, e in zip(axes, starts, ends):
        onnx_se[int(a) % max(len(xs), 1)] = [min(max(int(b), -2**31), 2**31 - 1), min(max(int(e), -2**31), 2**31 - 1)]
    ctx.emit("slice", [ctx.input(0)], {"starts": st, "steps": sp, "sizes": sz, "onnx_se": onnx_se},
             outputs=ctx.outputs)


# ---- gather family ----------------------------------------------------------------

@lower("Gather")
def _gather(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis")
    axis = _axis(ctx, ctx.attr("axis", 0), len(ctx.shape(0)))
    ctx.emit("gather", [ctx.input(0), ctx.input(1)], {"axis": axis}, outputs=ctx.outputs)


@lower("GatherElements")
def _gather_elements(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis")
    axis = _axis(ctx, ctx.attr("axis", 0), len(ctx.shape(0)))
    ctx.emit("gather_elements", [ctx.input(0), ctx.input(1)], {"axis": axis}, outputs=ctx.outputs)


@lower("ScatterElements")
def _scatter_elements(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis", "reduction")
    axis = _axis(ctx, ctx.attr("axis", 0), len(ctx.shape(0)))
    red = ctx.attr("reduction", "none")
    if red not in ("none", "add", "mul", "max", "min"):
        ctx.fail(f"reduction {red!r} is not supported")
    ctx.emit("scatter_elements", [ctx.input(0), ctx.input(1), ctx.input(2)], {"axis": axis, "reduction": red},
             outputs=ctx.outputs)


@lower("OneHot")
def _one_hot(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis")
    depth_v = np.asarray(ctx.require_const(1, "depth"))
    if depth_v.size != 1:
        ctx.fail("depth must hold one value")
    depth = int(depth_v.reshape(-1)[0])
    values = np.asarray(ctx.require_const(2, "values"))
    if values.size != 2:
        ctx.fail(f"values must hold 2 entries (off, on), got {values.size}")
    r = len(ctx.shape(0))
    axis = ctx.attr("axis", -1)
    if not -(r + 1) <= axis <= r:
        ctx.fail(f"axis {axis} out of range for output rank {r + 1}")
    if axis < 0:
        axis += r + 1
    v = values.reshape(-1)
    off, on = v[0].item(), v[1].item()
    ctx.emit("one_hot", [ctx.input(0)], {"axis": axis, "depth": depth, "off": off, "on": on,
                                         "dtype": str(values.dtype)}, outputs=ctx.outputs)


# ---- expand, tile, pad -------------------------------------------------------------

@lower("Expand")
def _expand(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    shape = _ints(ctx, 1, "shape")
    try:
        out = np.broadcast_shapes(tuple(ctx.shape(0)), tuple(shape))
    except ValueError:
        ctx.fail(f"shape {shape} does not broadcast with input {ctx.shape(0)}")
    ins = [ctx.input(0)] + ([ctx.input(1)] if ctx.computed(1) else [])
    ctx.emit("expand", ins, {"shape": [int(d) for d in out]}, outputs=ctx.outputs)


@lower("Tile")
def _tile(ctx: LowerCtx) -> None:
    ctx.only_attrs()
    if ctx.opset < 6:
        ctx.fail("Tile before opset 6 is not supported")
    reps = _ints(ctx, 1, "repeats")
    if len(reps) != len(ctx.shape(0)):
        ctx.fail(f"{len(reps)} repeats for rank {len(ctx.shape(0))}")
    ins = [ctx.input(0)] + ([ctx.input(1)] if ctx.computed(1) else [])
    ctx.emit("tile", ins, {"repeats": reps}, outputs=ctx.outputs)


@lower("ConstantOfShape")
def _constant_of_shape(ctx: LowerCtx) -> None:
    """Reached with a shape computed at run time (a constant shape is folded): an expand
    of the value to it."""
    ctx.only_attrs("value")
    shape = _ints(ctx, 0, "shape")
    value = ctx.attr("value", None)
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if value.size != 1:
        ctx.fail(f"value must hold one element, got {value.size}")
    if any(d < 0 for d in shape):
        ctx.fail(f"shape {shape} has a negative dim")
    check_shape(ctx.outputs[0], shape, value.dtype)
    c = ctx.add_const(value.reshape([1] * len(shape)), f"{ctx.name}_value")
    ins = [c] + ([ctx.input(0)] if ctx.computed(0) else [])
    ctx.emit("expand", ins, {"shape": shape}, outputs=ctx.outputs)


@lower("Range")
def _range(ctx: LowerCtx) -> None:
    """Reached with an operand computed at run time (constant operands are folded)."""
    ctx.only_attrs()
    vals = [ctx.require_const(i, what) for i, what in enumerate(("start", "limit", "delta"))]
    try:
        n = range_length(*vals)
    except OpUnsupported as e:
        ctx.fail(str(e))
    ctx.emit("range", [ctx.input(0), ctx.input(1), ctx.input(2)], {"length": n}, outputs=ctx.outputs)


@lower("Pad")
def _pad(ctx: LowerCtx) -> None:
    xs = ctx.shape(0)
    r = len(xs)
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        ctx.only_attrs("mode", "pads", "value", "paddings")
        pads = ctx.attr("pads", ctx.attr("paddings"))
        if pads is None:
            ctx.fail("pads attribute is required")
        value = ctx.attr("value", 0.0)
        axes = list(range(r))
    else:
        ctx.only_attrs("mode")
        pads = _ints(ctx, 1, "pads")
        value = 0
        if ctx.has(2):
            cv = np.asarray(ctx.require_const(2, "constant_value"))
            if cv.size != 1:
                ctx.fail("constant_value must hold one value")
            value = cv.reshape(-1)[0].item()
        axes = _axes_list(ctx, _ints(ctx, 3, "axes"), r) if ctx.has(3) else list(range(r))
    if mode not in ("constant", "reflect", "edge", "wrap"):
        ctx.fail(f"mode {mode!r} is not supported")
    n = len(axes)
    if len(pads) != 2 * n:
        ctx.fail(f"{len(pads)} pads for {n} axes")
    full = [0] * (2 * r)
    for k, a in enumerate(axes):
        full[a], full[r + a] = int(pads[k]), int(pads[n + k])
    attrs = {"mode": mode, "pads": full, "value": value}
    sym = ctx.sym_const(1) if ctx.opset >= 11 else None
    if sym is not None and any(not e.is_const for e in sym.reshape(-1)):
        sym = list(sym.reshape(-1))
        full_sym = [symdim.const(0)] * (2 * r)
        for k, a in enumerate(axes):
            full_sym[a], full_sym[r + a] = sym[k], sym[n + k]
        attrs["sym"] = {"pads": full_sym}
    ctx.emit("pad", [ctx.input(0)], attrs, outputs=ctx.outputs)


# ---- depth_to_space / space_to_depth -------------------------------------------------

@lower("DepthToSpace")
def _depth_to_space(ctx: LowerCtx) -> None:
    ctx.only_attrs("blocksize", "mode")
    if not ctx.has_attr("blocksize"):
        ctx.fail("blocksize attribute is required")
    ctx.emit("depth_to_space", [ctx.input(0)], {"blocksize": ctx.attr("blocksize"), "mode": ctx.attr("mode", "DCR")},
             outputs=ctx.outputs)


@lower("SpaceToDepth")
def _space_to_depth(ctx: LowerCtx) -> None:
    ctx.only_attrs("blocksize", "mode")
    if not ctx.has_attr("blocksize"):
        ctx.fail("blocksize attribute is required")
    ctx.emit("space_to_depth", [ctx.input(0)], {"blocksize": ctx.attr("blocksize"), "mode": ctx.attr("mode", "DCR")},
             outputs=ctx.outputs)


# ---- cumsum, trilu, topk ---------------------------------------------------------------

@lower("CumSum")
def _cumsum(ctx: LowerCtx) -> None:
    ctx.only_attrs("exclusive", "reverse")
    axis = _axis(ctx, _scalar_int(ctx, 1, "axis"), len(ctx.shape(0)))
    ctx.emit("cumsum", [ctx.input(0)], {"axis": axis, "exclusive": ctx.attr("exclusive", 0),
                                        "reverse": ctx.attr("reverse", 0)}, outputs=ctx.outputs)


@lower("Trilu")
def _trilu(ctx: LowerCtx) -> None:
    ctx.only_attrs("upper")
    k = _scalar_int(ctx, 1, "k") if ctx.has(1) else 0
    ctx.emit("trilu", [ctx.input(0)], {"upper": ctx.attr("upper", 1), "k": k}, outputs=ctx.outputs)


@lower("TopK")
def _topk(ctx: LowerCtx) -> None:
    ctx.only_attrs("axis", "k", "largest", "sorted")
    if ctx.opset < 10:
        if not ctx.has_attr("k"):
            ctx.fail("k attribute is required")
        k = ctx.attr("k")
    else:
        k = _scalar_int(ctx, 1, "K")
    axis = _axis(ctx, ctx.attr("axis", -1), len(ctx.shape(0)))
    outs = list(ctx.outputs) + [""] * (2 - len(ctx.outputs))
    ctx.emit("topk", [ctx.input(0)], {"axis": axis, "k": k, "largest": ctx.attr("largest", 1),
                                      "sorted": ctx.attr("sorted", 1)}, outputs=outs)


# ---- resize / upsample -----------------------------------------------------------------

def _floats(ctx: LowerCtx, i: int, what: str) -> list[float] | None:
    """Constant float input i as float64 values of its float32 entries, None when absent or empty."""
    if not ctx.has(i):
        return None
    v = np.asarray(ctx.require_const(i, what))
    if v.size == 0:
        return None
    return [float(x) for x in v.reshape(-1)]


def _emit_resize(ctx: LowerCtx, attrs: dict, scales: list[float] | None, sizes: list[int] | None,
                 axes: list[int] | None, policy: str) -> None:
    xs = ctx.shape(0)
    r = len(xs)
    axes = list(range(r)) if axes is None else axes
    if scales is not None and sizes is not None:
        ctx.fail("only one of scales and sizes may be given")
    if scales is None and sizes is None:
        ctx.fail("one of scales and sizes is required")
    full_scales = [1.0] * r
    shape = list(xs)
    if sizes is not None:
        if len(sizes) != len(axes):
            ctx.fail(f"{len(sizes)} sizes for {len(axes)} axes")
        if any(xs[a] == 0 for a in axes) or any(s < 0 for s in sizes):
            ctx.fail("sizes need non-empty input dims and non-negative entries")
        ratios = [sizes[k] / xs[a] for k, a in enumerate(axes)]
        if policy == "stretch":
            for k, a in enumerate(axes):
                full_scales[a], shape[a] = ratios[k], int(sizes[k])
        elif policy in ("not_larger", "not_smaller"):
            s = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                full_scales[a], shape[a] = s, int(s * xs[a] + 0.5)
        else:
            ctx.fail(f"keep_aspect_ratio_policy {policy!r} is not supported")
    else:
        if len(scales) != len(axes):
            ctx.fail(f"{len(scales)} scales for {len(axes)} axes")
        for k, a in enumerate(axes):
            if not scales[k] > 0 or not np.isfinite(scales[k]):
                ctx.fail(f"scale {scales[k]} must be positive")
            full_scales[a] = scales[k]
            shape[a] = int(np.float64(scales[k]) * xs[a])
    attrs["scales"] = full_scales
    attrs["shape"] = shape
    check_shape(ctx.outputs[0] if ctx.outputs else ctx.name, shape, ctx.dtype(0))  # before any coordinate table
    ctx.emit("resize", [ctx.input(0)], attrs, outputs=ctx.outputs)


@lower("Resize")
def _resize(ctx: LowerCtx) -> None:
    ctx.only_attrs("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                   "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy")
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        ctx.fail(f"mode {mode!r} is not supported")
    r = len(ctx.shape(0))
    if ctx.opset < 11:
        if mode == "cubic":
            ctx.fail("cubic mode needs opset 11")
        attrs = {"mode": mode, "coord": "asymmetric", "nearest_mode": "simple"}
        _emit_resize(ctx, attrs, _floats(ctx, 1, "scales"), None, None, "stretch")
        return
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel")
    attrs = {"mode": mode, "coord": coord, "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor"),
             "cubic_a": ctx.attr("cubic_coeff_a", -0.75), "exclude_outside": ctx.attr("exclude_outside", 0),
             "extrapolation_value": ctx.attr("extrapolation_value", 0.0), "antialias": ctx.attr("antialias", 0)}
    if attrs["antialias"] and mode == "nearest":
        ctx.fail("antialias with nearest mode is not supported")
    axes = ctx.attr("axes", None)
    if axes is not None:
        axes = _axes_list(ctx, axes, r)
    n_ax = r if axes is None else len(axes)
    if coord == "tf_crop_and_resize":
        roi = _floats(ctx, 1, "roi")
        if roi is None:
            ctx.fail("tf_crop_and_resize needs roi")
        if len(roi) != 2 * n_ax:
            ctx.fail(f"roi has {len(roi)} entries for {n_ax} axes")
        full = [0.0] * r + [1.0] * r
        for k, a in enumerate(axes if axes is not None else range(r)):
            full[a], full[r + a] = roi[k], roi[n_ax + k]
        attrs["roi"] = full
    scales = _floats(ctx, 2, "scales")
    sizes = (_ints(ctx, 3, "sizes") or None) if ctx.has(3) else None
    _emit_resize(ctx, attrs, scales, sizes, axes, ctx.attr("keep_aspect_ratio_policy", "stretch"))


@lower("Upsample")
def _upsample(ctx: LowerCtx) -> None:
    ctx.only_attrs("mode", "scales", "height_scale", "width_scale")
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        ctx.fail(f"mode {mode!r} is not supported")
    if ctx.opset >= 9:
        scales = _floats(ctx, 1, "scales")
    else:
        scales = ctx.attr("scales", None)
    if scales is None:
        ctx.fail("scales are required")
    attrs = {"mode": mode, "coord": "asymmetric", "nearest_mode": "simple"}
    _emit_resize(ctx, attrs, [float(np.float32(s)) for s in scales], None, None, "stretch")
