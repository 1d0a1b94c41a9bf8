"""Element-wise unary ops: one input, one output of the same shape.

Kernels: csrc/kernels/ref/unary.c. Dtypes: float32 for the math ops; abs, neg and sign
also int8/int16/int32/int64 (integer negation wraps); clip float32, uint8, int8, int16,
int32, int64; not bool; isnan and isinf float32 and float16 (bool output); copy any.
All ops except isnan, isinf and copy may run in place.

Attributes and parameter words (ops not listed have none):

    elu              alpha=1.0                     [alpha]
    selu             alpha=1.67326..., gamma=1.05070...   [alpha, gamma]
    celu             alpha=1.0 (nonzero)           [alpha]
    leaky_relu       alpha=0.01                    [alpha]
    thresholded_relu alpha=1.0                     [alpha]
    hard_sigmoid     alpha=0.2, beta=0.5           [alpha, beta]
    gelu             approximate "none" | "tanh"   [0 | 1 (int)]
    shrink           lambd=0.5, bias=0.0           [lambd, bias]
    clip             min, max (None: unbounded)    [min f, max f, min int64 (2 words, low
                                                    first), max int64 (2 words)]
    isinf            detect_positive=1, detect_negative=1   [int, int]

Semantics (v an element): relu max(v, 0) (NaN kept); elu v<0 ? alpha*(e^v - 1) : v;
selu v>0 ? gamma*v : gamma*alpha*(e^v - 1); celu v>0 ? v : alpha*(e^(v/alpha) - 1);
leaky_relu v<0 ? alpha*v : v; thresholded_relu v>alpha ? v : 0; hard_sigmoid
clamp(alpha*v + beta, 0, 1); hard_swish v*clamp(v/6 + 1/2, 0, 1); gelu
v/2*(1 + erf(v/sqrt 2)) or the tanh approximation; silu v*sigmoid(v); mish
v*tanh(softplus(v)); softplus log(1 + e^v); softsign v/(1 + |v|); shrink v<-lambd ?
v+bias : v>lambd ? v-bias : 0; round half to even; clip min(max(v, min), max) (integer
bounds are first clamped to the dtype's range); sign of NaN is NaN.
"""
from __future__ import annotations

import math

import numpy as np

from . import lut
from .registry import OpUnsupported, register

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BOOL = np.dtype(np.bool_)
SIGNED = [F32, np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)]
CLIP_TYPES = SIGNED + [np.dtype(np.uint8)]
ANY = [F32, F16, BOOL] + [np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64)]

SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _f64(fn):
    """Evaluates fn in float64 and rounds to float32 (a reference more exact than the kernel)."""
    def ref(x, *args):
        with np.errstate(all="ignore"):
            return np.asarray(fn(x.astype(np.float64), *args)).astype(np.float32)
    return ref


_erf = np.frompyfunc(math.erf, 1, 1)


def _erf64(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(np.float64)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _softplus(x):
    return np.logaddexp(0.0, x)


def _gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)))


# name -> (allowed input dtypes, output dtype or None for the input's, inplace,
#          attribute defaults in parameter order, reference(x, attrs))
_OPS: dict = {}


def _op(name, dtypes, ref, params=(), out=None, inplace=True):
    _OPS[name] = (dtypes, out, inplace, params, ref)


_F = [F32]
_op("relu", _F, lambda x, a: np.where(x < 0, np.float32(0), x).astype(np.float32))
_op("sigmoid", _F, lambda x, a: _f64(_sigmoid)(x))
_op("tanh", _F, lambda x, a: _f64(np.tanh)(x))
_op("exp", _F, lambda x, a: _f64(np.exp)(x))
_op("log", _F, lambda x, a: _f64(np.log)(x))
_op("sqrt", _F, lambda x, a: _f64(np.sqrt)(x))
_op("reciprocal", _F, lambda x, a: _f64(lambda v: 1.0 / v)(x))
_op("floor", _F, lambda x, a: np.floor(x))
_op("ceil", _F, lambda x, a: np.ceil(x))
_op("round", _F, lambda x, a: np.round(x))
_op("erf", _F, lambda x, a: _f64(_erf64)(x))
for _n in ("sin", "cos", "tan", "sinh", "cosh"):
    _op(_n, _F, (lambda f: lambda x, a: _f64(f)(x))(getattr(np, _n)))
