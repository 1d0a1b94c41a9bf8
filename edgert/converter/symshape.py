"""Every tensor's dims as expressions over the bounded input symbols (symdim), by each
edgert op's semantics, on the converted graph (after the passes).

infer(g, bounds) walks the nodes in order from the graph inputs' dims (a symbol where
bounded, else the constant): window ops by the ONNX output formulas (auto_pad SAME:
ceil(x / stride); ceil_mode; dilations; transposed convolution with output_padding),
resize by its scale, reshape by the expressions the importer recorded (attrs["sym"]),
transpose, concat, split, slice, pad, tile, expand, gather, matmul, gemm, the recurrent
ops (sequence and batch from X), and the ops whose output dims are their inputs'
(elementwise with broadcasting, normalizations, softmax, casts, reductions that keep the
rank). A dim it cannot follow is None: the ops not listed, and parameters the importer
folded from Shape arithmetic it could not follow (attrs["from_size"]); what is computed
from it is None too.

bounds.settle checks the runtime's output shapes against these expressions at every
size it tries, and the file's metadata keeps the outputs' dims as text
("output_dims": `edgert inspect` shows e.g. [1, 1, H, W] or [1, 96, ceil(H/32), ...]).
"""
from __future__ import annotations

import numpy as np

from . import symdim
from .symdim import Expr

# Ops whose output dims may not be the inputs' (those not listed here and not handled
# below follow the aligned-dims rule of _same_dims).
_EXPLICIT = {"conv2d", "max_pool2d", "avg_pool2d", "lp_pool2d", "conv_transpose2d", "global_avg_pool",
             "global_max_pool", "resize", "reshape", "transpose", "concat", "split", "slice", "pad", "tile", "expand",
             "gather", "matmul", "gemm", "lstm", "gru", "rnn"}
_BROADCASTING = {"add", "sub", "mul", "div", "pow", "max", "min", "mod", "where", "equal", "less", "greater",
                 "less_or_equal", "greater_or_equal", "and", "or", "xor", "prelu", "bitshift", "bitwise_and",
                 "bitwise_or", "bitwise_xor"}
_UNKNOWN = {"range", "shape", "depth_to_space", "space_to_depth", "topk", "one_hot", "partition", "spmm",
            "gather_elements", "scatter_elements", "argmax", "argmin", "cumsum", "trilu", "hardmax"}


def _const_dims(shape) -> tuple[Expr, ...]:
    return tuple(symdim.const(int(d)) for d in shape)


def infer(g, bounds) -> dict[str, tuple | None]:
    """{tensor: dims as expressions, or None where some dim cannot be followed}."""
    dims: dict[str, tuple | None] = {}
    binds = {(name, d): k for name, d, k in bounds.binds}
    for name in g.inputs:
        shape = g.tensors[name].shape
        dims[name] = tuple(symdim.sym(binds[(name, d)], bounds.symbols[binds[(name, d)]].name)
                           if (name, d) in binds else symdim.const(v) for d, v in enumerate(shape))
    for name, t in g.tensors.items():
        if t.is_const:
            dims[name] = _const_dims(t.shape)
    syms = {("sym", k): symdim.sym(k, s.name) for k, s in enumerate(bounds.symbols)}
    for n in g.nodes:
        ins = [dims.get(i) if i else None for i in n.inputs]
        try:
            outs = _node(n, g, ins, syms)
        except (symdim.Undecided, ZeroDivisionError, KeyError, IndexError, TypeError, ValueError):
            outs = None
        for k, o in enumerate(n.outputs):
            got = outs[k] if outs is not None and k < len(outs) else None
            if got is not None:
                shape = g.tensors[o].shape
                hi = [s.hi for s in bounds.symbols]
                if len(got) != len(shape) or any(_value(e, hi) != v for e, v in zip(got, shape)):
                    got = None  # the expressions must give the file's shape at the upper bounds
            dims[o] = got
    return dims


def _value(e: Expr, hi: list[int]) -> int | None:
    try:
        return e.evaluate(hi)
    except (ZeroDivisionError, KeyError):
        return None


