"""resize: ONNX Resize (and Upsample) with static scales and output shape.

Resizing is separable: along each axis d, output index o reads a few input indices
with weights, and an output element is the product-weighted sum over all axes. The
converter computes these per-axis tables once (in float64, following the ONNX
reference arithmetic: coordinate transform, neighbour choice, coefficients,
exclude_outside renormalization, edge clamping) and stores them as parameter words;
the C kernel only applies them.

Inputs: x. Output: x's dtype, shape attrs["shape"].

Attributes
    mode            "nearest" | "linear" | "cubic"
    coord           coordinate_transformation_mode: "half_pixel", "half_pixel_symmetric",
                    "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn", "tf_crop_and_resize"
    nearest_mode    "round_prefer_floor" | "round_prefer_ceil" | "floor" | "ceil" |
                    "simple" (opset < 11 Resize and Upsample: floor when upsampling an
                    axis, ceil when downsampling it)
    cubic_a         float (cubic mode)
    exclude_outside 0 | 1 (linear and cubic)
    antialias       0 | 1 (linear and cubic: when downsampling an axis, the filter is
                    stretched by 1/scale, so that axis takes more taps)
    scales          list[float], one per dim: the scale used by the coordinate transform
    shape           list[int]: the output shape
    roi             list[float] of 2*rank (starts then ends), tf_crop_and_resize only
    extrapolation_value  float (tf_crop_and_resize: output for source positions
                    outside the input)

Dtypes: nearest works on every edgert dtype (it copies elements); linear and cubic on
float32; positions needing extrapolation_value only on float32.

Parameter words
    0 kind (0 nearest: one tap per output index, copied; 1 weighted)
    1 rank r
    2 extrapolation value (float)
    3 .. 3+r  per axis d: taps T_d; 0 means identity (output size equals input size,
              index o reads o); nearest tables have T_d = 1
    then for each axis with T_d > 0, in order: out_d*T_d input indices (int; -1 = this
    output index lies outside the crop: the element is the extrapolation value), and,
    when kind is 1, out_d*T_d weights (float).
A weighted output element sums over the taps of every table axis (the product of
their weights); the kernel accepts at most 256 tap combinations over the axes before
the last.
"""
from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from .registry import OpUnsupported, in_shapes, register

MODES = ("nearest", "linear", "cubic")
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
MAX_ROW_COMBOS = 256


