#!/usr/bin/env python3
"""Random-graph differential tester: edgert against onnxruntime and the ONNX spec.

Each case is a random DAG of 3-15 ONNX nodes (opset 20) over 50+ op types: Conv,
ConvTranspose, Max/Average/LpPool (every auto_pad, ceil_mode, dilations,
count_include_pad), global pools, Resize (every mode, coordinate transformation mode and
nearest mode, by scales and by sizes), Pad (constant/reflect/edge, negative pads),
Slice (negative steps, out-of-range bounds), Gather, Where, broadcasting arithmetic,
reductions, normalizations, activations, Concat, Split, Reshape, Transpose, Flatten,
Squeeze/Unsqueeze, MatMul, Gemm and more, with random shapes and attributes (odd and
prime sizes, size-1 dimensions, strides larger than kernels, constant sub-graphs that
edgert folds at conversion). The generator evaluates each node as it adds it with
onnx.reference and keeps only nodes the reference accepts, so the graphs are valid.
Cases are a pure function of (--seed, case index).

Oracles. Each case is run by onnxruntime (CPU, graph optimizations off) and by
onnx.reference on a float64 copy of the graph (the "reference"); edgert converts it and
runs it in a worker process (a crash of the C runtime kills only the worker, which is
restarted; a shared stage marker tells a crash of edgert from one of an oracle). edgert is
compared with onnxruntime first; when they disagree, with the reference. A disagreement
is decided by the known-deviation table DEVIATIONS below: an entry names the op and
attribute condition, the ONNX spec text it relies on, what edgert does and what
onnxruntime does (and, where it matters, onnx.reference). A disagreement that no entry
explains is an "unexplained mismatch". Every graph output is judged on its own, and an
entry explains an output's disagreement only through a node that output depends on.
Where onnx.reference itself departs from the spec text (REFERENCE_QUIRKS: Resize
align_corners / tf_crop_and_resize at a fractional output length, MaxPool SAME_LOWER,
GlobalMaxPool of rank != 4, ...), the outputs that depend on such a node have no reference
and onnxruntime decides alone for them; an entry with `spec_ops` instead reruns the
reference with that op written from the spec text (Resize in exact rational arithmetic:
`resize_axes`, `x_original`, `resize_taps`), which then stays an oracle. The generator evaluates every node it adds with both
onnx.reference and onnxruntime; a node whose output shape they disagree on is kept only
as a graph output, so no later node is built on a shape that is in dispute.

Tolerance rule (conditioning-scaled). The reference runs the float64 graph three
times: once exactly, and twice with noise that models float32 rounding at every step:
each node's data inputs are multiplied by (1 + u), and each output y becomes
y * (1 + u) + u' * m, where u, u' are uniform in [-NOISE, NOISE], NOISE = 2**-22 (about
two float32 ulps), independent per element and per run, and m is the largest finite
|operand| of that node (the absolute error of a sum that cancels, of log near 1, ...).
Inputs that select shapes or coordinates (Resize's roi, scales, sizes) are not perturbed.
The sensitivity of output element i is
    sens_i = max over the noisy runs |y_noisy_i - y_i|
and a result r (edgert's or onnxruntime's) agrees with the exact y when, for every i,
    |r_i - y_i| <= ATOL + RTOL * |y_i| + K_SENS * sens_i
with ATOL = 1e-5 * (1 + mean |y|), RTOL = 1e-4, K_SENS = 16; NaN must meet NaN and an
infinity the same infinity (anything goes where sens_i is itself infinite). So a
well-conditioned graph is held to about 1e-4 relative, while Tan near a pole, exp of
large values, a sum that cancels, or a Floor/Round/Sign/max tie that float32 rounding
can flip gets the slack its own sensitivity shows. edgert against onnxruntime uses the
same tolerance (both compute in float32). Where there is no reference (it refused the
graph) a fixed RTOL = ATOL = 1e-3 is used. When edgert and onnxruntime disagree but
edgert meets the reference under the rule and onnxruntime is within the fixed 1e-3 of
it, the case passes (onnxruntime's own rounding, e.g. in InstanceNormalization).

Classes:
  pass       edgert agrees with onnxruntime (or with the reference where onnxruntime
             refused the graph);
  rejected   edgert raised an EdgertError with a clear message (grouped by cause;
             "[onnxruntime refuses the graph too]" marks those onnxruntime also refused);
  invalid    neither onnxruntime nor the reference accepts the graph;
  crash      any other exception from convert or run, an EdgertError that wraps an
             internal Python error (MemoryError, ValueError: ... in its message), a
             worker that died (signal) or a case over the time limit, in edgert;
  oracle_crash  the worker died or hung inside onnxruntime or onnx.reference (not
             counted against edgert; onnxruntime segfaults on some pooling graphs);
  mismatch   shape or value disagreement not explained by DEVIATIONS (kind:
             "edgert_off": onnxruntime and the reference agree and edgert differs;
             "ort_off": edgert agrees with the reference, onnxruntime differs;
             "all_differ": the three disagree; "no_reference": the reference refused
             the graph or is out for a quirk, and edgert differs from onnxruntime);
  deviation  a disagreement explained by an entry of DEVIATIONS.
Exit status 1 when there is a crash or an unexplained mismatch.

Failures are shrunk (outputs dropped, nodes cut out by turning their outputs into graph
inputs fed with the values they had, nodes bypassed, input dimensions reduced) while the
same failure persists, and written to --out DIR/<class>-<seed>-<index>/ as model.onnx,
inputs.npz, expected.npz (the reference's outputs) and test_function.txt (a pytest function to paste
into a test module; the data paths it uses are tests/data/fuzz_cases/<name>/).

Modes: float32 (static shapes); int8 (edgert's int8 file against edgert's own float32
file, by SQNR, with a floor per op type: SQNR_FLOOR); bounded (random sizes within
"lo..hi" input bounds: tools/fuzz_bounded.py, which --mode bounded runs).

    python tools/fuzz_graphs.py --seed 1 --graphs 300 [--jobs 1] [--out DIR]
    python tools/fuzz_graphs.py --seed 7 --minutes 60 --out /tmp/fuzz
    python tools/fuzz_graphs.py --seed 1 --replay 123      # one case, verbose
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import multiprocessing as mp
import os
import pathlib
import re
import sys
import time
import traceback
import warnings
from fractions import Fraction
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.printer  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

OPSET = 20
NOISE = 2.0 ** -22
RTOL = 1e-4
ATOL_REL = 1e-5
K_SENS = 16.0
FIXED_TOL = 1e-3
CASE_SECONDS = 120
MAX_ELEMS = 40000          # largest tensor the generator keeps
INTERNAL_ERROR = re.compile(r"\b(MemoryError|ValueError|IndexError|KeyError|TypeError|AttributeError|"
                            r"AssertionError|ZeroDivisionError|OverflowError|RuntimeError|Traceback|"
                            r"Unable to allocate)\b")


# --------------------------------------------------------------------------------------
# Resize as the ONNX text defines it, in exact arithmetic
# --------------------------------------------------------------------------------------

def _exact(v) -> Fraction:
    """The exact value of a stored number (a float32 scale 1.7 is 1.70000004768...)."""
    return Fraction(float(v))


@dataclasses.dataclass
class ResizeAxis:
    """One resized axis: lengths, the scale and the text's `output_width`, exactly."""
    length: int                 # length_original
    out: int                    # length_resized (output_width_int)
    scale: Fraction
    width: Fraction             # output_width: fractional when it comes out of a scale
    roi: tuple                  # (start_x, end_x)


def resize_axes(x_shape, roi, scales, sizes, axes=None, policy="stretch", coord="half_pixel"):
    """Per axis of x: a ResizeAxis, or None where the axis is left as it is. Lengths as
    onnxruntime, onnx.reference and edgert compute them: by scales floor(length * scale)
    (the operator summary's floor(length * (roi_end - roi_start) * scale) is implemented by
    none of them); by sizes the sizes, or with keep_aspect_ratio_policy 'scale = Min|Max(sizes[i]
    / in_size[d])', 'out_size[d] = round_int(scale * in_size[d])' (halfway cases up)."""
    r = len(x_shape)
    axes = [int(a) % r for a in axes] if axes is not None else list(range(r))
    plan: list = [None] * r
    have_sizes = sizes is not None and np.size(sizes) > 0
    if have_sizes and any(x_shape[a] == 0 for a in axes):
        raise ValueError("resize: sizes for an empty axis")
    if have_sizes and policy not in (None, "stretch"):
        ratios = [Fraction(int(sizes[j]), x_shape[a]) for j, a in enumerate(axes)]
        common = min(ratios) if policy == "not_larger" else max(ratios)
        lens = [(math.floor(common * x_shape[a] + Fraction(1, 2)), common) for a in axes]
    elif have_sizes:
        lens = [(int(sizes[j]), Fraction(int(sizes[j]), x_shape[a])) for j, a in enumerate(axes)]
    else:
        lens = [(math.floor(x_shape[a] * _exact(scales[j])), _exact(scales[j])) for j, a in enumerate(axes)]
    use_roi = coord == "tf_crop_and_resize" and roi is not None and np.size(roi) > 0
    for j, a in enumerate(axes):
        n, s = lens[j]
        box = (_exact(roi[j]), _exact(roi[len(axes) + j])) if use_roi else (Fraction(0), Fraction(1))
        if n == x_shape[a] and s == 1 and box == (0, 1):
            continue  # the identity
        if s <= 0:
            raise ValueError("resize: a scale must be positive")
        plan[a] = ResizeAxis(x_shape[a], n, s, x_shape[a] * s if not have_sizes or policy not in (None, "stretch")
                             else Fraction(n), box)
    return plan


def x_original(coord: str, y: int, ax: ResizeAxis) -> Fraction | None:
    """The text's coordinate_transformation_mode formula for output index y, exactly;
    None where tf_crop_and_resize reads outside [0, length_original - 1]."""
    L, n, s = ax.length, ax.out, ax.scale
    half = Fraction(1, 2)
    if coord == "half_pixel":
        return (y + half) / s - half
    if coord == "half_pixel_symmetric":
        adjustment = n / ax.width
        return Fraction(L, 2) * (1 - adjustment) + (y + half) / s - half
    if coord == "pytorch_half_pixel":
        return (y + half) / s - half if n > 1 else Fraction(0)
    if coord == "align_corners":
        return Fraction(y * (L - 1), n - 1) if n > 1 else Fraction(0)
    if coord == "asymmetric":
        return y / s
    if coord == "tf_crop_and_resize":
        start, end = ax.roi
        x = start * (L - 1) + Fraction(y * (L - 1), n - 1) * (end - start) if n > 1 else half * (start + end) * (L - 1)
        return x if 0 <= x <= L - 1 else None
    raise ValueError(f"resize: coordinate_transformation_mode {coord!r}")


def _nearest(x: Fraction, mode: str) -> int:
    fl = math.floor(x)
    frac = x - fl
    if mode == "floor" or frac == 0:
        return fl
    if mode == "ceil":
        return fl + 1
    if frac == Fraction(1, 2):
        return fl + 1 if mode == "round_prefer_ceil" else fl
    return fl + 1 if frac > Fraction(1, 2) else fl


