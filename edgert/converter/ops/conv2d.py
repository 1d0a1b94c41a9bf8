"""conv2d: 2-D convolution in NCHW (1-D as a height-1 special case), float32, with
fused bias and activation.

Kernel: csrc/kernels/ref/conv2d.c (depthwise direct loops; 1x1 as a GEMM on the NCHW
tensor; otherwise im2col packed inside the shared SGEMM, csrc/kernels/ref/sgemm.c).

conv2d
    inputs:  X (float32, [N, C, H, W]; [N, C, W] when rank1d)
             W (float32, [M, C/group, kH, kW]; [M, C/group, kW] when rank1d): the
               ONNX layout, constant or not
             B (float32, [M], optional)
    outputs: Y (float32, [N, M, OH, OW]; [N, M, OW] when rank1d)
             OH = (H + pad_top + pad_bottom - (dH*(kH-1) + 1)) // sH + 1, OW alike
    attrs:   group (int >= 1), kernel [kH, kW], strides [sH, sW], dilations [dH, dW],
             pads [top, left, bottom, right] (>= 0), rank1d (bool: X, W, Y have rank 3
             and kernel, strides, dilations, pads are given for height 1: kH = sH =
             dH = 1, top = bottom = 0), act, act_a, act_b (fused activation, ert_act)
    params:  [group, kH, kW, sH, sW, dH, dW, top, left, bottom, right, rank1d,
              act, act_a f, act_b f]
    scratch: depthwise_scratch_bytes when C/group == 1 and group > 1; sgemm_scratch_bytes(M/group, OH*OW,
             C/group, False) for 1x1 with stride 1 and no padding; otherwise
             sgemm_scratch_bytes(M/group, OH*OW, C/group*kH*kW, True).
"""
from __future__ import annotations

import numpy as np

from . import conv2d_s8
from .registry import OpUnsupported, register
from .activation import act_apply, act_words
from .window import conv_sum
from .gemm import sgemm_scratch_bytes

F32 = np.dtype(np.float32)


def conv_geometry(node, graph) -> dict:
    """Checked sizes of a conv2d node: n c h w m cg mg kh kw sh sw dh dw pads oh ow rank1d."""
    a = node.attrs
    if not 2 <= len(node.inputs) <= 3 or not node.inputs[0] or not node.inputs[1]:
        raise OpUnsupported("conv2d takes inputs X, W and an optional B")
    rank1d = bool(a.get("rank1d", False))
    rank = 3 if rank1d else 4
    x = graph.tensors[node.inputs[0]]
    w = graph.tensors[node.inputs[1]]
    b = graph.tensors[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else None
    for t, what in ((x, "X"), (w, "W"), (b, "B")):
        if t is not None and t.dtype != F32:
            raise OpUnsupported(f"conv2d: {what} has dtype {t.dtype}, supported: float32")
    if len(x.shape) != rank or len(w.shape) != rank:
        raise OpUnsupported(f"conv2d: X and W must have rank {rank}")
    group = int(a.get("group", 1))
    kh, kw = (int(v) for v in a.get("kernel", (w.shape[2], w.shape[3]) if not rank1d else (1, w.shape[2])))
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
    pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
    if len(pads) != 4 or min(pads) < 0:
        raise OpUnsupported(f"conv2d: pads {list(pads)} must be 4 values >= 0")
    if group < 1 or min(kh, kw, sh, sw, dh, dw) < 1:
        raise OpUnsupported("conv2d: group, kernel, strides and dilations must be >= 1")
    if rank1d:
        n, c, h, wd = x.shape[0], x.shape[1], 1, x.shape[2]
        m, wc, wkh, wkw = w.shape[0], w.shape[1], 1, w.shape[2]
        if (kh, sh, dh, pads[0], pads[2]) != (1, 1, 1, 0, 0):
            raise OpUnsupported("conv2d: the 1-D form needs a height-1 window")
    else:
        n, c, h, wd = x.shape
        m, wc, wkh, wkw = w.shape
    if c % group or m % group or wc * group != c:
        raise OpUnsupported(f"conv2d: W {list(w.shape)} does not match {c} input channels and group {group}")
    if (wkh, wkw) != (kh, kw):
        raise OpUnsupported(f"conv2d: kernel {[kh, kw]} does not match W {list(w.shape)}")
    if b is not None and tuple(b.shape) != (m,):
        raise OpUnsupported(f"conv2d: B must have shape [{m}]")
    oh = (h + pads[0] + pads[2] - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pads[1] + pads[3] - (dw * (kw - 1) + 1)) // sw + 1
    if h + pads[0] + pads[2] < dh * (kh - 1) + 1 or wd + pads[1] + pads[3] < dw * (kw - 1) + 1:
        raise OpUnsupported("conv2d: the window is larger than the padded input")
    return dict(n=n, c=c, h=h, w=wd, m=m, cg=c // group, mg=m // group, group=group, kh=kh, kw=kw, sh=sh, sw=sw,
                dh=dh, dw=dw, pads=pads, oh=oh, ow=ow, rank1d=rank1d)


def _infer(node, graph):
    if conv2d_s8.applies(node, graph):
        return conv2d_s8.infer(node, graph)
    g = conv_geometry(node, graph)
    act_words(node.attrs)
    shape = (g["n"], g["m"], g["ow"]) if g["rank1d"] else (g["n"], g["m"], g["oh"], g["ow"])
    return [(shape, F32)]


def _pack(node, graph):
    if conv2d_s8.applies(node, graph):
        return conv2d_s8.pack(node, graph)
    g = conv_geometry(node, graph)
    return [g["group"], g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], *g["pads"],
            int(g["rank1d"])] + act_words(node.attrs)


