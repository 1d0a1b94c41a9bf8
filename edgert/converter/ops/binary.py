"""Element-wise binary ops (and where) with numpy broadcasting, output rank <= 8.

Kernels: csrc/kernels/ref/binary.c. Both operands of a binary op have one dtype (the
ONNX lowering inserts casts where ONNX allows mixed types).

    add sub mul div pow min max mod   float32, uint8, int8, int16, int32, int64
    equal                             those and bool; bool output
    less less_or_equal greater greater_or_equal   float32 and the integers; bool output
    and or xor                        bool
    bitwise_and bitwise_or bitwise_xor bitshift   uint8, int8, int16, int32, int64
    prelu                             float32; the slope broadcasts to x (output shape = x's)
    where                             cond bool, x and y of one dtype (any)

Integer semantics: arithmetic wraps; div truncates toward zero; pow with a negative
exponent truncates 1/x^-e toward zero; division or remainder by zero gives 0.
min/max propagate NaN. mod: fmod=1 takes the dividend's sign (C fmod / %), fmod=0 the
divisor's (x - floor(x/y)*y, with ONNX's float special cases). bitshift: right shifts
of signed values are arithmetic; an amount that is negative or >= the bit width gives
-1 for a right shift of a negative value, else 0.

Attributes and parameter words:

    add       act (int kind, 0 none; see ert_act), act_a, act_b   [act, act_a f, act_b f]
    mod       fmod 0 | 1                                          [fmod]
    bitshift  direction "left" | "right"                          [0 | 1]

add, sub, mul and div may run in place (the output may share input 0's buffer when
they have the same shape and dtype).
"""
from __future__ import annotations


import numpy as np

from . import binary_s8
from .registry import OpUnsupported, register
from .activation import act_apply, act_kind, act_words
from .shapes import broadcast_shape

F32 = np.dtype(np.float32)
BOOL = np.dtype(np.bool_)
INTS = [np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64)]
NUMERIC = [F32] + INTS

# ---- numpy meanings ---------------------------------------------------------------

def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            return a / b
        safe = np.where(b == 0, 1, b).astype(a.dtype)
        r = np.fmod(a, safe)
        q = (a - r) // safe
        return np.where(b == 0, 0, q).astype(a.dtype)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            return np.power(a, b).astype(a.dtype)
        a64, b64 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
        neg = b64 < 0
        pos = np.power(a64, np.where(neg, 0, b64))
        negv = np.where(a64 == 1, 1, np.where(a64 == -1, np.where(b64 % 2 == 1, -1, 1), 0))
        return np.where(neg, negv, pos).astype(a.dtype)


def _mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            if fmod:
                return np.fmod(a, b)
            r = np.fmod(a, b)
            fix = (r != 0) & ((r < 0) != (b < 0))
            r = np.where(fix, r + b, r)
            return np.where(r == 0, np.copysign(np.float32(0), b), r).astype(a.dtype)
        safe = np.where(b == 0, 1, b).astype(a.dtype)
        r = np.fmod(a, safe) if fmod else np.mod(a, safe)
        return np.where(b == 0, 0, r).astype(a.dtype)


def _shift(a: np.ndarray, b: np.ndarray, right: bool) -> np.ndarray:
    width = a.dtype.itemsize * 8
    a64, b64 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    out_of_range = (b64 < 0) | (b64 >= width)
    s = np.where(out_of_range, 0, b64)
    if right:
        r = a64 >> s  # arithmetic on int64, exact for the narrower types
        fill = np.where(a64 < 0, -1, 0)
    else:
        mask = (1 << width) - 1
        r = (a64.astype(np.uint64) << s.astype(np.uint64)) & np.uint64(mask)
        return np.where(out_of_range, np.uint64(0), r).astype(a.dtype)
    return np.where(out_of_range, fill, r).astype(a.dtype)


_REFS = {
    "add": lambda a, b, n: np.add(a, b),
    "sub": lambda a, b, n: np.subtract(a, b),
    "mul": lambda a, b, n: np.multiply(a, b),
    "div": lambda a, b, n: _trunc_div(a, b),
    "pow": lambda a, b, n: _pow(a, b),
    "min": lambda a, b, n: np.minimum(a, b),
    "max": lambda a, b, n: np.maximum(a, b),
    "mod": lambda a, b, n: _mod(a, b, int(n.attrs.get("fmod", 0))),
    "equal": lambda a, b, n: np.equal(a, b),
    "less": lambda a, b, n: np.less(a, b),
    "less_or_equal": lambda a, b, n: np.less_equal(a, b),
    "greater": lambda a, b, n: np.greater(a, b),
    "greater_or_equal": lambda a, b, n: np.greater_equal(a, b),
    "and": lambda a, b, n: np.logical_and(a, b),
    "or": lambda a, b, n: np.logical_or(a, b),
    "xor": lambda a, b, n: np.logical_xor(a, b),
    "bitwise_and": lambda a, b, n: np.bitwise_and(a, b),
    "bitwise_or": lambda a, b, n: np.bitwise_or(a, b),
    "bitwise_xor": lambda a, b, n: np.bitwise_xor(a, b),
    "bitshift": lambda a, b, n: _shift(a, b, n.attrs.get("direction", "left") == "right"),
    "prelu": lambda a, b, n: np.where(a < 0, a * b, a).astype(a.dtype),
}