def _node(n, g, ins: list, syms: dict) -> list | None:
    a = n.attrs
    present = [(i, x) for i, x in zip(n.inputs, ins) if i]
    if any(x is None for _, x in present):
        return None
    out_shapes = [g.tensors[o].shape for o in n.outputs]
    if all(all(e.is_const for e in x) for _, x in present) and not a.get("from_size"):
        return [_const_dims(s) for s in out_shapes]
    if a.get("from_size") and "sym" not in a:
        return None  # parameters folded from Shape arithmetic the importer did not follow
    if n.op in _UNKNOWN:
        return None
    if n.op not in _EXPLICIT:
        # elementwise ops broadcast inputs of lower rank; the others keep their inputs' dims
        pairs = [(x, g.tensors[i].shape) for i, x in present
                 if n.op in _BROADCASTING or len(g.tensors[i].shape) == len(out_shapes[0])]
        return [_same_dims(s, [x for x, _ in pairs], [sh for _, sh in pairs]) for s in out_shapes]
    x = ins[0]
    if n.op in ("conv2d", "max_pool2d", "avg_pool2d", "lp_pool2d", "conv_transpose2d"):
        return [_window(n, g, x, out_shapes[0])]
    if n.op in ("global_avg_pool", "global_max_pool"):
        return [tuple(x[:2]) + _const_dims(out_shapes[0][2:])]
    if n.op == "resize":
        return [_resize(n, x, out_shapes[0])]
    if n.op == "reshape":
        sym = (a.get("sym") or {}).get("shape")
        if sym is None:
            return None
        env = {("in", 0, d): e for d, e in enumerate(x)}
        env.update(syms)
        return [tuple(_subst(symdim.as_expr(e), env) for e in sym)]
    if n.op == "transpose":
        return [tuple(x[p] for p in a["perm"])]
    if n.op == "concat":
        axis = int(a["axis"])
        total = symdim.const(0)
        for _, y in present:
            total = total + y[axis]
        return [tuple(total if d == axis else e for d, e in enumerate(x))]
    if n.op == "split":
        axis = int(a["axis"])
        sizes = (a.get("sym") or {}).get("sizes") or [symdim.const(s) for s in a["sizes"]]
        env = {("in", 0, d): e for d, e in enumerate(x)}
        env.update(syms)
        return [tuple(_subst(symdim.as_expr(s), env) if d == axis else e for d, e in enumerate(x)) for s in sizes]
    if n.op == "slice":
        se = a.get("onnx_se")
        if se is None:
            return None
        out = []
        for d, (e, (start, end)) in enumerate(zip(x, se)):
            out.append(_slice_len(e, start, end, int(a["steps"][d])))
        return [tuple(out)]
    if n.op == "pad":
        pads = (a.get("sym") or {}).get("pads") or [symdim.const(p) for p in a["pads"]]
        r = len(x)
        env = dict(syms)
        pads = [_subst(symdim.as_expr(p), env) for p in pads]
        return [tuple(x[d] + pads[d] + pads[r + d] for d in range(r))]
    if n.op == "tile":
        if len(n.inputs) > 1 and n.inputs[1]:
            return None
        return [tuple(e * int(r) for e, r in zip(x, a["repeats"]))]
    if n.op == "expand":
        if len(n.inputs) > 1 and n.inputs[1]:
            return None
        return [_broadcast([x, _const_dims(a["shape"])])]
    if n.op == "gather":
        axis = int(a["axis"])
        return [tuple(x[:axis]) + tuple(ins[1]) + tuple(x[axis + 1:])]
    if n.op == "matmul":
        b = ins[1]
        if len(x) < 2 or len(b) < 2:
            return None
        batch = _broadcast([x[:-2], b[:-2]]) if len(x) > 2 or len(b) > 2 else ()
        return [tuple(batch) + (x[-2], b[-1])]
    if n.op == "gemm":
        b = ins[1]
        m = x[1] if a.get("trans_a") else x[0]
        k = b[0] if a.get("trans_b") else b[1]
        return [(m, k)]
    if n.op in ("lstm", "gru", "rnn"):
        # Y [S, D, N, H] or [N, S, D, H], the states [D, N, H] or [N, D, H]: S and N are
        # X's ([S, N, I] or [N, S, I]), D and H the file's
        layout = int(a.get("layout", 0))
        seq, batch = (x[0], x[1]) if layout == 0 else (x[1], x[0])
        out = []
        for s in out_shapes:
            c = _const_dims(s)
            if len(s) == 4:
                out.append((seq, c[1], batch, c[3]) if layout == 0 else (batch, seq, c[2], c[3]))
            else:
                out.append((c[0], batch, c[2]) if layout == 0 else (batch, c[1], c[2]))
        return out
    return None


def _subst(e: Expr, env: dict) -> Expr:
    """e with its input-dim references replaced by expressions."""
    return symdim.substitute(e, lambda i, d: env[("in", i, d)])