for _n, _f in (("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan), ("asinh", np.arcsinh),
               ("acosh", np.arccosh), ("atanh", np.arctanh)):
    _op(_n, _F, (lambda f: lambda x, a: _f64(f)(x))(_f))
_op("softplus", _F, lambda x, a: _f64(_softplus)(x))
_op("softsign", _F, lambda x, a: _f64(lambda v: v / (1.0 + np.abs(v)))(x))
_op("elu", _F, lambda x, a: _f64(lambda v: np.where(v < 0, a["alpha"] * np.expm1(v), v))(x),
    (("alpha", 1.0),))
_op("selu", _F, lambda x, a: _f64(lambda v: np.where(v > 0, a["gamma"] * v,
                                                     a["gamma"] * a["alpha"] * np.expm1(v)))(x),
    (("alpha", SELU_ALPHA), ("gamma", SELU_GAMMA)))
_op("celu", _F, lambda x, a: _f64(lambda v: np.where(v > 0, v, a["alpha"] * np.expm1(v / a["alpha"])))(x),
    (("alpha", 1.0),))
_op("leaky_relu", _F, lambda x, a: _f64(lambda v: np.where(v < 0, a["alpha"] * v, v))(x), (("alpha", 0.01),))
_op("thresholded_relu", _F, lambda x, a: np.where(x > np.float32(a["alpha"]), x, np.float32(0)).astype(F32),
    (("alpha", 1.0),))
_op("hard_sigmoid", _F, lambda x, a: _f64(lambda v: np.clip(a["alpha"] * v + a["beta"], 0.0, 1.0))(x),
    (("alpha", 0.2), ("beta", 0.5)))
_op("hard_swish", _F, lambda x, a: _f64(lambda v: v * np.clip(v / 6.0 + 0.5, 0.0, 1.0))(x))
_op("gelu", _F, lambda x, a: _f64(lambda v: _gelu(v, a["approximate"]))(x), (("approximate", "none"),))
_op("silu", _F, lambda x, a: _f64(lambda v: v * _sigmoid(v))(x))
_op("mish", _F, lambda x, a: _f64(lambda v: v * np.tanh(_softplus(v)))(x))
_op("shrink", _F, lambda x, a: _f64(lambda v: np.where(v < -a["lambd"], v + a["bias"],
                                                       np.where(v > a["lambd"], v - a["bias"], 0.0)))(x),
    (("lambd", 0.5), ("bias", 0.0)))
_op("abs", SIGNED, lambda x, a: np.abs(x))
_op("neg", SIGNED, lambda x, a: np.negative(x))
_op("sign", SIGNED, lambda x, a: np.sign(x))
_op("clip", CLIP_TYPES, lambda x, a: _clip_ref(x, a), (("min", None), ("max", None)))
_op("not", [BOOL], lambda x, a: np.logical_not(x))
_op("isnan", [F32, F16], lambda x, a: np.isnan(x), out=BOOL, inplace=False)
_op("isinf", [F32, F16], lambda x, a: np.isinf(x) & (((x > 0) & bool(a["detect_positive"])) |
                                                      ((x < 0) & bool(a["detect_negative"]))),
    (("detect_positive", 1), ("detect_negative", 1)), out=BOOL, inplace=False)
_op("copy", ANY, lambda x, a: x.copy(), inplace=False)


def _attrs(node) -> dict:
    """The op's attributes in parameter order, defaults filled in (None means absent)."""
    out = {}
    for k, d in _OPS[node.op][3]:
        v = node.attrs.get(k)
        out[k] = d if v is None else v
    return out


def _int_bounds(dtype: np.dtype) -> tuple[int, int]:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return INT64_MIN, INT64_MAX


def _clip_ints(node, dtype: np.dtype) -> tuple[int, int]:
    a = _attrs(node)
    lo_t, hi_t = _int_bounds(dtype)
    lo = lo_t if a["min"] is None else min(max(int(a["min"]), lo_t), hi_t)
    hi = hi_t if a["max"] is None else min(max(int(a["max"]), lo_t), hi_t)
    return lo, hi


def _clip_ref(x: np.ndarray, a: dict) -> np.ndarray:
    if x.dtype.kind == "f":
        lo = -np.inf if a["min"] is None else a["min"]
        hi = np.inf if a["max"] is None else a["max"]
        return np.minimum(np.maximum(x, np.float32(lo)), np.float32(hi)).astype(x.dtype)
    lo_t, hi_t = _int_bounds(x.dtype)
    lo = lo_t if a["min"] is None else min(max(int(a["min"]), lo_t), hi_t)
    hi = hi_t if a["max"] is None else min(max(int(a["max"]), lo_t), hi_t)
    return np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))