# Depthwise padded path (csrc/kernels/ref/conv2d.c DW_SLOTS, DW_PAD_MAX, DW_FLAT_BELOW).
DW_SLOTS, DW_PAD_MAX, DW_FLAT_BELOW = 4, 256 * 1024, 64


def depthwise_scratch_bytes(g: dict) -> int:
    """DW_SLOTS slots, each a padded copy of one input plane (the rows and columns the
    windows reach, split by stride phase) followed, when OW < DW_FLAT_BELOW, by the
    output plane at the padded pitch. When such a slot would exceed DW_PAD_MAX bytes:
    band mode for the windows the NEON plane kernels take (3x3 or 5x5, column stride 1
    or 2, no column dilation, OW >= 3 + stride), a slot holding the unsplit padded rows
    of as many output rows as fit in DW_PAD_MAX; else 0 (direct path)."""
    rows = (g["oh"] - 1) * g["sh"] + (g["kh"] - 1) * g["dh"] + 1
    cols = (g["ow"] - 1) * g["sw"] + (g["kw"] - 1) * g["dw"] + 1
    prow, plen = -(-rows // g["sh"]), -(-cols // g["sw"])
    pad = g["sh"] * g["sw"] * prow * plen * 4
    one = (pad + 63) // 64 * 64
    if g["ow"] < DW_FLAT_BELOW:
        one += (((g["oh"] - 1) * plen + g["ow"]) * 4 + 63) // 64 * 64
    if pad <= DW_PAD_MAX and one <= DW_PAD_MAX:
        return DW_SLOTS * one
    band = depthwise_band_rows(g)
    if not band:
        return 0
    band_rows = (band - 1) * g["sh"] + (g["kh"] - 1) * g["dh"] + 1
    return DW_SLOTS * ((band_rows * ((g["ow"] - 1) * g["sw"] + g["kw"]) * 4 + 63) // 64 * 64)


def depthwise_band_rows(g: dict) -> int:
    """Output rows per band in band mode (csrc/kernels/ref/conv2d.c dw_band_rows), 0
    when the window is not one the plane kernels take or not one row fits."""
    if (g["kh"] != g["kw"] or g["kh"] not in (3, 5) or g["sw"] not in (1, 2) or g["dw"] != 1
            or g["ow"] < 3 + g["sw"]):
        return 0
    cols = (g["ow"] - 1) * g["sw"] + g["kw"]
    fit = (DW_PAD_MAX // 4) // cols
    span = (g["kh"] - 1) * g["dh"] + 1
    if fit < span:
        return 0
    return min((fit - span) // g["sh"] + 1, g["oh"])


def _scratch(node, graph) -> int:
    if conv2d_s8.applies(node, graph):
        return conv2d_s8.scratch(node, graph)
    g = conv_geometry(node, graph)
    if g["cg"] == 1 and g["group"] > 1:  # same choice as path_of() in conv2d.c
        return depthwise_scratch_bytes(g)
    hw = g["oh"] * g["ow"]
    if g["kh"] == g["kw"] == 1 and g["sh"] == g["sw"] == 1 and not any(g["pads"]):
        return sgemm_scratch_bytes(g["mg"], hw, g["cg"], False)
    return sgemm_scratch_bytes(g["mg"], hw, g["cg"] * g["kh"] * g["kw"], True)


def conv_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, group: int, strides, dilations,
                   pads) -> np.ndarray:
    """numpy NCHW convolution (float64 accumulation); pads [top, left, bottom, right]."""
    y = conv_sum(x, w, group, strides, dilations, pads)
    if b is not None:
        y += b.astype(np.float64).reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def _reference(node, inputs):
    if inputs[0].dtype == np.int8:
        return conv2d_s8.reference(node, inputs)
    a = node.attrs
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    rank1d = bool(a.get("rank1d", False))
    if rank1d:
        x, w = x[:, :, None, :], w[:, :, None, :]
    y = conv_reference(x, w, b, int(a.get("group", 1)), a.get("strides", (1, 1)), a.get("dilations", (1, 1)),
                       a.get("pads", (0, 0, 0, 0)))
    if rank1d:
        y = y[:, :, 0, :]
    kind, fa, fb = act_words(a)
    return [act_apply(kind, fa, fb, y)]


register("conv2d", infer=_infer, pack=_pack, reference=_reference, scratch=_scratch)
