"""Reductions over a set of axes, and argmax / argmin along one axis.

reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_l1 reduce_l2
reduce_log_sum reduce_log_sum_exp reduce_sum_square
    inputs:  X
    outputs: Y, same dtype as X
    attrs:   axes (list of int): the reduced axes, in [-rank, rank), distinct. An empty
             list reduces nothing: each output is the reduction of one element (x for
             sum, x*x for sum_square, |x| for l1 and l2, log(x) for log_sum, ...). The
             ONNX "empty axes means all axes" rule is resolved by the lowering.
             keepdims (bool, default True): reduced axes stay as size-1 dimensions.
    params:  [keepdims, n_axes, axis_0, ..., axis_{n_axes-1}], axes normalized to
             [0, rank), strictly increasing.
    dtypes:  float32 for every op; int32 and int64 also for sum, prod, max, min
             (integer sums and products wrap around); bool also for max (any) and
             min (all).
    An empty reduction (a reduced dimension of size 0) gives: sum, l1, l2, sum_square 0;
    prod 1; max -inf (integers: the type's minimum; bool: false); min +inf (integers:
    the type's maximum; bool: true); mean NaN; log_sum and log_sum_exp -inf.
    Float max and min propagate NaN.

argmax argmin
    inputs:  X (float32, int32, int64)
    outputs: Y (int64): the index along `axis` of the first (or, with
             select_last_index, the last) maximum / minimum.
    attrs:   axis (int, in [-rank, rank)), keepdims (bool, default True),
             select_last_index (bool, default False)
    params:  [axis (normalized), keepdims, select_last_index]
    The reduced dimension must not be empty unless the output is.

Kernel layout (csrc/kernels/ref/reduce.c): after dropping size-1 dimensions and merging
neighbouring dimensions that are both reduced or both kept, the input is either
[outer, reduced, inner] (computed directly, in parallel) or a general pattern (for
example reduced-kept-reduced), whose reduced elements the kernel gathers one output at
a time into scratch (`reduce_scratch_bytes` below, which must agree with the C prepare).
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, Shape, register

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)

REDUCE_OPS = (
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1",
    "reduce_l2", "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square",
)

REDUCE_DTYPES: dict[str, tuple[np.dtype, ...]] = {op: (F32,) for op in REDUCE_OPS}
REDUCE_DTYPES["reduce_sum"] = (F32, I32, I64)
REDUCE_DTYPES["reduce_prod"] = (F32, I32, I64)
REDUCE_DTYPES["reduce_max"] = (F32, I32, I64, BOOL)
REDUCE_DTYPES["reduce_min"] = (F32, I32, I64, BOOL)

ARG_DTYPES = (F32, I32, I64)


def normalize_axes(axes, rank: int, what: str = "axes") -> list[int]:
    """Axes in [-rank, rank) as sorted non-negative ints; OpUnsupported when out of range
    or repeated."""
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            raise OpUnsupported(f"{what}: axis {a} is out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise OpUnsupported(f"{what}: repeated axes {list(axes)}")
    return sorted(out)


def reduced_shape(shape: Shape, axes: list[int], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if k in axes else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def merged_groups(shape: Shape, axes: list[int]) -> list[tuple[int, bool]]:
    """(size, reduced) runs after dropping size-1 dimensions and merging neighbours of
    the same kind: the decomposition the C prepare computes."""
    groups: list[list] = []
    for k, d in enumerate(shape):
        if d == 1:
            continue
        red = k in axes
        if groups and groups[-1][1] == red:
            groups[-1][0] *= d
        else:
            groups.append([d, red])
    return [(int(s), bool(r)) for s, r in groups]


def is_general(shape: Shape, axes: list[int]) -> bool:
    """True when the reduction is not of the form [outer, reduced, inner]."""
    # Runs alternate, so one reduced run has at most one kept run on each side.
    return sum(1 for _, r in merged_groups(shape, axes) if r) > 1


def reduce_scratch_bytes(shape: Shape, axes: list[int], dtype) -> int:
    if not is_general(shape, axes):
        return 0
    r = 1
    for a in axes:
        r *= shape[a]
    return int(r) * np.dtype(dtype).itemsize


def _x(node, graph):
    return graph.tensors[node.inputs[0]]


def _reduce_axes(node, graph) -> list[int]:
    rank = len(_x(node, graph).shape)
    return normalize_axes(node.attrs.get("axes", []), rank, node.op)


def _make_reduce(op: str):
    def infer(node, graph):
        if len(node.inputs) != 1 or not node.inputs[0]:
            raise OpUnsupported(f"{op} takes one input")
        x = _x(node, graph)
        if x.dtype not in REDUCE_DTYPES[op]:
            raise OpUnsupported(
                f"{op}: dtype {x.dtype} is not supported (supported: "
                + ", ".join(str(d) for d in REDUCE_DTYPES[op]) + ")")
        axes = _reduce_axes(node, graph)
        keep = bool(node.attrs.get("keepdims", True))
        return [(reduced_shape(x.shape, axes, keep), x.dtype)]

    def pack(node, graph):
        axes = _reduce_axes(node, graph)
        return [int(bool(node.attrs.get("keepdims", True))), len(axes), *axes]

    def reference(node, inputs):
        x = inputs[0]
        axes = normalize_axes(node.attrs.get("axes", []), x.ndim, op)
        keep = bool(node.attrs.get("keepdims", True))
        return [reduce_reference(op, x, axes, keep)]

    def scratch(node, graph):
        x = _x(node, graph)
        return reduce_scratch_bytes(x.shape, _reduce_axes(node, graph), x.dtype)

    register(op, infer=infer, pack=pack, reference=reference, scratch=scratch)


def reduce_reference(op: str, x: np.ndarray, axes: list[int], keepdims: bool) -> np.ndarray:
    """numpy meaning of the reduce_* ops (axes normalized; [] reduces nothing)."""
    ax = tuple(axes)
    dt = x.dtype
    if dt == BOOL:
        if op == "reduce_max":
            return np.any(x, axis=ax, keepdims=keepdims)
        if op == "reduce_min":
            return np.all(x, axis=ax, keepdims=keepdims)
        raise OpUnsupported(f"{op}: bool input")
    if dt.kind in "iu":
        with np.errstate(over="ignore"):
            if op == "reduce_sum":
                r = np.sum(x, axis=ax, keepdims=keepdims, dtype=dt)
            elif op == "reduce_prod":
                r = np.prod(x, axis=ax, keepdims=keepdims, dtype=dt)
            elif op in ("reduce_max", "reduce_min"):
                info = np.iinfo(dt)
                if op == "reduce_max":
                    r = np.max(x, axis=ax, keepdims=keepdims, initial=info.min)
                else:
                    r = np.min(x, axis=ax, keepdims=keepdims, initial=info.max)
            else:
                raise OpUnsupported(f"{op}: integer input")
        return np.asarray(r, dt)
    xd = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op == "reduce_sum":
            r = np.sum(xd, axis=ax, keepdims=keepdims)
        elif op == "reduce_mean":
            n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
            r = np.sum(xd, axis=ax, keepdims=keepdims) / n if n else \
                np.full(reduced_shape(x.shape, axes, keepdims), np.nan)
        elif op == "reduce_max":
            r = np.max(xd, axis=ax, keepdims=keepdims, initial=-np.inf)
            # `initial` hides NaN in some numpy versions: propagate explicitly.
            r = np.where(np.any(np.isnan(xd), axis=ax, keepdims=keepdims), np.nan, r)
        elif op == "reduce_min":
            r = np.min(xd, axis=ax, keepdims=keepdims, initial=np.inf)
            r = np.where(np.any(np.isnan(xd), axis=ax, keepdims=keepdims), np.nan, r)
        elif op == "reduce_prod":
            r = np.prod(xd, axis=ax, keepdims=keepdims)
        elif op == "reduce_l1":
            r = np.sum(np.abs(xd), axis=ax, keepdims=keepdims)
        elif op == "reduce_l2":
            r = np.sqrt(np.sum(xd * xd, axis=ax, keepdims=keepdims))
        elif op == "reduce_log_sum":
            r = np.log(np.sum(xd, axis=ax, keepdims=keepdims))
        elif op == "reduce_log_sum_exp":
            m = np.max(xd, axis=ax, keepdims=True, initial=-np.inf)
            mf = np.where(np.isinf(m), 0.0, m)
            s = np.sum(np.exp(xd - mf), axis=ax, keepdims=True)
            r = np.where(np.isinf(m), m, np.log(s) + mf)
            if not keepdims:
                r = np.reshape(r, reduced_shape(x.shape, axes, False))
        elif op == "reduce_sum_square":
            r = np.sum(xd * xd, axis=ax, keepdims=keepdims)
        else:
            raise KeyError(op)
    return np.asarray(r).astype(F32)


for _op in REDUCE_OPS:
    _make_reduce(_op)


# ---- argmax / argmin ----------------------------------------------------------------

def _arg_axis(node, graph) -> int:
    rank = len(_x(node, graph).shape)
    return normalize_axes([node.attrs.get("axis", 0)], rank, node.op)[0]


def _make_arg(op: str):
    def infer(node, graph):
        if len(node.inputs) != 1 or not node.inputs[0]:
            raise OpUnsupported(f"{op} takes one input")
        x = _x(node, graph)
        if x.dtype not in ARG_DTYPES:
            raise OpUnsupported(f"{op}: dtype {x.dtype} is not supported (float32, int32, int64)")
        if len(x.shape) == 0:
            raise OpUnsupported(f"{op}: input must have rank >= 1")
        axis = _arg_axis(node, graph)
        keep = bool(node.attrs.get("keepdims", True))
        shape = reduced_shape(x.shape, [axis], keep)
        if x.shape[axis] == 0 and int(np.prod(shape, dtype=np.int64)) > 0:
            raise OpUnsupported(f"{op}: the reduced dimension {axis} is empty")
        return [(shape, I64)]

    def pack(node, graph):
        return [_arg_axis(node, graph), int(bool(node.attrs.get("keepdims", True))),
                int(bool(node.attrs.get("select_last_index", False)))]

    def reference(node, inputs):
        x = inputs[0]
        axis = normalize_axes([node.attrs.get("axis", 0)], x.ndim, op)[0]
        keep = bool(node.attrs.get("keepdims", True))
        last = bool(node.attrs.get("select_last_index", False))
        fn = np.argmax if op == "argmax" else np.argmin
        if last:
            flipped = np.flip(x, axis)
            r = x.shape[axis] - 1 - fn(flipped, axis=axis)
        else:
            r = fn(x, axis=axis)
        if keep:
            r = np.expand_dims(r, axis)
        return [np.asarray(r, I64)]

    register(op, infer=infer, pack=pack, reference=reference)


_make_arg("argmax")
_make_arg("argmin")