def _words64(v: int) -> list[int]:
    """An int64 as two int32 words, low word first."""
    u = v & 0xFFFFFFFFFFFFFFFF
    lo, hi = u & 0xFFFFFFFF, u >> 32
    return [lo - (1 << 32) if lo >= 1 << 31 else lo, hi - (1 << 32) if hi >= 1 << 31 else hi]


def _make(name: str) -> None:
    dtypes, out, inplace, params, ref = _OPS[name]

    def infer(node, graph):
        if dtypes == _F and lut.applies(node, graph):  # int8 by table lookup
            return lut.infer(node, graph)
        x = graph.tensors[node.inputs[0]]
        if len(node.inputs) != 1:
            raise OpUnsupported(f"{name}: expects one input, got {len(node.inputs)}")
        if x.dtype not in dtypes:
            raise OpUnsupported(f"{name}: dtype {x.dtype} is not supported "
                                f"(supported: {', '.join(str(d) for d in dtypes)})")
        a = _attrs(node)
        if name == "gelu" and a["approximate"] not in ("none", "tanh"):
            raise OpUnsupported(f"gelu: approximate={a['approximate']!r} is not supported")
        if name == "celu" and float(a["alpha"]) == 0.0:
            raise OpUnsupported("celu: alpha must not be 0")
        if name == "clip" and x.dtype.kind == "f":
            for k in ("min", "max"):
                if a[k] is not None and math.isnan(float(a[k])):
                    raise OpUnsupported(f"clip: {k} is NaN")
        return [(x.shape, out if out is not None else x.dtype)]

    def pack(node, graph):
        a = _attrs(node)
        if name == "gelu":
            return [1 if a["approximate"] == "tanh" else 0]
        if name == "isinf":
            return [int(bool(a["detect_positive"])), int(bool(a["detect_negative"]))]
        if name == "clip":
            dt = graph.tensors[node.inputs[0]].dtype
            lo_f = -math.inf if a["min"] is None or dt.kind != "f" else float(a["min"])
            hi_f = math.inf if a["max"] is None or dt.kind != "f" else float(a["max"])
            lo, hi = _clip_ints(node, dt) if dt.kind in "iu" else (INT64_MIN, INT64_MAX)
            return [lo_f, hi_f] + _words64(lo) + _words64(hi)
        return [float(a[k]) for k, _ in params]

    def reference(node, inputs):
        if len(inputs) == 2:
            return lut.reference(node, inputs)
        return [ref(np.asarray(inputs[0]), _attrs(node))]

    register(name, infer=infer, pack=pack, reference=reference, inplace=inplace)


for _name in _OPS:
    _make(_name)

UNARY_OPS = tuple(_OPS)