_DTYPES = {
    **{k: NUMERIC for k in ("add", "sub", "mul", "div", "pow", "min", "max", "mod",
                            "less", "less_or_equal", "greater", "greater_or_equal")},
    "equal": NUMERIC + [BOOL],
    **{k: [BOOL] for k in ("and", "or", "xor")},
    **{k: INTS for k in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitshift")},
    "prelu": [F32],
}

_BOOL_OUT = {"equal", "less", "less_or_equal", "greater", "greater_or_equal"}
_INPLACE = {"add", "sub", "mul", "div"}


def _make(name: str) -> None:
    dtypes = _DTYPES[name]
    ref = _REFS[name]

    def infer(node, graph):
        if len(node.inputs) != 2 or not all(node.inputs):
            raise OpUnsupported(f"{name}: expects two inputs")
        if name in ("add", "mul") and binary_s8.applies(node, graph):
            return binary_s8.infer(node, graph)
        a, b = (graph.tensors[i] for i in node.inputs)
        if a.dtype != b.dtype:
            raise OpUnsupported(f"{name}: operands have dtypes {a.dtype} and {b.dtype}")
        if a.dtype not in dtypes:
            raise OpUnsupported(f"{name}: dtype {a.dtype} is not supported "
                                f"(supported: {', '.join(str(d) for d in dtypes)})")
        shape = broadcast_shape([a.shape, b.shape], name)
        if name == "prelu" and shape != a.shape:
            raise OpUnsupported(f"prelu: slope shape {list(b.shape)} does not broadcast to x {list(a.shape)}")
        if name == "add" and act_kind(node.attrs.get("act")) != 0 and a.dtype != F32:
            raise OpUnsupported("add: a fused activation needs float32")
        if name == "mod" and int(node.attrs.get("fmod", 0)) not in (0, 1):
            raise OpUnsupported("mod: fmod must be 0 or 1")
        if name == "bitshift" and node.attrs.get("direction", "left") not in ("left", "right"):
            raise OpUnsupported(f"bitshift: direction {node.attrs.get('direction')!r}")
        return [(shape, BOOL if name in _BOOL_OUT else a.dtype)]

    def pack(node, graph):
        if name in ("add", "mul") and binary_s8.applies(node, graph):
            return binary_s8.pack(node, graph)
        if name == "add":
            return act_words(node.attrs)
        if name == "mod":
            return [int(node.attrs.get("fmod", 0))]
        if name == "bitshift":
            return [1 if node.attrs.get("direction", "left") == "right" else 0]
        return []

    def reference(node, inputs):
        a, b = (np.asarray(x) for x in inputs)
        if name in ("add", "mul") and "y_zp" in node.attrs and a.dtype == np.int8:
            return binary_s8.reference(node, inputs)
        with np.errstate(all="ignore"):
            r = np.asarray(ref(a, b, node))
        if name == "add":
            kind, fa, fb = act_words(node.attrs)
            r = act_apply(kind, fa, fb, r)
        return [r]

    register(name, infer=infer, pack=pack, reference=reference, inplace=name in _INPLACE)


for _name in _REFS:
    _make(_name)


def _where_infer(node, graph):
    if len(node.inputs) != 3 or not all(node.inputs):
        raise OpUnsupported("where: expects three inputs")
    c, x, y = (graph.tensors[i] for i in node.inputs)
    if c.dtype != BOOL:
        raise OpUnsupported(f"where: condition has dtype {c.dtype}, must be bool")
    if x.dtype != y.dtype:
        raise OpUnsupported(f"where: values have dtypes {x.dtype} and {y.dtype}")
    return [(broadcast_shape([c.shape, x.shape, y.shape], "where"), x.dtype)]


register("where", infer=_where_infer, pack=lambda node, graph: [],
         reference=lambda node, inputs: [np.where(*[np.asarray(v) for v in inputs])])

BINARY_OPS = tuple(_REFS)
