"""Data-movement ops: reshape, transpose, concat, split, slice, expand, tile, pad,
depth_to_space, space_to_depth.

All of them move elements without looking at their values, so they accept every
edgert dtype (the C kernels work by element size). Every shape-like quantity is an
attribute fixed at convert time, except expand's target and tile's repeats, which a
bounded conversion may give as data computed at run time (a shape program).

Attributes and parameter words per op (ints are int32 words, floats binary32 words):

reshape (inputs: x; in-place: the output may share x's buffer)
    attrs  shape: list[int]  the output shape (no -1 or 0 placeholders left)
    words  none; the kernel checks that element counts and dtypes agree and copies
           the bytes unless the planner gave the output x's buffer.

transpose (inputs: x)
    attrs  perm: list[int]   output dim i is input dim perm[i]
    words  0 rank, 1.. perm[0..rank)

concat (inputs: x0, x1, ..., at least one)
    attrs  axis: int (0 <= axis < rank)
    words  0 axis

split (inputs: x; outputs: one per part)
    attrs  axis: int (0 <= axis < rank), sizes: list[int] (sum = x.shape[axis])
    words  0 axis, 1 count n, 2.. sizes[0..n)

slice (inputs: x)
    attrs  starts, steps, sizes: list[int], one entry per dim of x, already normalized:
           output dim d takes input indices starts[d] + i*steps[d], i < sizes[d]
           (steps[d] != 0; every such index lies in [0, x.shape[d]); starts[d] is 0
           when sizes[d] is 0)
    words  0 rank, then per dim d: 1+3d start, 2+3d step, 3+3d size

expand (inputs: x, optional target)
    attrs  shape: list[int]  the output shape, numpy-broadcast-compatible with x
    words  none
    target: int32/int64 [k], k <= output rank, the shape as data, computed at run time
    (a shape program, docs/runtime.md): the output is the broadcast of x's shape and
    the target's values; `shape` is that at the size converted

tile (inputs: x, optional repeats)
    attrs  repeats: list[int] (>= 0, one per dim)
    words  0 rank, 1.. repeats (only without the repeats input)
    repeats: int32/int64 [rank], the repeats as data computed at run time (a shape
    program); `repeats` holds them at the size converted

pad (inputs: x)
    attrs  mode: "constant" | "reflect" | "edge" | "wrap"; pads: list[int] of 2*rank
           (begins then ends; negative values crop); value: float | int (constant mode)
    words  0 mode (0 constant, 1 reflect, 2 edge, 3 wrap), 1 rank, 2.. begins[0..rank),
           then ends[0..rank), then 2 words: the fill value's bytes in x's dtype, little
           endian, zero-extended to 8 bytes (low word first)
    meaning: along each dim the input is first cropped by the negative pads, then the
    cropped extent m is padded by the positive ones; in reflect mode index -i maps to i
    (the edge is not repeated) and the reflection repeats with period 2(m-1); edge
    repeats the border element; wrap is periodic with period m. Non-constant modes need
    m >= 1 wherever something is padded.

depth_to_space (inputs: x [N, C, H, W])
    attrs  blocksize: int, mode: "DCR" | "CRD"
    words  0 blocksize, 1 mode (0 DCR, 1 CRD)

space_to_depth (inputs: x [N, C, H, W])
    attrs  blocksize: int, mode: "DCR" | "CRD" (output channel (by*b + bx)*C + c for
           DCR, c*b*b + by*b + bx for CRD)
    words  0 blocksize, 1 mode (0 DCR, 1 CRD)
"""
from __future__ import annotations

import numpy as np

from ... import dtypes
from . import concat_s8
from .registry import OpUnsupported, in_shapes, register

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def data_dtype(node, graph, idx: int = 0) -> np.dtype:
    """dtype of input idx, which any edgert dtype may have; OpUnsupported otherwise."""
    dt = graph.tensors[node.inputs[idx]].dtype
    if not dtypes.supported(dt):
        raise OpUnsupported(f"{node.op}: dtype {dt} is not an edgert dtype")
    return dt


def value_words(value, dtype) -> list[int]:
    """Two int32 words holding `value` converted to `dtype`, little endian, zero-extended."""
    raw = np.array(value).astype(dtype).tobytes()
    raw = raw + bytes(8 - len(raw))
    lo, hi = np.frombuffer(raw, dtype="<i4")
    return [int(lo), int(hi)]


# ---- reshape ------------------------------------------------------------------

def _reshape_infer(node, graph):
    dt = data_dtype(node, graph)
    (xs,) = in_shapes(node, graph)[:1]
    shape = tuple(int(d) for d in node.attrs["shape"])
    if any(d < 0 for d in shape):
        raise OpUnsupported(f"reshape: output shape {shape} has negative dims")
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(xs, dtype=np.int64)):
        raise OpUnsupported(f"reshape: cannot reshape {xs} to {shape}")
    return [(shape, dt)]