def _kernel(mode: str, a: float, t: float) -> float:
    """The interpolation filter at distance t: the triangle, or the cubic convolution kernel
    with coefficient a (Keys' equation (4))."""
    t = abs(t)
    if mode == "linear":
        return max(0.0, 1.0 - t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def resize_taps(ax: ResizeAxis, coord: str, mode: str, nearest_mode="round_prefer_floor", cubic_a=-0.75,
                antialias=0, exclude_outside=0):
    """(indices [out, T], weights [out, T], extrapolated [out]) of one axis. Nearest: one
    tap. Linear and cubic: the filter's taps around x_original (the filter stretched by
    1/scale when antialias is set and the axis shrinks, then normalized); with
    exclude_outside the taps outside the input get weight 0 and the rest are renormalized,
    otherwise they read the edge element."""
    support = 1 if mode == "linear" else 2
    stretch = min(ax.scale, 1) if antialias and mode != "nearest" else Fraction(1)
    first = math.floor(-support / stretch) + 1      # taps base+first .. base+1-first
    n_taps = 1 if mode == "nearest" else 2 - 2 * first
    idx = np.zeros((ax.out, n_taps), np.int64)
    w = np.zeros((ax.out, n_taps))
    extra = np.zeros(ax.out, bool)
    for y in range(ax.out):
        x = x_original(coord, y, ax)
        if x is None:
            extra[y] = True
            continue
        if mode == "nearest":
            idx[y, 0], w[y, 0] = _nearest(x, nearest_mode), 1.0
            continue
        base = math.ceil(x) - 1                       # x - base in (0, 1]
        taps = [base + i for i in range(first, 2 - first)]
        ws = [_kernel(mode, cubic_a, float(stretch * (t - x))) for t in taps]
        if antialias:
            total = sum(ws)
            ws = [v / total for v in ws]
        if exclude_outside:
            ws = [v if 0 <= t < ax.length else 0.0 for t, v in zip(taps, ws)]
            total = sum(ws)
            ws = [v / total for v in ws] if total else ws
        idx[y], w[y] = taps, ws
    return np.clip(idx, 0, ax.length - 1), w, extra


def _spec_resize_ops():
    """Resize written from the ONNX text, for the float64 reference where onnx.reference
    departs from it (REFERENCE_QUIRKS entries with spec_ops)."""
    from onnx.reference.op_run import OpRun

    class Resize(OpRun):
        op_domain = ""

        def _run(self, x, roi=None, scales=None, sizes=None, antialias=None, axes=None,
                 coordinate_transformation_mode=None, cubic_coeff_a=None, exclude_outside=None,
                 extrapolation_value=None, keep_aspect_ratio_policy=None, mode=None, nearest_mode=None):
            coord = _bstr(coordinate_transformation_mode or "half_pixel")
            mode = _bstr(mode or "nearest")
            plan = resize_axes(x.shape, roi, scales, sizes, axes, _bstr(keep_aspect_ratio_policy or "stretch"),
                               coord)
            y = x
            for d, ax in enumerate(plan):
                if ax is None:
                    continue
                idx, w, extra = resize_taps(ax, coord, mode, _bstr(nearest_mode or "round_prefer_floor"),
                                            -0.75 if cubic_coeff_a is None else float(cubic_coeff_a),
                                            antialias or 0, exclude_outside or 0)
                g = np.take(y, idx, axis=d)  # [.., out, T, ..]
                if mode == "nearest":
                    y = np.take(g, 0, axis=d + 1)
                else:
                    shape = [1] * g.ndim
                    shape[d], shape[d + 1] = w.shape
                    y = (g * w.reshape(shape)).sum(axis=d + 1).astype(x.dtype)
                if extra.any():
                    shape = [1] * y.ndim
                    shape[d] = ax.out
                    fill = np.asarray(0.0 if extrapolation_value is None else extrapolation_value, y.dtype)
                    y = np.where(extra.reshape(shape), fill, y)
            return (np.ascontiguousarray(y),)

    return [Resize]


# --------------------------------------------------------------------------------------
# Known deviations
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class Deviation:
    name: str
    op: str
    condition: str                      # the attribute condition, in words
    match: Callable[[Any, dict], bool]  # (node, {tensor: shape}) -> bool
    spec: str                           # the ONNX spec text relied on
    edgert: str
    onnxruntime: str
    situations: tuple                   # the disagreements it explains (see the module docstring's kinds)
    check: Callable | None = None       # (edgert outputs, onnxruntime outputs) -> bool: the values fit the entry


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _bstr(v):
    return v.decode() if isinstance(v, bytes) else v


POOLS = ("MaxPool", "AveragePool", "LpPool")


def _pool_geometry(node, shapes):
    """(input spatial shape, kernel, strides, dilations, auto_pad, ceil_mode) of a pooling node."""
    x = shapes.get(node.input[0])
    k = list(_attr(node, "kernel_shape") or [])
    if x is None or not k:
        return None
    nd = len(k)
    return (list(x[2:]), k, list(_attr(node, "strides") or [1] * nd), list(_attr(node, "dilations") or [1] * nd),
            _bstr(_attr(node, "auto_pad", b"NOTSET")), _attr(node, "ceil_mode", 0))


def _same_dilated_pool(node, shapes) -> bool:
    return (node.op_type in POOLS and _bstr(_attr(node, "auto_pad", b"NOTSET")) in ("SAME_UPPER", "SAME_LOWER")
            and any(d > 1 for d in (_attr(node, "dilations") or [])))


def _same_pool_negative_total(node, shapes) -> bool:
    g = _pool_geometry(node, shapes) if node.op_type in POOLS + ("Conv",) else None
    if g is None and node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in shapes:
        x = shapes.get(node.input[0])
        nd = len(shapes[node.input[1]]) - 2
        g = None if x is None else (list(x[2:]), list(shapes[node.input[1]][2:]),
                                    list(_attr(node, "strides") or [1] * nd), list(_attr(node, "dilations") or [1] * nd),
                                    _bstr(_attr(node, "auto_pad", b"NOTSET")), 0)
    if g is None or g[4] not in ("SAME_UPPER", "SAME_LOWER"):
        return False
    sp, k, st, dl = g[:4]
    return any((-(-sp[i] // st[i]) - 1) * st[i] + (k[i] - 1) * dl[i] + 1 - sp[i] < 0 for i in range(len(k)))


def _pool_empty_window(node, shapes) -> bool:
    """Some window has every tap in the padding (the spec's max or mean of no element)."""
    g = _pool_geometry(node, shapes) if node.op_type in POOLS else None
    if g is None:
        return False
    sp, k, st, dl, ap, ceil = g
    nd = len(k)
    pads = list(_attr(node, "pads") or [0] * 2 * nd)
    for i in range(nd):
        keff = (k[i] - 1) * dl[i] + 1
        if ap in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-sp[i] // st[i])
            tot = max(0, (out - 1) * st[i] + keff - sp[i])
            b = tot // 2 if ap == "SAME_UPPER" else tot - tot // 2
        elif ap == "VALID":
            continue
        else:
            b = pads[i]
            n = sp[i] + pads[i] + pads[i + nd] - keff
            out = (-(-n // st[i]) if ceil else n // st[i]) + 1
        for o in range(max(out, 0)):
            if not any(0 <= o * st[i] - b + j * dl[i] < sp[i] for j in range(k[i])):
                return True
    return False


def _same_conv_transpose_grows(node, shapes) -> bool:
    """ConvTranspose SAME_* whose in * stride output is longer than the full transposed
    convolution (a negative total padding)."""
    if node.op_type != "ConvTranspose" or _attr(node, "output_shape") is not None:
        return False
    if _bstr(_attr(node, "auto_pad", b"NOTSET")) not in ("SAME_UPPER", "SAME_LOWER"):
        return False
    x = shapes.get(node.input[0])
    k = _attr(node, "kernel_shape") or (list(shapes[node.input[1]][2:]) if node.input[1] in shapes else None)
    if x is None or not k:
        return True
    nd = len(k)
    st = _attr(node, "strides") or [1] * nd
    dl = _attr(node, "dilations") or [1] * nd
    op = _attr(node, "output_padding") or [0] * nd
    return any(st[i] * (x[2 + i] - 1) + op[i] + (k[i] - 1) * dl[i] + 1 < x[2 + i] * st[i] for i in range(nd))


def _valid_ceil_pool(node, shapes) -> bool:
    return (node.op_type in POOLS and _bstr(_attr(node, "auto_pad", b"NOTSET")) == "VALID"
            and _attr(node, "ceil_mode", 0) == 1)


def _pool_window_longer_than_input(node, shapes) -> bool:
    """An axis whose dilated window is longer than the padded input: the spec's floor gives
    no window there."""
    g = _pool_geometry(node, shapes) if node.op_type in POOLS else None
    if g is None or g[4] in ("SAME_UPPER", "SAME_LOWER"):
        return False
    sp, k, st, dl, ap, ceil = g
    nd = len(k)
    pads = [0] * 2 * nd if ap == "VALID" else list(_attr(node, "pads") or [0] * 2 * nd)
    return any(sp[i] + pads[i] + pads[i + nd] - ((k[i] - 1) * dl[i] + 1) < 0 for i in range(nd))


_MISSING = object()


def _resize_plan(node, shapes, inits):
    """(coordinate_transformation_mode, resize_axes(...)) of a Resize whose roi, scales and
    sizes are initializers and whose input shape is known; None otherwise."""
    x = shapes.get(node.input[0])
    if node.op_type != "Resize" or x is None:
        return None
    coord = _bstr(_attr(node, "coordinate_transformation_mode", b"half_pixel"))

    def const(i):
        if len(node.input) <= i or not node.input[i]:
            return None
        return inits.get(node.input[i], _MISSING)

    roi, scales, sizes = const(1) if coord == "tf_crop_and_resize" else None, const(2), const(3)
    if any(v is _MISSING for v in (roi, scales, sizes)) or (scales is None and sizes is None):
        return None
    try:
        return coord, resize_axes(tuple(x), roi, scales, sizes, _attr(node, "axes"),
                                  _bstr(_attr(node, "keep_aspect_ratio_policy", b"stretch")), coord)
    except (ValueError, ZeroDivisionError, IndexError):
        return None


def _resize_coords(node, shapes, inits):
    """Per resized axis: x_original of every output index (the text's formula, exact, as
    float64; tf_crop_and_resize's extrapolated indices left out), or None when unknown."""
    got = _resize_plan(node, shapes, inits)
    if got is None:
        return None
    coord, plan = got
    return [np.array([float(x) for y in range(ax.out) if (x := x_original(coord, y, ax)) is not None])
            for ax in plan if ax is not None]


def _resize_nearest_tie(node, shapes, inits=None) -> bool:
    """Resize nearest where some x_original lies within 1e-4 of a rounding boundary, so float32
    rounding of the coordinate decides the pixel."""
    if node.op_type != "Resize" or _bstr(_attr(node, "mode", b"nearest")) != "nearest":
        return False
    coords = _resize_coords(node, shapes, inits or {})
    if coords is None:
        return True
    nm = _bstr(_attr(node, "nearest_mode", b"round_prefer_floor"))
    for xo in coords:
        frac = xo - np.floor(xo)
        near = np.abs(frac - 0.5) if nm.startswith("round") else np.minimum(frac, 1 - frac)
        if np.any(near < 1e-4):
            return True
    return False


def _resize_whole_number_coordinate(node, shapes, inits) -> bool:
    """A Resize with an x_original that is a whole number in exact arithmetic (the value where
    a float64 evaluation an ulp above it makes onnx.reference read the pixel before)."""
    if node.op_type != "Resize":
        return False
    got = _resize_plan(node, shapes, inits)
    if got is None:
        return True
    coord, plan = got
    for ax in plan:
        if ax is not None and any((x := x_original(coord, y, ax)) is not None and x.denominator == 1
                                  and (x > 0 or _attr(node, "exclude_outside", 0)) for y in range(ax.out)):
            return True
    return False


def _only_ort_nan(e_out, ort_out) -> bool:
    """Every disagreement is a NaN of onnxruntime where edgert has a finite value."""
    if ort_out is None:
        return False
    for e, o in zip(e_out, ort_out):
        if e.shape != o.shape:
            return False
        with np.errstate(all="ignore"):
            off = ~np.isclose(e, o, rtol=1e-3, atol=1e-4, equal_nan=True)
        if np.any(off & ~(np.isnan(o) & np.isfinite(e))):
            return False
    return True


def _resize_lengths(node, shapes, inits):
    """(input shape, output lengths as the implementations compute them, scales) or None."""
    x = shapes.get(node.input[0])
    if x is None or _attr(node, "axes") is not None:
        return None
    r = len(x)
    if len(node.input) > 3 and node.input[3] and node.input[3] in inits:
        out = [int(v) for v in inits[node.input[3]]]
        return x, out, [out[i] / x[i] for i in range(r)]
    if len(node.input) > 2 and node.input[2] in inits:
        sc = inits[node.input[2]].astype(np.float32).astype(np.float64)
        return x, [int(np.floor(x[i] * sc[i])) for i in range(r)], list(sc)
    return None


def _resize_kept_length_axis(node, shapes) -> bool:
    """Resize with an axis whose output length equals its input length although its mapping
    is not the identity (a scale other than 1, or a tf_crop_and_resize roi other than [0, 1])."""
    coord = _bstr(_attr(node, "coordinate_transformation_mode", b"half_pixel"))
    if node.op_type != "Resize" or coord == "align_corners":
        return False
    got = _resize_lengths(node, shapes, _CURRENT_INITS)
    if got is None:
        return True
    x, out, sc = got
    r = len(x)
    roi = _CURRENT_INITS.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
    for i in range(r):
        if out[i] != x[i] or x[i] < 2:
            continue
        if coord == "tf_crop_and_resize":
            if roi is None or roi[i] != 0 or roi[r + i] != 1:
                return True
        elif abs(sc[i] - 1) > 1e-6:
            return True
    return False


def _half_pixel_symmetric_fractional(node, shapes) -> bool:
    if node.op_type != "Resize" or _bstr(_attr(node, "coordinate_transformation_mode", b"")) != "half_pixel_symmetric":
        return False
    if _bstr(_attr(node, "mode", b"nearest")) != "cubic":
        return False
    got = _resize_lengths(node, shapes, _CURRENT_INITS)
    if got is None:
        return True
    x, out, sc = got
    return any(abs(x[i] * sc[i] - out[i]) > 1e-6 for i in range(len(x)))


def _only_edgert_nan(e_out, ort_out) -> bool:
    """Every disagreement is a NaN of edgert where onnxruntime has a number."""
    if ort_out is None:
        return False
    return _only_ort_nan(ort_out, e_out)


def _mvn_zero_or_ort_nan(e_out, ort_out) -> bool:
    """Every disagreement is an element where edgert gives 0 (a zero-variance slice's
    answer, or a value a later op left at 0) or onnxruntime gives NaN."""
    if ort_out is None:
        return False
    for e, o in zip(e_out, ort_out):
        if e.shape != o.shape:
            return False
        with np.errstate(all="ignore"):
            off = ~np.isclose(e, o, rtol=1e-3, atol=1e-4, equal_nan=True)
        if np.any(off & ~((e == 0) | np.isnan(o))):
            return False
    return True


def _resize_interpolating_identity_axis(node, shapes) -> bool:
    """Resize linear or cubic with an axis longer than 1 that it leaves as it is."""
    if node.op_type != "Resize" or _bstr(_attr(node, "mode", b"nearest")) == "nearest":
        return False
    got = _resize_plan(node, shapes, _CURRENT_INITS)
    x = shapes.get(node.input[0])
    if got is None or x is None:
        return True
    return any(ax is None and x[d] > 1 for d, ax in enumerate(got[1]))


ANY = ("ort_off", "edgert_off", "all_differ", "no_reference")
_CURRENT_INITS: dict = {}  # the case's initializers while DEVIATIONS are matched

# Only entries checked against the spec text with a float64 implementation of that text
# (pooling and transposed convolution, written for this table) and against onnx.reference:
# where edgert is wrong, that is a bug, not an entry here. `situations`: the disagreements
# an entry explains ("edgert_off" too where onnxruntime and onnx.reference share a departure
# from the spec).
DEVIATIONS: list[Deviation] = [
    Deviation(
        name="resize_nearest_tie",
        op="Resize", condition="mode=nearest where an x_original lies within 1e-4 of the nearest_mode's "
                               "rounding boundary (a float32-rounding tie, not a semantic difference)",
        match=lambda n, sh: _resize_nearest_tie(n, sh, _CURRENT_INITS),
        spec="the coordinate formulas of coordinate_transformation_mode, then nearest_mode, evaluated with the "
             "scales tensor's value (e.g. 1.7 stored as 1.70000005)",
        edgert="computes the source indices in float64 at conversion: the exact-arithmetic pixel",
        onnxruntime="computes the coordinate in float32 at run time, so a coordinate a few ulps below x.5 can "
                    "round up (onnx.reference: float64, like edgert)",
        situations=ANY),
    Deviation(
        name="pool_window_longer_than_input",
        op="MaxPool/AveragePool/LpPool", condition="explicit pads or VALID, a window longer than the padded input",
        match=_pool_window_longer_than_input,
        spec="'output_spatial_shape[i] = floor((input_spatial_shape[i] + pad_shape[i] - dilation[i] * "
             "(kernel_shape[i] - 1) - 1) / strides_spatial_shape[i] + 1)': negative numerator, floor gives 0 "
             "(or fewer) windows",
        edgert="an empty axis (0 windows), as the formula and onnx.reference; a negative length is refused at "
               "conversion",
        onnxruntime="divides with truncation toward zero, so it returns one window",
        situations=("ort_off", "no_reference")),
    Deviation(
        name="pool_same_dilated",
        op="MaxPool/AveragePool/LpPool", condition="auto_pad=SAME_UPPER|SAME_LOWER and any dilation > 1",
        match=_same_dilated_pool,
        spec=("'SAME_UPPER or SAME_LOWER: output_spatial_shape[i] = ceil(input_spatial_shape[i] / "
              "strides_spatial_shape[i])' and 'pad_shape[i] = (output_spatial_shape[i] - 1) * "
              "strides_spatial_shape[i] + ((kernel_spatial_shape[i] - 1) * dilations[i] + 1) - "
              "input_spatial_shape[i]'; 'the extra padding is added at the end for SAME_UPPER and at the "
              "beginning for SAME_LOWER'"),
        edgert="as the spec: output ceil(in / stride), total padding from the dilated kernel extent",
        onnxruntime="computes the SAME padding from the undilated kernel, so both the output length and the "
                    "windows differ (onnx.reference keeps ceil(in / stride) but also pads for the undilated "
                    "kernel, so its windows are shifted: same shape as edgert, other values)",
        situations=ANY),
    Deviation(
        name="conv_same_dilated",
        op="Conv", condition="auto_pad=SAME_UPPER|SAME_LOWER and any dilation > 1",
        match=lambda n, sh: (n.op_type == "Conv" and any(d > 1 for d in (_attr(n, "dilations") or []))
                             and _bstr(_attr(n, "auto_pad", b"NOTSET")) in ("SAME_UPPER", "SAME_LOWER")),
        spec="Conv auto_pad: 'SAME_UPPER or SAME_LOWER mean pad the input so that `output_shape[i] = "
             "ceil(input_shape[i] / strides[i])`', the padding for the dilated kernel extent",
        edgert="as the spec (checked against a float64 implementation of the text on 80 random cases)",
        onnxruntime="refuses at run time: 'Dilation not supported for AutoPadType::SAME_UPPER or "
                    "AutoPadType::SAME_LOWER' (inside a larger graph its shape inference can still give "
                    "the undilated shape downstream)",
        situations=ANY),
    Deviation(
        name="mvn_constant_slice",
        op="MeanVarianceNormalization", condition="a slice over `axes` whose values are all equal (a size-1 "
                                                  "axis, or a constant slice)",
        match=lambda n, sh: n.op_type == "MeanVarianceNormalization",
        spec="the function body: Y = (X - ReduceMean(X)) / (Sqrt(ReduceMean(X^2) - ReduceMean(X)^2) + 1e-9): "
             "a zero variance gives 0 / 1e-9 = 0",
        edgert="0 there (a non-negative variance), as the reference (run with the formula in float64)",
        onnxruntime="NaN (E[X^2] - E[X]^2 rounds below 0 and Sqrt gives NaN), which later ops turn into "
                    "other values",
        situations=("ort_off",)),
    Deviation(
        name="mvn_constant_slice_no_reference",
        op="MeanVarianceNormalization", condition="as mvn_constant_slice, in a graph the reference refuses: "
                                                  "every disagreement is a NaN of onnxruntime, or an element where "
                                                  "edgert gives 0 (onnxruntime's rounding gives about +-1 there, or "
                                                  "a NaN that a later MaxPool turns into -3.4e38)",
        match=lambda n, sh: n.op_type == "MeanVarianceNormalization",
        spec="as mvn_constant_slice", edgert="as mvn_constant_slice", onnxruntime="as mvn_constant_slice",
        situations=("no_reference",), check=_mvn_zero_or_ort_nan),
    Deviation(
        name="resize_kept_length_axis",
        op="Resize", condition="an axis whose output length equals its input length although its mapping is not "
                              "the identity: scale != 1 (e.g. 3 * 1.2 -> 3), or tf_crop_and_resize with a roi "
                              "other than [0, 1] on it",
        match=_resize_kept_length_axis,
        spec="the coordinate formulas use the given scale (asymmetric: 'x_original = x_resized / scale'; half_pixel: "
             "'(x_resized + 0.5) / scale - 0.5'; ...) and tf_crop_and_resize's roi on every axis",
        edgert="as the spec (checked: linear 3 -> 3 at scale 1.2 in asymmetric, half_pixel, pytorch_half_pixel, "
               "half_pixel_symmetric; tf_crop_and_resize roi 0.1..0.9 on a 6 -> 6 axis); onnx.reference agrees",
        onnxruntime="copies such an axis unchanged",
        situations=("ort_off", "no_reference")),
    Deviation(
        name="resize_identity_axis_nan",
        op="Resize", condition="mode=linear|cubic, an axis it leaves as it is (scale 1, same length), a NaN or an "
                              "infinity in the input: every disagreement is a NaN of onnxruntime where edgert is "
                              "finite",
        match=_resize_interpolating_identity_axis,
        spec="at scale 1 every coordinate_transformation_mode gives x_original = x_resized (half_pixel: '(x_resized "
             "+ 0.5) / 1 - 0.5'; align_corners: 'x_resized * (length_original - 1) / (length_resized - 1)'), a "
             "whole number: the output element is the input element itself",
        edgert="copies such an axis (no interpolation on it), as onnx.reference",
        onnxruntime="interpolates it with weights 1 and 0, so a NaN or an infinity in the neighbouring element "
                    "gives 0 * NaN = NaN",
        situations=("ort_off", "no_reference"), check=_only_ort_nan),
    Deviation(
        name="resize_half_pixel_symmetric_fractional",
        op="Resize", condition="mode=cubic, coordinate_transformation_mode=half_pixel_symmetric, by scales, "
                              "input length * scale not an integer",
        match=_half_pixel_symmetric_fractional,
        spec="'adjustment = output_width_int / output_width; center = input_width / 2; offset = center * "
             "(1 - adjustment); x_ori = offset + (x + 0.5) / scale - 0.5', output_width 'can be a fractional number "
             "when it is calculated out of a scale factor'",
        edgert="as the spec, with the fractional output_width; onnx.reference agrees",
        onnxruntime="differs in cubic mode on such axes (its adjustment is not the spec's there)",
        situations=("ort_off",)),
    Deviation(
        name="nan_propagation",
        op="ReduceMax/ReduceMin/ReduceMean/MaxPool/Max/Min...", condition="a NaN inside the graph (Pow of a negative "
                                                                        "base, 0/0, ...) that onnxruntime drops",
        match=lambda n, sh: True,
        spec="the spec's ops are defined elementwise on IEEE floats (numpy semantics): a NaN operand gives a NaN "
             "result; no op says NaN is skipped",
        edgert="propagates the NaN, as onnx.reference does",
        onnxruntime="its max/min reductions and pools skip NaN (std::max keeps the other operand), so a NaN "
                    "disappears",
        situations=("ort_off", "no_reference"), check=_only_edgert_nan),
    Deviation(
        name="pool_valid_ceil",
        op="MaxPool/AveragePool/LpPool", condition="auto_pad=VALID and ceil_mode=1",
        match=_valid_ceil_pool,
        spec=("'VALID: output_spatial_shape[i] = ceil((input_spatial_shape[i] - ((kernel_spatial_shape[i] - 1) "
              "* dilations[i] + 1) + 1) / strides_spatial_shape[i])' (with ceil_mode enabled), which equals "
              "the floor formula: every window lies inside the input"),
        edgert="as the spec: no window reaches past the input",
        onnxruntime="applies ceil to the explicit-padding formula with zero pads, adding a last window that "
                    "hangs past the input (onnx.reference refuses ceil_mode with auto_pad)",
        situations=ANY),
    Deviation(
        name="pool_same_negative_total_pad",
        op="MaxPool/AveragePool/LpPool/Conv", condition="auto_pad=SAME_* where the spec's pad_shape is "
                                                        "negative (stride larger than the kernel extent)",
        match=_same_pool_negative_total,
        spec=("'pad_shape[i] = (output_spatial_shape[i] - 1) * strides_spatial_shape[i] + "
              "((kernel_spatial_shape[i] - 1) * dilations[i] + 1) - input_spatial_shape[i]' can be negative; "
              "the text does not say how a negative pad_shape is split"),
        edgert="takes max(0, pad_shape): windows start at 0 (TensorFlow's SAME, which the spec cites)",
        onnxruntime="splits the negative total like a positive one, so windows start inside the input "
                    "(onnx.reference fails: 'index can't contain negative values')",
        situations=ANY),
    Deviation(
        name="pool_empty_window",
        op="MaxPool/AveragePool/LpPool", condition="a window whose every tap falls in the padding",
        match=_pool_empty_window,
        spec="'The output of each pooling window is maximum number of elements exclude pad': for a window "
             "with no element the text defines no value",
        edgert="MaxPool -inf, AveragePool (count_include_pad=0) 0, LpPool 0",
        onnxruntime="varies with the padding path (onnx.reference gives 0)",
        situations=ANY),
    Deviation(
        name="conv_transpose_same_longer_than_full",
        op="ConvTranspose", condition="auto_pad=SAME_*, no output_shape, in * stride longer than the full "
                                      "output stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1",
        match=_same_conv_transpose_grows,
        spec=("auto_pad: 'SAME_UPPER or SAME_LOWER mean pad the input so that `output_shape[i] = input_shape[i] "
              "* strides[i]`'; 'total_padding[i] = stride[i] * (input_size[i] - 1) + output_padding[i] + "
              "((kernel_shape[i] - 1) * dilations[i] + 1) - output_shape[i]' (negative here)"),
        edgert="output in * stride; the negative padding extends the output with zeros (plus bias), as "
               "onnx.reference does",
        onnxruntime="clamps the padding at 0: output stride * (in - 1) + ... + 1, shorter than in * stride",
        situations=("ort_off", "no_reference")),
]


@dataclasses.dataclass
class ReferenceQuirk:
    """A condition under which onnx.reference itself departs from the spec text: the
    reference is then not used as an oracle for the case (onnxruntime decides)."""
    name: str
    op: str
    condition: str
    match: Callable[[Any, dict, dict], bool]  # (node, {tensor: shape}, {initializer: array}) -> bool
    spec: str
    reference: str
    edgert: str = ""
    # The op written from the spec text (a function giving OpRun classes): when set, the
    # reference is run again with it in place of onnx.reference's op and stays an oracle;
    # otherwise the outputs that depend on the node have no reference.
    spec_ops: Callable | None = None


def _resize_fractional_length(node, shapes, inits) -> bool:
    if node.op_type != "Resize":
        return False
    coord = _bstr(_attr(node, "coordinate_transformation_mode", b"half_pixel"))
    if coord not in ("align_corners", "tf_crop_and_resize"):
        return False
    policy = _bstr(_attr(node, "keep_aspect_ratio_policy", b"stretch"))
    if len(node.input) > 3 and node.input[3]:
        if policy == "stretch":
            return False  # by sizes: the lengths are integers
        x, sizes = shapes.get(node.input[0]), inits.get(node.input[3])
        axes = _attr(node, "axes") or list(range(len(x) if x is not None else 0))
        if x is None or sizes is None:
            return True
        ratios = [float(sizes[j]) / x[a] for j, a in enumerate(axes)]
        sc = min(ratios) if policy == "not_larger" else max(ratios)
        return any(x[a] * sc != round(x[a] * sc) for a in axes)
    if len(node.input) < 3 or not node.input[2]:
        return False
    x, scales = shapes.get(node.input[0]), inits.get(node.input[2])
    if x is None or scales is None or scales.size != len(x):
        return True
    widths = np.asarray(x, np.float64) * scales.astype(np.float32).astype(np.float64)
    # exactly: 3 * 0.33333334 = 1.0000000298 fails the reference's `output_width == 1` too
    return bool(np.any(widths != np.round(widths)))


def _global_pool_not_4d(node, shapes, inits) -> bool:
    return node.op_type == "GlobalMaxPool" and len(shapes.get(node.input[0], (0, 0, 0, 0))) != 4


def _pool_reference_shape_off(node, shapes, inits) -> bool:
    """A pooling node whose reference output shape is not the spec's: more windows than the
    ceil formula with explicit pads, or other than ceil(in / stride) with SAME_*."""
    if node.op_type not in ("MaxPool", "AveragePool", "LpPool"):
        return False
    x, y = shapes.get(node.input[0]), shapes.get(node.output[0])
    k = list(_attr(node, "kernel_shape") or [])
    if x is None or y is None or not k or len(y) != len(x):
        return False
    nd = len(k)
    st = list(_attr(node, "strides") or [1] * nd)
    dl = list(_attr(node, "dilations") or [1] * nd)
    ap = _bstr(_attr(node, "auto_pad", b"NOTSET"))
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        return any(y[2 + i] != -(-x[2 + i] // st[i]) for i in range(nd))
    if ap == "VALID":
        return any(y[2 + i] != max(0, (x[2 + i] - ((k[i] - 1) * dl[i] + 1)) // st[i] + 1) for i in range(nd))
    p = list(_attr(node, "pads") or [0] * 2 * nd)
    ceil = _attr(node, "ceil_mode", 0)
    for i in range(nd):
        n = x[2 + i] + p[i] + p[i + nd] - ((k[i] - 1) * dl[i] + 1)
        want = (-(-n // st[i]) if ceil else n // st[i]) + 1
        if ceil and want > 0 and (want - 1) * st[i] >= x[2 + i] + p[i]:
            want -= 1  # a last window that would start in the end padding is dropped (all implementations)
        if y[2 + i] != max(want, 0):
            return True
    return False


def _max_pool_same_lower_odd(node, shapes, inits) -> bool:
    if node.op_type != "MaxPool" or _bstr(_attr(node, "auto_pad", b"NOTSET")) != "SAME_LOWER":
        return False
    g = _pool_geometry(node, shapes)
    if g is None:
        return True
    sp, k, st, dl = g[:4]
    return any(((-(-sp[i] // st[i]) - 1) * st[i] + (k[i] - 1) * dl[i] + 1 - sp[i]) % 2 == 1 for i in range(len(k)))


def _pool_ceil_overhang(node, shapes, inits) -> bool:
    """AveragePool/LpPool in ceil mode with explicit pads whose last window reaches past the
    end padding."""
    if node.op_type not in ("AveragePool", "LpPool") or not _attr(node, "ceil_mode", 0):
        return False
    g = _pool_geometry(node, shapes)
    if g is None:
        return True
    sp, k, st, dl, ap, _ = g
    if ap != "NOTSET":
        return False
    nd = len(k)
    pads = list(_attr(node, "pads") or [0] * 2 * nd)
    for i in range(nd):
        keff = (k[i] - 1) * dl[i] + 1
        out = -(-(sp[i] + pads[i] + pads[i + nd] - keff) // st[i]) + 1
        if out > 0 and (out - 1) * st[i] >= sp[i] + pads[i]:
            out -= 1  # a last window that would start in the end padding is dropped
        if out > 0 and (out - 1) * st[i] + keff > sp[i] + pads[i] + pads[i + nd]:
            return True
    return False


def _pytorch_half_pixel_to_one(node, shapes, inits) -> bool:
    if node.op_type != "Resize" or _bstr(_attr(node, "coordinate_transformation_mode", b"")) != "pytorch_half_pixel":
        return False
    y = shapes.get(node.output[0])
    return y is None or 1 in tuple(y)[2:] or 1 in tuple(y)[:2]


REFERENCE_QUIRKS: list[ReferenceQuirk] = [
    ReferenceQuirk(
        name="conv_transpose_grouped",
        op="ConvTranspose", condition="group > 1",
        match=lambda n, sh, ini: n.op_type == "ConvTranspose" and _attr(n, "group", 1) > 1,
        spec="the grouped transposed convolution: input channels split in `group` groups, W of shape "
             "(C, M / group, k...)",
        reference="fails to reshape W for some shapes ('cannot reshape array of size 32 into shape (1,1,8)') and "
                  "gives wrong values for others (SAME_UPPER, group 2, kernel 1, stride 2: 0.44 off the spec)",
        edgert="the grouped transposed convolution of the text, as onnxruntime"),
    ReferenceQuirk(
        name="resize_pytorch_half_pixel_length_one",
        op="Resize", condition="coordinate_transformation_mode=pytorch_half_pixel with an output length of 1",
        match=_pytorch_half_pixel_to_one,
        spec="'x_original = length_resized > 1 ? (x_resized + 0.5) / scale - 0.5 : 0'",
        reference="uses x_original = -0.5 there in cubic mode (a 1, 2, 4 axis resized to 1 gives 0.906, not 1)",
        edgert="x_original = 0 there, as the text and onnxruntime",
        spec_ops=_spec_resize_ops),
    ReferenceQuirk(
        name="resize_whole_number_coordinate",
        op="Resize", condition="an x_original that is a whole number in exact arithmetic (every mode: e.g. half_pixel "
                               "7 -> 17 at output 8, 8.5 * 7 / 17 - 0.5 = 3; half_pixel_symmetric 9 -> 4 at scale 0.5, "
                               "output 0: 0.5 + 0.5 / 0.5 - 0.5 = 1)",
        match=_resize_whole_number_coordinate,
        spec="the coordinate_transformation_mode formulas ('x_original = (x_resized + 0.5) / scale - 0.5', "
             "half_pixel_symmetric's 'x_ori = offset + (x + 0.5) / scale - 0.5', ...), then the interpolation at "
             "x_original: a whole-number x_original reads that input element (nearest: the element itself; linear "
             "and cubic: its weight is 1, its neighbours' 0)",
        reference="evaluates x_original in float64 and, when the result is an ulp above the whole number, takes the "
                  "neighbour window around x_original + pad (which rounds to the whole number) but the weights of "
                  "x_original - floor(x_original) (about 0): every weight lands one element to the left, so it reads "
                  "the element before (9 -> 4 cubic half_pixel_symmetric: output 0 is x[0], not x[1]; 7 -> 17 "
                  "nearest half_pixel_symmetric: output 8 takes pixel 2 between two outputs that take 3)",
        edgert="snaps a coordinate within 1e-9 of a whole number to it at conversion and reads that element, as "
               "onnxruntime's arithmetic does",
        spec_ops=_spec_resize_ops),
    ReferenceQuirk(
        name="max_pool_same_lower_split",
        op="MaxPool", condition="auto_pad=SAME_LOWER with an odd total padding on some axis",
        match=_max_pool_same_lower_odd,
        spec="auto_pad: 'In case the padding is an odd number, the extra padding is added at the end for SAME_UPPER "
             "and at the beginning for SAME_LOWER'",
        reference="splits the padding as for SAME_UPPER (total // 2 at the beginning, the extra one at the end), so "
                  "every window is shifted one element right (kernel 2x4, strides 1x3 on 7x9: first window rows 0-1, "
                  "not row 0 alone)",
        edgert="the extra padding at the beginning, as the text and onnxruntime"),
    ReferenceQuirk(
        name="lp_normalization_p1",
        op="LpNormalization", condition="p=1",
        match=lambda n, sh, ini: n.op_type == "LpNormalization" and _attr(n, "p", 2) == 1,
        spec="'Given a matrix, apply Lp-normalization along the provided axis': x / sum(|x|) for p=1",
        reference="divides by sum(x), not sum(|x|): signs flip and values blow up where the slice has "
                  "negative entries",
        edgert="x / sum(|x|), as onnxruntime"),
    ReferenceQuirk(
        name="pool_reference_shape",
        op="MaxPool/AveragePool/LpPool", condition="ceil_mode=1 with explicit pads, auto_pad=SAME_* or VALID, "
                                                   "where the reference's output shape is not the spec's",
        match=_pool_reference_shape_off,
        spec="'output_spatial_shape[i] = ceil((input_spatial_shape[i] + pad_shape[i] - dilation[i] * "
             "(kernel_shape[i] - 1) - 1) / strides_spatial_shape[i] + 1)'; SAME: 'ceil(input_spatial_shape[i] / "
             "strides_spatial_shape[i])'",
        reference="MaxPool 5x3, kernel 2, pads 1, ceil_mode=1 gives 8x6 (the spec: 6x4); 1-D SAME_LOWER, "
                  "kernel 4, stride 5 on 9 gives 1 (the spec: 2); LpPool VALID with dilations 2x3, kernel 3x2, "
                  "strides 2x1 on 7x9 gives 3x8 (the spec: 2x6)",
        edgert="the text's output shapes"),
    ReferenceQuirk(
        name="pool_ceil_overhang",
        op="AveragePool/LpPool", condition="ceil_mode=1 with explicit pads, the last window reaching past the end "
                                           "padding",
        match=_pool_ceil_overhang,
        spec="'output_spatial_shape[i] = ceil((input_spatial_shape[i] + pad_shape[i] - dilation[i] * "
             "(kernel_shape[i] - 1) - 1) / strides_spatial_shape[i] + 1)'; every window takes its kernel_shape "
             "taps at the given dilations, and AveragePool divides 'by the number of elements (exclude pad when "
             "attribute count_include_pad is zero)'",
        reference="gives other values, also for windows inside the input: AveragePool kernel 3, dilation 3, stride "
                  "5 on 0..18 in ceil mode averages window 0 to 3.5, not mean(0, 3, 6) = 3",
        edgert="the text's windows; the taps of the last window past the end padding are left out (not counted "
               "as padding), as onnxruntime and PyTorch"),
    ReferenceQuirk(
        name="max_pool_ceil_begin_pads",
        op="MaxPool", condition="ceil_mode=1 with explicit pads, a begin pad > 0",
        match=lambda n, sh, ini: (n.op_type == "MaxPool" and _attr(n, "ceil_mode", 0) == 1 and
                                  _bstr(_attr(n, "auto_pad", b"NOTSET")) == "NOTSET" and
                                  any(p > 0 for p in list(_attr(n, "pads") or [])[:len(_attr(n, "kernel_shape") or [])])),
        spec="pads: 'the number of pixels added to the beginning and end part of the corresponding axis': window i "
             "starts at i * stride - pad_begin",
        reference="leaves out the begin padding in some of these (kernel 3, stride 1, pads [2, 0], ceil_mode=1 on "
                  "17: window 0 is x[0..2], not x[-2..0]), with the output shape right",
        edgert="the text's windows, as onnxruntime"),
    ReferenceQuirk(
        name="resize_fractional_length",
        op="Resize", condition="coordinate_transformation_mode=align_corners|tf_crop_and_resize, by scales, "
                              "input length * scale not an integer",
        match=_resize_fractional_length,
        spec=("'x_original = x_resized * (length_original - 1) / (length_resized - 1)' with "
              "'length_resized as the length of the resized tensor in axis x' (an integer); likewise "
              "tf_crop_and_resize's '(end_x - start_x) * (length_original - 1) / (length_resized - 1)'"),
        reference="uses output_width = scale * input_width, the fractional length, in those formulas "
                  "(up to 0.68 off on a 5-long axis at scale 1.5)",
        edgert="the integer output length, as onnxruntime and PyTorch",
        spec_ops=_spec_resize_ops),
    ReferenceQuirk(
        name="global_max_pool_not_4d",
        op="GlobalMaxPool", condition="input rank != 4",
        match=_global_pool_not_4d,
        spec="'Output data tensor from pooling across the input tensor. The output tensor has the same rank "
             "as the input. The first two dimensions of output shape are the same as the input (N x C), "
             "while the other dimensions are all 1.'",
        reference="reduces axes (rank-2, rank-1) instead of 2..rank-1: [N, C, L] -> [N, 1]",
        edgert="[N, C, 1, ...], as onnxruntime"),
]


# --------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------

PRIMES_AND_ODD = [1, 1, 2, 3, 4, 5, 7, 8, 9, 11, 13, 16]
UNARY_PLAIN = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Erf", "Softsign", "Sin", "Cos", "Atan", "Floor", "Ceil",
               "Round", "Sign", "Identity", "Mish", "HardSwish", "Softplus", "Tan"]


class Skip(Exception):
    """The op generator cannot apply to the chosen tensor."""


class GraphGen:
    def __init__(self, rng: np.random.Generator, max_nodes: int):
        from onnx.reference import ReferenceEvaluator

        self._ref = ReferenceEvaluator
        self.rng = rng
        self.max_nodes = max_nodes
        self.nodes: list = []
        self.inits: dict[str, np.ndarray] = {}
        self.inputs: dict[str, np.ndarray] = {}
        self.vals: dict[str, np.ndarray] = {}
        self.pool: list[str] = []       # float tensors that ops may consume
        self.final: list[str] = []      # outputs whose shape onnxruntime and onnx.reference disagree on
        self.consumed: set[str] = set()
        self.count = 0

    # ---- helpers
    def name(self, p: str) -> str:
        self.count += 1
        return f"{p}{self.count}"

    def const(self, arr, prefix="c") -> str:
        n = self.name(prefix)
        arr = np.asarray(arr)
        self.inits[n] = arr
        self.vals[n] = arr
        return n

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def randn(self, shape, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def add(self, op, inputs, n_out=1, pool=True, **attrs) -> list[str]:
        """Adds a node after evaluating it alone with onnx.reference and onnxruntime. A node
        neither accepts is skipped; one whose output shapes differ between the two (a
        departure of one of them from the spec) stays, but its outputs only become graph
        outputs: nothing is built on a shape the three implementations do not share."""
        outs = [self.name("t") for _ in range(n_out)]
        node = helper.make_node(op, inputs, outs, name=self.name("n"), **attrs)
        ins = [i for i in inputs if i]
        g = helper.make_graph([node], "one", [helper.make_tensor_value_info(i, _dtype(self.vals[i]), None) for i in ins],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        feeds = {i: self.vals[i] for i in ins}
        res = ort_res = None
        try:
            with np.errstate(all="ignore"):
                res = [np.asarray(r) for r in self._ref(m).run(None, feeds)]
        except Exception:
            pass
        try:
            gi = helper.make_graph([node], "one", [helper.make_tensor_value_info(i, _dtype(self.vals[i]),
                                                                                 list(np.shape(self.vals[i])))
                                                   for i in ins],
                                   [helper.make_tensor_value_info(o, _dtype(r), None) for o, r in zip(outs, res)]
                                   if res is not None else
                                   [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
            ort_res = [np.asarray(r) for r in run_ort(helper.make_model(gi, opset_imports=[
                helper.make_opsetid("", OPSET)], ir_version=9), feeds)]
        except Exception:
            pass
        if res is None and ort_res is None:
            raise Skip(f"{op}: refused by both")
        disagree = res is not None and ort_res is not None and any(
            a.shape != b.shape for a, b in zip(res, ort_res))
        if res is None:
            res = ort_res
        for o, r in zip(outs, res):
            if r.size > MAX_ELEMS or r.size == 0 and r.dtype != np.float32:
                raise Skip("too large")
            self.vals[o] = r
        self.nodes.append(node)
        self.consumed.update(inputs)
        for o in outs:
            if self.vals[o].dtype != np.float32:
                continue
            if disagree:
                self.final.append(o)
            elif pool:
                self.pool.append(o)
        if disagree and not pool:
            raise Skip("a helper node whose shape the oracles do not share")
        return outs

    def positive(self, x) -> str:
        """A tensor >= 0.1 derived from x (Abs then Add)."""
        a, = self.add("Abs", [x], pool=False)
        return self.add("Add", [a, self.const(np.float32(self.choice([0.1, 0.5, 1.0])))], pool=False)[0]

    def pick(self) -> str:
        # favour recent tensors (chains), sometimes older ones (branches)
        k = len(self.pool)
        if self.rng.random() < 0.6:
            return self.pool[-1 - int(self.rng.integers(min(k, 2)))]
        return self.pool[int(self.rng.integers(k))]

    def shape(self, x):
        return self.vals[x].shape

    # ---- building
    def build(self):
        rng = self.rng
        n_in = 1 if rng.random() < 0.7 else 2
        for _ in range(n_in):
            r = rng.random()
            if r < 0.65:
                shape = [self.choice([1, 1, 2]), self.choice([1, 2, 3, 4, 5, 6, 8]), self.choice(PRIMES_AND_ODD + [6, 10]),
                         self.choice(PRIMES_AND_ODD + [6, 10, 12])]
            elif r < 0.8:
                shape = [self.choice([1, 2]), self.choice([1, 2, 3, 4, 6]), self.choice(PRIMES_AND_ODD + [17, 19])]
            elif r < 0.95:
                shape = [self.choice([1, 2, 3, 5]), self.choice(PRIMES_AND_ODD + [17, 24])]
            else:
                shape = [self.choice([1, 2]), self.choice([1, 2, 3]), self.choice([2, 3, 5]), self.choice([3, 4, 7])][
                        :int(rng.integers(1, 5))]
            n = self.name("x")
            self.inputs[n] = self.randn(shape)
            self.vals[n] = self.inputs[n]
            self.pool.append(n)
        if rng.random() < 0.12:  # a constant sub-graph: edgert folds it at conversion
            shape = [1, self.choice([1, 2, 3, 4]), self.choice([3, 5, 7, 8]), self.choice([3, 4, 5, 9])]
            n = self.const(self.randn(shape), "k")
            self.pool.append(n)
        target = int(rng.integers(3, self.max_nodes + 1))
        tries = 0
        while len(self.nodes) < target and tries < 200:
            tries += 1
            gen = self.choice(OP_GENERATORS)
            x = self.pick()
            before = (len(self.nodes), len(self.pool), dict(self.vals), set(self.consumed), dict(self.inits),
                      len(self.final))
            try:
                gen(self, x)
            except (Skip, ValueError, IndexError, ZeroDivisionError):
                self.nodes, self.pool = self.nodes[:before[0]], self.pool[:before[1]]
                self.vals, self.consumed, self.inits = before[2], before[3], before[4]
                self.final = self.final[:before[5]]
        if len(self.nodes) < 3:
            raise Skip("too few nodes")
        return self.model()

    def model(self):
        float_outs = [t for t in self.pool if t not in self.consumed and t not in self.inputs and t not in self.inits]
        produced = [o for n in self.nodes for o in n.output if o in self.vals and self.vals[o].dtype == np.float32]
        outs = float_outs[-3:] + [t for t in self.final[-2:] if t not in self.consumed]
        outs = outs or produced[-1:]
        if self.rng.random() < 0.2 and produced:
            extra = self.choice(produced)
            if extra not in outs:
                outs.append(extra)
        return make_model(self.nodes, self.inputs, self.inits, outs), dict(self.inputs)


def _dtype(v) -> int:
    return helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype)


def make_model(nodes, inputs: dict, inits: dict, outputs: list[str], elem=TensorProto.FLOAT):
    used = {i for n in nodes for i in n.input} | set(outputs)
    g = helper.make_graph(
        list(nodes), "fuzz",
        [helper.make_tensor_value_info(k, elem if v.dtype == np.float32 else _dtype(v), list(v.shape))
         for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items() if k in used])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)


# ---- op generators: each takes (G, x) and raises Skip when it does not apply


def g_unary(G: GraphGen, x):
    op = G.choice(UNARY_PLAIN + ["LeakyRelu", "HardSigmoid", "Elu", "Selu", "Celu", "ThresholdedRelu", "Shrink",
                                 "Gelu", "Clip", "Exp", "Log", "Sqrt", "Reciprocal", "Softmax", "LogSoftmax"])
    r = len(G.shape(x))
    rng = G.rng
    if op == "Exp" and np.nanmax(np.abs(G.vals[x]), initial=0) > 40:
        raise Skip("exp overflow")
    if op in ("Log", "Sqrt", "Reciprocal") and (G.vals[x] <= 0).any():
        x = G.positive(x)
    attrs: dict = {}
    inputs = [x]
    if op == "LeakyRelu":
        attrs["alpha"] = float(G.choice([0.01, 0.2, 1.5, -0.3]))
    elif op == "HardSigmoid":
        attrs.update(alpha=float(G.choice([0.2, 1 / 6, 0.5])), beta=float(G.choice([0.5, 0.3])))
    elif op in ("Elu", "Celu", "ThresholdedRelu"):
        attrs["alpha"] = float(G.choice([1.0, 0.5, 2.0]))
    elif op == "Selu" and rng.random() < 0.5:
        attrs.update(alpha=1.5, gamma=0.8)
    elif op == "Shrink":
        attrs.update(bias=float(G.choice([0.0, 0.5])), lambd=float(G.choice([0.5, 1.0])))
    elif op == "Gelu":
        attrs["approximate"] = G.choice(["none", "tanh"])
    elif op == "Clip":
        lo, hi = sorted(rng.standard_normal(2).astype(np.float32))
        k = rng.integers(4)
        inputs = [x, G.const(np.float32(lo)) if k in (1, 3) else "", G.const(np.float32(hi)) if k in (2, 3) else ""]
        while inputs[-1] == "":
            inputs.pop()
    elif op in ("Softmax", "LogSoftmax"):
        attrs["axis"] = int(rng.integers(-r, r))
    G.add(op, inputs, **attrs)


def _broadcast_shape(G, shape):
    """A random shape that broadcasts against `shape` (dims dropped on the left, some set to 1)."""
    rng = G.rng
    k = int(rng.integers(0, len(shape) + 1))
    s = [d if rng.random() < 0.6 else 1 for d in shape[len(shape) - k:]]
    if rng.random() < 0.1 and len(s) < 5:  # bidirectional: the constant adds a leading dim
        s = [G.choice([2, 3])] + [1] * len(shape)
    return s


def g_binary(G: GraphGen, x):
    op = G.choice(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum", "Mean", "PRelu"])
    shape = G.shape(x)
    rng = G.rng
    others = [t for t in G.pool if t != x and _broadcastable(G.shape(t), shape)]
    if op == "PRelu":  # the slope broadcasts to X one way only
        others = [t for t in others if tuple(np.broadcast_shapes(G.shape(t), shape)) == tuple(shape)]
    if others and rng.random() < 0.5:
        y = G.choice(others)
    else:
        s = _broadcast_shape(G, shape) if op != "PRelu" else [d if rng.random() < 0.5 else 1 for d in shape[1:]][
            int(rng.integers(0, len(shape))):] or [1]
        y = G.const(G.randn(s))
    if op == "Div":
        if (np.abs(G.vals[y]) < 0.3).any():
            y = G.positive(y)
    if op == "Pow":
        x = G.positive(x)
        if y in G.inits and rng.random() < 0.6:
            y = G.const(np.float32(G.choice([2.0, 3.0, 0.5, -1.0, 1.7, -0.5])))
        elif np.abs(G.vals[y]).max() > 3:
            raise Skip("pow overflow")
    ins = [x, y] if rng.random() < 0.8 or op == "PRelu" else [y, x]
    if op in ("Sum", "Mean", "Max", "Min") and rng.random() < 0.3:
        ins.append(G.const(G.randn(_broadcast_shape(G, shape))))
    G.add(op, ins)


def _broadcastable(a, b) -> bool:
    for p, q in zip(reversed(a), reversed(b)):
        if p != q and p != 1 and q != 1:
            return False
    return True


def g_where(G: GraphGen, x):
    shape = G.shape(x)
    rng = G.rng
    cmp = G.choice(["Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"])
    rhs = G.const(np.float32(0.0) if cmp == "Equal" else G.randn(_broadcast_shape(G, shape)))
    if cmp == "Equal":
        xr, = G.add("Round", [x], pool=False)
        c, = G.add(cmp, [xr, rhs], pool=False)
    else:
        c, = G.add(cmp, [x, rhs], pool=False)
    others = [t for t in G.pool if t != x and _broadcastable(G.shape(t), shape)]
    y = G.choice(others) if others and rng.random() < 0.5 else G.const(G.randn(_broadcast_shape(G, shape)))
    G.add("Where", [c, x, y] if rng.random() < 0.5 else [c, y, x])


def g_reduce(G: GraphGen, x):
    op = G.choice(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                   "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"])
    r = len(G.shape(x))
    rng = G.rng
    if op == "ReduceLogSum":
        x = G.positive(x)
    if op == "ReduceLogSumExp" and np.abs(G.vals[x]).max() > 40:
        raise Skip("overflow")
    attrs = {"keepdims": int(rng.integers(2))}
    inputs = [x]
    if rng.random() < 0.85:
        k = int(rng.integers(1, r + 1))
        axes = sorted(rng.choice(r, size=k, replace=False).tolist())
        axes = [a - r if rng.random() < 0.3 else a for a in axes]
        inputs.append(G.const(np.array(axes, np.int64)))
    if op == "ReduceProd" and np.prod([G.shape(x)[a] for a in range(r)]) > 64:
        x2, = G.add("Tanh", [x], pool=False)
        inputs[0] = x2
    G.add(op, inputs, **attrs)


def g_norm(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    rng = G.rng
    op = G.choice(["BatchNormalization", "LayerNormalization", "InstanceNormalization", "LpNormalization",
                   "MeanVarianceNormalization"])
    if op == "BatchNormalization":
        if r < 2:
            raise Skip("rank")
        c = shape[1]
        G.add(op, [x, G.const(G.randn([c])), G.const(G.randn([c])), G.const(G.randn([c])),
                   G.const((np.abs(G.randn([c])) + 0.1).astype(np.float32))], epsilon=float(G.choice([1e-5, 1e-3])))
    elif op == "InstanceNormalization":
        if r < 3:
            raise Skip("rank")
        c = shape[1]
        G.add(op, [x, G.const(G.randn([c])), G.const(G.randn([c]))], epsilon=float(G.choice([1e-5, 1e-2])))
    elif op == "LayerNormalization":
        axis = int(rng.integers(-r, r))
        s = list(shape[axis:])
        ins = [x, G.const(G.randn(s))]
        if rng.random() < 0.6:
            ins.append(G.const(G.randn(s)))
        G.add(op, ins, axis=axis, epsilon=float(G.choice([1e-5, 1e-3])))
    elif op == "LpNormalization":
        G.add(op, [x], axis=int(rng.integers(-r, r)), p=int(G.choice([1, 2])))
    else:
        if r != 4:
            raise Skip("rank")
        G.add(op, [x], axes=G.choice([[0, 2, 3], [2, 3], [1], [0, 1, 2, 3]]))


def _spatial(G, x, lo=3, hi=4):
    r = len(G.shape(x))
    if not lo <= r <= hi:
        raise Skip("rank")
    return r - 2


def g_conv(G: GraphGen, x):
    nd = _spatial(G, x)
    rng = G.rng
    n, c = G.shape(x)[:2]
    groups = [g for g in range(1, c + 1) if c % g == 0]
    group = G.choice(groups) if rng.random() < 0.4 else 1
    m = group * int(rng.integers(1, max(2, 9 // group)))
    k = [int(G.choice([1, 1, 2, 3, 3, 5])) for _ in range(nd)]
    attrs: dict = {"kernel_shape": k}
    if rng.random() < 0.5:
        attrs["strides"] = [int(G.choice([1, 1, 2, 3, 4])) for _ in range(nd)]
    if rng.random() < 0.3:
        attrs["dilations"] = [int(G.choice([1, 2, 3])) for _ in range(nd)]
    if group > 1:
        attrs["group"] = group
    _pads(G, attrs, nd, k, allow_pads=True)
    w = G.const(G.randn([m, c // group] + k, scale=1 / math.sqrt(c // group * int(np.prod(k)))))
    ins = [x, w]
    if rng.random() < 0.6:
        ins.append(G.const(G.randn([m])))
    G.add("Conv", ins, **attrs)


def _pads(G, attrs, nd, k, allow_pads=True):
    rng = G.rng
    ap = G.choice(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
    if ap != "NOTSET":
        attrs["auto_pad"] = ap
    elif allow_pads and rng.random() < 0.6:
        attrs["pads"] = [int(rng.integers(0, max(1, k[i % nd]))) for i in range(2 * nd)]


def g_conv_transpose(G: GraphGen, x):
    nd = _spatial(G, x)
    rng = G.rng
    c = G.shape(x)[1]
    group = G.choice([g for g in range(1, c + 1) if c % g == 0]) if rng.random() < 0.3 else 1
    m = int(rng.integers(1, 5))
    k = [int(G.choice([1, 2, 3, 3, 4])) for _ in range(nd)]
    attrs: dict = {"kernel_shape": k}
    strides = [int(G.choice([1, 2, 2, 3])) for _ in range(nd)]
    dil = [int(G.choice([1, 1, 2, 3])) for _ in range(nd)]
    if rng.random() < 0.7:
        attrs["strides"] = strides
    else:
        strides = [1] * nd
    if rng.random() < 0.3:
        attrs["dilations"] = dil
    else:
        dil = [1] * nd
    if group > 1:
        attrs["group"] = group
    r = rng.random()
    if r < 0.25:
        attrs["output_padding"] = [int(rng.integers(0, max(strides[i], dil[i]))) for i in range(nd)]
    if r > 0.85:
        attrs["output_shape"] = [int(G.shape(x)[2 + i] * strides[i] + rng.integers(0, strides[i])) for i in range(nd)]
    else:
        _pads(G, attrs, nd, k)
    w = G.const(G.randn([c, m] + k, scale=1 / math.sqrt(c)))
    ins = [x, w]
    if rng.random() < 0.5:
        ins.append(G.const(G.randn([m * group])))
    G.add("ConvTranspose", ins, **attrs)


def g_pool(G: GraphGen, x):
    nd = _spatial(G, x)
    rng = G.rng
    op = G.choice(["MaxPool", "MaxPool", "AveragePool", "AveragePool", "LpPool", "GlobalAveragePool",
                   "GlobalMaxPool"])
    if op.startswith("Global"):
        G.add(op, [x])
        return
    sp = G.shape(x)[2:]
    k = [int(min(G.choice([1, 2, 2, 3, 3, 4, 5]), sp[i] + 2)) for i in range(nd)]
    attrs: dict = {"kernel_shape": k}
    if rng.random() < 0.7:
        attrs["strides"] = [int(G.choice([1, 2, 2, 3, 5])) for _ in range(nd)]
    if op != "LpPool" and rng.random() < 0.4:
        attrs["ceil_mode"] = 1
    if rng.random() < 0.3:
        attrs["dilations"] = [int(G.choice([1, 2, 3])) for _ in range(nd)]
    if op == "AveragePool" and rng.random() < 0.5:
        attrs["count_include_pad"] = 1
    if op == "LpPool":
        attrs["p"] = int(G.choice([1, 2, 3]))
    _pads(G, attrs, nd, k)
    G.add(op, [x], **attrs)


def g_resize(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    if r < 3:
        raise Skip("rank")
    rng = G.rng
    mode = G.choice(["nearest", "linear", "cubic"])
    coord = G.choice(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                      "tf_crop_and_resize"])
    attrs: dict = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = G.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(G.choice([-0.75, -0.5]))
        if rng.random() < 0.3:
            attrs["exclude_outside"] = 1
    if mode != "nearest" and rng.random() < 0.1:
        attrs["antialias"] = 1
    roi = ""
    if coord == "tf_crop_and_resize":
        lo = [0.0] * r
        hi = [1.0] * r
        for i in range(2, r):
            lo[i], hi[i] = float(G.choice([0.0, 0.1, 0.25])), float(G.choice([1.0, 0.8, 0.9]))
        roi = G.const(np.array(lo + hi, np.float32))
        if rng.random() < 0.5:
            attrs["extrapolation_value"] = float(G.choice([0.0, -1.0]))
    if rng.random() < 0.6:
        sc = [1.0, 1.0] + [float(G.choice([0.5, 0.6, 0.75, 1.0, 1.25, 1.5, 1.7, 2.0, 2.5, 3.0, 1 / 3]))
                           for _ in range(r - 2)]
        if int(np.prod([shape[i] * sc[i] for i in range(r)])) > MAX_ELEMS:
            raise Skip("too big")
        G.add("Resize", [x, roi, G.const(np.array(sc, np.float32))], **attrs)
    else:
        sz = list(shape[:2]) + [int(max(1, round(shape[i] * G.choice([0.5, 0.7, 1.0, 1.3, 2.0, 2.6, 3.0])) +
                                        int(rng.integers(-1, 2)))) for i in range(2, r)]
        if rng.random() < 0.2 and coord != "tf_crop_and_resize":
            # over the spatial axes only (on every axis it would resize N and C too)
            attrs["keep_aspect_ratio_policy"] = G.choice(["not_larger", "not_smaller"])
            attrs["axes"] = list(range(2, r))
            sz = sz[2:]
        G.add("Resize", [x, roi, "", G.const(np.array(sz, np.int64))], **attrs)


def g_pad(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    rng = G.rng
    mode = G.choice(["constant", "constant", "reflect", "edge", "wrap"])
    pads = []
    for _side in range(2):
        for i in range(r):
            if i < r - 2 and rng.random() < 0.7:
                pads.append(0)
                continue
            lo = -(shape[i] - 1) // 2 if rng.random() < 0.25 else 0
            hi = (shape[i] - 1) if mode == "reflect" else 3
            pads.append(int(rng.integers(lo, max(lo, hi) + 1)))
    ins = [x, G.const(np.array(pads, np.int64))]
    if mode == "constant" and rng.random() < 0.5:
        ins.append(G.const(np.float32(G.choice([0.5, -2.0, 0.0]))))
    G.add("Pad", ins, mode=mode)


def g_slice(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    rng = G.rng
    k = int(rng.integers(1, r + 1))
    axes = rng.choice(r, size=k, replace=False).tolist()
    starts, ends, steps = [], [], []
    for a in axes:
        d = shape[a]
        step = int(G.choice([1, 1, 2, 3, -1, -1, -2, -3]))
        s = int(rng.integers(-d - 2, d + 2))
        e = int(G.choice([rng.integers(-d - 2, d + 2), 10**9, -(10**9)]))
        if step > 0 and rng.random() < 0.5:
            e = int(G.choice([d, 10**9, -1]))
        starts.append(s), ends.append(e), steps.append(step)
    axes = [a - r if rng.random() < 0.3 else a for a in axes]
    ins = [x, G.const(np.array(starts, np.int64)), G.const(np.array(ends, np.int64)),
           G.const(np.array(axes, np.int64))]
    if rng.random() < 0.9 or any(st != 1 for st in steps):
        ins.append(G.const(np.array(steps, np.int64)))
    outs = G.add("Slice", ins)
    if G.vals[outs[0]].size == 0:
        raise Skip("empty")


def g_gather(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    rng = G.rng
    axis = int(rng.integers(-r, r))
    d = shape[axis]
    ishape = G.choice([[], [2], [3], [1], [2, 2]])
    idx = rng.integers(-d, d, size=ishape).astype(np.int64)
    if r - 1 + len(ishape) > 5:
        raise Skip("rank")
    G.add("Gather", [x, G.const(idx)], axis=axis)


def g_concat(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    rng = G.rng
    axis = int(rng.integers(-r, r))
    others = [t for t in G.pool if len(G.shape(t)) == r and all(
        G.shape(t)[i] == shape[i] for i in range(r) if i != axis % r)]
    ins = [x] + [G.choice(others) for _ in range(int(rng.integers(1, 3)))]
    if rng.random() < 0.3:
        s = list(shape)
        s[axis] = int(G.choice([1, 2, 3]))
        ins.insert(int(rng.integers(len(ins) + 1)), G.const(G.randn(s)))
    G.add("Concat", ins, axis=axis)


def g_split(G: GraphGen, x):
    shape = G.shape(x)
    r = len(shape)
    rng = G.rng
    axis = int(rng.integers(-r, r))
    d = shape[axis]
    if d < 2:
        raise Skip("small")
    if rng.random() < 0.5:
        n = int(rng.integers(2, min(d, 4) + 1))
        G.add("Split", [x], n_out=n, axis=axis, num_outputs=n)
    else:
        cut = sorted(rng.choice(np.arange(1, d), size=min(int(rng.integers(1, 3)), d - 1), replace=False).tolist())
        sizes = np.diff([0] + cut + [d]).astype(np.int64)
        G.add("Split", [x, G.const(sizes)], n_out=len(sizes), axis=axis)


def g_reshape(G: GraphGen, x):
    shape = G.shape(x)
    rng = G.rng
    total = int(np.prod(shape))
    op = G.choice(["Reshape", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Transpose",
                   "DepthToSpace", "SpaceToDepth", "Expand", "Tile"])
    r = len(shape)
    if op == "Reshape":
        if total == 0:
            raise Skip("empty")
        fac = []
        n = total
        for p in (2, 3, 5, 7, 11, 13, 17, 19):
            while n % p == 0:
                fac.append(p)
                n //= p
        if n > 1:
            fac.append(n)
        rng.shuffle(fac)
        k = int(rng.integers(1, 6))
        dims = [1] * k
        for f in fac:
            dims[int(rng.integers(k))] *= f
        if rng.random() < 0.5:
            dims[int(rng.integers(k))] = -1
        if rng.random() < 0.3:
            for i in range(min(k, r)):
                if dims[i] == shape[i] and dims[i] != -1:
                    dims[i] = 0
                    break
        G.add("Reshape", [x, G.const(np.array(dims, np.int64))])
    elif op == "Flatten":
        G.add("Flatten", [x], axis=int(rng.integers(-r, r + 1)))
    elif op == "Squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        if not ones:
            raise Skip("no 1")
        ax = ones[: int(rng.integers(1, len(ones) + 1))]
        G.add("Squeeze", [x] + ([G.const(np.array([a - r for a in ax], np.int64))] if rng.random() < 0.8 else []))
    elif op == "Unsqueeze":
        if r >= 5:
            raise Skip("rank")
        G.add("Unsqueeze", [x, G.const(np.array([int(rng.integers(-r - 1, r + 1))], np.int64))])
    elif op == "Transpose":
        G.add("Transpose", [x], perm=rng.permutation(r).tolist())
    elif op in ("DepthToSpace", "SpaceToDepth"):
        if r != 4:
            raise Skip("rank")
        b = int(G.choice([2, 3]))
        if op == "DepthToSpace":
            if shape[1] % (b * b):
                raise Skip("channels")
            G.add(op, [x], blocksize=b, mode=G.choice(["DCR", "CRD"]))
        else:
            if shape[2] % b or shape[3] % b:
                raise Skip("size")
            G.add(op, [x], blocksize=b)
    elif op == "Expand":
        s = [d if d != 1 or rng.random() < 0.5 else int(G.choice([2, 3])) for d in shape]
        if rng.random() < 0.3:
            s = [1] + s
        G.add("Expand", [x, G.const(np.array(s, np.int64))])
    else:
        G.add("Tile", [x, G.const(np.array([int(G.choice([1, 1, 2, 3])) for _ in shape], np.int64))])


def g_matmul(G: GraphGen, x):
    shape = G.shape(x)
    rng = G.rng
    r = len(shape)
    if rng.random() < 0.45:
        # Gemm on a 2-D view
        if r != 2:
            x, = G.add("Flatten", [x], axis=int(rng.integers(1, r)) if r > 1 else 0)
        m, k = G.shape(x)
        ta, tb = int(rng.integers(2)), int(rng.integers(2))
        if ta:
            x, = G.add("Transpose", [x], perm=[1, 0], pool=False)
        n = int(G.choice([1, 3, 4, 7, 8]))
        w = G.randn([n, k] if tb else [k, n], 1 / math.sqrt(k))
        ins = [x, G.const(w)]
        if rng.random() < 0.7:
            ins.append(G.const(G.randn(G.choice([[n], [1], [m, n], [m, 1], []]))))
        attrs = {"transA": ta, "transB": tb}
        if rng.random() < 0.4:
            attrs.update(alpha=float(G.choice([0.5, 2.0])), beta=float(G.choice([0.0, 1.0, -1.5])))
        G.add("Gemm", ins, **attrs)
        return
    k = shape[-1]
    others = [t for t in G.pool if t != x and len(G.shape(t)) >= 2 and G.shape(t)[-2] == k
              and _broadcastable(G.shape(t)[:-2], shape[:-2])]
    if others and rng.random() < 0.4:
        y = G.choice(others)
    else:
        n = int(G.choice([1, 2, 5, 8]))
        ws = [k] if rng.random() < 0.15 else ([k, n] if rng.random() < 0.7 else
                                               list(_broadcast_shape(G, shape[:-2])) + [k, n])
        y = G.const(G.randn(ws, 1 / math.sqrt(k)))
    G.add("MatMul", [x, y])


def g_cumsum(G: GraphGen, x):
    r = len(G.shape(x))
    G.add("CumSum", [x, G.const(np.int64(G.rng.integers(-r, r)))], exclusive=int(G.rng.integers(2)),
          reverse=int(G.rng.integers(2)))


OP_GENERATORS = ([g_unary] * 5 + [g_binary] * 4 + [g_where, g_cumsum] + [g_reduce] * 2 + [g_norm] * 2
                 + [g_conv] * 3 + [g_conv_transpose] * 2 + [g_pool] * 3 + [g_resize] * 3 + [g_pad] * 2
                 + [g_slice] * 2 + [g_gather, g_concat, g_split] + [g_reshape] * 3 + [g_matmul] * 2)


def generate(seed: int, index: int, max_nodes: int = 15):
    """Case `index` of `seed`: (model, feeds) or None when no graph came out."""
    rng = np.random.default_rng([seed, index])
    for _ in range(5):
        try:
            return GraphGen(rng, max_nodes).build()
        except Skip:
            continue
    return None


# --------------------------------------------------------------------------------------
# Oracles
# --------------------------------------------------------------------------------------

def to_float64(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
    return m


# What a worker is doing, shared with the driver: a worker that dies in an oracle is not an
# edgert crash ("oracle_crash"; onnxruntime itself segfaults on some pooling graphs).
STAGES = ("generator", "onnxruntime", "reference", "edgert")
_STAGE = None


def _set_stage(name: str) -> None:
    if _STAGE is not None:
        _STAGE.value = STAGES.index(name)


def run_ort(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _float64_ops():
    """Ops whose onnx.reference implementation does not run in float64 (a function body
    with float32 constants), written from the spec's formula."""
    from onnx.reference.op_run import OpRun

    class MeanVarianceNormalization(OpRun):
        op_domain = ""

        def _run(self, x, axes=None):
            ax = tuple(axes if axes is not None else (0, 2, 3))
            mean = x.mean(axis=ax, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=ax, keepdims=True)  # E[X^2] - E[X]^2, without its rounding
            return ((x - mean) / (np.sqrt(var) + 1e-9),)

    return [MeanVarianceNormalization]


# Inputs that select shapes or coordinates, not data: never perturbed.
NO_NOISE = {"Resize": (1, 2, 3), "Upsample": (1,)}


def run_reference64(model, feeds, rng_seed=0, noisy_runs=2, with_shapes=False, spec_ops=()):
    """(exact outputs, sensitivity per output) of the float64 graph (see the docstring);
    `spec_ops`: OpRun classes written from the spec text, used in place of onnx.reference's."""
    from onnx.reference import ReferenceEvaluator

    m64 = to_float64(model)
    ev = ReferenceEvaluator(m64, new_ops=_float64_ops() + list(spec_ops))
    f64 = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    outs = [o.name for o in m64.graph.output]
    rng = np.random.default_rng(rng_seed)

    def perturb(v):
        if isinstance(v, np.ndarray) and v.dtype == np.float64 and v.size:
            return np.asarray(v * (1 + rng.uniform(-NOISE, NOISE, v.shape)), dtype=np.float64)
        return v

    def run(noisy: bool):
        res: dict = {"": None}
        res.update(ev.rt_inits_)
        res.update({k: (perturb(v) if noisy else v) for k, v in f64.items()})
        with np.errstate(all="ignore"):
            for node in ev.rt_nodes_:
                ins = [res[i] for i in node.input]
                if noisy:
                    keep = NO_NOISE.get(node.op_type, ())
                    ins = [v if j in keep else perturb(v) for j, v in enumerate(ins)]
                o = node.run(*ins)
                if noisy:  # relative noise, plus absolute noise on the scale of the operands
                    scale = max([float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0)) for v in ins
                                 if isinstance(v, np.ndarray) and v.dtype == np.float64] + [0.0])
                for name, v in zip(node.output, o):
                    v = np.asarray(v)
                    if noisy and v.dtype == np.float64 and v.size:
                        v = perturb(v) + rng.uniform(-NOISE, NOISE, v.shape) * scale
                    res[name] = v
        if not noisy:
            shapes.update({k: np.shape(v) for k, v in res.items() if k})
        return [np.asarray(res[o]) for o in outs]

    shapes: dict = {}
    exact = run(False)
    sens = [np.zeros(e.shape) for e in exact]
    with np.errstate(all="ignore"):
        for _ in range(noisy_runs):
            try:
                noisy = run(True)
            except Exception:  # a perturbation the reference cannot take: that run is skipped
                continue
            for i, y in enumerate(noisy):
                if y.shape != exact[i].shape:
                    sens[i] = np.full(exact[i].shape, np.inf)
                    continue
                d = np.abs(y.astype(np.float64) - exact[i].astype(np.float64))
                d[np.isnan(d) & ~(np.isnan(y) & np.isnan(exact[i]))] = np.inf
                d[np.isnan(d)] = 0
                sens[i] = np.maximum(sens[i], d)
    if with_shapes:
        return exact, sens, shapes
    return exact, sens


def agree(got, want, sens=None) -> tuple[bool, str]:
    """Whether `got` matches `want` within the tolerance rule; a reason when not."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return False, f"shape {list(got.shape)} vs {list(want.shape)}"
    if got.size == 0:
        return True, ""
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if sens is not None and np.shape(sens) != w.shape:
        sens = None  # the reference's shape differs: no sensitivity for this pair
    with np.errstate(all="ignore"):
        if sens is None:
            tol = FIXED_TOL + FIXED_TOL * np.abs(w)
            sens = np.zeros(w.shape)
        else:
            fin = np.abs(w[np.isfinite(w)])
            atol = ATOL_REL * (1 + (fin.mean() if fin.size else 0))
            tol = atol + RTOL * np.abs(w) + K_SENS * sens
        err = np.abs(g - w)
        ok = err <= tol
        both_nan = np.isnan(g) & np.isnan(w)
        same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
        loose = ~np.isfinite(sens)  # the output is ill-conditioned there: anything goes
        ok |= both_nan | same_inf | loose
    if ok.all():
        return True, ""
    bad = np.argwhere(~ok)
    i = tuple(bad[0])
    return False, (f"{len(bad)}/{ok.size} elements off, max |diff| {np.nanmax(np.where(ok, 0, err)):.4g}; "
                   f"first at {list(i)}: got {g[i]:.6g}, want {w[i]:.6g} (tol {tol[i]:.3g})")


# --------------------------------------------------------------------------------------
# edgert, and the classification of one case
# --------------------------------------------------------------------------------------

def _static_shapes(model) -> dict:
    shapes: dict = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        return shapes
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    for t in model.graph.initializer:
        shapes[t.name] = tuple(t.dims)
    return shapes


def run_edgert(model, feeds, quantize=None, calibration=None):
    import edgert

    kw = {}
    if quantize:
        kw.update(quantize=quantize, calibration=calibration)
    blob = edgert.convert(model, None, **kw)
    sess = edgert.Session(blob)
    return [np.asarray(o) for o in sess.run(None, feeds)]


def _cause(msg: str) -> str:
    """A message reduced to its cause: numbers, names and shapes blanked out."""
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip() and not ln.startswith("to run them")]
    body = lines[1] if len(lines) > 1 and "cannot be converted" in lines[0] else (lines[0] if lines else msg)
    body = re.sub(r"^\S+ \((\w+)\):", r"\1:", body)
    body = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", body)
    body = re.sub(r"\[[^\]]*\]|\([^)]*\)", "[…]", body)
    body = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", body)
    return body[:160]


def _ancestors(model) -> dict:
    """Per graph output: the indices of the nodes it depends on."""
    nodes = list(model.graph.node)
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    res = {}
    for out in model.graph.output:
        seen: set = set()
        stack = [out.name]
        while stack:
            i = producer.get(stack.pop())
            if i is not None and i not in seen:
                seen.add(i)
                stack.extend(x for x in nodes[i].input if x)
        res[out.name] = seen
    return res


def _reference_quirks(model, feeds, shapes, rec):
    """Applies REFERENCE_QUIRKS: (float64 outputs, sensitivities) rerun with the spec's ops
    where an entry has them (None when nothing is rerun), and the indices of the nodes whose
    dependent outputs have no reference."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    hits = [(q, i) for q in REFERENCE_QUIRKS for i, n in enumerate(model.graph.node) if q.match(n, shapes, inits)]
    if not hits:
        return None, set()
    rec["reference_quirks"] = sorted({q.name for q, _ in hits})
    dropped = {i for q, i in hits if q.spec_ops is None}
    ops = {q.name: q.spec_ops for q, _ in hits if q.spec_ops is not None}
    if not ops:
        return None, dropped
    try:
        out, sens = run_reference64(model, feeds, spec_ops=[c for f in ops.values() for c in f()])
    except Exception as e:  # the spec's op refused it too: those nodes have no reference
        rec["spec_ops_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return None, dropped | {i for q, i in hits if q.spec_ops is not None}
    return (out, sens), dropped


def _judge_output(e, o, r, s, nodes, anc, shapes, e_all=None):
    """One output: None when it agrees, else (situation, deviation name or None, detail).
    e: edgert's; o: onnxruntime's (None: refused); r: the reference's (None: refused, or
    out for a quirk of a node it depends on); s: its sensitivity."""
    vs_ort = agree(e, o, s) if o is not None else None
    vs_ref = agree(e, r, s) if r is not None else None
    primary = vs_ort if vs_ort is not None else vs_ref
    if primary[0]:
        return None
    ort_ref = agree(o, r, s) if o is not None and r is not None else None
    if vs_ref is not None and vs_ref[0] and o is not None and agree(o, r)[0]:
        return None  # edgert matches the reference; onnxruntime is within FIXED_TOL of it (its own rounding)
    if vs_ref is not None and vs_ref[0]:
        situation = "ort_off"
    elif vs_ort is None or (ort_ref is not None and ort_ref[0]):
        situation = "edgert_off"
    elif vs_ref is None:
        situation = "no_reference"  # the reference refused the graph (or a quirk): onnxruntime decides alone
    else:
        situation = "all_differ"
    detail = f"edgert vs {'onnxruntime' if vs_ort is not None else 'reference'}: {primary[1]}"
    if vs_ref is not None and vs_ort is not None:
        detail += f"; edgert vs reference: {vs_ref[1] or 'agree'}"
    if ort_ref is not None:
        detail += f"; onnxruntime vs reference: {ort_ref[1] or 'agree'}"
    for dev in DEVIATIONS:
        if situation in dev.situations and any(dev.match(nodes[j], shapes) for j in anc) and (
                dev.check is None or dev.check([e], None if o is None else [o])):
            return situation, dev.name, detail
    return situation, None, detail


def classify(model, feeds, want_edgert=True) -> dict:
    """Runs the oracles and edgert on one case; returns the result record. Each output is
    judged on its own: a reference quirk or a deviation explains an output only through a
    node that output depends on."""
    import edgert

    rec: dict = {"ops": sorted({n.op_type for n in model.graph.node}), "nodes": len(model.graph.node)}
    names = [o.name for o in model.graph.output]
    nodes = list(model.graph.node)
    anc = _ancestors(model)
    _set_stage("onnxruntime")
    try:
        ort_out = run_ort(model, feeds)
    except Exception as e:
        ort_out, rec["ort_error"] = None, f"{type(e).__name__}: {str(e)[:300]}"
    shapes: dict = {}
    dropped: set = set()
    _set_stage("reference")
    try:
        ref_out, sens, shapes = run_reference64(model, feeds, with_shapes=True)
    except Exception as e:
        ref_out, sens, rec["ref_error"] = None, None, f"{type(e).__name__}: {str(e)[:300]}"
    else:
        rerun, dropped = _reference_quirks(model, feeds, shapes, rec)
        if rerun is not None:
            ref_out, sens = rerun
    # per output: the reference, unless it depends on a node whose quirk leaves it out (its
    # sensitivities still measure the graph's conditioning)
    refs = [None if ref_out is None or anc[n] & dropped else ref_out[i] for i, n in enumerate(names)]
    orts = ort_out if ort_out is not None else [None] * len(names)
    judged = [i for i in range(len(names)) if orts[i] is not None or refs[i] is not None]
    if not judged:
        rec["cls"] = "invalid"
        if ref_out is not None:
            rec["cause"] = ("only onnx.reference accepts the graph, and it departs from the spec here: "
                            + ", ".join(rec.get("reference_quirks", [])))
        return rec
    if len(judged) < len(names):
        rec["unjudged_outputs"] = [n for i, n in enumerate(names) if i not in judged]
    if not want_edgert:
        rec["cls"] = "oracles_only"
        return rec
    _set_stage("edgert")
    try:
        e_out = run_edgert(model, feeds)
    except edgert.EdgertError as e:
        msg = str(e)
        if INTERNAL_ERROR.search(msg):
            rec.update(cls="crash", kind="internal error in an EdgertError", detail=msg[:600],
                       cause=_cause(msg))
        else:
            rec.update(cls="rejected", cause=_cause(msg) + (" [onnxruntime refuses the graph too]" if ort_out is None
                                                           else ""), detail=msg[:600])
        return rec
    except Exception as e:
        rec.update(cls="crash", kind=type(e).__name__, detail="".join(
            traceback.format_exception_only(type(e), e))[:600], cause=_cause(f"{type(e).__name__}: {e}"))
        return rec
    if len(e_out) != len(names):
        rec.update(cls="mismatch", kind="edgert_off", detail=f"{len(e_out)} outputs, want {len(names)}")
        return rec
    global _CURRENT_INITS
    _CURRENT_INITS = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    if not shapes:  # the reference refused the graph: ONNX shape inference's shapes
        shapes = _static_shapes(model)
    explained: list = []
    for i in judged:
        got = _judge_output(e_out[i], orts[i], refs[i], sens[i] if sens else None, nodes, anc[names[i]], shapes)
        if got is None:
            continue
        situation, dev, detail = got
        if dev is None:
            rec.update(cls="mismatch", kind=situation, detail=f"output {names[i]}: {detail}")
            return rec
        explained.append((names[i], dev, detail))
    if not explained:
        rec["cls"] = "pass"
        return rec
    rec.update(cls="deviation", kind=explained[0][1], detail=f"output {explained[0][0]}: {explained[0][2]}")
    if len({d for _, d, _ in explained}) > 1:
        rec["deviations"] = sorted({d for _, d, _ in explained})
    return rec


# --------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------

# SQNR floor (dB) per op type for --mode int8: the case's floor is the lowest over its ops.
SQNR_FLOOR = collections.defaultdict(lambda: 20.0, {
    "Exp": 10.0, "Pow": 10.0, "Div": 10.0, "Reciprocal": 10.0, "Log": 10.0, "Tan": 5.0, "ReduceProd": 5.0,
    "Softmax": 12.0, "LogSoftmax": 12.0, "Floor": 5.0, "Ceil": 5.0, "Round": 5.0, "Sign": 5.0,
    "Where": 10.0, "ReduceLogSumExp": 12.0, "InstanceNormalization": 12.0, "LayerNormalization": 12.0,
    "MeanVarianceNormalization": 12.0, "LpNormalization": 12.0, "Sub": 14.0, "Tanh": 15.0, "Sigmoid": 15.0,
    "ReduceL2": 15.0, "Sqrt": 15.0, "Erf": 15.0, "Gelu": 15.0, "CumSum": 15.0,
})


def mode_float32(model, feeds) -> dict:
    return classify(model, feeds)


def mode_int8(model, feeds) -> dict:
    """edgert's int8 file against edgert's own float32 file, by SQNR."""
    import edgert

    rec: dict = {"ops": sorted({n.op_type for n in model.graph.node}), "nodes": len(model.graph.node)}
    rng = np.random.default_rng(0)
    calib = {k: np.concatenate([v] + [(v * (1 + 0.1 * rng.standard_normal(v.shape))).astype(v.dtype)
                                      for _ in range(7)]) if v.dtype == np.float32 else v for k, v in feeds.items()}
    _set_stage("edgert")
    try:
        f32 = run_edgert(model, feeds)
    except edgert.EdgertError as e:
        rec.update(cls="rejected", cause="float32: " + _cause(str(e)))
        return rec
    except Exception as e:
        rec.update(cls="crash", kind=type(e).__name__, detail=str(e)[:600], cause=_cause(str(e)))
        return rec
    try:
        q = run_edgert(model, feeds, quantize="int8", calibration=calib)
    except edgert.EdgertError as e:
        msg = str(e)
        rec.update(cls="crash" if INTERNAL_ERROR.search(msg) else "rejected", cause="int8: " + _cause(msg),
                   kind="internal error in an EdgertError", detail=msg[:600])
        return rec
    except Exception as e:
        rec.update(cls="crash", kind=type(e).__name__, detail=str(e)[:600], cause=_cause(str(e)))
        return rec
    floor = min(SQNR_FLOOR[op] for op in rec["ops"])
    worst = math.inf
    for a, b in zip(f32, q):
        if a.shape != b.shape:
            rec.update(cls="mismatch", kind="int8_shape", detail=f"{b.shape} vs {a.shape}")
            return rec
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not np.isfinite(a64).all():
            continue
        noise = np.sum((a64 - b64) ** 2)
        sig = np.sum(a64 ** 2)
        s = math.inf if noise == 0 else 10 * math.log10(max(sig, 1e-30) / noise)
        worst = min(worst, s)
    rec["sqnr"] = worst
    if worst < floor:
        rec.update(cls="mismatch", kind="int8_sqnr", detail=f"SQNR {worst:.1f} dB < floor {floor:.0f} dB")
    else:
        rec["cls"] = "pass"
    return rec


def mode_bounded(model, feeds) -> dict:
    """Bounded dimensions have their own generator and driver, tools/fuzz_bounded.py
    (spatial graphs whose attributes stay valid at every size, converted with bounds and
    run at random sizes against a static conversion at each size and onnxruntime's
    shape); `--mode bounded` runs it with this tool's --seed, --graphs, --minutes and
    --out."""
    raise NotImplementedError("--mode bounded runs tools/fuzz_bounded.py (see main)")


MODES = {"float32": mode_float32, "int8": mode_int8, "bounded": mode_bounded}


# --------------------------------------------------------------------------------------
# Workers: every edgert call runs in a worker process; a dead worker is a crash
# --------------------------------------------------------------------------------------

def _worker(conn, mode, stage, edgert_home=None):
    global _STAGE
    _STAGE = stage
    if edgert_home:  # the edgert the driver imported (the installed one under pytest), not the checkout's
        sys.path.insert(0, edgert_home)
    warnings.filterwarnings("ignore", category=RuntimeWarning)  # numpy on empty and non-finite values
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    fn = MODES[mode]
    while True:
        try:
            task = conn.recv()
        except EOFError:  # the driver has gone
            return
        if task is None:
            return
        kind, payload = task
        try:
            _set_stage("generator")
            if kind == "generate":
                seed, index, max_nodes = payload
                g = generate(seed, index, max_nodes)
                rec = {"cls": "generated", "graph": None if g is None else (g[0].SerializeToString(), g[1])}
            elif kind == "case":
                seed, index, max_nodes = payload
                t0 = time.time()
                g = generate(seed, index, max_nodes)
                if g is None:
                    rec = {"cls": "invalid", "detail": "generator gave up", "ops": [], "nodes": 0}
                else:
                    rec = fn(*g)
                rec["seconds"] = time.time() - t0
            else:
                model_bytes, feeds = payload
                rec = fn(onnx.load_from_string(model_bytes), feeds)
        except Exception as e:  # a bug of this tool, not of edgert: reported as such
            rec = {"cls": "tool_error", "detail": traceback.format_exc()[-1500:], "ops": [], "nodes": 0,
                   "cause": f"{type(e).__name__}"}
        conn.send(rec)


class Worker:
    def __init__(self, mode):
        self.mode = mode
        self.ctx = mp.get_context("spawn")
        self.start()

    def start(self):
        self.conn, child = self.ctx.Pipe()
        self.stage = self.ctx.Value("i", 0, lock=False)
        import edgert

        home = os.path.dirname(os.path.dirname(os.path.abspath(edgert.__file__)))
        self.proc = self.ctx.Process(target=_worker, args=(child, self.mode, self.stage, home), daemon=True)
        self.proc.start()
        child.close()
        self.busy = None
        self.t0 = 0.0

    def submit(self, task, tag):
        self.conn.send(task)
        self.busy, self.t0 = tag, time.time()

    def poll(self, timeout=0.0):
        """The finished record, a crash record when the worker died or hung, or None."""
        if self.conn.poll(timeout):
            try:
                rec = self.conn.recv()
                self.busy = None
                return rec
            except EOFError:
                pass
        if not self.proc.is_alive() or time.time() - self.t0 > CASE_SECONDS:
            code = self.proc.exitcode
            stage = STAGES[self.stage.value]
            self.kill()
            self.start()
            cls = "crash" if stage == "edgert" else "oracle_crash"
            if code is None:
                return {"cls": cls, "kind": f"timeout in {stage}", "detail": f"over {CASE_SECONDS} s in {stage}",
                        "cause": f"timeout in {stage}", "ops": [], "nodes": 0}
            return {"cls": cls, "kind": f"worker died in {stage}", "cause": f"{stage}: exit code {code}",
                    "detail": f"worker process died in {stage} with exit code {code}", "ops": [], "nodes": 0}
        return None

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)

    def stop(self):
        try:
            self.conn.send(None)
            self.proc.join(5)
        except Exception:
            pass
        self.kill()

    def call(self, task) -> dict:
        self.submit(task, "call")
        while True:
            rec = self.poll(0.5)
            if rec is not None:
                return rec


# --------------------------------------------------------------------------------------
# Shrinking and writing test cases
# --------------------------------------------------------------------------------------

KEY_ATTRS = ("mode", "coordinate_transformation_mode", "auto_pad", "ceil_mode", "antialias", "nearest_mode")


def _graph_key(model) -> tuple:
    """What tells two minimal graphs apart: op types and the attributes that select code paths."""
    return tuple(sorted((n.op_type,) + tuple(str(_attr(n, a)) for a in KEY_ATTRS if _attr(n, a) is not None)
                        for n in model.graph.node))


def _signature(rec) -> tuple:
    return rec.get("cls"), rec.get("kind"), rec.get("cause") if rec.get("cls") == "crash" else None


def _prune(model, feeds):
    """Drops nodes, initializers and inputs that no output needs."""
    g = model.graph
    need = {o.name for o in g.output}
    keep = []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    keep.reverse()
    inputs = {k: v for k, v in feeds.items() if k in need}
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer if t.name in need}
    outs = [o.name for o in g.output]
    return make_model(keep, inputs, inits, outs), inputs


def _intermediates(model, feeds) -> dict:
    from onnx.reference import ReferenceEvaluator

    g = model.graph
    names = [o for n in g.node for o in n.output if o]
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in names)
    with np.errstate(all="ignore"):
        vals = ReferenceEvaluator(m).run(None, feeds)
    return dict(zip(names, (np.asarray(v) for v in vals)))


def shrink(worker: Worker, model, feeds, rec, budget_s=90.0, log=None):
    """A smaller (model, feeds) with the same failure signature."""
    sig = _signature(rec)
    t_end = time.time() + budget_s
    evals = [0]

    def fails(m, f) -> bool:
        if time.time() > t_end:
            return False
        evals[0] += 1
        r = worker.call(("model", (m.SerializeToString(), f)))
        return _signature(r) == sig

    def with_outputs(m, outs):
        mm = onnx.ModelProto()
        mm.CopyFrom(m)
        del mm.graph.output[:]
        mm.graph.output.extend(helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs)
        return mm

    best, bf = model, feeds
    # 1. one output at a time
    outs = [o.name for o in best.graph.output]
    if len(outs) > 1:
        for o in outs:
            m, f = _prune(with_outputs(best, [o]), bf)
            if fails(m, f):
                best, bf = m, f
                break
    changed = True
    while changed and time.time() < t_end:
        changed = False
        try:
            vals = _intermediates(best, bf)
        except Exception:
            break
        inits = {t.name: numpy_helper.to_array(t) for t in best.graph.initializer}
        nodes = list(best.graph.node)
        outs = [o.name for o in best.graph.output]
        # 1b. drop one output
        for o in outs if len(outs) > 1 else []:
            m, f = _prune(with_outputs(best, [x for x in outs if x != o]), bf)
            if fails(m, f):
                best, bf, changed = m, f, True
                break
        if changed:
            continue
        # 2. cut: a node's float input becomes a graph input fed with its value
        for n in nodes:
            for i in n.input:
                if not i or i in bf or i in inits or i not in vals or vals[i].dtype != np.float32:
                    continue
                f = dict(bf)
                f[i] = vals[i]
                m, f = _prune(make_model(nodes, f, inits, outs), f)
                if len(m.graph.node) < len(nodes) and fails(m, f):
                    best, bf, changed = m, f, True
                    break
            if changed:
                break
        if changed:
            continue
        # 3. bypass: a unary-shaped node whose first input has its output's shape
        for n in nodes:
            if len(n.output) != 1 or not n.input or n.input[0] not in vals and n.input[0] not in bf:
                continue
            src = n.input[0]
            sv = bf.get(src, vals.get(src))
            if sv is None or n.output[0] not in vals or sv.shape != vals[n.output[0]].shape or sv.dtype != np.float32:
                continue
            rest = [nn for nn in nodes if nn is not n]
            rest2 = []
            for nn in rest:
                c = onnx.NodeProto()
                c.CopyFrom(nn)
                for j, x in enumerate(c.input):
                    if x == n.output[0]:
                        c.input[j] = src
                rest2.append(c)
            outs2 = [src if o == n.output[0] else o for o in outs]
            if len(set(outs2)) != len(outs2) or src in bf and src in outs2:
                continue
            m, f = _prune(make_model(rest2, bf, inits, outs2), bf)
            if fails(m, f):
                best, bf, changed = m, f, True
                break
        if changed:
            continue
        # 4. smaller inputs: halve or decrement one dimension of one graph input
        for name, v in list(bf.items()):
            for ax in range(v.ndim):
                for new in sorted({v.shape[ax] // 2, v.shape[ax] - 1}):
                    if new < 1 or new >= v.shape[ax]:
                        continue
                    f = dict(bf)
                    f[name] = np.take(v, range(new), axis=ax)
                    m = make_model(nodes, f, inits, outs)
                    if fails(m, f):
                        best, bf, changed = m, f, True
                        break
                if changed:
                    break
            if changed:
                break
    if log:
        log(f"  shrunk to {len(best.graph.node)} node(s) in {evals[0]} evaluations")
    return best, bf


TEST_TEMPLATE = '''
def test_fuzz_{name}():
    """{summary}"""
    import pathlib

    import numpy as np

    import edgert

    d = pathlib.Path(__file__).resolve().parent / "data" / "fuzz_cases" / "{name}"
    feeds = dict(np.load(d / "inputs.npz"))
    expected = np.load(d / "expected.npz")
    sess = edgert.Session(edgert.convert(str(d / "model.onnx"), None))
    outs = sess.run(None, feeds)
    for name, got in zip({outputs!r}, outs):
        want = expected[name]
        assert got.shape == want.shape, (name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol={rtol}, atol={atol})
'''


def write_case(out_dir: pathlib.Path, name: str, model, feeds, rec, expected=None) -> pathlib.Path:
    """Writes a failing case as a ready test: `expected` ({output: array}, the spec's answer)
    defaults to the float64 reference's outputs."""
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(d / "model.onnx"))
    np.savez(d / "inputs.npz", **feeds)
    outs = [o.name for o in model.graph.output]
    try:
        if expected is not None:
            exact = [np.asarray(expected[o], np.float64) for o in outs]
            sens = [np.zeros(e.shape) for e in exact]
        else:
            exact, sens = run_reference64(model, feeds)
        np.savez(d / "expected.npz", **{o: e.astype(np.float32) if e.dtype == np.float64 else e
                                        for o, e in zip(outs, exact)})
        scale = max([float(np.nanmax(np.abs(e))) if e.size else 0.0 for e in exact] + [1.0])
        slack = max([float(np.nanmax(s)) if s.size else 0.0 for s in sens] + [0.0])
    except Exception as e:  # the reference refuses the graph: onnxruntime's outputs
        np.savez(d / "expected.npz", **dict(zip(outs, run_ort(model, feeds))))
        scale, slack = 1.0, 0.0
        rec = dict(rec, reference_error=str(e)[:200])
    atol = float(f"{ATOL_REL * scale + K_SENS * slack + 1e-6:.3g}")
    summary = (f"{rec.get('cls')} ({rec.get('kind') or rec.get('cause')}): "
               f"{rec.get('detail', '')}").replace('"""', "'''").replace("\\", "/")[:400]
    text = TEST_TEMPLATE.format(name=re.sub(r"\W", "_", name), summary=summary, outputs=outs, rtol=RTOL, atol=atol)
    (d / "test_function.txt").write_text(text.lstrip())  # not test_*.py: pytest would collect it here
    (d / "record.json").write_text(json.dumps(rec, indent=1, default=str))
    (d / "graph.txt").write_text(onnx.printer.to_text(model.graph))
    return d


# --------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------

FAILING = ("crash", "mismatch", "tool_error")


def run(args) -> dict:
    log = (lambda s: print(s, flush=True)) if not args.quiet else (lambda s: None)
    workers = [Worker(args.mode) for _ in range(max(1, args.jobs))]
    counts: collections.Counter = collections.Counter()
    causes: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    failures: list[tuple[int, dict]] = []
    op_counts: collections.Counter = collections.Counter()
    t0 = time.time()
    deadline = t0 + args.minutes * 60 if args.minutes else math.inf
    limit = args.graphs if args.graphs else (math.inf if args.minutes else 300)
    nxt = args.start
    done = 0
    try:
        while True:
            for w in workers:
                if w.busy is None and nxt - args.start < limit and time.time() < deadline:
                    w.submit(("case", (args.seed, nxt, args.max_nodes)), nxt)
                    nxt += 1
            if all(w.busy is None for w in workers):
                break
            for w in workers:
                if w.busy is None:
                    continue
                idx = w.busy
                rec = w.poll(0.05)
                if rec is None:
                    continue
                rec["index"] = idx
                done += 1
                counts[rec["cls"]] += 1
                op_counts.update(rec.get("ops", []))
                if rec["cls"] == "rejected":
                    causes[rec.get("cause", "?")] += 1
                if rec["cls"] in ("mismatch", "deviation", "crash", "oracle_crash"):
                    kinds[f"{rec['cls']}: {rec.get('kind')}"] += 1
                if rec["cls"] in FAILING:
                    failures.append((idx, rec))
                    log(f"[{idx}] {rec['cls']} {rec.get('kind', '')}: {rec.get('detail', '')[:300]}  ops={rec['ops']}")
                elif args.verbose:
                    log(f"[{idx}] {rec['cls']} {rec.get('kind') or rec.get('cause') or ''} ops={rec['ops']}")
                if done % 100 == 0:
                    log(f"... {done} cases, {time.time() - t0:.0f} s: {dict(counts)}")
        elapsed = time.time() - t0
        shrunk = []
        if args.out and failures:
            out = pathlib.Path(args.out)
            seen: collections.Counter = collections.Counter()
            written: dict = {}
            for idx, rec in failures:
                sig = _signature(rec) + (tuple(rec.get("ops", [])) if rec["cls"] != "crash" else (),)
                if rec["cls"] == "tool_error" or seen[sig] >= 1 or len(shrunk) >= args.shrink_max:
                    continue
                seen[sig] += 1
                r = workers[0].call(("generate", (args.seed, idx, args.max_nodes)))
                if not r.get("graph"):
                    continue
                g = (onnx.load_from_string(r["graph"][0]), r["graph"][1])
                log(f"shrinking case {idx} ({rec['cls']} {rec.get('kind')})")
                m, f = shrink(workers[0], *g, rec, budget_s=args.shrink_seconds, log=log)
                final = workers[0].call(("model", (m.SerializeToString(), f)))
                key = (final.get("cls"), final.get("kind"), _graph_key(m))
                if key in written:
                    log(f"  same minimal graph as {written[key]}")
                    continue
                d = write_case(out, f"{rec['cls']}-{args.seed}-{idx}", m, f, dict(final, index=idx, seed=args.seed))
                written[key] = d.name
                shrunk.append(str(d))
                log(f"  wrote {d}")
    finally:
        for w in workers:
            w.stop()
    summary = {"seed": args.seed, "mode": args.mode, "cases": done, "seconds": round(elapsed, 1),
               "counts": dict(counts), "rejections_by_cause": dict(causes.most_common()),
               "failures_and_deviations_by_kind": dict(kinds.most_common()),
               "failures": [{"index": i, **{k: r.get(k) for k in ("cls", "kind", "detail", "ops", "cause")}}
                            for i, r in failures],
               "op_types": len(op_counts), "shrunk": shrunk}
    return summary


def print_summary(s: dict) -> None:
    print(f"\n{s['cases']} cases (seed {s['seed']}, mode {s['mode']}) in {s['seconds']} s, "
          f"{s['op_types']} op types")
    for cls in ("pass", "rejected", "invalid", "oracle_crash", "deviation", "crash", "mismatch", "tool_error"):
        print(f"  {cls:10s} {s['counts'].get(cls, 0)}")
    if s["rejections_by_cause"]:
        print("rejections by cause:")
        for c, n in s["rejections_by_cause"].items():
            print(f"  {n:5d}  {c}")
    if s["failures_and_deviations_by_kind"]:
        print("crashes, mismatches and deviations by kind:")
        for c, n in s["failures_and_deviations_by_kind"].items():
            print(f"  {n:5d}  {c}")
    for p in s["shrunk"]:
        print(f"shrunk case: {p}")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--graphs", type=int, default=0, help="number of cases (default 300 without --minutes)")
    ap.add_argument("--minutes", type=float, default=0, help="run until this much time has passed")
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--mode", choices=sorted(MODES), default="float32")
    ap.add_argument("--max-nodes", type=int, default=15)
    ap.add_argument("--out", help="directory for shrunk failing cases")
    ap.add_argument("--shrink-max", type=int, default=10, help="at most this many failures shrunk")
    ap.add_argument("--shrink-seconds", type=float, default=90)
    ap.add_argument("--json", help="write the summary as JSON here")
    ap.add_argument("--replay", type=int, help="run one case index in this process and print everything")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    if args.mode == "bounded":
        from tools import fuzz_bounded
        argv2 = ["--seed", str(args.seed)] + (["--graphs", str(args.graphs)] if args.graphs else []) + \
            (["--minutes", str(args.minutes)] if args.minutes else []) + (["--out", str(args.out)] if args.out else []) + \
            (["--replay", str(args.replay)] if args.replay is not None else [])
        return fuzz_bounded.main(argv2)
    if args.replay is not None:
        g = generate(args.seed, args.replay, args.max_nodes)
        if g is None:
            print("the generator gave up on this case")
            return 0
        print(onnx.printer.to_text(g[0].graph))
        print({k: v.shape for k, v in g[1].items()})
        rec = MODES[args.mode](*g)
        print(json.dumps(rec, indent=1, default=str))
        if args.out:
            print(write_case(pathlib.Path(args.out), f"replay-{args.seed}-{args.replay}", *g, rec))
        return 1 if rec["cls"] in FAILING else 0
    s = run(args)
    print_summary(s)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(s, indent=1, default=str))
    return 1 if any(s["counts"].get(c) for c in FAILING) else 0


if __name__ == "__main__":
    sys.exit(main())