def _x_original(coord: str, y: np.ndarray, scale: float, n_in: int, n_out: int,
                roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinates of output indices y; second value flags extrapolated ones."""
    out_f = scale * n_in  # the ONNX reference uses the unrounded output length here
    extra = None
    if coord == "align_corners":
        # The integer output length (the ONNX text, onnxruntime and PyTorch): with a
        # non-integer scale, the unrounded length would misplace every tap.
        x = np.zeros(n_out) if n_out == 1 else y * (n_in - 1) / (n_out - 1)
    elif coord == "asymmetric":
        x = y / scale
    elif coord == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif coord == "pytorch_half_pixel":
        # A single output reads coordinate 0 (the ONNX text and onnxruntime; the ONNX
        # reference uses -0.5, which differs only for cubic).
        x = np.zeros(n_out) if n_out == 1 else (y + 0.5) / scale - 0.5
    elif coord == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif coord == "half_pixel_symmetric":
        adjustment = n_out / out_f
        center = n_in / 2
        x = center * (1 - adjustment) + (y + 0.5) / scale - 0.5
    elif coord == "tf_crop_and_resize":
        r0, r1 = roi if roi is not None else (0.0, 1.0)
        if n_out == 1:  # the integer output length, as for align_corners
            x = np.full(n_out, (r1 - r0) * (n_in - 1) / 2)
        else:
            x = y * (r1 - r0) * (n_in - 1) / (n_out - 1)
        x = x + r0 * (n_in - 1)
        extra = (x < 0) | (x > n_in - 1)
    else:
        raise OpUnsupported(f"resize: coordinate_transformation_mode {coord!r} is not supported")
    # A coordinate that is a whole number in exact arithmetic (8.5 * 7 / 17 - 0.5 = 3) can
    # come out 1 ulp off; snapped, a nearest pick or a tap split does not turn on the noise.
    x = np.where(np.abs(x - np.round(x)) < 1e-9, np.round(x), x)
    return x, extra


def _coeffs(attrs: dict, ratio: float, scale: float) -> list[float]:
    mode = attrs["mode"]
    if attrs.get("antialias", 0) and mode != "nearest":
        return _antialias_coeffs(mode, ratio, scale, float(attrs.get("cubic_a", -0.75)))
    if mode == "nearest":
        if float(ratio).is_integer():
            return [0.0, 1.0]
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        if nm == "simple":
            nm = "floor" if scale >= 1 else "ceil"
        if nm == "round_prefer_floor":
            return [float(ratio <= 0.5), float(ratio > 0.5)]
        if nm == "round_prefer_ceil":
            return [float(ratio < 0.5), float(ratio >= 0.5)]
        if nm == "floor":
            return [1.0, 0.0]
        if nm == "ceil":
            return [0.0, 1.0]
        raise OpUnsupported(f"resize: nearest_mode {nm!r} is not supported")
    if mode == "linear":
        return [1.0 - ratio, ratio]
    a = float(attrs.get("cubic_a", -0.75))
    r = ratio
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
            ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a]


def _antialias_coeffs(mode: str, ratio: float, scale: float, a: float) -> list[float]:
    """Filter taps stretched by 1/scale when downsampling (ONNX antialias)."""
    scale = min(scale, 1.0)
    if mode == "linear":
        start = math.floor(-1 / scale) + 1
        args = [(i - ratio) * scale for i in range(start, start + 2 - 2 * start)]
        c = [min(max(1 - abs(t), 0.0), 1.0) for t in args]
    else:
        start = math.floor(-2 / scale) + 1

        def cubic(t: float) -> float:
            t = abs(t)
            if t <= 1:
                return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
            if t < 2:
                return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
            return 0.0
        c = [cubic(scale * (i - ratio)) for i in range(start, 2 - start)]
    total = sum(c)
    return [v / total for v in c]


def axis_taps(attrs: dict, scale: float) -> int:
    """Taps per output index along an axis resized with `scale`."""
    mode = attrs["mode"]
    if mode == "nearest":
        return 2
    if attrs.get("antialias", 0):
        s = min(scale, 1.0)
        return 2 - 2 * (math.floor((-1 if mode == "linear" else -2) / s) + 1)
    return 4 if mode == "cubic" else 2


def axis_table(attrs: dict, d: int, n_in: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(indices [n_out, T] int64 with -1 = extrapolate, weights [n_out, T] float64) for
    axis d, or None when the axis is an identity."""
    n_out = int(attrs["shape"][d])
    scale = float(attrs["scales"][d])
    r = len(attrs["shape"])
    roi = attrs.get("roi")
    coord = attrs["coord"]
    roi_d = (float(roi[d]), float(roi[r + d])) if roi is not None else None
    default_roi = roi_d is None or (math.isclose(roi_d[0], 0.0) and math.isclose(roi_d[1], 1.0))
    if n_out == n_in and math.isclose(scale, 1.0) and (coord != "tf_crop_and_resize" or default_roi):
        return None
    if n_out == 0:
        return np.zeros((0, 1), np.int64), np.zeros((0, 1))
    if n_in == 0:
        raise OpUnsupported(f"resize: cannot resize an empty dim {d} to {n_out}")
    if scale <= 0:
        raise OpUnsupported(f"resize: scale {scale} of dim {d} must be positive")
    y = np.arange(n_out, dtype=np.float64)
    x, extra = _x_original(coord, y, scale, n_in, n_out, roi_d)
    n = axis_taps(attrs, scale)
    pad = (n + 1) // 2
    idx = np.zeros((n_out, n), np.int64)
    w = np.zeros((n_out, n))
    for o in range(n_out):
        xo = float(x[o])
        xi = math.floor(xo)
        ratio = 1.0 if xo == xi else xo - xi
        w[o] = _coeffs(attrs, ratio, scale)
        xp = xo + pad
        p = math.floor(xp)
        start = p - n // 2 if xp == p else p - n // 2 + 1
        idx[o] = np.arange(start, start + n) - pad
    if attrs.get("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        s = w.sum(axis=1, keepdims=True)
        w = w / np.where(s == 0, 1.0, s)
    idx = np.clip(idx, 0, n_in - 1)
    if attrs["mode"] == "nearest":
        pick = np.argmax(w, axis=1)
        idx = idx[np.arange(n_out), pick][:, None]
        w = np.ones((n_out, 1))
    if extra is not None:
        idx[extra] = -1
        w[extra] = 0.0
    if n_out == n_in and attrs["mode"] == "nearest" and np.array_equal(idx[:, 0], np.arange(n_in)):
        return None
    return idx, w


def _tables(node, in_shape) -> list[tuple[np.ndarray, np.ndarray] | None]:
    return [axis_table(node.attrs, d, in_shape[d]) for d in range(len(in_shape))]


def _infer(node, graph):
    xs = in_shapes(node, graph)[0]
    dt = graph.tensors[node.inputs[0]].dtype
    a = node.attrs
    if not dtypes.supported(dt):
        raise OpUnsupported(f"resize: dtype {dt} is not an edgert dtype")
    if a["mode"] not in MODES:
        raise OpUnsupported(f"resize: mode {a['mode']!r} is not supported")
    if a["coord"] not in COORD_MODES:
        raise OpUnsupported(f"resize: coordinate_transformation_mode {a['coord']!r} is not supported")
    if a["mode"] != "nearest" and dt != np.float32:
        raise OpUnsupported(f"resize: {a['mode']} mode supports float32 only, got {dt}")
    if a["mode"] == "nearest" and a.get("nearest_mode", "round_prefer_floor") not in NEAREST_MODES:
        raise OpUnsupported(f"resize: nearest_mode {a.get('nearest_mode')!r} is not supported")
    if a["mode"] == "nearest" and a.get("exclude_outside", 0):
        raise OpUnsupported("resize: exclude_outside with nearest mode is not supported")
    shape = tuple(int(s) for s in a["shape"])
    if len(shape) != len(xs) or len(a["scales"]) != len(xs) or any(s < 0 for s in shape):
        raise OpUnsupported("resize: scales and shape must have one entry per dim")
    tables = _tables(node, xs)
    combos = 1
    for t in tables[:-1]:
        if t is not None:
            combos *= t[0].shape[1]
    if combos > MAX_ROW_COMBOS:
        raise OpUnsupported(f"resize: {a['mode']} over {len(xs) - 1} outer axes needs {combos} tap "
                            f"combinations per row, at most {MAX_ROW_COMBOS} are supported")
    if dt != np.float32 and any(t is not None and (t[0] < 0).any() for t in tables):
        raise OpUnsupported("resize: extrapolation is supported for float32 only")
    return [(shape, dt)]


def _pack(node, graph):
    xs = in_shapes(node, graph)[0]
    a = node.attrs
    tables = _tables(node, xs)
    weighted = a["mode"] != "nearest"
    words: list = [1 if weighted else 0, len(xs), float(a.get("extrapolation_value", 0.0))]
    words += [0 if t is None else int(t[0].shape[1]) for t in tables]
    for t in tables:
        if t is None:
            continue
        idx, w = t
        words += [int(v) for v in idx.reshape(-1)]
        if weighted:
            words += [float(v) for v in w.reshape(-1)]
    return words


def _reference(node, ins):
    x = ins[0]
    a = node.attrs
    tables = _tables(node, x.shape)
    weighted = a["mode"] != "nearest"
    y = x.astype(np.float64) if weighted else x
    extra = np.zeros((), bool)
    for d, t in enumerate(tables):
        if t is None:
            continue
        idx, w = t
        bshape = [1] * x.ndim
        bshape[d] = idx.shape[0]
        extra = extra | (idx[:, 0] < 0).reshape(bshape)
        safe = np.maximum(idx, 0)
        if x.shape[d] == 0 or idx.shape[0] == 0:
            shp = list(y.shape)
            shp[d] = idx.shape[0]
            y = np.zeros(shp, y.dtype)
            continue
        g = np.take(y, safe, axis=d)  # [.., n_out, T, ..]
        if weighted:
            wshape = [1] * g.ndim
            wshape[d], wshape[d + 1] = w.shape
            y = (g * w.reshape(wshape)).sum(axis=d + 1)
        else:
            y = g[(slice(None),) * (d + 1) + (0,)]
    if weighted:
        y = y.astype(np.float32)
    if extra.any():
        y = np.where(extra, np.float32(a.get("extrapolation_value", 0.0)), y)
    return [np.ascontiguousarray(y.astype(x.dtype))]


register("resize", infer=_infer, pack=_pack, reference=_reference)
