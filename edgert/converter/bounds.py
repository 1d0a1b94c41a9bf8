"""Bounded dimensions: one statically planned file for every input size within bounds.

`input_shapes={"x": [1, 3, 48, (32, 960)]}` (CLI `x=1,3,48,32..960`) gives dimension 3
of x the bounds 32..960. The file is converted and planned at the upper bounds, so every
size fits its arena. What depends on the size is found by converting the model at
several sizes within the bounds (the upper and lower bounds, one between, and sizes of
other residues near both, samples()) and comparing the graphs node by node:

* output shapes that differ are recomputed at run time by the C runtime's shape
  function of each op (docs/runtime.md, "Bounded dimensions");
* parameter words that differ (a slice size, ...) become rules `word = input dim + c`,
  and the varying output dims of a reshape (whose shape the importer folded from
  Shape -> Gather -> Concat arithmetic) become rules `dim = input dim + c` or
  `dim = input elements / the other dims`: expressions evaluated at run time;
* anything else that differs (a constant computed from the size, a graph that changes
  shape with the size) is refused at conversion, naming the node and op.

Scratch is planned for the largest need over the samples and over a sweep of each
node's varying input dims (sweep_scratch). The converter then loads the file in the C
runtime and checks, at each sample size, that it runs and computes the output shapes the
sample conversions have, and at sample sizes the ONNX model itself cannot run, that the
runtime refuses them.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..fileformat import (_BIND, _HEAD, _RULE, _SYM, RULE_INFER, RULE_NO_NODE, RULE_OUTDIM, RULE_OUTDIM_EXPR,
                          RULE_PARAM, RULE_PARAM_EXPR, RULE_PARAM_SYM, RULE_RESIZE, RULE_SAME, RULE_SLICE, RULE_STEP)
from . import symdim

# Ops whose output shape is stored in the file rather than computed from inputs and
# parameters: their varying output dims need a rule.
SHAPE_FROM_FILE = {"reshape", "expand"}

@dataclasses.dataclass
class Symbol:
    name: str
    lo: int
    hi: int


@dataclasses.dataclass
class Bounds:
    symbols: list[Symbol]
    binds: list[tuple[str, int, int]]  # (input name, dim, symbol index)
    rules: list[tuple[int, int, int, int, int, int]] = dataclasses.field(default_factory=list)
    # (node index, kind, input index, input dim, target, add)
    steps: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    # symbol -> (step, residue mask): the model runs the sizes v with bit v % step set
    code: list[int] = dataclasses.field(default_factory=list)  # the EXPR rules' programs

    def add_expr(self, node: int, kind: int, target: int, expr) -> None:
        """An EXPR rule (PARAM_EXPR: parameter word `target`; OUTDIM_EXPR: output dim
        target % 8 of output target / 8) = expr (symdim), its program appended to code."""
        words = symdim.program(expr)
        self.rules.append((node, kind, len(self.code), len(words), target, 0))
        self.code += words

    def box(self) -> list[tuple[int, int]]:
        return [(s.lo, s.hi) for s in self.symbols]

    def pack(self, input_index: dict[str, int], string_ref) -> bytes:
        out = bytearray(_HEAD.pack(len(self.symbols), len(self.binds), len(self.rules) + len(self.steps),
                                   len(self.code)))
        for s in self.symbols:
            off, n = string_ref(s.name)
            out += _SYM.pack(off, n, s.lo, s.hi)
        for name, dim, sym in self.binds:
            out += _BIND.pack(input_index[name], dim, sym)
        steps = [(RULE_NO_NODE, RULE_STEP, k, mask & 0xFFFFFFFF, step, int(np.int32(np.uint32(mask >> 32))))
                 for k, (step, mask) in self.steps.items()]
        for r in sorted(self.rules) + sorted(steps):
            out += _RULE.pack(*r)
        for w in self.code:
            out += (w & 0xFFFFFFFF).to_bytes(4, "little")
        return bytes(out)


def is_bounded(dim) -> bool:
    return isinstance(dim, (tuple, list)) and len(dim) == 2


def has_bounds(input_shapes: dict[str, Any] | None) -> bool:
    return any(is_bounded(d) for v in (input_shapes or {}).values() for d in v)


def parse_dim(text: str):
    """'32' -> 32; '32..960' -> (32, 960)."""
    if ".." in text:
        lo, hi = text.split("..", 1)
        return (int(lo), int(hi))
    return int(text)


def _onnx_dims(model) -> dict[str, list]:
    init = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in init or not vi.type.HasField("tensor_type"):
            continue
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            dims.append(int(d.dim_value) if d.HasField("dim_value") and not d.dim_param else (d.dim_param or None))
        out[vi.name] = dims
    return out


def resolve(model, input_shapes: dict[str, Any], input_values: dict) -> Bounds:
    """Symbols and bindings of `input_shapes`; fills in the shapes of inputs not given
    whose symbolic dims all share a bounded symbol (in place)."""
    onnx_dims = _onnx_dims(model)
    symbols: list[Symbol] = []
    by_name: dict[str, int] = {}
    binds: list[tuple[str, int, int]] = []
    fixed: dict[str, int] = {}  # ONNX dimension names given a fixed value
    for name, dims in input_shapes.items():
        for k, d in enumerate(dims):
            src = onnx_dims.get(name)
            if not is_bounded(d):
                if src is not None and k < len(src) and isinstance(src[k], str):
                    fixed.setdefault(src[k], int(d))
                continue
            lo, hi = int(d[0]), int(d[1])
            if not 1 <= lo <= hi or hi >= 2**31:
                raise ConversionError(f"--input-shape {name}: dimension {k} bounds {lo}..{hi} must satisfy 1 <= LO <= HI")
            src = onnx_dims.get(name)
            sym = src[k] if src is not None and k < len(src) and isinstance(src[k], str) else f"{name}:{k}"
            if sym in by_name:
                s = symbols[by_name[sym]]
                if (s.lo, s.hi) != (lo, hi):
                    raise ConversionError(f"inputs sharing dimension {sym!r} have different bounds: "
                                          f"{s.lo}..{s.hi} and {lo}..{hi}")
            else:
                by_name[sym] = len(symbols)
                symbols.append(Symbol(sym, lo, hi))
            binds.append((name, k, by_name[sym]))
    # Inputs not given: their symbolic dims take a bounded symbol of the same name.
    for name, dims in onnx_dims.items():
        if name in input_shapes or name in input_values:
            continue
        if any(isinstance(d, str) and d in by_name for d in dims) and all(
                isinstance(d, int) or (isinstance(d, str) and (d in by_name or d in fixed)) for d in dims):
            shape = []
            for k, d in enumerate(dims):
                if isinstance(d, int):
                    shape.append(d)
                elif d not in by_name:
                    shape.append(fixed[d])
                else:
                    s = symbols[by_name[d]]
                    shape.append((s.lo, s.hi))
                    binds.append((name, k, by_name[d]))
            input_shapes[name] = shape
    return Bounds(symbols, binds)


# Offsets from the upper bound (and from the lower bound) of the extra sample sizes: their
# residues modulo 2, 3, 4, ... 64 differ from the bound's, so a parameter that follows the
# size non-linearly (SAME pads, which depend on the size modulo the strides on the way;
# ceil_mode rounding) is seen to vary and gets a rule or is refused (derive_rules).
HI_OFFSETS = (1, 2, 3, 4, 8, 16, 32)
LO_OFFSETS = (1,)


def samples(sym: Symbol) -> list[int]:
    """Sizes the model is converted at: the upper bound first, the lower bound, one
    between (a multiple of the largest power of two, up to 32, dividing both), then
    sizes of other residues near both bounds (HI_OFFSETS, LO_OFFSETS) and one odd size
    between."""
    g = 1
    while g < 32 and sym.lo % (g * 2) == 0 and sym.hi % (g * 2) == 0:
        g *= 2
    mid = sym.lo + (sym.hi - sym.lo) // 2 // g * g
    out = [sym.hi]
    extra = [sym.hi - d for d in HI_OFFSETS] + [sym.lo + d for d in LO_OFFSETS] + [mid + 1 - mid % 2 * 2]
    for v in [sym.lo, mid] + extra:
        if sym.lo <= v <= sym.hi and v not in out:
            out.append(v)
    return out


def concrete(input_shapes: dict[str, Any], bounds: Bounds, values: list[int]) -> dict[str, list[int]]:
    """input_shapes with each bound dimension set to its symbol's value."""
    out = {k: [d if not is_bounded(d) else None for d in v] for k, v in input_shapes.items()}
    for name, dim, sym in bounds.binds:
        out[name][dim] = values[sym]
    return out


