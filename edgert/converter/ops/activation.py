"""Fused activations: the `act`, `act_a`, `act_b` attributes that the fusion pass puts on
conv2d, gemm, matmul and binary nodes (float and int8), their parameter words and their
numpy meaning. Kernels: csrc/src/internal.h (ert_act)."""
from __future__ import annotations

import math

import numpy as np

from .registry import OpUnsupported

# Fused activation kinds (csrc/src/internal.h ert_act), by name.
ACT_KINDS = {"none": 0, "relu": 1, "clip": 2, "hard_sigmoid": 3, "hard_swish": 4, "sigmoid": 5,
             "silu": 6, "leaky_relu": 7, "tanh": 8, "gelu": 9}


def act_kind(value) -> int:
    """The activation kind of an `act` attribute (int kind or name; None is none)."""
    if value is None:
        return 0
    if isinstance(value, str):
        if value not in ACT_KINDS:
            raise OpUnsupported(f"unknown fused activation {value!r}")
        return ACT_KINDS[value]
    k = int(value)
    if not 0 <= k < len(ACT_KINDS):
        raise OpUnsupported(f"unknown fused activation kind {k}")
    return k


def act_words(attrs: dict) -> list:
    """The three parameter words [kind, a, b] of a fused activation."""
    return [act_kind(attrs.get("act")), float(attrs.get("act_a") or 0.0), float(attrs.get("act_b") or 0.0)]


def act_apply(kind: int, a: float, b: float, x: np.ndarray) -> np.ndarray:
    """numpy meaning of fused activation `kind` on float32 x."""
    if kind == 0:
        return x
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if kind == 1:
            r = np.where(v > 0, v, 0.0)
        elif kind == 2:
            r = np.minimum(np.maximum(v, a), b)
        elif kind == 3:
            r = np.clip(a * v + b, 0.0, 1.0)
        elif kind == 4:
            r = v * np.clip(v / 6.0 + 0.5, 0.0, 1.0)
        elif kind == 5:
            r = 1.0 / (1.0 + np.exp(-v))
        elif kind == 6:
            r = v / (1.0 + np.exp(-v))
        elif kind == 7:
            r = np.where(v < 0, a * v, v)
        elif kind == 8:
            r = np.tanh(v)
        elif kind == 9:
            erf = np.frompyfunc(math.erf, 1, 1)
            r = 0.5 * v * (1.0 + erf(v / math.sqrt(2.0)).astype(np.float64))
        else:
            raise OpUnsupported(f"unknown fused activation kind {kind}")
    return r.astype(np.float32)