def _same_dims(out_shape, xs: list, shapes: list) -> tuple | None:
    """Output dims that are some input's (aligned from the right; a symbolic one first), or
    1 where every input is 1 there: elementwise ops, broadcasting, normalizations, casts,
    reductions that keep the rank."""
    r = len(out_shape)
    out = []
    for d in range(r):
        want = out_shape[d]
        cands = []
        for x, s in zip(xs, shapes):
            j = d - (r - len(s))
            if 0 <= j < len(s) and s[j] == want:
                cands.append(x[j])
        if not cands:
            if want == 1:
                out.append(symdim.const(1))
                continue
            return None
        sym = [c for c in cands if not c.is_const]
        out.append(sym[0] if sym else cands[0])
    return tuple(out)


def _broadcast(shapes: list) -> tuple:
    r = max(len(s) for s in shapes)
    out = []
    for d in range(r):
        cands = [s[d - (r - len(s))] for s in shapes if d - (r - len(s)) >= 0]
        non1 = [c for c in cands if c != 1]
        sym = [c for c in non1 if not c.is_const]
        out.append(sym[0] if sym else (non1[0] if non1 else symdim.const(1)))
    return tuple(out)


def _window(n, g, x, out_shape) -> tuple:
    """conv2d, pooling and conv_transpose2d output dims by the ONNX formulas."""
    a = n.attrs
    rank1d = bool(a.get("rank1d", False))
    spatial = [len(x) - 1] if rank1d else [len(x) - 2, len(x) - 1]
    axes = [1] if rank1d else [0, 1]
    kernel = [int(v) for v in a.get("kernel", ())] or list(g.tensors[n.inputs[1]].shape[2:])
    if rank1d and len(kernel) == 1:
        kernel = [1] + kernel
    strides = [int(v) for v in a.get("strides", (1, 1))]
    dil = [int(v) for v in a.get("dilations", (1, 1))]
    pads = [int(v) for v in a.get("pads", (0, 0, 0, 0))]
    same = a.get("same_pad")
    out = list(_const_dims(out_shape))
    out[0] = x[0]
    for d, ax in zip(spatial, axes):
        size, k, s, dl = x[d], kernel[ax], strides[ax], dil[ax]
        span = dl * (k - 1) + 1
        p0, p1 = pads[ax], pads[ax + 2]
        if n.op == "conv_transpose2d":
            op = [int(v) for v in a.get("output_padding", (0, 0))]
            out[d] = size * s if same else s * (size - 1) + op[ax] + span - p0 - p1
        elif same:
            out[d] = symdim.ceildiv(size, s)
        elif a.get("ceil_mode"):
            o = symdim.ceildiv(size + p0 + p1 - span, s) + 1
            out[d] = symdim.min_(o, symdim.floordiv(size + p0 - 1, s) + 1)
        else:
            out[d] = symdim.floordiv(size + p0 + p1 - span, s) + 1
    return tuple(out)


def _resize(n, x, out_shape) -> tuple | None:
    from fractions import Fraction
    out = []
    for d, (e, v) in enumerate(zip(x, out_shape)):
        scale = float(n.attrs["scales"][d])
        if e.is_const:
            out.append(symdim.const(v))
            continue
        f32 = np.float32(scale)
        if float(f32) != scale:
            return None  # ONNX sizes: a fixed output length, or one the runtime derives otherwise
        q = Fraction(scale)
        out.append(symdim.floordiv(e * q.numerator, q.denominator))
    return tuple(out)


def _slice_len(x: Expr, start: int, end: int, step: int) -> Expr:
    """The length ONNX Slice gives along a dim of size x (start, end: the ONNX values)."""
    if start == 0 and end >= 2**31 - 1 and step == 1:
        return x
    s = symdim.const(start) + (x if start < 0 else 0)
    e = symdim.const(end) + (x if end < 0 else 0)
    if step > 0:
        s, e = symdim.clamp(s, 0, x), symdim.clamp(e, 0, x)
        return symdim.max_(symdim.ceildiv(e - s, step), 0)
    s, e = symdim.clamp(s, 0, x - 1), symdim.clamp(e, -1, x - 1)
    return symdim.max_(symdim.ceildiv(s - e, -step), 0)


def output_text(g, bounds, dims: dict) -> dict[str, list[str]]:
    """{graph output: its dims as text} for the file's metadata (edgert inspect)."""
    box = bounds.box()
    out = {}
    for o in g.outputs:
        d = dims.get(o)
        out[o] = [str(symdim.simplify(e, box)) for e in d] if d is not None else None
    return out
