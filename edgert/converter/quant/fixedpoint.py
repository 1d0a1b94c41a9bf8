"""Integer arithmetic of edgert's int8 ops, shared by the quantizer and the numpy
references (docs/quantization.md is the specification; the C kernels include
csrc/kernels/ref/quant_s8.h, which implements the same rules).

A real multiplier m >= 0 is represented as (mult, shift) with m ~= mult * 2**-shift,
mult an int32 in [2**30, 2**31) (or 0) and shift in [1, 62]. Requantizing an integer
accumulator `acc` is one 64-bit multiply and one rounding shift:

    requant(acc, mult, shift) = floor((acc * mult + 2**(shift - 1)) / 2**shift)

that is, rounding half up (toward +infinity). The product must fit in int64; each op
bounds its accumulator so that it does.
"""
from __future__ import annotations

import math

import numpy as np

QMIN, QMAX = -128, 127
SHIFT_MIN, SHIFT_MAX = 1, 62


class MultiplierRangeError(ValueError):
    """A requantization multiplier that the fixed-point form cannot hold (not finite,
    negative, or 2**30 and above): the node has no int8 form with these scales."""


def quantize_multiplier(m: float) -> tuple[int, int]:
    """(mult, shift) with mult * 2**-shift the closest such value to m (m >= 0, below
    2**30). Multipliers too small for shift 62 lose low bits (down to mult 0)."""
    m = float(m)
    if not math.isfinite(m) or m < 0:
        raise MultiplierRangeError(f"requantization multiplier {m} must be finite and >= 0")
    if m == 0.0:
        return 0, SHIFT_MIN
    f, e = math.frexp(m)  # m = f * 2**e, f in [0.5, 1)
    mult = int(round(f * (1 << 31)))
    if mult == 1 << 31:
        mult >>= 1
        e += 1
    shift = 31 - e
    if shift < SHIFT_MIN:
        raise MultiplierRangeError(f"requantization multiplier {m} is too large (at most 2**30)")
    if shift > SHIFT_MAX:
        drop = shift - SHIFT_MAX
        mult = (mult + (1 << (drop - 1))) >> drop if drop < 63 else 0
        shift = SHIFT_MAX
    return mult, shift


def narrow_multipliers(ms, bits: int) -> tuple[list[int], int]:
    """Multipliers of `bits` bits sharing one shift in [1, 31] (add: 15, mul: 14): the
    largest of ms becomes a value in [2**(bits-1), 2**bits). None when the largest is
    2**(bits-1) or more (no shift >= 1 represents it)."""
    top = max(float(m) for m in ms)
    if not math.isfinite(top) or top < 0:
        raise MultiplierRangeError(f"multipliers {ms} must be finite and >= 0")
    if top == 0.0:
        return [0 for _ in ms], 1
    _, e = math.frexp(top)
    shift = bits - e
    if int(round(top * 2.0 ** shift)) >= 1 << bits:
        shift -= 1
    shift = min(shift, 31)
    if shift < 1:
        raise MultiplierRangeError(f"multiplier {top} is too large for {bits}-bit multipliers")
    return [min(int(round(float(m) * 2.0 ** shift)), (1 << bits) - 1) for m in ms], shift


