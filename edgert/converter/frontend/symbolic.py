"""The values of Shape arithmetic as symbolic expressions (bounded conversions).

A bounded conversion imports the model at the upper bounds, where Shape, Gather,
Concat, Sub, ... fold into constants. Beside each such constant the importer keeps, when
it can follow the arithmetic, its value as symdim expressions over the bounded input
symbols (OnnxImporter.sym, by ONNX name): Shape of a bounded graph input gives its
symbols, and the integer ops below compute on expressions by their ONNX meaning. A
lowering that takes a shape-like input (pads, split sizes, a reshape's shape) reads it
with LowerCtx.sym_const and records the expressions of the parameters it makes
(node.attrs["sym"]); bounds.derive_rules turns those into expression rules that the
runtime evaluates at every size (docs/format.md, PARAM_EXPR and OUTDIM_EXPR).

What is not followed (Shape of an intermediate tensor, floats, ops not listed) has no
expression: its constant varies as before, and the rules fitted from the sample
conversions apply there.
"""
from __future__ import annotations

import numpy as np

from .. import symdim

MAX_ELEMENTS = 64  # values followed per tensor (shape vectors and scalars)


def _arr(values) -> np.ndarray:
    out = np.empty(np.shape(values), dtype=object)
    flat = out.reshape(-1)
    for k, v in enumerate(np.asarray(values, dtype=object).reshape(-1)):
        flat[k] = symdim.as_expr(v)
    return out


def tensor_dims(imp, tensor: str) -> tuple | None:
    """A tensor's dims as expressions during the import: a graph input's symbols, a
    constant's dims (a constant folded from Shape arithmetic: only when its value is
    followed, else its shape may follow the size), an emitted node's output by symshape."""
    g = imp.graph
    if tensor in g.inputs:
        dims = imp.sym_dims.get(tensor, {})
        return tuple(dims.get(k, symdim.const(d)) for k, d in enumerate(g.tensors[tensor].shape))
    t = g.tensors.get(tensor)
    if t is not None and t.is_const:
        sized = (g.metadata.get("size_constants") or {}).get(tensor)
        if sized is not None and sized not in imp.sym:
            return None
        return tuple(symdim.const(d) for d in t.shape)
    return imp.sym_shapes.get(tensor)


def node_dims(imp, nodes) -> None:
    """The output dims of nodes just emitted, as expressions (symshape's rules)."""
    from .. import symshape
    syms = {("sym", k): e for dims in imp.sym_dims.values() for e in dims.values() for k in e.symbols()}
    for n in nodes:
        ins = [tensor_dims(imp, i) if i else None for i in n.inputs]
        try:
            outs = symshape._node(n, imp.graph, ins, syms)
        except (symdim.Undecided, ZeroDivisionError, KeyError, IndexError, TypeError, ValueError):
            outs = None
        for k, o in enumerate(n.outputs):
            got = outs[k] if outs is not None and k < len(outs) else None
            if got is not None and len(got) != len(imp.graph.tensors[o].shape):
                got = None
            imp.sym_shapes[o] = got


def shape_value(imp, node, tensor: str, op: str, start: int, end: int) -> None:
    """Shape (or Size) of `tensor`: its dims' expressions where they are followed."""
    dims = tensor_dims(imp, tensor)
    if dims is None:
        return
    exprs = list(dims)
    at = _imported_values(imp)
    if [e.evaluate(at) for e in exprs] != list(imp.graph.tensors[tensor].shape):
        return  # not the dims at the size imported: not followed
    if op == "Size":
        total = symdim.const(1)
        for e in exprs:
            total = total * e
        imp.sym[node.output[0]] = _arr(np.array(total, dtype=object))
    else:
        imp.sym[node.output[0]] = _arr(np.array(exprs[start:end] + [], dtype=object).reshape(-1))


def _input(imp, name: str, value) -> np.ndarray | None:
    if not name:
        return None
    if name in imp.sym:
        return imp.sym[name]
    v = np.asarray(value)
    if v.dtype.kind not in "iub" or v.size > MAX_ELEMENTS:
        return None
    return _arr(v.astype(np.int64))


def _binary(fn, a, b):
    return np.frompyfunc(fn, 2, 1)(a, b)


