"""Pooling over NCHW float32 tensors (1-D as a height-1 special case).

Kernels: csrc/kernels/ref/pool.c.

max_pool2d avg_pool2d lp_pool2d
    inputs:  X (float32, [N, C, H, W]; [N, C, W] when rank1d)
    outputs: Y (float32, [N, C, OH, OW]; [N, C, OW] when rank1d), per spatial dim
             span = d*(k-1) + 1, floor mode: OH = (H + top + bottom - span) // s + 1;
             ceil_mode: OH = ceil((H + top + bottom - span) / s) + 1, minus 1 when the
             last window would start at or past H + top (ONNX semantics).
    attrs:   kernel [kH, kW], strides [sH, sW], dilations [dH, dW], pads [top, left,
             bottom, right] (>= 0), ceil_mode (bool), rank1d (bool: rank-3 tensors, the
             height values are 1/1/1/0/0); avg_pool2d: count_include_pad (bool);
             lp_pool2d: p (int >= 1)
    params:  [kH, kW, sH, sW, dH, dW, top, left, bottom, right, ceil_mode, rank1d, extra]
             extra = count_include_pad (avg), p (lp), 0 (max)
    Window taps are (oy*sH - top + ky*dH, ox*sW - left + kx*dW). max: the largest tap
    inside the image (-inf when none). avg: the sum of taps inside the image divided by
    the number of taps inside the image, or with count_include_pad by the number of taps
    inside the explicitly padded extent [-top, H + bottom) x [-left, W + right) (taps
    that ceil_mode adds beyond it never count); 0 when the count is 0. lp: (sum of
    |tap|^p over taps inside the image)^(1/p).

global_avg_pool global_max_pool
    inputs:  X (float32, rank >= 3, [N, C, d1, ...])
    outputs: Y (float32, [N, C, 1, ...]) the mean / max over all spatial dimensions
    params:  []
"""
from __future__ import annotations

import math

import numpy as np

from . import pool_s8
from .registry import OpUnsupported, register
from .window import pool_out_size, window_geometry

F32 = np.dtype(np.float32)


def _geometry(node, graph) -> dict:
    a = node.attrs
    if len(node.inputs) != 1 or not node.inputs[0]:
        raise OpUnsupported(f"{node.op} takes one input")
    x = graph.tensors[node.inputs[0]]
    if x.dtype != F32:
        raise OpUnsupported(f"{node.op}: dtype {x.dtype} is not supported (float32)")
    g = window_geometry(node, graph)
    if node.op == "lp_pool2d":
        g["extra"] = int(a.get("p", 2))
        if g["extra"] < 1 or g["extra"] != a.get("p", 2):
            raise OpUnsupported(f"lp_pool2d: p must be an integer >= 1, got {a.get('p')}")
    return g


def _infer(node, graph):
    if pool_s8.applies(node, graph):
        return pool_s8.infer(node, graph)
    g = _geometry(node, graph)
    shape = (g["n"], g["c"], g["ow"]) if g["rank1d"] else (g["n"], g["c"], g["oh"], g["ow"])
    return [(shape, F32)]


def _pack(node, graph):
    if pool_s8.applies(node, graph):
        return pool_s8.pack(node, graph)
    g = _geometry(node, graph)
    return [g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], *g["pads"], int(g["ceil_mode"]),
            int(g["rank1d"]), g["extra"]]


def pool_reference(kind: str, x: np.ndarray, kernel, strides, dilations, pads, ceil_mode: bool,
                   extra: int) -> np.ndarray:
    """numpy meaning of max/avg/lp pooling of a rank-4 x (see the module docstring)."""
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    oh = pool_out_size(h, kh, sh, dh, pt, pb, ceil_mode)
    ow = pool_out_size(w, kw, sw, dw, pl, pr, ceil_mode)
    if oh == 0 or ow == 0:  # no window: an empty output
        return np.zeros((n, c, oh, ow), np.float32)
    # Enough padding on both sides for every tap; masks say which taps are real / counted.
    big_b = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - h - pt)
    big_r = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - w - pl)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, big_b), (pl, big_r)), constant_values=fill)
    iy = np.arange(xp.shape[2]) - pt
    ix = np.arange(xp.shape[3]) - pl
    inside = ((iy >= 0) & (iy < h))[:, None] & ((ix >= 0) & (ix < w))[None, :]
    counted = ((iy < h + pb)[:, None] & (ix < w + pr)[None, :]) if extra and kind == "avg" else inside
    taps = []
    cnt = np.zeros((oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            ys = slice(ky * dh, ky * dh + sh * (oh - 1) + 1, sh)
            xs = slice(kx * dw, kx * dw + sw * (ow - 1) + 1, sw)
            taps.append(xp[:, :, ys, xs])
            cnt += counted[ys, xs]
    t = np.stack(taps)
    with np.errstate(all="ignore"):
        if kind == "max":
            y = t.max(axis=0)
        elif kind == "avg":
            y = np.where(cnt > 0, t.sum(axis=0) / np.maximum(cnt, 1), 0.0)
        else:
            y = (np.abs(t) ** extra).sum(axis=0) ** (1.0 / extra)
    return y.astype(np.float32)


def _make(op: str, kind: str):
    def reference(node, inputs):
        if inputs[0].dtype == np.int8:
            return pool_s8.reference(node, inputs)
        a = node.attrs
        x = inputs[0]
        rank1d = bool(a.get("rank1d", False))
        if rank1d:
            x = x[:, :, None, :]
        extra = 0
        if kind == "avg":
            extra = int(bool(a.get("count_include_pad", False)))
        elif kind == "lp":
            extra = int(a.get("p", 2))
        y = pool_reference(kind, x, a["kernel"], a.get("strides", (1, 1)), a.get("dilations", (1, 1)),
                           a.get("pads", (0, 0, 0, 0)), bool(a.get("ceil_mode", False)), extra)
        return [y[:, :, 0, :] if rank1d else y]

    register(op, infer=_infer, pack=_pack, reference=reference)


_make("max_pool2d", "max")
_make("avg_pool2d", "avg")
_make("lp_pool2d", "lp")


def _global_infer(node, graph):
    if len(node.inputs) != 1 or not node.inputs[0]:
        raise OpUnsupported(f"{node.op} takes one input")
    if pool_s8.applies(node, graph):
        return pool_s8.infer(node, graph)
    x = graph.tensors[node.inputs[0]]
    if x.dtype != F32:
        raise OpUnsupported(f"{node.op}: dtype {x.dtype} is not supported (float32)")
    if len(x.shape) < 3:
        raise OpUnsupported(f"{node.op}: input must have rank >= 3")
    if math.prod(x.shape[2:]) == 0:
        raise OpUnsupported(f"{node.op}: empty spatial dimensions")
    return [(tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2), F32)]


def _global_pack(node, graph):
    if pool_s8.applies(node, graph):
        return pool_s8.pack(node, graph)
    return []


def _global_make(op: str, fn):
    def reference(node, inputs):
        x = inputs[0]
        if x.dtype == np.int8:
            return pool_s8.reference(node, inputs)
        axes = tuple(range(2, x.ndim))
        return [fn(x.astype(np.float64), axis=axes, keepdims=True).astype(np.float32)]

    register(op, infer=_global_infer, pack=_global_pack, reference=reference)


_global_make("global_avg_pool", np.mean)
_global_make("global_max_pool", np.max)
