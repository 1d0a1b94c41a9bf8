"""conv_transpose2d: 2-D transposed convolution in NCHW (1-D as height 1), float32,
with fused bias and activation.

Kernel: csrc/kernels/ref/conv_transpose2d.c: per batch item and group, the columns
W_g^T X_g (a GEMM on the shared SGEMM) for a chunk of input rows, scattered-added into
Y (col2im).

conv_transpose2d
    inputs:  X (float32, [N, C, H, W]; [N, C, W] when rank1d)
             W (float32, [C, M/group, kH, kW]; [C, M/group, kW] when rank1d; ONNX layout)
             B (float32, [M], optional)
    outputs: Y (float32, [N, M, OH, OW]; [N, M, OW] when rank1d),
             OH = sH*(H-1) + out_pad_h + dH*(kH-1) + 1 - top - bottom, OW alike
    attrs:   group, kernel [kH, kW], strides, dilations, pads [top, left, bottom,
             right] (>= 0), output_padding [h, w] (>= 0), rank1d (bool; the height
             values are then 1, 1, 1, 0, 0, 0), act, act_a, act_b (fused activation)
    params:  [group, kH, kW, sH, sW, dH, dW, top, left, bottom, right, out_pad_h,
              out_pad_w, rank1d, act, act_a f, act_b f]
    Y[n, m, oy, ox] = B[m] + sum over c in m's group, ky, kx with
        oy = iy*sH - top + ky*dH, ox = ix*sW - left + kx*dW of
        X[n, c, iy, ix] * W[c, m mod (M/group), ky, kx]
    scratch: rows = col_rows(...) input rows per chunk;
             align64(Mg*kH*kW * rows*W * 4) + sgemm_scratch_bytes(Mg*kH*kW, rows*W, C/group, False)
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register
from .activation import act_apply, act_words
from .gemm import sgemm_scratch_bytes

F32 = np.dtype(np.float32)

# Column buffer budget in floats (csrc/kernels/ref/conv_transpose2d.c COL_BUDGET).
COL_BUDGET = 65536


def col_rows(rows_k: int, h: int, w: int) -> int:
    """Input rows per chunk: as many as keep rows_k * rows * w within the budget, >= 1."""
    return max(1, min(h, COL_BUDGET // max(1, rows_k * w)))


def _geometry(node, graph) -> dict:
    a = node.attrs
    if not 2 <= len(node.inputs) <= 3 or not node.inputs[0] or not node.inputs[1]:
        raise OpUnsupported("conv_transpose2d takes inputs X, W and an optional B")
    rank1d = bool(a.get("rank1d", False))
    rank = 3 if rank1d else 4
    x = graph.tensors[node.inputs[0]]
    w = graph.tensors[node.inputs[1]]
    b = graph.tensors[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else None
    for t, what in ((x, "X"), (w, "W"), (b, "B")):
        if t is not None and t.dtype != F32:
            raise OpUnsupported(f"conv_transpose2d: {what} has dtype {t.dtype}, supported: float32")
    if len(x.shape) != rank or len(w.shape) != rank:
        raise OpUnsupported(f"conv_transpose2d: X and W must have rank {rank}")
    group = int(a.get("group", 1))
    kh, kw = (int(v) for v in a["kernel"])
    sh, sw = (int(v) for v in a.get("strides", (1, 1)))
    dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
    pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
    oph, opw = (int(v) for v in a.get("output_padding", (0, 0)))
    if len(pads) != 4 or min(pads) < 0 or min(oph, opw) < 0:
        raise OpUnsupported("conv_transpose2d: pads and output_padding must be >= 0")
    if group < 1 or min(kh, kw, sh, sw, dh, dw) < 1:
        raise OpUnsupported("conv_transpose2d: group, kernel, strides and dilations must be >= 1")
    if rank1d:
        n, c, h, wd = x.shape[0], x.shape[1], 1, x.shape[2]
        wc, mg, wkh, wkw = w.shape[0], w.shape[1], 1, w.shape[2]
        if (kh, sh, dh, pads[0], pads[2], oph) != (1, 1, 1, 0, 0, 0):
            raise OpUnsupported("conv_transpose2d: the 1-D form needs a height-1 window")
    else:
        n, c, h, wd = x.shape
        wc, mg, wkh, wkw = w.shape
    if wc != c or c % group:
        raise OpUnsupported(f"conv_transpose2d: W {list(w.shape)} does not match {c} channels and group {group}")
    if (wkh, wkw) != (kh, kw):
        raise OpUnsupported(f"conv_transpose2d: kernel {[kh, kw]} does not match W {list(w.shape)}")
    m = mg * group
    if b is not None and tuple(b.shape) != (m,):
        raise OpUnsupported(f"conv_transpose2d: B must have shape [{m}]")
    oh = sh * (h - 1) + oph + dh * (kh - 1) + 1 - pads[0] - pads[2]
    ow = sw * (wd - 1) + opw + dw * (kw - 1) + 1 - pads[1] - pads[3]
    if oh < 1 or ow < 1:
        raise OpUnsupported("conv_transpose2d: empty output")
    return dict(n=n, c=c, h=h, w=wd, m=m, mg=mg, cg=c // group, group=group, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh,
                dw=dw, pads=pads, oph=oph, opw=opw, oh=oh, ow=ow, rank1d=rank1d)


def _infer(node, graph):
    g = _geometry(node, graph)
    act_words(node.attrs)
    shape = (g["n"], g["m"], g["ow"]) if g["rank1d"] else (g["n"], g["m"], g["oh"], g["ow"])
    return [(shape, F32)]


def _pack(node, graph):
    g = _geometry(node, graph)
    return [g["group"], g["kh"], g["kw"], g["sh"], g["sw"], g["dh"], g["dw"], *g["pads"], g["oph"], g["opw"],
            int(g["rank1d"])] + act_words(node.attrs)


def _scratch(node, graph) -> int:
    g = _geometry(node, graph)
    rows_k = g["mg"] * g["kh"] * g["kw"]
    rows = col_rows(rows_k, g["h"], g["w"])
    cols = rows * g["w"]
    return (rows_k * cols * 4 + 63) // 64 * 64 + sgemm_scratch_bytes(rows_k, cols, g["cg"], False)


def conv_transpose_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, group: int, strides, dilations,
                             pads, output_padding) -> np.ndarray:
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    oph, opw = output_padding
    full_h = sh * (h - 1) + dh * (kh - 1) + 1 + oph
    full_w = sw * (wd - 1) + dw * (kw - 1) + 1 + opw
    m = mg * group
    cg = c // group
    y = np.zeros((n, m, full_h, full_w), np.float64)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for g in range(group):
        xs = x64[:, g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                contrib = np.einsum("nchw,cm->nmhw", xs, w64[g * cg:(g + 1) * cg, :, ky, kx])
                y[:, g * mg:(g + 1) * mg, ky * dh: ky * dh + sh * (h - 1) + 1: sh,
                  kx * dw: kx * dw + sw * (wd - 1) + 1: sw] += contrib
    y = y[:, :, pt: full_h - pb, pl: full_w - pr]
    if b is not None:
        y = y + b.astype(np.float64).reshape(1, m, 1, 1)
    return y.astype(np.float32)


def _reference(node, inputs):
    a = node.attrs
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    rank1d = bool(a.get("rank1d", False))
    if rank1d:
        x, w = x[:, :, None, :], w[:, :, None, :]
    y = conv_transpose_reference(x, w, b, int(a.get("group", 1)), a.get("strides", (1, 1)),
                                 a.get("dilations", (1, 1)), a.get("pads", (0, 0, 0, 0)),
                                 a.get("output_padding", (0, 0)))
    if rank1d:
        y = y[:, :, 0, :]
    kind, fa, fb = act_words(a)
    return [act_apply(kind, fa, fb, y)]


register("conv_transpose2d", infer=_infer, pack=_pack, reference=_reference, scratch=_scratch)