def sample_values(bounds: Bounds) -> list[list[int]]:
    """Symbol values per sample: the first is every upper bound; each symbol then
    varies alone, then all together at their lower bounds."""
    base = [s.hi for s in bounds.symbols]
    out = [base]
    for k, s in enumerate(bounds.symbols):
        for v in samples(s)[1:]:
            vals = list(base)
            vals[k] = v
            out.append(vals)
    if len(bounds.symbols) > 1:
        out.append([s.lo for s in bounds.symbols])
        both_odd = [min(s.lo + 1 - s.lo % 2, s.hi) for s in bounds.symbols]
        if both_odd not in out:
            out.append(both_odd)
    return out


def onnx_input_feeds(model, shapes: dict[str, list[int]], values: dict) -> dict[str, np.ndarray]:
    """Zero feeds of the model's inputs at `shapes` (values: frozen inputs, fed as given)."""
    from onnx import helper
    init = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        if vi.name in values:
            feeds[vi.name] = np.asarray(values[vi.name])
            continue
        tt = vi.type.tensor_type
        shape = shapes.get(vi.name) or [int(d.dim_value) for d in tt.shape.dim]
        feeds[vi.name] = np.zeros(shape, helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return feeds


def model_fails_at(model, shapes: dict[str, list[int]], values: dict, cache: dict) -> str | None:
    """onnxruntime's error when the ONNX model itself cannot run at `shapes` (an FPN whose
    skip connections need a multiple of 32), None when it runs or onnxruntime is absent."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    if "session" not in cache:
        try:
            opts = ort.SessionOptions()
            opts.log_severity_level = 4
            cache["session"] = ort.InferenceSession(model.SerializeToString(), opts,
                                                    providers=["CPUExecutionProvider"])
        except Exception:
            cache["session"] = None
    sess = cache["session"]
    if sess is None:
        return None
    try:
        sess.run(None, onnx_input_feeds(model, shapes, values))
    except Exception as e:
        return str(e).strip().splitlines()[0][:300]
    return None


def _prefix_constants(graphs: list, values: list[list[int]]) -> None:
    """A constant input that, at every sample size, is the leading part of the upper
    bound's constant (position embeddings sliced to the sequence length) becomes a slice
    of that constant, in every graph, whose sizes follow a symbol at run time."""
    g0 = graphs[0]
    k = 0
    while k < len(g0.nodes):
        n = g0.nodes[k]
        for t in n.inputs:
            if not t or not g0.tensors[t].is_const:
                continue
            c0 = g0.tensors[t].data
            cs = [g.tensors[t].data if t in g.tensors and g.tensors[t].is_const else None for g in graphs[1:]]
            if all(c is not None and c.shape == c0.shape and np.array_equal(c, c0) for c in cs):
                continue
            if any(c is None or c.ndim != c0.ndim or any(a > b for a, b in zip(c.shape, c0.shape))
                   or not np.array_equal(c, c0[tuple(slice(0, d) for d in c.shape)]) for c in cs):
                continue  # derive_rules refuses it
            out = g0.unique_name(f"{t}__bounded")
            for g, c in zip(graphs, [c0] + cs):
                g.tensors[t].data = c0
                g.tensors[t].shape = c0.shape
                g.add_tensor(out, c.shape, c0.dtype)
                for m in g.nodes:  # every use of the constant reads the slice
                    m.inputs = [out if i == t else i for i in m.inputs]
                g.outputs = [out if o == t else o for o in g.outputs]
                node = g.nodes[k]
                g.nodes.insert(k, type(node)("slice", [t], [out], {"starts": [0] * c0.ndim, "steps": [1] * c0.ndim,
                                                                    "sizes": list(c.shape)}, out))
            k += 1
            n = g0.nodes[k]
        k += 1


class NeedsRunTime(ConversionError):
    """derive_rules: values computed from the input size (ONNX tensor names) that the
    graphs fold into constants or parameters which vary in a way no rule follows; the
    conversion is to be made again with them computed at run time (a shape program,
    docs/runtime.md). The message is the error to give if that does not help."""

    def __init__(self, message: str, names: set[str]):
        super().__init__(message)
        self.names = names


def derive_rules(graphs: list, bounds: Bounds, values: list[list[int]]) -> None:
    """Compares the graphs converted at the sample sizes (graphs[0] at the upper bounds,
    the one written; values: the symbols' values of each) and fills bounds.rules;
    ConversionError for what the runtime could not follow, NeedsRunTime when values
    computed from the input size (the importer's g.metadata["size_constants"] and
    ["size_inputs"]) could be computed at run time instead."""
    from . import ops as edgert_ops
    _prefix_constants(graphs, values)
    g0 = graphs[0]
    size_constants = {k: v for g in graphs for k, v in (g.metadata.get("size_constants") or {}).items()}
    size_inputs = g0.metadata.get("size_inputs") or {}
    wanted: set[str] = set()

    def refuse(message: str, source: str | None = None):
        """Asks for `source` (an ONNX name) at run time, else gives up with `message`; the
        first message stays, for when computing at run time does not help."""
        if source is not None:
            if not wanted:
                refuse.first = message
            wanted.add(source)
            return
        if wanted:
            raise NeedsRunTime(refuse.first, wanted)
        raise ConversionError(message)

    for g in graphs[1:]:
        if len(g.nodes) != len(g0.nodes) or any(a.op != b.op or a.inputs != b.inputs or a.outputs != b.outputs
                                                for a, b in zip(g0.nodes, g.nodes)):
            # Constants computed from the size may be why (a pass that treats small and
            # large constants apart): computed at run time, they are the same nodes.
            wanted.update(_varying_constants(graphs, size_constants))
            refuse.first = ("the converted graph changes with the input size (bounded dimensions need one graph "
                            "for every size); convert a static file per size instead")
            refuse(refuse.first)
    for t in g0.outputs:
        if g0.tensors[t].is_const and any(not np.array_equal(g.tensors[t].data, g0.tensors[t].data) for g in graphs):
            refuse(f"output {t!r} is a constant that differs between input sizes (bounded dimensions compute "
                   f"outputs at run time)", size_constants.get(t))
    for k, n in enumerate(g0.nodes):
        others = [g.nodes[k] for g in graphs[1:]]
        for j, t in enumerate(n.inputs):
            if t and g0.tensors[t].is_const:
                for g in graphs[1:]:
                    d = g.tensors[t].data
                    if d.shape != g0.tensors[t].data.shape or not np.array_equal(d, g0.tensors[t].data):
                        refuse(f"node {n.name!r}: op {n.op} does not support bounded dimensions yet (its input {j} "
                               f"is a constant computed from the input size)", size_constants.get(t))
                        break
        if n.op == "resize" and _resize_rules(k, n, others, graphs, bounds):
            continue
        opdef = edgert_ops.get(n.op)
        words = [opdef.pack(n, g0)] + [opdef.pack(m, g) for m, g in zip(others, graphs[1:])]
        if any(len(w) != len(words[0]) for w in words):
            refuse(f"node {n.name!r}: op {n.op} does not support bounded dimensions yet "
                   f"(its parameter count follows the input size)", size_inputs.get(n.name))
            continue
        in_shapes = [[g.tensors[t].shape if t else None for t in m.inputs] for m, g in zip([n] + others, graphs)]
        same = _same_rules(k, n, g0, in_shapes) + _slice_rules(k, n, others, in_shapes)
        bounds.rules += same
        exprs = _expr_words(n, g0)
        for w in range(len(words[0])):
            vals = [ws[w] for ws in words]
            if any(r[4] == w or (r[1] == RULE_SLICE and r[4] + 2 == w) for r in same):
                continue
            if w in exprs and _expr_rule(k, n, RULE_PARAM_EXPR, w, exprs[w], vals, values, in_shapes, bounds,
                                         f"parameter {w}"):
                continue
            if all(v == vals[0] for v in vals):
                continue
            rule = _dim_rule(vals, in_shapes)
            if rule is not None:
                bounds.rules.append((k, RULE_PARAM, rule[0], rule[1], w, rule[2]))
                continue
            sym = _sym_rule(vals, values)
            if sym is None:
                refuse(f"node {n.name!r}: op {n.op} does not support bounded dimensions yet "
                       f"(parameter {w} follows the input size in a way the runtime cannot compute)",
                       size_inputs.get(n.name))
                continue
            bounds.rules.append((k, RULE_PARAM_SYM, sym[0], 0, w, sym[1]))
        if n.op in SHAPE_FROM_FILE and len([i for i in n.inputs if i]) == 1:  # else its target input gives it
            out_shapes = [g.tensors[m.outputs[0]].shape for m, g in zip([n] + others, graphs)]
            varying = [d for d in range(len(out_shapes[0])) if any(s[d] != out_shapes[0][d] for s in out_shapes)]
            sym_shape = (n.attrs.get("sym") or {}).get("shape")
            if sym_shape is not None and len(sym_shape) == len(out_shapes[0]):
                # dims as the ONNX arithmetic computes them (symbolic.py): expression rules
                kept = len(bounds.rules), len(bounds.code)
                for d, e in enumerate(sym_shape):
                    if (d in varying or not symdim.as_expr(e).is_const) and not _expr_rule(
                            k, n, RULE_OUTDIM_EXPR, d, e, [s[d] for s in out_shapes], values, in_shapes, bounds,
                            f"output dim {d}"):
                        del bounds.rules[kept[0]:], bounds.code[kept[1]:]  # the fits below decide
                        break
                else:
                    varying = []
            infer = n.op == "reshape" and len(varying) == 1  # the element count fixes it
            if infer:
                bounds.rules.append((k, RULE_INFER, 0, 0, varying[0], 0))
            for d in varying if not infer else ():
                rule = _dim_rule([s[d] for s in out_shapes], in_shapes)
                if rule is None:
                    refuse(f"node {n.name!r}: op {n.op} does not support bounded dimensions yet (output dim {d} "
                           f"follows the input size in a way the runtime cannot compute)", size_inputs.get(n.name))
                    continue
                bounds.rules.append((k, RULE_OUTDIM, rule[0], rule[1], d, rule[2]))
    if wanted:
        raise NeedsRunTime(refuse.first, wanted)


def _expr_words(n, g) -> dict:
    """{parameter word: expression} of node n's parameters that the importer recorded as
    expressions (attrs["sym"]: {attribute: [expression per entry]}, symbolic.py), each
    entry's word found by moving it and seeing which word moves."""
    from . import ops as edgert_ops
    sym = n.attrs.get("sym") or {}
    out = {}
    pack = edgert_ops.get(n.op).pack
    base = pack(n, g)
    for attr, exprs in sym.items():
        if attr == "shape" or attr not in n.attrs:
            continue
        vals = list(n.attrs[attr])
        for idx, e in enumerate(exprs):
            try:
                n.attrs[attr] = vals[:idx] + [vals[idx] + 7919] + vals[idx + 1:]
                moved = [w for w, (a, b) in enumerate(zip(base, pack(n, g))) if a != b]
            except Exception:
                moved = []
            finally:
                n.attrs[attr] = vals
            if len(moved) == 1:
                out[moved[0]] = e
    return out


def _expr_rule(k: int, n, kind: int, target: int, e, vals: list[int], values: list[list[int]],
               in_shapes: list[list], bounds: Bounds, what: str) -> bool:
    """An EXPR rule of node n (index k) for `what` (a parameter word or an output dim,
    `target`), when it follows the size; False, with no rule, when the expression does
    not give each sample's value (vals), as when a pass changed the node."""
    e = symdim.as_expr(e)
    got = []
    for vs, shapes in zip(values, in_shapes):
        env = {j: v for j, v in enumerate(vs)}
        for i, shp in enumerate(shapes):
            for d, v in enumerate(shp or ()):
                env[("in", i, d)] = v
        got.append(e.evaluate(env))
    if got != list(vals):
        return False  # a pass changed the node (merged reshapes): the fitted rules decide
    if len(set(got)) > 1 or e.symbols():
        try:
            bounds.add_expr(k, kind, target, e)
        except OverflowError as ex:
            raise ConversionError(f"node {n.name!r}: op {n.op}: {what} follows the input size by {e}, which the "
                                  f"runtime cannot evaluate ({ex})") from None
    return True


def _varying_constants(graphs: list, size_constants: dict[str, str]) -> set[str]:
    """ONNX names of the constants computed from the size (size_constants: tensor -> ONNX
    name) that are not the same constant in every graph."""
    out = set()
    for t, source in size_constants.items():
        data = [g.tensors[t].data if t in g.tensors else None for g in graphs]
        if any(d is not None for d in data) and (any(d is None for d in data) or any(
                d.shape != data[0].shape or not np.array_equal(d, data[0]) for d in data)):
            out.add(source)
    return out


def _same_rules(k: int, n, g, in_shapes: list[list]) -> list[tuple[int, int, int, int, int, int]]:
    """SAME rules of window node n (index k) whose ONNX auto_pad was SAME_UPPER or
    SAME_LOWER (attr same_pad): each pad word of a spatial axis whose input size varies
    (over in_shapes, the samples' input shapes) is recomputed at run time from the actual
    size by the auto_pad formula itself (csrc/src/bounds.c), whatever the samples show."""
    auto = n.attrs.get("same_pad")
    if auto is None:
        return []
    from . import ops as edgert_ops
    pack = edgert_ops.get(n.op).pack
    pads = list(n.attrs["pads"])
    base = pack(n, g)
    rules = []
    try:
        for p in range(len(pads)):
            axis = p % (len(pads) // 2)
            dim = 2 + axis
            if all(s[0][dim] == in_shapes[0][0][dim] for s in in_shapes):
                continue
            n.attrs["pads"] = pads[:p] + [pads[p] + 7919] + pads[p + 1:]
            moved = [w for w, (a, b) in enumerate(zip(base, pack(n, g))) if a != b]
            n.attrs["pads"] = pads
            stride, dil, kern = n.attrs["strides"][axis], n.attrs["dilations"][axis], n.attrs["kernel"][axis]
            k_eff = (kern - 1) * dil + 1
            if len(moved) != 1 or k_eff >= 1 << 16 or stride >= 1 << 12:
                raise ConversionError(f"node {n.name!r}: op {n.op} with auto_pad {auto} does not support bounded "
                                      f"dimensions (its pads cannot be recomputed at run time)")
            end = p >= len(pads) // 2
            add = k_eff | stride << 16 | int(end) << 28 | int(auto == "SAME_LOWER") << 29
            rules.append((k, RULE_SAME, 0, dim, moved[0], add))
    finally:
        n.attrs["pads"] = pads
    return rules


def _slice_rules(k: int, n, others: list, in_shapes: list[list]) -> list[tuple[int, int, int, int, int, int]]:
    """SLICE rules of slice node n (index k) for each axis whose input size varies: the
    runtime recomputes start and size from the ONNX start and end (attr onnx_se, the same
    at every sample) by the ONNX rule, checked here against every sample's words."""
    se = n.attrs.get("onnx_se")
    if n.op != "slice" or se is None or any(m.attrs.get("onnx_se") != se for m in others):
        return []
    from .ops.shape_ops import normalize_slice
    rules = []
    for d, (start, end) in enumerate(se):
        if all(s[0][d] == in_shapes[0][0][d] for s in in_shapes):
            continue
        step = n.attrs["steps"][d]
        for m, s in zip([n] + others, in_shapes):
            st, _, sz = normalize_slice(s[0], [start], [end], [d], [step])
            if (st[d], sz[d]) != (m.attrs["starts"][d], m.attrs["sizes"][d]):
                return []  # a pass changed the slice: the fitted rules decide
        rules.append((k, RULE_SLICE, end & 0xFFFFFFFF, d, 1 + 3 * d, start))
    return rules


def same_pad(x: int, add: int) -> int:
    """The pad a SAME rule gives for input size x (the runtime's formula, for tests)."""
    k, stride = add & 0xFFFF, (add >> 16) & 0xFFF
    total = (-(-x // stride) - 1) * stride + k - x
    if total <= 0:
        return 0
    end, lower = (add >> 28) & 1, (add >> 29) & 1
    return total - total // 2 if end != lower else total // 2


RESIZE_COORDS = {"half_pixel": 0, "pytorch_half_pixel": 1, "asymmetric": 2, "align_corners": 3}
RESIZE_NEAREST_MODES = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3, "simple": 4}
RESIZE_FIXED_OUT = 1 << 6


def _resize_rules(k: int, n, others: list, graphs: list, bounds: Bounds) -> bool:
    """RESIZE rules for a nearest or linear resize whose input size varies: the runtime
    rebuilds each resized axis's index (and weight) table for the actual size by the
    converter's own formula (csrc/src/bounds.c, resize_rules), with the output length
    floor(scale * input) (ONNX scales) or the file's (ONNX sizes, the same at every
    sample); False when nothing about it varies."""
    from .ops.resize import _tables
    shapes = [(g.tensors[m.inputs[0]].shape, g.tensors[m.outputs[0]].shape) for m, g in zip([n] + others, graphs)]
    a = n.attrs
    why = None
    if a.get("mode") not in ("nearest", "linear") or a.get("antialias") or a.get("roi") is not None:
        why = "mode or antialias"
    elif a.get("coord") not in RESIZE_COORDS:
        why = f"coordinate_transformation_mode {a.get('coord')}"
    elif a["mode"] == "linear" and a.get("exclude_outside"):
        why = "exclude_outside"
    if why is not None and all(sh == shapes[0] for sh in shapes):
        return False  # the runtime refuses it at load if a bounded dimension reaches it
    if why is not None:
        raise ConversionError(f"node {n.name!r}: op resize does not support bounded dimensions yet ({why}; nearest "
                              f"and linear resizing with half_pixel, pytorch_half_pixel, asymmetric or align_corners "
                              f"coordinates follow the input size)")
    code = RESIZE_COORDS[a["coord"]] | RESIZE_NEAREST_MODES.get(a.get("nearest_mode", "round_prefer_floor"), 0) << 3
    tables = _tables(n, shapes[0][0])
    rules = []
    for d, t in enumerate(tables):
        if t is None:
            if any(i[d] != o[d] for i, o in shapes):
                raise ConversionError(f"node {n.name!r}: op resize does not support bounded dimensions yet (axis "
                                      f"{d} is an identity at the upper bounds only)")
            continue
        if any(i[d] == 0 or o[d] == 0 for i, o in shapes):
            raise ConversionError(f"node {n.name!r}: op resize does not support bounded dimensions yet (axis {d} is "
                                  f"empty at some sizes)")
        scale = float(a["scales"][d])
        f32 = np.float32(scale)
        if float(f32) == scale and all(o[d] == int(np.float64(scale) * i[d]) for i, o in shapes):
            rules.append((k, RULE_RESIZE, 0, d, code, int(f32.view(np.int32))))
        elif all(o[d] == shapes[0][1][d] for _, o in shapes):
            rules.append((k, RULE_RESIZE, 0, d, code | RESIZE_FIXED_OUT, 0))
        else:
            raise ConversionError(f"node {n.name!r}: op resize does not support bounded dimensions yet (the output "
                                  f"size of axis {d} follows the input size by other than its scale)")
    if not rules:  # every axis an identity: one rule still makes the runtime copy the shape
        rules.append((k, RULE_RESIZE, 0, 0, code, int(np.float32(1.0).view(np.int32))))
    bounds.rules += rules
    return True


def _sym_rule(vals: list[int], values: list[list[int]]) -> tuple[int, int] | None:
    """(symbol, add) with vals[s] == values[s][symbol] + add for every sample."""
    for k in range(len(values[0])):
        diffs = {v - s[k] for v, s in zip(vals, values)}
        if len(diffs) == 1:
            return k, diffs.pop()
    return None


def _dim_rule(vals: list[int], in_shapes: list[list]) -> tuple[int, int, int] | None:
    """(input, dim, add) with vals[s] == in_shapes[s][input][dim] + add for every sample."""
    best = None
    for i, shp in enumerate(in_shapes[0]):
        if shp is None:
            continue
        for d in range(len(shp)):
            diffs = {v - s[i][d] for v, s in zip(vals, in_shapes)}
            if len(diffs) == 1:
                add = diffs.pop()
                if best is None or abs(add) < abs(best[2]):
                    best = (i, d, add)
    return best


def upper(input_shapes: dict[str, Any]) -> dict[str, list[int]]:
    return {k: [d[1] if is_bounded(d) else d for d in v] for k, v in input_shapes.items()}


# Values per swept dimension at most (evenly spread, ends included) in sweep_scratch.
SWEEP_MAX = 1024


def sweep_scratch(graphs: list) -> list[int]:
    """Each node's scratch, at least its largest over the sample graphs and over a sweep of
    its input sizes: a varying input dim takes every value between its smallest and
    largest over the samples (the others at their largest), since a scratch need can
    follow a size non-monotonically (conv_transpose2d's row chunks: rows * W with rows =
    budget // W). Values the op refuses (sizes no input size gives) are skipped."""
    from . import ops as edgert_ops
    g0 = graphs[0]
    out = []
    for k, n in enumerate(g0.nodes):
        fn = edgert_ops.get(n.op).scratch
        if fn is None:
            out.append(0)
            continue
        best = max(int(fn(g.nodes[k], g)) for g in graphs)
        shapes = [[tuple(g.tensors[t].shape) if t and not g.tensors[t].is_const else None for t in g.nodes[k].inputs]
                  for g in graphs]
        top, varying = {}, []
        for j, shp in enumerate(shapes[0]):
            if shp is None or any(s[j] is None or len(s[j]) != len(shp) for s in shapes):
                continue
            for d in range(len(shp)):
                vs = [s[j][d] for s in shapes]
                if min(vs) != max(vs):
                    varying.append((j, d, min(vs), max(vs)))
                top[j] = tuple(max(s[j][e] for s in shapes) for e in range(len(shp)))
        if not varying:
            out.append(best)
            continue
        saved = {j: g0.tensors[n.inputs[j]].shape for j in top}
        try:
            for j, d, lo, hi in varying:
                span = hi - lo
                step = max(1, -(-span // SWEEP_MAX))
                for v in sorted(set(range(lo, hi + 1, step)) | {hi}):
                    for i, shp in top.items():
                        g0.tensors[n.inputs[i]].shape = shp
                    shp = list(top[j])
                    shp[d] = v
                    g0.tensors[n.inputs[j]].shape = tuple(shp)
                    try:
                        best = max(best, int(fn(n, g0)))
                    except Exception:
                        continue
        finally:
            for j, shp in saved.items():
                g0.tensors[n.inputs[j]].shape = shp
        out.append(best)
    return out


def check_with_runtime(data: bytes, graphs: list, bounds: Bounds, values: list[list[int]],
                       invalid: list[tuple[list[int], dict, str]] = ()) -> None:
    """Loads the file in the C runtime and checks, at each sample size, the output shapes
    it computes against the sample conversion's, and that it runs (its kernels' prepare
    checks their scratch against the plan); at the sizes where the ONNX model itself
    fails (invalid: (values, feeds, onnxruntime's error)), that the runtime refuses too."""
    from ..runtime import session as runtime
    try:
        sess = runtime.Session(data, max_contexts=1)
    except Exception as e:  # the loader's message names the node and op
        raise ConversionError(f"bounded dimensions: {e}") from None
    for vals, feeds, why in invalid:
        try:
            sess.run(None, feeds)
        except Exception:
            continue
        raise ConversionError(f"bounded dimensions: at sizes {vals} the model fails in onnxruntime ({why}), but the "
                              f"runtime would run it; narrow the bounds")
    for g, vals in zip(graphs, values):
        feeds = {}
        for name in g.inputs:
            t = g.tensors[name]
            feeds[name] = np.zeros(t.shape, t.dtype)
        try:
            outs = sess.run(None, feeds)
        except Exception as e:
            raise ConversionError(f"bounded dimensions: the runtime fails at sizes {vals}: {e}") from None
        for name, arr in zip(g.outputs, outs):
            want = tuple(g.tensors[name].shape)
            if tuple(arr.shape) != want:
                raise ConversionError(f"bounded dimensions: output {name!r} at sizes {vals} computes to "
                                      f"{list(arr.shape)}, the model gives {list(want)}")


# Every size of a symbol is tried when it has at most this many (more are sampled evenly).
MAX_ENUMERATED = 4096
# Symbol value combinations tried together, beyond each symbol alone (all when fewer).
MAX_COMBINATIONS = 400


def _symbol_values(s: Symbol) -> list[int]:
    span = s.hi - s.lo + 1
    step = max(1, -(-span // MAX_ENUMERATED))
    return sorted(set(range(s.lo, s.hi + 1, step)) | {s.hi})


def _step_of(valid: dict[int, bool]) -> tuple[int, int] | None:
    """(step, residue mask) for the smallest step <= 64 such that whether a size runs
    depends on size % step alone, over the sizes tried (each residue seen twice at
    least), when some size does not run; else None."""
    sizes = sorted(valid)
    if all(valid.values()) or not any(valid.values()):
        return None
    for step in range(2, min(64, len(sizes) // 2) + 1):
        mask, seen = 0, {}
        for v in sizes:
            if seen.setdefault(v % step, valid[v]) != valid[v]:
                break
        else:
            for r, ok in seen.items():
                mask |= int(ok) << r
            return step, mask
    return None


def residues(mask: int) -> list[int]:
    return [r for r in range(64) if mask >> r & 1]


def settle(serialize_fn, g, bounds: Bounds, input_shapes: dict[str, Any]) -> bytes:
    """The file's bytes after trying, in the C runtime's shape pass (Session.shapes_at:
    every node's shape function and prepare, no kernel), every size of each symbol (the
    others at their upper bounds; evenly spread when more than MAX_ENUMERATED) and up to
    MAX_COMBINATIONS combinations of all symbols:

    * a node whose scratch falls short at some size gets that size's need
      (g.metadata["scratch_at_least"]), and the file is written and tried again;
    * sizes the model cannot run (feature maps that no longer match after stride-32 FPN
      levels, windows longer than the input) become a STEP constraint (bounds.steps)
      when they are exactly the sizes off a step (H % 32 == 0); inputs are then checked
      against it with a message naming the input, dimension and rule;
    * any other pattern is a ConversionError that says which bounds to give instead.

    serialize_fn(g) -> bytes writes the file."""
    import re
    from ..errors import EdgertError
    from ..runtime import session as runtime
    from . import ops as edgert_ops
    names: dict[str, list[int]] = {}  # a lowering may emit several nodes of one name (conv_transpose2d + pad)
    for k, n in enumerate(g.nodes):
        if edgert_ops.get(n.op).scratch is not None:
            names.setdefault(n.name, []).append(k)
    scratch = g.metadata.setdefault("scratch_at_least", [0] * len(g.nodes))
    sym_dims = {o: g.metadata.get("sym_dims", {}).get(o) for o in g.outputs}
    hi = [s.hi for s in bounds.symbols]
    syms = [s.name for s in bounds.symbols]
    rng = np.random.default_rng(0)

    for _ in range(8):
        bounds.steps.clear()
        data = serialize_fn(g)
        try:
            sess = runtime.Session(data, max_contexts=1)
        except EdgertError as e:  # the loader's message names the node and op
            raise ConversionError(f"bounded dimensions: {e}") from None
        short: dict[int, int] = {}

        def fails(vals) -> str | None:
            try:
                shapes = sess.shapes_at(concrete(input_shapes, bounds, vals))
            except EdgertError as e:
                m = re.search(r"'([^']*)': needs (\d+) scratch bytes", str(e))
                if m is None or m.group(1) not in names:
                    return str(e)
                for k in names[m.group(1)]:
                    short[k] = max(short.get(k, 0), int(m.group(2)))
                return None
            _check_dims(shapes, sym_dims, vals)
            return None

        lists = []
        for k, s in enumerate(bounds.symbols):
            valid = {}
            for v in _symbol_values(s):
                vals = list(hi)
                vals[k] = v
                valid[v] = fails(vals) is None
            lists.append([v for v in sorted(valid) if valid[v]])
            if all(valid.values()):
                continue
            good, bad = lists[-1], [v for v in sorted(valid) if not valid[v]]
            step = _step_of(valid)
            if step is None:
                inner = _step_of({v: ok for v, ok in valid.items() if good and good[0] <= v <= good[-1]})
                hint = ""
                if good:
                    hint = f"; it runs {_ranges(good)}: give bounds {good[0]}..{good[-1]}" + (
                        f" (it runs sizes {inner[0]}*k + {residues(inner[1])})" if inner else "")
                raise ConversionError(f"bounded dimensions: the model cannot run {s.name!r} = {_ranges(bad)} within "
                                      f"{s.lo}..{s.hi}{hint}")
            bounds.steps[k] = step
        if len(lists) > 1:
            total = int(np.prod([len(v) for v in lists]))
            if total <= MAX_COMBINATIONS:
                combos = [[int(x) for x in c] for c in
                          np.array(np.meshgrid(*lists, indexing="ij")).reshape(len(lists), -1).T]
            else:
                combos = [[v[min(len(v) - 1, j * len(v) // 19)] for v in lists] for j in range(20)]
                combos += [[int(rng.choice(v)) for v in lists] for _ in range(MAX_COMBINATIONS - 20)]
            for vals in combos:
                why = fails(vals)
                if why is not None:
                    raise ConversionError(f"bounded dimensions: at sizes {dict(zip(syms, vals))} the runtime fails "
                                          f"({why}) though each size runs alone; fix all but one of {syms}")
        if not short:
            break
        for k, need in short.items():
            scratch[k] = max(scratch[k], need)
    else:
        raise ConversionError("bounded dimensions: the scratch plan does not settle over the sizes")
    return data if not bounds.steps else serialize_fn(g)


def _check_dims(shapes: dict[str, list[int]], sym_dims: dict, vals: list[int]) -> None:
    """The runtime's output shapes at symbol values `vals` against the expressions the
    converter derived from the ops (symshape); ConversionError naming the output when
    they differ."""
    for name, shape in shapes.items():
        exprs = sym_dims.get(name)
        if exprs is None:
            continue
        want = [e.evaluate(vals) for e in exprs]
        if list(shape) != want:
            raise ConversionError(f"bounded dimensions: output {name!r} at sizes {vals} is {list(shape)} in the "
                                  f"runtime, but {[str(e) for e in exprs]} = {want} by the ops' semantics")


def _ranges(vals: list[int]) -> str:
    """[1, 2, 3, 7, 9, 10] -> '1..3, 7, 9..10' (at most 6 runs shown)."""
    runs: list[list[int]] = []
    for v in vals:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    text = [f"{a}..{b}" if a != b else f"{a}" for a, b in runs[:6]]
    return ", ".join(text) + (", ..." if len(runs) > 6 else "")


# ---- one conversion: rules from the expressions -------------------------------------------

class NeedsSamples(Exception):
    """derive_from_expressions: something the expressions do not cover; the converter falls
    back to the sample conversions (docs/runtime.md lists the cases)."""


class _ShapeView:
    """The graph's tensors with their shapes at other symbol values (from the expressions)."""

    class _T:
        def __init__(self, t, shape):
            self.name, self.shape, self.dtype, self.data, self.quant = t.name, shape, t.dtype, t.data, t.quant

        @property
        def is_const(self):
            return self.data is not None

    def __init__(self, g, dims: dict, vals: list[int]):
        self.tensors = {}
        for name, t in g.tensors.items():
            d = dims.get(name)
            shape = tuple(e.evaluate(vals) for e in d) if d is not None else t.shape
            self.tensors[name] = _ShapeView._T(t, shape)
        self.metadata = g.metadata
        self.inputs, self.outputs = g.inputs, g.outputs

    def const(self, name: str):
        return self.tensors[name].data if name else None


def probe_values(bounds: Bounds) -> list[list[int]]:
    """Symbol values where the expressions are checked against each op's parameters: the
    lower bounds, odd sizes near both bounds and one between (prime-ish offsets)."""
    out = []
    for pick in (lambda s: s.lo, lambda s: s.hi - 1, lambda s: s.lo + (s.hi - s.lo) * 5 // 11 | 1,
                 lambda s: min(s.hi, s.lo + 2)):
        v = [min(max(pick(s), s.lo), s.hi) for s in bounds.symbols]
        if v not in out and v != [s.hi for s in bounds.symbols]:
            out.append(v)
    return out


def derive_from_expressions(g, bounds: Bounds) -> dict:
    """Fills bounds.rules from every tensor's dims as expressions (symshape) and the
    parameters' expressions the importer recorded, on the one graph converted at the upper
    bounds: SAME pads, slices, resize tables, expression rules for parameters and reshape
    dims. Each node's other parameter words are checked to stay the same at the probe
    values (probe_values). Returns the dims; NeedsSamples when something is not covered
    (a dim not followed, a constant computed from the size, a fallback partition, ...)."""
    from . import ops as edgert_ops, symshape
    dims = symshape.infer(g, bounds)
    hi = [s.hi for s in bounds.symbols]
    probes = probe_values(bounds)
    views = [_ShapeView(g, dims, v) for v in probes]
    used = {i for n in g.nodes for i in n.inputs if i}
    for t in g.metadata.get("size_constants") or {}:
        if t in g.tensors and (t in used or t in g.outputs):
            raise NeedsSamples(f"constant {t!r} is computed from the input size")
    for t in g.outputs:
        if dims.get(t) is None:
            raise NeedsSamples(f"output {t!r}: its dims are not followed")
        if g.tensors[t].is_const:
            raise NeedsSamples(f"output {t!r} is a constant")
    if any(0 in t.shape for t in g.tensors.values()) or any(i not in used for i in g.inputs):
        # an empty tensor at the upper bounds may have folded what follows into constants
        raise NeedsSamples("an empty tensor or an unused input at the upper bounds")
    rules = []
    for k, n in enumerate(g.nodes):
        tensors = [t for t in list(n.inputs) + list(n.outputs) if t]
        if any(dims.get(t) is None for t in tensors):
            raise NeedsSamples(f"node {n.name!r} ({n.op}): its dims are not followed")
        if all(e.is_const for t in tensors for e in dims[t]):
            continue
        if n.op in ("partition", "range", "shape") or (n.attrs.get("from_size") and "sym" not in n.attrs):
            raise NeedsSamples(f"node {n.name!r} ({n.op})")
        in_shapes = [[g.tensors[t].shape if t else None for t in n.inputs]] + [
            [v.tensors[t].shape if t else None for t in n.inputs] for v in views]
        node_rules: list = []
        if n.op == "resize":
            others = [n] * len(views)
            if _resize_rules(k, n, others, [g] + views, bounds):
                continue
        node_rules += _same_rules(k, n, g, in_shapes)
        se = n.attrs.get("onnx_se") if n.op == "slice" else None
        if se is not None:
            from .ops.shape_ops import normalize_slice
            r = len(se)
            st, _, sz = normalize_slice(in_shapes[0][0], [a for a, _ in se], [b for _, b in se], range(r),
                                        n.attrs["steps"])
            if (list(st), list(sz)) != (list(n.attrs["starts"]), list(n.attrs["sizes"])):
                raise NeedsSamples(f"node {n.name!r}: a pass changed the slice")
            for d, (start, end) in enumerate(se):
                if not dims[n.inputs[0]][d].is_const:
                    node_rules.append((k, RULE_SLICE, end & 0xFFFFFFFF, d, 1 + 3 * d, start))
        exprs = _expr_words(n, g)
        covered = {r[4] for r in node_rules} | {r[4] + 2 for r in node_rules if r[1] == RULE_SLICE} | set(exprs)
        bounds.rules += node_rules
        for w, e in exprs.items():
            e = symdim.as_expr(e)
            env_hi = _env(hi, in_shapes[0])
            if e.symbols() or any(_eval_env(e, _env(v, s)) != _eval_env(e, env_hi) for v, s in zip(probes, in_shapes[1:])):
                bounds.add_expr(k, RULE_PARAM_EXPR, w, _over_symbols(e, n, dims, bounds))
        if n.op in SHAPE_FROM_FILE and len([i for i in n.inputs if i]) == 1:
            for d, e in enumerate(dims[n.outputs[0]]):
                if not e.is_const:
                    bounds.add_expr(k, RULE_OUTDIM_EXPR, d, e)
        # the other parameter words must not follow the size
        pack = edgert_ops.get(n.op).pack
        base = pack(n, g)
        for v in views:
            try:
                words = pack(n, v)
            except Exception:
                continue  # a size the op refuses: the runtime's tries find it (settle)
            if len(words) != len(base) or any(a != b for w, (a, b) in enumerate(zip(base, words))
                                              if w not in covered):
                raise NeedsSamples(f"node {n.name!r} ({n.op}): a parameter follows the size")
    return dims


def _env(vals: list[int], shapes: list) -> dict:
    env = {j: v for j, v in enumerate(vals)}
    for i, shp in enumerate(shapes):
        for d, x in enumerate(shp or ()):
            env[("in", i, d)] = x
    return env


def _eval_env(e, env) -> int | None:
    try:
        return e.evaluate(env)
    except (ZeroDivisionError, KeyError):
        return None


def _over_symbols(e, n, dims: dict, bounds: Bounds):
    """e with the node's input-dim references kept (the runtime reads them), checked to
    encode."""
    symdim.program(e)
    return e