def quantize_multipliers(ms) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel quantize_multiplier: (mult int32 array, shift int32 array)."""
    pairs = [quantize_multiplier(float(m)) for m in np.asarray(ms, np.float64).reshape(-1)]
    return (np.array([p[0] for p in pairs], np.int32).reshape(np.shape(ms)),
            np.array([p[1] for p in pairs], np.int32).reshape(np.shape(ms)))


def requant(acc, mult, shift) -> np.ndarray:
    """floor((acc * mult + 2**(shift-1)) / 2**shift) elementwise, in int64 (broadcasting)."""
    acc = np.asarray(acc, np.int64)
    mult = np.asarray(mult, np.int64)
    shift = np.asarray(shift, np.int64)
    return (acc * mult + (np.int64(1) << (shift - 1))) >> shift


def saturate(v, lo: int = QMIN, hi: int = QMAX) -> np.ndarray:
    """Clamps to [lo, hi] and returns int8."""
    return np.clip(np.asarray(v, np.int64), lo, hi).astype(np.int8)


def round_div(num, den) -> np.ndarray:
    """num / den rounded half away from zero (den > 0), in int64."""
    num = np.asarray(num, np.int64)
    den = np.asarray(den, np.int64)
    q = (np.abs(num) + den // 2) // den
    return np.where(num < 0, -q, q)


def round_half_even_f32(v: np.ndarray) -> np.ndarray:
    """Float32 values rounded half to even (as float32)."""
    return np.rint(np.asarray(v, np.float32)).astype(np.float32)


# ---- choosing quantization parameters -------------------------------------------

def activation_qparams(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero_point) of int8 asymmetric per-tensor quantization covering [lo, hi]
    (widened to include 0, so that 0 is exact)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"range [{lo}, {hi}] is not finite")
    scale = float(np.float32((hi - lo) / 255.0))
    if scale <= 0.0 or not math.isfinite(scale):
        return 1.0, 0
    zp = int(round(QMIN - lo / scale))
    return scale, min(max(zp, QMIN), QMAX)


def weight_qparams(w: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-channel int8 quantization of w along `axis`: (int8 values in
    [-127, 127], float32 scales with max|w[c]| = 127 * scale[c])."""
    w = np.asarray(w, np.float32)
    red = tuple(d for d in range(w.ndim) if d != axis)
    amax = np.max(np.abs(w), axis=red) if w.size else np.zeros(w.shape[axis], np.float32)
    scale = (amax.astype(np.float64) / 127.0).astype(np.float32)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def quantize_values(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """float32 -> int8 as quantize_linear computes it: saturate(round_half_even(x / s) + zp)."""
    v = np.rint(np.asarray(x, np.float32) / np.float32(scale)).astype(np.float64) + zp
    v = np.where(np.isnan(v), zp, v)
    return np.clip(v, QMIN, QMAX).astype(np.int8)


def dequantize_values(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    return ((np.asarray(q, np.int32) - np.int32(zp)).astype(np.float32) * np.float32(scale)).astype(np.float32)


def bias_values(b: np.ndarray | None, s_in: float, s_w: np.ndarray, n: int) -> np.ndarray:
    """int32 bias in accumulator units (scale s_in * s_w[c]), clamped to +-2**30."""
    if b is None:
        return np.zeros(n, np.int32)
    acc_scale = np.float64(s_in) * np.asarray(s_w, np.float64)
    q = np.rint(np.asarray(b, np.float64) / acc_scale)
    return np.clip(q, -(2**30), 2**30).astype(np.int32)


def shared_shift_multipliers(ms) -> tuple[np.ndarray, int]:
    """Multipliers sharing one shift: the shift that represents the largest of ms, and
    each m as round(m * 2**shift) (int32; smaller ones keep fewer significant bits)."""
    ms = np.asarray(ms, np.float64).reshape(-1)
    top = float(ms.max()) if ms.size else 0.0
    _, shift = quantize_multiplier(top)
    mult = np.minimum(np.rint(ms * 2.0 ** shift), 2**31 - 1).astype(np.int64)
    return mult.astype(np.int32), shift


def channel_params(bias: np.ndarray, s_in: float, s_w: np.ndarray, s_out: float) -> tuple[np.ndarray, int]:
    """The int32 [C, 2] table (bias, mult) of the conv2d and gemm int8 kernels and the
    layer's shift: mult[c] * 2**-shift ~= s_in * s_w[c] / s_out."""
    mult, shift = shared_shift_multipliers(np.float64(s_in) * np.asarray(s_w, np.float64) / np.float64(s_out))
    table = np.stack([np.asarray(bias, np.int32), mult], axis=1).astype(np.int32)
    return np.ascontiguousarray(table), shift


def clamp_range(zp: int, scale: float, act: int, a: float, b: float) -> tuple[int, int]:
    """Integer output range [lo, hi] of an int8 output with an activation folded in:
    none (0), relu (1) or clip(a, b) (2)."""
    lo, hi = QMIN, QMAX
    if act == 1:
        lo = max(lo, zp)
    elif act == 2:
        if a is not None and math.isfinite(a):
            lo = max(lo, min(QMAX, int(zp + math.ceil(a / scale - 1e-9))))
        if b is not None and math.isfinite(b):
            hi = min(hi, max(QMIN, int(zp + math.floor(b / scale + 1e-9))))
    elif act != 0:
        raise ValueError(f"activation kind {act} cannot be folded into an int8 output")
    return lo, max(lo, hi)
