"""Sliding windows shared by the float and int8 forms of convolution and pooling: output
sizes, a pooling node's checked geometry, and the exact windowed sum that the numpy
meanings of conv2d and conv2d_s8 use."""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported


def pool_out_size(size: int, k: int, s: int, d: int, p0: int, p1: int, ceil_mode: bool) -> int:
    """Output length of a window of k taps (dilation d, stride s) over size elements
    padded by p0 and p1: floor or ceil((padded - span) / s) + 1, less a last window that
    would start in the end padding (ceil_mode). A window longer than the padded input
    gives 0 windows, or one in ceil mode when the division rounds up to 0; a length
    below 0 (the spec's formula gives no valid shape) is returned as it is, for the
    caller to refuse."""
    span = d * (k - 1) + 1
    padded = size + p0 + p1
    if not ceil_mode:
        return (padded - span) // s + 1
    out = -((span - padded) // s) + 1
    if out > 0 and (out - 1) * s >= size + p0:
        out -= 1
    return out


def window_geometry(node, graph) -> dict:
    """Checked window sizes of a pooling node, whatever its dtype: n c h w kh kw sh sw dh
    dw pads ceil_mode rank1d oh ow, and extra (count_include_pad for avg_pool2d, else 0)."""
    a = node.attrs
    x = graph.tensors[node.inputs[0]]
    rank1d = bool(a.get("rank1d", False))
    if len(x.shape) != (3 if rank1d else 4):
        raise OpUnsupported(f"{node.op}: input must have rank {3 if rank1d else 4}")
    kh, kw = (int(v) for v in a["kernel"])
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
    pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
    ceil_mode = bool(a.get("ceil_mode", False))
    if len(pads) != 4 or min(pads) < 0 or min(kh, kw, sh, sw, dh, dw) < 1:
        raise OpUnsupported(f"{node.op}: kernel, strides, dilations must be >= 1 and pads >= 0")
    if rank1d and (kh, sh, dh, pads[0], pads[2]) != (1, 1, 1, 0, 0):
        raise OpUnsupported(f"{node.op}: the 1-D form needs a height-1 window")
    n, c = x.shape[0], x.shape[1]
    h, w = (1, x.shape[2]) if rank1d else (x.shape[2], x.shape[3])
    oh = pool_out_size(h, kh, sh, dh, pads[0], pads[2], ceil_mode)
    ow = pool_out_size(w, kw, sw, dw, pads[1], pads[3], ceil_mode)
    if oh < 0 or ow < 0:
        raise OpUnsupported(f"{node.op}: the window is larger than the padded input by more than a stride "
                            f"(output {oh}x{ow}: no valid shape)")
    extra = int(bool(a.get("count_include_pad", False))) if node.op == "avg_pool2d" else 0
    return dict(n=n, c=c, h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pads=pads, ceil_mode=ceil_mode,
                rank1d=rank1d, oh=oh, ow=ow, extra=extra)


def conv_sum(x: np.ndarray, w: np.ndarray, group: int, strides, dilations, pads, dtype=np.float64) -> np.ndarray:
    """numpy NCHW convolution accumulated in `dtype` (float64, or int64 for exact integer
    sums), zero padding; pads [top, left, bottom, right]."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(dtype), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    y = np.zeros((n, m, oh, ow), dtype)
    mg = m // group
    wd_ = w.astype(dtype)
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = wd_[g * mg:(g + 1) * mg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, ws[:, :, ky, kx])
    return y