def evaluate(imp, node, ins: list[str], outs: list) -> None:
    """node's outputs as expressions, from its inputs' (ONNX semantics); nothing when an
    input or the op is not followed."""
    op = node.op_type
    vals = [imp._value(i) if i else None for i in ins]
    xs = [_input(imp, n, v) if n else None for n, v in zip(node.input, vals)]
    if any(n and x is None for n, x in zip(node.input, xs)):
        return
    attrs = {a.name: a for a in node.attribute}
    try:
        y = _eval(op, xs, attrs, vals, outs)
    except (symdim.Undecided, ZeroDivisionError, TypeError, ValueError, IndexError, OverflowError):
        return
    if y is None:
        return
    y = np.asarray(y, dtype=object)
    if y.shape != np.shape(outs[0]) or y.size > MAX_ELEMENTS:
        return
    # the expressions hold at the size imported: their value there is the folded constant's
    hi = _imported_values(imp)
    try:
        ok = all(int(v) == symdim.as_expr(e).evaluate(hi) for v, e in zip(np.asarray(outs[0]).reshape(-1),
                                                                           y.reshape(-1)))
    except (ZeroDivisionError, TypeError, ValueError):
        ok = False
    if ok:
        imp.sym[node.output[0]] = _arr(y)


def _imported_values(imp) -> list[int]:
    """The symbols' values at the size being imported (from the graph inputs' shapes)."""
    out = [0] * 32
    for name, dims in imp.sym_dims.items():
        t = imp.graph.tensors.get(name)
        for d, e in dims.items():
            for k in e.symbols():
                out[k] = t.shape[d]
    return out


def _ints(attr) -> list[int]:
    return [int(v) for v in attr.ints]


def _eval(op: str, xs, attrs, vals, outs):
    x = xs[0]
    if op in ("Identity", "Cast"):
        if op == "Cast" and np.asarray(outs[0]).dtype.kind not in "iu":
            return None
        return x
    if op in ("Add", "Sub", "Mul"):
        fn = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b}[op]
        return _binary(fn, xs[0], xs[1])
    if op == "Div":
        # integer Div truncates: floor where both are non-negative (decided by the value
        # at the upper bound not being enough; the divisor must be a positive constant)
        def div(a, b):
            b = symdim.as_expr(b)
            if not b.is_const or b.value <= 0:
                raise ValueError("division by an expression")
            return symdim.floordiv(a, b)
        if np.asarray(vals[0]).dtype.kind not in "iu" or np.any(np.asarray(vals[0]) < 0):
            return None
        return _binary(div, xs[0], xs[1])
    if op == "Mod":
        if "fmod" in attrs and attrs["fmod"].i:
            return None
        return _binary(symdim.mod, xs[0], xs[1])
    if op in ("Min", "Max"):
        fn = symdim.min_ if op == "Min" else symdim.max_
        y = xs[0]
        for z in xs[1:]:
            y = _binary(lambda a, b: fn(a, b), y, z)
        return y
    if op == "Neg":
        return np.frompyfunc(lambda a: -a, 1, 1)(x)
    if op == "Gather":
        axis = attrs["axis"].i if "axis" in attrs else 0
        idx = np.asarray(vals[1]).astype(np.int64)
        n = x.shape[axis]
        return np.take(x, np.where(idx < 0, idx + n, idx), axis=axis)
    if op == "Concat":
        return np.concatenate(xs, axis=attrs["axis"].i)
    if op in ("Unsqueeze", "Squeeze", "Reshape", "Flatten"):
        return x.reshape(np.shape(outs[0]))
    if op == "Slice":
        if len(xs) < 3:
            return None
        idx = [slice(None)] * x.ndim
        starts = np.asarray(vals[1]).reshape(-1)
        ends = np.asarray(vals[2]).reshape(-1)
        axes = np.asarray(vals[3]).reshape(-1) if len(vals) > 3 and vals[3] is not None else range(len(starts))
        steps = np.asarray(vals[4]).reshape(-1) if len(vals) > 4 and vals[4] is not None else [1] * len(starts)
        for s, e, a, st in zip(starts, ends, axes, steps):
            idx[int(a)] = slice(int(s), int(e), int(st))
        if any(xs[k] is not None and any(not v.is_const for v in xs[k].reshape(-1)) for k in range(1, len(xs))):
            return None  # slice bounds that follow the size: not followed
        return x[tuple(idx)]
    return None