register("reshape", infer=_reshape_infer, pack=lambda node, graph: [],
         reference=lambda node, ins: [ins[0].reshape(node.attrs["shape"])], inplace=True)


# ---- transpose ----------------------------------------------------------------

def _transpose_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    perm = [int(p) for p in node.attrs["perm"]]
    if sorted(perm) != list(range(len(xs))):
        raise OpUnsupported(f"transpose: perm {perm} is not a permutation of rank {len(xs)}")
    return [(tuple(xs[p] for p in perm), dt)]


register("transpose", infer=_transpose_infer,
         pack=lambda node, graph: [len(node.attrs["perm"]), *[int(p) for p in node.attrs["perm"]]],
         reference=lambda node, ins: [np.ascontiguousarray(np.transpose(ins[0], node.attrs["perm"]))])


# ---- concat -------------------------------------------------------------------

def _concat_infer(node, graph):
    if not node.inputs or any(not i for i in node.inputs):
        raise OpUnsupported("concat: needs at least one input, none absent")
    dt = data_dtype(node, graph)
    shapes = in_shapes(node, graph)
    axis = int(node.attrs["axis"])
    r = len(shapes[0])
    if not 0 <= axis < r:
        raise OpUnsupported(f"concat: axis {axis} out of range for rank {r}")
    total = 0
    for k, s in enumerate(shapes):
        if graph.tensors[node.inputs[k]].dtype != dt:
            raise OpUnsupported("concat: inputs have different dtypes")
        if len(s) != r or any(s[d] != shapes[0][d] for d in range(r) if d != axis):
            raise OpUnsupported(f"concat: shapes {shapes} do not agree off axis {axis}")
        total += s[axis]
    out = list(shapes[0])
    out[axis] = total
    if concat_s8.applies(node, graph):  # int8 inputs of different quantizations
        concat_s8.words(node, graph)
    return [(tuple(out), dt)]


def _concat_pack(node, graph):
    if concat_s8.applies(node, graph):
        return [int(node.attrs["axis"])] + concat_s8.words(node, graph)
    return [int(node.attrs["axis"])]


def _concat_reference(node, ins):
    if "y_zp" in node.attrs:
        return concat_s8.reference(node, ins, int(node.attrs["axis"]))
    return [np.concatenate(ins, axis=node.attrs["axis"])]


register("concat", infer=_concat_infer, pack=_concat_pack, reference=_concat_reference)


# ---- split --------------------------------------------------------------------

def _split_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    axis = int(node.attrs["axis"])
    sizes = [int(s) for s in node.attrs["sizes"]]
    if not 0 <= axis < len(xs):
        raise OpUnsupported(f"split: axis {axis} out of range for rank {len(xs)}")
    if any(s < 0 for s in sizes) or sum(sizes) != xs[axis]:
        raise OpUnsupported(f"split: sizes {sizes} do not add up to dim {xs[axis]}")
    outs = []
    for s in sizes:
        o = list(xs)
        o[axis] = s
        outs.append((tuple(o), dt))
    return outs


def _split_ref(node, ins):
    axis = node.attrs["axis"]
    cuts = np.cumsum(node.attrs["sizes"])[:-1]
    return [np.ascontiguousarray(p) for p in np.split(ins[0], cuts, axis=axis)]


register("split", infer=_split_infer,
         pack=lambda node, graph: [int(node.attrs["axis"]), len(node.attrs["sizes"]),
                                   *[int(s) for s in node.attrs["sizes"]]],
         reference=_split_ref)


# ---- slice --------------------------------------------------------------------

