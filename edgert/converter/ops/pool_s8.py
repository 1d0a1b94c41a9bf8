"""Pooling on int8 tensors (the ops are max_pool2d, avg_pool2d, global_avg_pool,
global_max_pool; edgert/converter/ops/pool.py dispatches here when X is int8). Kernel:
csrc/kernels/ref/pool_s8.c.

max_pool2d, global_max_pool (int8)
    The output has the input's scale and zero point (the converter gives it the same
    quantization), so the int8 maximum is the quantized maximum. Params: the float
    op's. A window without a tap inside the image gives -128.
avg_pool2d (int8)
    The output has the input's quantization. attrs: zp (the zero point). Params: the
    13 float-op words + [zp]. y = zp + round_div(sum over taps inside the image of
    (x - zp), count), round_div rounding half away from zero and count as the float op
    counts (count_include_pad included); y = zp when count is 0.
global_avg_pool (int8)
    attrs: x_zp, y_zp, mult, shift. Params: [x_zp, y_zp, mult, shift].
    y = clamp(y_zp + requant(sum over the spatial dims of (x - x_zp), mult, shift),
    -128, 127) with mult * 2**-shift ~= sx / (sy * spatial size).
"""
from __future__ import annotations

import math

import numpy as np

from .registry import OpUnsupported
from .window import pool_out_size, window_geometry
from ..quant.fixedpoint import requant, round_div, saturate

S8 = np.dtype(np.int8)


def applies(node, graph) -> bool:
    return len(node.inputs) == 1 and bool(node.inputs[0]) and graph.tensors[node.inputs[0]].dtype == S8


def _zp(node, key: str) -> int:
    v = int(node.attrs.get(key, 0))
    if not -128 <= v <= 127:
        raise OpUnsupported(f"{node.op} (int8): {key} outside int8")
    return v


def geometry(node, graph) -> dict:
    if node.op == "lp_pool2d":
        raise OpUnsupported("lp_pool2d has no int8 form")
    return window_geometry(node, graph)


def infer(node, graph):
    x = graph.tensors[node.inputs[0]]
    if node.op in ("global_avg_pool", "global_max_pool"):
        if len(x.shape) < 3 or math.prod(x.shape[2:]) == 0:
            raise OpUnsupported(f"{node.op} (int8): input must have rank >= 3 and non-empty spatial dims")
        if node.op == "global_avg_pool":
            _global_words(node, graph)
        return [(tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2), S8)]
    g = geometry(node, graph)
    if node.op == "avg_pool2d":
        _zp(node, "zp")
    shape = (g["n"], g["c"], g["ow"]) if g["rank1d"] else (g["n"], g["c"], g["oh"], g["ow"])
    return [(shape, S8)]


def _global_words(node, graph) -> list[int]:
    a = node.attrs
    size = math.prod(graph.tensors[node.inputs[0]].shape[2:])
    if size * 255 >= 2**31:
        raise OpUnsupported("global_avg_pool (int8): spatial size too large")
    mult, shift = int(a.get("mult", 0)), int(a.get("shift", 1))
    if not (0 <= mult < 2**31 and 1 <= shift <= 62):
        raise OpUnsupported("global_avg_pool (int8): bad multiplier or shift")
    return [_zp(node, "x_zp"), _zp(node, "y_zp"), mult, shift]


def pack(node, graph):
    if node.op == "global_avg_pool":
        return _global_words(node, graph)
    if node.op == "global_max_pool":
        return []
    g = geometry(node, graph)
    words = [g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], *g["pads"], int(g["ceil_mode"]),
             int(g["rank1d"]), g["extra"]]
    return words + ([_zp(node, "zp")] if node.op == "avg_pool2d" else [])


def _windows(x: np.ndarray, a: dict, kind: str):
    """(taps [T, N, C, OH, OW] int64 with -1000 outside the image, count [OH, OW])."""
    n, c, h, w = x.shape
    kh, kw = (int(v) for v in a["kernel"])
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
    pt, pl, pb, pr = (int(v) for v in a.get("pads", (0, 0, 0, 0)))
    ceil_mode = bool(a.get("ceil_mode", False))
    oh = pool_out_size(h, kh, sh, dh, pt, pb, ceil_mode)
    ow = pool_out_size(w, kw, sw, dw, pl, pr, ceil_mode)
    if oh == 0 or ow == 0:  # no window: one all-outside tap over an empty output
        return np.full((1, n, c, oh, ow), -1000, np.int64), np.zeros((oh, ow), np.int64)
    big_b = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
    big_r = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - w - pl)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pt, big_b), (pl, big_r)), constant_values=-1000)
    iy = np.arange(xp.shape[2]) - pt
    ix = np.arange(xp.shape[3]) - pl
    inside = ((iy >= 0) & (iy < h))[:, None] & ((ix >= 0) & (ix < w))[None, :]
    include = kind == "avg" and bool(a.get("count_include_pad", False))
    counted = ((iy < h + pb)[:, None] & (ix < w + pr)[None, :]) if include else inside
    taps, cnt = [], np.zeros((oh, ow), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            ys = slice(ky * dh, ky * dh + sh * (oh - 1) + 1, sh)
            xs = slice(kx * dw, kx * dw + sw * (ow - 1) + 1, sw)
            taps.append(xp[:, :, ys, xs])
            cnt += counted[ys, xs]
    return np.stack(taps), cnt


def reference(node, inputs):
    a = node.attrs
    x = np.asarray(inputs[0])
    if node.op in ("global_avg_pool", "global_max_pool"):
        axes = tuple(range(2, x.ndim))
        if node.op == "global_max_pool":
            return [x.max(axis=axes, keepdims=True).astype(np.int8)]
        xzp, yzp = int(a.get("x_zp", 0)), int(a.get("y_zp", 0))
        s = (x.astype(np.int64) - xzp).sum(axis=axes, keepdims=True)
        return [saturate(yzp + requant(s, int(a.get("mult", 0)), int(a.get("shift", 1))))]
    rank1d = bool(a.get("rank1d", False))
    if rank1d:
        x = x[:, :, None, :]
    kind = "max" if node.op == "max_pool2d" else "avg"
    taps, cnt = _windows(x, a, kind)
    outside = taps == -1000
    if kind == "max":
        y = np.where(outside, -128, taps).max(axis=0)
        y = np.where(outside.all(axis=0), -128, y)
    else:
        zp = int(a.get("zp", 0))
        s = np.where(outside, 0, taps - zp).sum(axis=0)
        y = np.where(cnt > 0, zp + round_div(s, np.maximum(cnt, 1)), zp)
    y = saturate(y)
    return [y[:, :, 0, :] if rank1d else y]
