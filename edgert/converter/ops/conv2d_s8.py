"""conv2d on int8 tensors (the op is `conv2d`; edgert/converter/ops/conv2d.py dispatches here when
X is int8). Kernel: csrc/kernels/ref/conv2d_s8.c (ert_conv2d_s8__ref).

conv2d (int8)
    inputs:  X  (int8, [N, C, H, W]; [N, C, W] when rank1d), real = sx * (x - x_zp)
             W  (int8, [M, C/group, kH, kW]), real = sw[m] * w (symmetric per channel)
             QP (int32 constant, [M, 2]): per output channel (bias, mult); bias in
                accumulator units sx * sw[m]; mult[m] * 2**-shift ~= sx * sw[m] / sy
    outputs: Y  (int8, the float op's shape), real = sy * (y - y_zp)
    attrs:   the float op's geometry attrs (group, kernel, strides, dilations, pads,
             rank1d); act must be absent or "none" (an activation is folded into the
             output range); x_zp, y_zp (int), out_min, out_max (int, the output range,
             e.g. [y_zp, 127] for a folded relu), shift (int in [1, 62], the layer's)
    params:  the 15 float-op words (act 0) + [x_zp, y_zp, out_min, out_max, shift]
    meaning: acc[m, p] = bias[m] + sum over the window of (x - x_zp) * w, padding
             contributing 0 (that is, real zero); then
             y = clamp(y_zp + requant(acc, mult[m], shift), out_min, out_max)
             (requant: edgert/converter/quant/fixedpoint.py). The sum is exact: prepare requires
             K * 255 * 128 + |bias| < 2**31 with K = C/group * kH * kW.
    scratch: depthwise (C/group == 1): SLOTS slots of align64(2 * R * sW * L) bytes, an
             int16 copy of the R rows and Q columns of one input plane that the windows
             reach (R = (OH-1)*sH + (kH-1)*dH + 1, Q likewise), each row split into sW
             phases of L = ceil(Q / sW) values; or 0 (direct loops) when 2 * R * sW * L
             exceeds DW_PAD_MAX; for kxk windows (k 3 or 5) of strides 1 or 2, one
             output channel per input channel, M >= 16, OH*OW >= 16 and shift >= 31, at
             least SLOTS slots of a band of 16 interleaved channels (the (R-1)*sH + k
             padded input rows and the outputs of R output rows, about DWC_BUDGET bytes,
             see dwc_rows in the C kernel; the aarch64 kernels use it, the others the
             copy). Otherwise SLOTS slots of
             align64(min(PB, OH*OW) * K * 2) + align64(MR * K * 2) bytes (an int16
             im2col block of PB pixels and MR weight rows widened to int16); when
             OH*OW > PB the im2col part is at least align64(4*ceil(K/4) * P8) bytes, P8
             the block's pixels rounded up to 8 (the block: min(OH*OW, max(PB, or 2*PB
             when K % 4 == 0, QCOL / (4*ceil(K/4)) rounded down to 16)) pixels), and the
             slots are followed by align64(group * ceil(M/group/MR) * (16 * ceil(K/4) +
             32)) bytes: for the SIMD kernels, blocks of int8 quads and the weights packed
             once per run (groups of MR channels in quads of taps, with their biases and
             multipliers). A file converted without them runs the same (blocks of 64 or
             128 pixels, packing per block).
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported
from .activation import act_kind
from .gemm import align64
from .window import conv_sum
from ..quant.fixedpoint import requant, saturate

S8 = np.dtype(np.int8)
I32 = np.dtype(np.int32)
PB, MR, SLOTS, DW_PAD_MAX = 64, 4, 4, 1 << 20
QCOL = 16384  # bytes of int8 quads a block of the SIMD layout holds at least (S8_QCOL)
DWC_BUDGET, DWC_SLACK = 32768, 320
TERM_MAX = 255 * 128  # largest |(x - x_zp) * w|


def applies(node, graph) -> bool:
    """True when the node is the int8 form of conv2d."""
    return bool(node.inputs) and bool(node.inputs[0]) and graph.tensors[node.inputs[0]].dtype == S8


def geometry(node, graph) -> dict:
    a = node.attrs
    if len(node.inputs) != 3 or not all(node.inputs):
        raise OpUnsupported("conv2d (int8) takes inputs X, W and QP")
    x, w, qp = (graph.tensors[i] for i in node.inputs)
    rank1d = bool(a.get("rank1d", False))
    rank = 3 if rank1d else 4
    if x.dtype != S8 or w.dtype != S8 or len(x.shape) != rank or len(w.shape) != rank:
        raise OpUnsupported(f"conv2d (int8): X and W must be int8 of rank {rank}")
    if act_kind(a.get("act")) != 0:
        raise OpUnsupported("conv2d (int8): activations are folded into out_min/out_max")
    group = int(a.get("group", 1))
    kh, kw = (int(v) for v in a.get("kernel", (w.shape[2], w.shape[3]) if not rank1d else (1, w.shape[2])))
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
    pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
    if len(pads) != 4 or min(pads) < 0 or group < 1 or min(kh, kw, sh, sw, dh, dw) < 1:
        raise OpUnsupported("conv2d (int8): bad geometry")
    if rank1d:
        n, c, h, wd = x.shape[0], x.shape[1], 1, x.shape[2]
        m, wc, wkh, wkw = w.shape[0], w.shape[1], 1, w.shape[2]
        if (kh, sh, dh, pads[0], pads[2]) != (1, 1, 1, 0, 0):
            raise OpUnsupported("conv2d (int8): the 1-D form needs a height-1 window")
    else:
        n, c, h, wd = x.shape
        m, wc, wkh, wkw = w.shape
    if c % group or m % group or wc * group != c or (wkh, wkw) != (kh, kw):
        raise OpUnsupported(f"conv2d (int8): W {list(w.shape)} does not match X and group {group}")
    if qp.dtype != I32 or tuple(qp.shape) != (m, 2) or not qp.is_const or int(qp.data[:, 1].min(initial=0)) < 0:
        raise OpUnsupported(f"conv2d (int8): QP must be a constant int32 [{m}, 2], multipliers >= 0")
    if not 1 <= int(a.get("shift", 0)) <= 62:
        raise OpUnsupported("conv2d (int8): shift must be in [1, 62]")
    k = wc * kh * kw
    bias_max = int(np.abs(qp.data[:, 0].astype(np.int64)).max()) if m else 0
    if k * TERM_MAX + bias_max >= 2**31:
        raise OpUnsupported(f"conv2d (int8): {k} taps per output could overflow the int32 accumulator")
    for key in ("x_zp", "y_zp", "out_min", "out_max"):
        if not -128 <= int(a.get(key, 0 if "zp" in key else (-128 if key == "out_min" else 127))) <= 127:
            raise OpUnsupported(f"conv2d (int8): {key} outside int8")
    oh = (h + pads[0] + pads[2] - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pads[1] + pads[3] - (dw * (kw - 1) + 1)) // sw + 1
    if oh < 1 or ow < 1:
        raise OpUnsupported("conv2d (int8): the window is larger than the padded input")
    return dict(n=n, c=c, h=h, w=wd, m=m, cg=wc, mg=m // group, group=group, kh=kh, kw=kw, sh=sh, sw=sw,
                dh=dh, dw=dw, pads=pads, oh=oh, ow=ow, rank1d=rank1d, k=k)


def out_range(attrs: dict) -> tuple[int, int, int]:
    return int(attrs.get("y_zp", 0)), int(attrs.get("out_min", -128)), int(attrs.get("out_max", 127))


def infer(node, graph):
    g = geometry(node, graph)
    zp, lo, hi = out_range(node.attrs)
    if not lo <= hi:
        raise OpUnsupported("conv2d (int8): out_min > out_max")
    shape = (g["n"], g["m"], g["ow"]) if g["rank1d"] else (g["n"], g["m"], g["oh"], g["ow"])
    return [(shape, S8)]


def pack(node, graph):
    g = geometry(node, graph)
    zp, lo, hi = out_range(node.attrs)
    return [g["group"], g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], *g["pads"], int(g["rank1d"]),
            0, 0.0, 0.0, int(node.attrs.get("x_zp", 0)), zp, lo, hi, int(node.attrs["shift"])]


def scratch(node, graph) -> int:
    g = geometry(node, graph)
    if g["cg"] == 1:
        rows = (g["oh"] - 1) * g["sh"] + (g["kh"] - 1) * g["dh"] + 1
        cols = (g["ow"] - 1) * g["sw"] + (g["kw"] - 1) * g["dw"] + 1
        one = 2 * rows * g["sw"] * -(-cols // g["sw"])
        need = 0 if one > DW_PAD_MAX else SLOTS * ((one + 63) // 64 * 64)
        s, t = g["sw"], g["sh"]
        k = g["kh"]
        if ((g["kw"], g["dh"], g["dw"]) == (k, 1, 1) and k in (3, 5) and s in (1, 2) and t in (1, 2)
                and g["mg"] == 1 and g["m"] >= 16 and g["oh"] * g["ow"] >= 16 and int(node.attrs["shift"]) >= 31
                and g["ow"] <= DW_PAD_MAX // 64):
            cols = (g["ow"] - 1) * s + k  # the kernel's 16-channel bands (dwc_rows in the C)
            r = (DWC_BUDGET - DWC_SLACK - 16 * (k - t) * cols) // (16 * (t * cols + g["ow"]))
            r = min(max(r, -(-16 // g["ow"])), g["oh"])
            band = 16 * (((r - 1) * t + k) * cols + r * g["ow"]) + DWC_SLACK
            need = max(need, SLOTS * ((band + 63) // 64 * 64))
        return need
    p, k = g["oh"] * g["ow"], g["k"]
    col, wrows = align64(min(PB, p) * k * 2), align64(MR * k * 2)
    if p <= PB:
        return SLOTS * (col + wrows)
    # the SIMD layout (ext_scratch in the C): slots that also hold a block of int8 quads,
    # then the packed weights of every group of MR channels
    kq4 = -(-k // 4) * 4
    pixels = min(p, max(PB if k % 4 else 2 * PB, QCOL // kq4 // 16 * 16))
    col = max(col, align64(kq4 * -(-pixels // 8) * 8))
    return SLOTS * (col + wrows) + align64(g["group"] * -(-g["mg"] // MR) * (kq4 * 4 + 32))


def conv_acc(x: np.ndarray, w: np.ndarray, group: int, strides, dilations, pads) -> np.ndarray:
    """Exact int64 NCHW convolution of integer arrays (zero padding)."""
    return conv_sum(x, w, group, strides, dilations, pads, np.int64)


def reference(node, inputs):
    a = node.attrs
    x, w, qp = inputs
    rank1d = bool(a.get("rank1d", False))
    if rank1d:
        x, w = x[:, :, None, :], w[:, :, None, :]
    xs = x.astype(np.int64) - int(a.get("x_zp", 0))
    acc = conv_acc(xs, w, int(a.get("group", 1)), a.get("strides", (1, 1)), a.get("dilations", (1, 1)),
                   a.get("pads", (0, 0, 0, 0)))
    qp = np.asarray(qp, np.int64)
    ch = (1, -1, 1, 1)
    acc = acc + qp[:, 0].reshape(ch)
    zp, lo, hi = out_range(a)
    y = saturate(zp + requant(acc, qp[:, 1].reshape(ch), int(a["shift"])), lo, hi)
    return [y[:, :, 0, :] if rank1d else y]