def normalize_slice(shape, starts, ends, axes, steps) -> tuple[list[int], list[int], list[int]]:
    """ONNX Slice clamping: per-dim (start, step, size) for every dim of `shape`."""
    r = len(shape)
    st = [0] * r
    sp = [1] * r
    sz = list(shape)
    seen = set()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = int(axis)
        if axis < 0:
            axis += r
        if not 0 <= axis < r or axis in seen:
            raise OpUnsupported(f"slice: bad or repeated axis {axis}")
        seen.add(axis)
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            raise OpUnsupported("slice: step 0")
        dim = shape[axis]
        if start < 0:
            start += dim
        if end < 0:
            end += dim
        if step > 0:
            start = min(max(start, 0), dim)
            end = min(max(end, 0), dim)
            n = max(0, -(-(end - start) // step))
        else:
            start = min(max(start, 0), dim - 1)
            end = min(max(end, -1), dim - 1)
            n = max(0, -(-(start - end) // -step))
        if n == 0:
            start = 0
        st[axis], sp[axis], sz[axis] = start, step, n
    return st, sp, sz


def _slice_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    st, sp, sz = node.attrs["starts"], node.attrs["steps"], node.attrs["sizes"]
    if not len(st) == len(sp) == len(sz) == len(xs):
        raise OpUnsupported("slice: starts/steps/sizes must have one entry per dim")
    for d in range(len(xs)):
        if sp[d] == 0 or sz[d] < 0:
            raise OpUnsupported("slice: bad step or size")
        if sz[d] > 0:
            last = st[d] + (sz[d] - 1) * sp[d]
            if not (0 <= st[d] < xs[d] and 0 <= last < xs[d]):
                raise OpUnsupported(f"slice: dim {d} reads outside the input")
    return [(tuple(int(s) for s in sz), dt)]


def _slice_pack(node, graph):
    words = [len(node.attrs["starts"])]
    for a, b, c in zip(node.attrs["starts"], node.attrs["steps"], node.attrs["sizes"]):
        words += [int(a), int(b), int(c)]
    return words


def _slice_ref(node, ins):
    idx = []
    for a, b, c in zip(node.attrs["starts"], node.attrs["steps"], node.attrs["sizes"]):
        idx.append(a + b * np.arange(c))
    return [np.ascontiguousarray(ins[0][np.ix_(*idx)])] if idx else [ins[0].copy()]


register("slice", infer=_slice_infer, pack=_slice_pack, reference=_slice_ref)


# ---- expand -------------------------------------------------------------------

def _shape_input(node, graph, what: str, rank: int | None) -> None:
    """Checks the optional input 1 of expand or tile: int32/int64 [k], k <= the output
    rank (expand) or k == the input rank (tile)."""
    if len(node.inputs) < 2 or not node.inputs[1]:
        return
    t = graph.tensors[node.inputs[1]]
    if t.dtype not in (np.dtype(np.int32), np.dtype(np.int64)) or len(t.shape) != 1 or (
            rank is not None and t.shape[0] != rank):
        raise OpUnsupported(f"{node.op}: {what} must be int32 or int64 [k], got {t.dtype} {list(t.shape)}")


def _expand_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    shape = tuple(int(d) for d in node.attrs["shape"])
    _shape_input(node, graph, "the target", None)
    if len(node.inputs) > 1 and node.inputs[1] and graph.tensors[node.inputs[1]].shape[0] > len(shape):
        raise OpUnsupported("expand: the target has more dims than the output")
    if len(xs) > len(shape):
        raise OpUnsupported(f"expand: rank of {xs} exceeds that of {shape}")
    for a, b in zip(xs[::-1], shape[::-1]):
        if a != b and a != 1:
            raise OpUnsupported(f"expand: {xs} does not broadcast to {shape}")
    return [(shape, dt)]


def _expand_ref(node, ins):
    shape = node.attrs["shape"]
    if len(ins) > 1 and ins[1] is not None:
        shape = np.broadcast_shapes(ins[0].shape, tuple(int(d) for d in ins[1]))
    return [np.ascontiguousarray(np.broadcast_to(ins[0], shape))]


register("expand", infer=_expand_infer, pack=lambda node, graph: [], reference=_expand_ref)


# ---- tile ---------------------------------------------------------------------

def _tile_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    reps = [int(r) for r in node.attrs["repeats"]]
    if len(reps) != len(xs) or any(r < 0 for r in reps):
        raise OpUnsupported(f"tile: repeats {reps} do not fit rank {len(xs)}")
    _shape_input(node, graph, "repeats", len(xs))
    return [(tuple(a * r for a, r in zip(xs, reps)), dt)]


def _tile_pack(node, graph):
    if len(node.inputs) > 1 and node.inputs[1]:
        return [len(node.attrs["repeats"])]
    return [len(node.attrs["repeats"]), *[int(r) for r in node.attrs["repeats"]]]


def _tile_ref(node, ins):
    reps = node.attrs["repeats"] if len(ins) < 2 or ins[1] is None else [int(r) for r in ins[1]]
    if any(r < 0 for r in reps) or len(reps) != ins[0].ndim:
        raise ValueError(f"tile: repeats {list(reps)} do not fit rank {ins[0].ndim}")
    return [np.tile(ins[0], reps)]


register("tile", infer=_tile_infer, pack=_tile_pack, reference=_tile_ref)


# ---- pad ----------------------------------------------------------------------

def _pad_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    mode = node.attrs.get("mode", "constant")
    if mode not in PAD_MODES:
        raise OpUnsupported(f"pad: mode {mode!r} is not supported")
    pads = [int(p) for p in node.attrs["pads"]]
    r = len(xs)
    if len(pads) != 2 * r:
        raise OpUnsupported(f"pad: {len(pads)} pads for rank {r}")
    out = []
    for d in range(r):
        b, e = pads[d], pads[r + d]
        m = xs[d] + min(b, 0) + min(e, 0)
        if m < 0:
            raise OpUnsupported(f"pad: dim {d} cropped below zero")
        n = m + max(b, 0) + max(e, 0)
        if mode != "constant" and m == 0 and n > 0:
            raise OpUnsupported(f"pad: {mode} mode cannot pad an empty dim {d}")
        out.append(n)
    return [(tuple(out), dt)]


def _pad_pack(node, graph):
    dt = graph.tensors[node.inputs[0]].dtype
    mode = node.attrs.get("mode", "constant")
    pads = [int(p) for p in node.attrs["pads"]]
    return [PAD_MODES.index(mode), len(pads) // 2, *pads, *value_words(node.attrs.get("value", 0), dt)]


def _pad_src_index(o: np.ndarray, b: int, e: int, n_in: int, mode: str) -> np.ndarray:
    """Input index for output indices o along one dim (-1: the fill value)."""
    lo = max(-b, 0)  # cropped at the start
    m = n_in - lo - max(-e, 0)
    c = o - max(b, 0)
    if mode == "constant":
        return np.where((c >= 0) & (c < m), c + lo, -1)
    if mode == "edge":
        c = np.clip(c, 0, m - 1)
    elif mode == "wrap":
        c = np.mod(c, m)
    else:  # reflect
        if m == 1:
            c = np.zeros_like(c)
        else:
            p = 2 * (m - 1)
            c = np.mod(c, p)
            c = np.where(c >= m, p - c, c)
    return c + lo


def _pad_ref(node, ins):
    x = ins[0]
    r = x.ndim
    pads = node.attrs["pads"]
    shape = tuple(x.shape[d] + pads[d] + pads[r + d] for d in range(r))
    mode = node.attrs.get("mode", "constant")
    y = x
    valid = np.ones(shape, bool)
    for d in range(r):
        src = _pad_src_index(np.arange(shape[d]), pads[d], pads[r + d], x.shape[d], mode)
        y = np.take(y, np.maximum(src, 0), axis=d) if x.shape[d] > 0 else np.zeros(
            y.shape[:d] + (shape[d],) + y.shape[d + 1:], x.dtype)
        vshape = [1] * r
        vshape[d] = shape[d]
        valid = valid & (src >= 0).reshape(vshape)
    fill = np.array(node.attrs.get("value", 0)).astype(x.dtype)
    return [np.ascontiguousarray(np.where(valid, y, fill).astype(x.dtype))]


register("pad", infer=_pad_infer, pack=_pad_pack, reference=_pad_ref)


# ---- depth_to_space / space_to_depth --------------------------------------------

def _d2s_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    b = int(node.attrs["blocksize"])
    mode = node.attrs.get("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise OpUnsupported(f"depth_to_space: mode {mode!r}")
    if len(xs) != 4 or b < 1 or xs[1] % (b * b):
        raise OpUnsupported(f"depth_to_space: input {xs} and blocksize {b} do not fit")
    n, c, h, w = xs
    return [((n, c // (b * b), h * b, w * b), dt)]


def _d2s_ref(node, ins):
    x = ins[0]
    b = node.attrs["blocksize"]
    n, c, h, w = x.shape
    if node.attrs.get("mode", "DCR") == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(t.reshape(n, c // (b * b), h * b, w * b))]


register("depth_to_space", infer=_d2s_infer,
         pack=lambda node, graph: [int(node.attrs["blocksize"]), 0 if node.attrs.get("mode", "DCR") == "DCR" else 1],
         reference=_d2s_ref)


def _s2d_infer(node, graph):
    dt = data_dtype(node, graph)
    xs = in_shapes(node, graph)[0]
    b = int(node.attrs["blocksize"])
    if node.attrs.get("mode", "DCR") not in ("DCR", "CRD"):
        raise OpUnsupported(f"space_to_depth: mode {node.attrs.get('mode')!r}")
    if len(xs) != 4 or b < 1 or xs[2] % b or xs[3] % b:
        raise OpUnsupported(f"space_to_depth: input {xs} and blocksize {b} do not fit")
    n, c, h, w = xs
    return [((n, c * b * b, h // b, w // b), dt)]


def _s2d_ref(node, ins):
    x = ins[0]
    b = node.attrs["blocksize"]
    n, c, h, w = x.shape
    perm = (0, 3, 5, 1, 2, 4) if node.attrs.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(perm)
    return [np.ascontiguousarray(t.reshape(n, c * b * b, h // b, w // b))]


register("space_to_depth", infer=_s2d_infer,
         pack=lambda node, graph: [int(node.attrs["blocksize"]), 0 if node.attrs.get("mode", "DCR") == "DCR" else 1],
         reference=_s2d_ref)
