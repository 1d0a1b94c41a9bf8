"""Normalisation ops. All are float32 only.

batch_norm (inference; may run in place)
    inputs:  X [N, C, ...] (rank >= 2), scale [C], B [C], mean [C], var [C]
    outputs: Y (shape of X)
    attrs:   epsilon (float, default 1e-5)
    params:  [epsilon]
    y = (x - mean) * a + B per channel, with a = scale / sqrt(var + epsilon). The
    kernel derives a from the vectors each run, so they may be graph inputs as well
    as constants (ONNX models usually have constants, which the Conv+BN pass folds
    away).

instance_norm
    inputs:  X [N, C, ...] (rank >= 2), scale [C], B [C]
    outputs: Y
    attrs:   epsilon (float, default 1e-5)
    params:  [epsilon]
    For each (n, c): y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c], mean and
    (biased) variance over the spatial dimensions.

layer_norm (may run in place)
    inputs:  X (rank >= 1), scale, bias (optional): scale and bias hold exactly
             prod(X.shape[axis:]) elements (the normalized shape; the lowering
             broadcasts constants to it)
    outputs: Y, then optionally Mean and InvStdDev, both of shape
             X.shape[:axis] + (1,) * (rank - axis)
    attrs:   axis (int, in [-rank, rank), default -1), epsilon (float, default 1e-5)
    params:  [axis (normalized), epsilon]
    Over each row of the trailing dimensions from `axis`: mean, biased variance,
    inv = 1 / sqrt(var + epsilon), y = (x - mean) * inv * scale + bias.

group_norm
    inputs:  X [N, C, ...] (rank >= 2), scale, bias: C values (one per channel) or,
             with per_group, num_groups values (one per group)
    outputs: Y
    attrs:   num_groups (int, divides C), epsilon (float, default 1e-5),
             per_group (bool, default False; ONNX opset 18 semantics)
    params:  [num_groups, epsilon, per_group]
    For each (n, group): mean and biased variance over the group's channels and the
    spatial dimensions; y = (x - mean) / sqrt(var + epsilon) * scale + bias.

lrn (across channels)
    inputs:  X [N, C, ...] (rank >= 2)
    outputs: Y
    attrs:   size (int >= 1), alpha (1e-4), beta (0.75), bias (1.0)
    params:  [size, alpha, beta, bias]
    square_sum[n, c] = sum of x[n, k]^2 for k in
    [c - floor((size-1)/2), c + ceil((size-1)/2)] within [0, C);
    y = x / (bias + alpha / size * square_sum) ^ beta.
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register

F32 = np.dtype(np.float32)


def _t(graph, name):
    return graph.tensors[name] if name else None


def _need_f32(node, graph, idxs, optional=()) -> None:
    for i in idxs:
        if i >= len(node.inputs) or not node.inputs[i]:
            if i in optional:
                continue
            raise OpUnsupported(f"{node.op}: input {i} is required")
        t = graph.tensors[node.inputs[i]]
        if t.dtype != F32:
            raise OpUnsupported(f"{node.op}: input {i} has dtype {t.dtype}, supported: float32")


def _numel(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64))


def _vec_check(node, graph, idx: int, count: int, what: str) -> None:
    t = graph.tensors[node.inputs[idx]]
    if _numel(t) != count:
        raise OpUnsupported(f"{node.op}: {what} has shape {t.shape}, expected {count} values")


def _eps(node) -> float:
    return float(node.attrs.get("epsilon", 1e-5))


# ---- batch_norm -----------------------------------------------------------------------

def _bn_infer(node, graph):
    if len(node.inputs) != 5:
        raise OpUnsupported("batch_norm takes 5 inputs (X, scale, B, mean, var)")
    _need_f32(node, graph, range(5))
    x = _t(graph, node.inputs[0])
    if len(x.shape) < 2:
        raise OpUnsupported("batch_norm: input must have rank >= 2")
    for i, what in ((1, "scale"), (2, "B"), (3, "mean"), (4, "var")):
        _vec_check(node, graph, i, x.shape[1], what)
    return [(x.shape, F32)]


def _bn_ref(node, inputs):
    x, s, b, m, v = (np.asarray(a, np.float64) for a in inputs)
    shp = (1, -1) + (1,) * (x.ndim - 2)
    a = s.reshape(-1) / np.sqrt(v.reshape(-1) + _eps(node))
    y = (x - m.reshape(shp)) * a.reshape(shp) + b.reshape(shp)
    return [y.astype(F32)]


register("batch_norm", infer=_bn_infer, pack=lambda node, graph: [_eps(node)], reference=_bn_ref,
         inplace=True)


# ---- instance_norm --------------------------------------------------------------------

def _in_infer(node, graph):
    if len(node.inputs) != 3:
        raise OpUnsupported("instance_norm takes 3 inputs (X, scale, B)")
    _need_f32(node, graph, range(3))
    x = _t(graph, node.inputs[0])
    if len(x.shape) < 2:
        raise OpUnsupported("instance_norm: input must have rank >= 2")
    _vec_check(node, graph, 1, x.shape[1], "scale")
    _vec_check(node, graph, 2, x.shape[1], "B")
    return [(x.shape, F32)]


def _in_ref(node, inputs):
    x, s, b = (np.asarray(a, np.float64) for a in inputs)
    ax = tuple(range(2, x.ndim))
    shp = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=ax, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=ax, keepdims=True)
    y = (x - mean) / np.sqrt(var + _eps(node)) * s.reshape(shp) + b.reshape(shp)
    return [y.astype(F32)]


register("instance_norm", infer=_in_infer, pack=lambda node, graph: [_eps(node)], reference=_in_ref)


# ---- layer_norm -----------------------------------------------------------------------

def _ln_axis(node, rank: int) -> int:
    a = int(node.attrs.get("axis", -1))
    if not -rank <= a < rank:
        raise OpUnsupported(f"layer_norm: axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def _ln_infer(node, graph):
    if len(node.inputs) not in (2, 3):
        raise OpUnsupported("layer_norm takes 2 or 3 inputs (X, scale, bias)")
    _need_f32(node, graph, range(len(node.inputs)), optional=(2,))
    x = _t(graph, node.inputs[0])
    if len(x.shape) < 1:
        raise OpUnsupported("layer_norm: input must have rank >= 1")
    axis = _ln_axis(node, len(x.shape))
    n = int(np.prod(x.shape[axis:], dtype=np.int64))
    _vec_check(node, graph, 1, n, "scale")
    if len(node.inputs) == 3 and node.inputs[2]:
        _vec_check(node, graph, 2, n, "bias")
    if not 1 <= len(node.outputs) <= 3:
        raise OpUnsupported("layer_norm has 1 to 3 outputs (Y, Mean, InvStdDev)")
    stat = tuple(x.shape[:axis]) + (1,) * (len(x.shape) - axis)
    return [(x.shape, F32)] + [(stat, F32)] * (len(node.outputs) - 1)


def _ln_ref(node, inputs):
    x = np.asarray(inputs[0], np.float64)
    axis = _ln_axis(node, x.ndim)
    ax = tuple(range(axis, x.ndim))
    norm_shape = x.shape[axis:]
    mean = x.mean(axis=ax, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=ax, keepdims=True)
    inv = 1.0 / np.sqrt(var + _eps(node))
    y = (x - mean) * inv * np.asarray(inputs[1], np.float64).reshape(norm_shape)
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + np.asarray(inputs[2], np.float64).reshape(norm_shape)
    outs = [y.astype(F32), mean.astype(F32), inv.astype(F32)]
    return outs[:len(node.outputs)]


register("layer_norm", infer=_ln_infer,
         pack=lambda node, graph: [_ln_axis(node, len(_t(graph, node.inputs[0]).shape)), _eps(node)],
         reference=_ln_ref, inplace=True)


# ---- group_norm -----------------------------------------------------------------------

def _gn_groups(node, channels: int) -> int:
    g = int(node.attrs.get("num_groups", 0))
    if g <= 0 or channels % g:
        raise OpUnsupported(f"group_norm: num_groups {g} does not divide the {channels} channels")
    return g


def _gn_infer(node, graph):
    if len(node.inputs) != 3:
        raise OpUnsupported("group_norm takes 3 inputs (X, scale, bias)")
    _need_f32(node, graph, range(3))
    x = _t(graph, node.inputs[0])
    if len(x.shape) < 2:
        raise OpUnsupported("group_norm: input must have rank >= 2")
    g = _gn_groups(node, x.shape[1])
    count = g if node.attrs.get("per_group", False) else x.shape[1]
    _vec_check(node, graph, 1, count, "scale")
    _vec_check(node, graph, 2, count, "bias")
    return [(x.shape, F32)]


def _gn_ref(node, inputs):
    x = np.asarray(inputs[0], np.float64)
    n, c = x.shape[:2]
    g = _gn_groups(node, c)
    xg = x.reshape(n, g, -1)
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + _eps(node))).reshape(x.shape)
    s = np.asarray(inputs[1], np.float64).reshape(-1)
    b = np.asarray(inputs[2], np.float64).reshape(-1)
    if node.attrs.get("per_group", False):
        s, b = np.repeat(s, c // g), np.repeat(b, c // g)
    shp = (1, -1) + (1,) * (x.ndim - 2)
    return [(y * s.reshape(shp) + b.reshape(shp)).astype(F32)]


def _gn_pack(node, graph):
    x = _t(graph, node.inputs[0])
    return [_gn_groups(node, x.shape[1]), _eps(node), int(bool(node.attrs.get("per_group", False)))]


register("group_norm", infer=_gn_infer, pack=_gn_pack, reference=_gn_ref)


# ---- lrn ------------------------------------------------------------------------------

def _lrn_attrs(node):
    size = int(node.attrs.get("size", 0))
    if size < 1:
        raise OpUnsupported(f"lrn: size must be >= 1, got {size}")
    return (size, float(node.attrs.get("alpha", 1e-4)), float(node.attrs.get("beta", 0.75)),
            float(node.attrs.get("bias", 1.0)))


def _lrn_infer(node, graph):
    if len(node.inputs) != 1:
        raise OpUnsupported("lrn takes one input")
    _need_f32(node, graph, [0])
    x = _t(graph, node.inputs[0])
    if len(x.shape) < 2:
        raise OpUnsupported("lrn: input must have rank >= 2")
    _lrn_attrs(node)
    return [(x.shape, F32)]


def _lrn_ref(node, inputs):
    x = np.asarray(inputs[0], np.float64)
    size, alpha, beta, bias = _lrn_attrs(node)
    c = x.shape[1]
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2
    sq = np.zeros_like(x)
    for k in range(c):
        a, b = max(0, k - lo), min(c, k + hi + 1)
        sq[:, k] = np.sum(x[:, a:b] ** 2, axis=1)
    y = x / (bias + alpha / size * sq) ** beta
    return [y.astype(F32)]


register("lrn", infer=_lrn_infer, pack=lambda node, graph: list(_lrn_attrs(node)), reference=_lrn_ref)
