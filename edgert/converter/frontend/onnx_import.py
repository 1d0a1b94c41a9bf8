"""ONNX front end: an ONNX model with fixed input shapes becomes an edgert Graph.

The importer walks the ONNX nodes in order as an abstract interpreter. A node whose
inputs are all constants is evaluated now (with onnx's reference implementation), so
the shape computations exporters emit (Shape, Gather, Concat, Cast, Unsqueeze, ...)
disappear; Shape and Size are answered from the static shapes. Every other node is
lowered by the function registered for its op type in onnx_ops/ (loaded by the package),
which emits edgert ops whose output shapes come from each op's `infer`.
Problems are collected for every node, so one error lists them all.

A bounded conversion may ask (run_time) for values computed from input sizes to be
computed at run time instead: the nodes computing them, back to their Shape nodes, are
lowered as run-time nodes (Shape to `shape`), and their value at the size imported stays
known, for the lowerings that need a constant (LowerCtx.require_const, computed).
"""
from __future__ import annotations

import heapq
import math
import os
import re
import stat
from typing import Any, Callable

import numpy as np

from ... import dtypes
from .. import ops as edgert_ops
from ...errors import ConversionError, ModelFormatError, OnnxFormatError, UnsupportedError
from ..ir import MAX_TENSOR_BYTES, MAX_TENSOR_ELEMENTS, Graph, check_shape
from ..ops import OpUnsupported
from ..passes.fold_constants import fold_nodes

MIN_OPSET, MAX_OPSET = 7, 28

LOWERINGS: dict[str, Callable[["LowerCtx"], None]] = {}

# The largest constant the converter computes by evaluating a node on constants
# (ConstantOfShape, Range, Expand, ...): such a tensor is not in the model's file, so it
# is bounded well below the general tensor limit (docs/design.md, "Untrusted ONNX:
# converter limits").
MAX_FOLDED_BYTES = 256 << 20

# Ops that, on constant inputs, are lowered and folded with edgert's own references
# rather than evaluated with onnx's: the float compute ops, whose references are the
# specification edgert's kernels and onnxruntime are checked against (onnx's evaluator
# disagrees with the ONNX text on some of them: grouped ConvTranspose, ConvTranspose with
# output_shape, SAME padding in ceil mode, LpNormalization p=1, GlobalMaxPool of rank 3,
# negative Pad). A convolution or product above passes/fold_constants.MAX_FOLDED_MACS
# stays a node and runs in the runtime. Shape arithmetic (Shape, Gather, Concat, Range,
# ...) stays with onnx.
FOLD_WITH_OWN_REFERENCES = {
    "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalMaxPool", "GlobalAveragePool",
    "GlobalLpPool", "LpNormalization", "Pad", "Resize", "Upsample", "BatchNormalization", "InstanceNormalization",
    "LayerNormalization", "GroupNormalization", "LRN", "MeanVarianceNormalization", "Gemm", "MatMul", "Softmax",
    "LogSoftmax", "Hardmax", "DepthToSpace", "SpaceToDepth", "GRU", "LSTM", "RNN"}

# Ops never evaluated at convert time even with constant inputs.
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def lower(*op_types: str):
    """Decorator registering a lowering for ONNX op types (default domain)."""

    def deco(fn):
        for t in op_types:
            if t in LOWERINGS:
                raise KeyError(f"lowering for {t} registered twice")
            LOWERINGS[t] = fn
        return fn

    return deco


class LowerCtx:
    """What a lowering function sees of one ONNX node.

    Inputs are addressed by position: `input(i)` is the edgert tensor name ("" when
    absent), `shape(i)`, `dtype(i)`, `const(i)` (ndarray or None). `emit` adds an
    edgert node; give `outputs=ctx.outputs` (the ONNX names) for the node's final
    results, or nothing for fresh intermediate names. `alias(i, name)` makes ONNX
    output i an existing tensor. `fail(reason)` rejects the node.
    """

    def __init__(self, importer: "OnnxImporter", node, opset: int):
        self._imp = importer
        self.graph: Graph = importer.graph
        self.node = node
        self.op_type: str = node.op_type
        self.name: str = node.name or (node.output[0] if node.output else node.op_type)
        self.opset = opset
        self.outputs: list[str] = list(node.output)
        self._attrs = {a.name: a for a in node.attribute}

    # ---- inputs --------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.node.input)

    def input(self, i: int) -> str:
        if i >= len(self.node.input) or not self.node.input[i]:
            return ""
        return self._imp.resolve(self.node.input[i])

    def has(self, i: int) -> bool:
        return bool(self.input(i))

    def shape(self, i: int) -> tuple[int, ...]:
        return self._tensor(i).shape

    def dtype(self, i: int) -> np.dtype:
        return self._tensor(i).dtype

    def _tensor(self, i: int):
        name = self.input(i)
        if not name:
            self.fail(f"input {i} is required")
        return self.graph.tensors[name]

    def const(self, i: int) -> np.ndarray | None:
        name = self.input(i)
        return self.graph.const(name) if name else None

    def require_const(self, i: int, what: str) -> np.ndarray:
        """The value of input i: a constant's, or, for a value a shape program computes at run
        time (computed(i)), its value at the size converted (which the bounded conversion's
        rules then follow)."""
        v = self.const(i)
        imp = self._imp
        if imp.sym_dims and i < len(self.node.input) and self.node.input[i] in imp.size_values:
            s = imp.sym.get(self.node.input[i])
            if s is None or any(not e.is_const for e in s.reshape(-1)):
                self.size_read = True  # a parameter that follows the size (symshape: attrs["from_size"])
        if v is None:
            v = self._imp.known.get(self.input(i))
        if v is None:
            self.fail(f"{what} (input {i}) must be constant after folding; it depends on runtime data")
        return v

    def sym_const(self, i: int) -> np.ndarray | None:
        """The value of input i as symdim expressions (an object array) when it is computed
        from bounded input sizes and the importer followed the arithmetic; None otherwise
        (a constant that does not follow the size, or one it could not follow)."""
        if i >= len(self.node.input) or not self.node.input[i]:
            return None
        return self._imp.sym.get(self.node.input[i])

    def sym_dims(self, i: int) -> tuple | None:
        """Input i's dims as expressions (bounded conversions), None when not followed."""
        if not self._imp.sym_dims or not self.input(i):
            return None
        from . import symbolic
        return symbolic.tensor_dims(self._imp, self.input(i))

    @property
    def bounded(self) -> bool:
        """A bounded conversion (the importer keeps expressions of dims and Shape values)."""
        return bool(self._imp.sym_dims)

    def from_size(self, i: int) -> bool:
        """Input i is computed from input sizes (Shape or Size arithmetic)."""
        return i < len(self.node.input) and self.node.input[i] in self._imp.size_values

    def computed(self, i: int) -> bool:
        """Input i is computed at run time from the input size (a shape program of a bounded
        conversion, docs/runtime.md); require_const gives its value at the size converted."""
        return bool(self.input(i)) and self.input(i) in self._imp.known

    # ---- attributes -----------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = None) -> Any:
        import onnx
        a = self._attrs.get(name)
        if a is None:
            return default
        T = onnx.AttributeProto
        if a.type == T.INT:
            return int(a.i)
        if a.type == T.FLOAT:
            return float(a.f)
        if a.type == T.STRING:
            try:
                return a.s.decode("utf-8")
            except UnicodeDecodeError:
                self.fail(f"attribute {name!r} is not valid UTF-8")
        if a.type == T.INTS:
            return [int(x) for x in a.ints]
        if a.type == T.FLOATS:
            return [float(x) for x in a.floats]
        if a.type == T.STRINGS:
            try:
                return [s.decode("utf-8") for s in a.strings]
            except UnicodeDecodeError:
                self.fail(f"attribute {name!r} is not valid UTF-8")
        if a.type == T.TENSOR:
            return tensor_to_array(a.t, f"attribute {name!r}")
        if a.type == T.GRAPH:
            return a.g
        self.fail(f"attribute {name!r} has an unsupported type")

    def only_attrs(self, *allowed: str) -> None:
        """Rejects the node when it carries an attribute outside `allowed`."""
        extra = sorted(set(self._attrs) - set(allowed))
        if extra:
            self.fail(f"unsupported attribute(s) {extra}")

    # ---- building ------------------------------------------------------------
    def fail(self, reason: str):
        raise OpUnsupported(reason)

    def add_const(self, data: np.ndarray, hint: str = "") -> str:
        return self.graph.add_const(np.asarray(data), hint or f"{self.name}_const")

    def derived_const(self, i: int, how: str, make, hint: str) -> str:
        """The constant make(value of constant input i), e.g. its transpose, computed once
        per (input, how): every node that reads one initializer the same way shares it."""
        src = self.input(i)
        key = (src, how)
        name = self._imp.derived.get(key)
        if name is None:
            name = self.graph.add_derived_const(np.asarray(make(self.graph.const(src))), src, hint)
            self._imp.derived[key] = name
        return name

    def emit(self, op: str, inputs: list[str], attrs: dict | None = None, outputs: list[str] | None = None,
             n_outputs: int = 1) -> list[str]:
        if outputs is None:
            outputs = [self.graph.unique_name(f"{self.name}_{op}") for _ in range(n_outputs)]
        outputs = [o if o else self.graph.unique_name(f"{self.name}_{op}_unused{k}") for k, o in enumerate(outputs)]
        return self._imp.emit(op, inputs, outputs, attrs or {}, self.name)

    def alias(self, i: int, tensor: str) -> None:
        self._imp.alias(self.outputs[i], tensor)


class OnnxImporter:
    def __init__(self, model, input_shapes: dict[str, list[int]] | None, input_values: dict[str, np.ndarray] | None,
                 run_time: set[str] | frozenset[str] = frozenset()):
        self.model = model
        self.input_shapes = dict(input_shapes or {})
        self.input_values = dict(input_values or {})
        # Shape programs (bounded conversions): ONNX tensors computed from input sizes that
        # must be computed at run time (see size_values); `runtime` is their closure,
        # `known` the value of each (edgert name) at the size imported.
        self.wanted = set(run_time)
        self.size_values: set[str] = set()
        self.runtime: set[str] = set()
        self.known: dict[str, np.ndarray] = {}
        self._pending: dict[str, np.ndarray] = {}
        self.graph = Graph()
        self.names: dict[str, str] = {}  # ONNX name -> edgert tensor name
        self.derived: dict[tuple[str, str], str] = {}  # (constant, how) -> LowerCtx.derived_const
        self.problems: list[tuple[str, str, str]] = []
        self.poisoned: set[str] = set()
        self.opset = 0
        self.partitions: dict[str, Any] = {}  # placeholder node name -> partitioner.OnnxPartition
        # emits the edgert node of a placeholder; set with `partitions` by the partitioner,
        # which sits above the importer
        self.emit_placeholder: Callable[[OnnxImporter, Any], None] | None = None
        self.data_dependent: list[str] = []  # partition outputs whose shape follows the data
        # Bounded conversions: the symbolic dims of the bounded inputs, and the values of
        # Shape arithmetic as symdim expressions (edgert name -> object array), where the
        # importer can follow them (symbolic.py)
        self.sym_dims: dict[str, dict[int, Any]] = {}
        self.sym: dict[str, np.ndarray] = {}
        self.sym_shapes: dict[str, tuple | None] = {}  # edgert tensor -> its dims as expressions
        self.fixed_sizes: set[str] = set()  # ONNX values from Shape arithmetic shown not to follow the size

    # ---- name handling -------------------------------------------------------
    def resolve(self, onnx_name: str) -> str:
        return self.names.get(onnx_name, onnx_name)

    def alias(self, onnx_name: str, tensor: str) -> None:
        self.names[onnx_name] = tensor

    def emit(self, op, inputs, outputs, attrs, node_name) -> list[str]:
        g = self.graph
        opdef = edgert_ops.get(op)
        node = g.add_node(op, inputs, outputs, attrs, name=node_name)
        try:
            results = opdef.infer(node, g)
        except Exception:
            g.nodes.pop()
            raise
        if len(results) != len(outputs):
            g.nodes.pop()
            raise OpUnsupported(f"{op} produces {len(results)} outputs, {len(outputs)} requested")
        for name, (shape, dt) in zip(outputs, results):
            if name in g.tensors:
                g.nodes.pop()
                raise ConversionError(f"tensor {name!r} defined twice")
            g.add_tensor(name, shape, dt)
        return outputs

    # ---- driver --------------------------------------------------------------
    def run(self) -> Graph:
        m = self.model
        for op in m.opset_import:
            if op.domain in ("", "ai.onnx"):
                self.opset = op.version
        if not self.opset:
            raise ConversionError("model imports no default-domain opset")
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise ConversionError(f"opset {self.opset} is outside the supported range {MIN_OPSET}..{MAX_OPSET}")
        nodes = check_graph(m.graph, set())
        self.size_values = size_values(nodes, [vi.name for vi in m.graph.input])
        self.runtime = run_time_closure(nodes, self.size_values, self.wanted)
        self._graph_inputs(m.graph)
        self._initializers(m.graph)
        self._nodes(nodes, self.opset)
        if self.problems:
            raise UnsupportedError(self.problems)
        g = self.graph
        for o in m.graph.output:
            name = self.resolve(o.name)
            if name not in g.tensors:
                raise ConversionError(f"graph output {o.name!r} is never produced")
            if name != o.name:
                # Keep the ONNX output name: rename the producing tensor, or copy when the
                # tensor is an input, a constant, already an output, or the name is taken.
                if name in g.inputs or g.tensors[name].is_const or name in g.outputs or o.name in g.tensors:
                    target = o.name if o.name not in g.tensors else g.unique_name(o.name)
                    name = self.emit("copy", [name], [target], {}, o.name)[0]
                else:
                    g.rename_tensor(name, o.name)
                    self.names = {k: (o.name if v == name else v) for k, v in self.names.items()}
                    self.names[name] = o.name  # a later output of the old name finds it (z = Identity(y), y)
                    name = o.name
            elif name in g.outputs:
                name = self.emit("copy", [name], [g.unique_name(o.name)], {}, o.name)[0]
            g.outputs.append(name)
        self.graph.metadata["output_names"] = [o.name for o in m.graph.output]
        return self.graph

    def _graph_inputs(self, g) -> None:
        init_names = {i.name for i in g.initializer}
        unfixed = []
        for vi in g.input:
            if vi.name in init_names:
                continue
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                raise ConversionError(f"input {vi.name!r} is not a tensor")
            try:
                dt = _np_dtype(tt.elem_type)
            except KeyError:
                raise ConversionError(f"input {vi.name!r} has an unsupported element type {tt.elem_type}") from None
            if vi.name in self.input_values:
                value = np.asarray(self.input_values.pop(vi.name))
                check_shape(vi.name, value.shape, dt)
                value = value.astype(dt)
                self.graph.add_tensor(vi.name, value.shape, dt, value)
                continue
            dims: list[Any] = []
            for d in tt.shape.dim:
                if d.HasField("dim_value") and d.dim_value >= 0 and not d.dim_param:
                    dims.append(int(d.dim_value))
                else:
                    dims.append(d.dim_param or "?")
            fixed = self.input_shapes.pop(vi.name, None)
            if fixed is not None:
                if len(fixed) != len(dims):
                    raise ConversionError(
                        f"--input-shape {vi.name}: model input has rank {len(dims)} ({_fmt_dims(dims)}), got {len(fixed)} dims")
                for k, (want, have) in enumerate(zip(fixed, dims)):
                    if isinstance(have, int) and have != want:
                        raise ConversionError(
                            f"--input-shape {vi.name}: dimension {k} is fixed to {have} in the model, got {want}")
                    if want < 0:
                        raise ConversionError(f"--input-shape {vi.name}: dimension {k} must be >= 0, got {want}")
                dims = list(fixed)
            bad = [(k, d) for k, d in enumerate(dims) if not isinstance(d, int)]
            if bad:
                unfixed.append(f"{vi.name} {_fmt_dims(dims)}: dimension(s) " + ", ".join(f"{k} ({d})" for k, d in bad))
                continue
            self.graph.add_tensor(vi.name, dims, dt)  # refuses negative or oversized shapes
            self.graph.inputs.append(vi.name)
        if unfixed:
            raise ConversionError(
                "symbolic input dimensions must be fixed with --input-shape NAME=D0,D1,... :\n  " + "\n  ".join(unfixed))
        extra = sorted(set(self.input_shapes) | set(self.input_values))
        if extra:
            known = [vi.name for vi in g.input if vi.name not in init_names]
            raise ConversionError(f"unknown input name(s) {extra}; the model's inputs are {known}")

    def _initializers(self, g) -> None:
        for init in g.initializer:
            if init.name in self.graph.tensors:
                continue  # an input value given by the caller overrides the default
            arr = tensor_to_array(init, f"initializer {init.name!r}")
            self._add_const_value(init.name, arr)

    def _add_const_value(self, name: str, arr: np.ndarray) -> None:
        arr = np.asarray(arr)
        check_shape(name, arr.shape, arr.dtype)
        arr = np.require(arr, requirements="C")
        if not dtypes.supported(arr.dtype):
            # Kept for folding (e.g. doubles cast to float); rejected only if it reaches a kernel.
            pass
        t = self.graph.unique_name(name)
        self.graph.tensors[t] = _const_tensor(t, arr)
        self.names[name] = t

    def _nodes(self, nodes, opset: int) -> None:
        for node in nodes:
            self._node(node, opset)

    def _node(self, node, opset: int) -> None:
        name = node.name or (node.output[0] if node.output else node.op_type)
        if node.name in self.partitions and node.domain == "ai.edgert.partition":
            if any(self.resolve(i) in self.poisoned for i in node.input if i):
                self.poisoned.update(node.output)  # the problem upstream is reported there
                return
            try:
                self.emit_placeholder(self, node)
            except ConversionError as e:
                self._problem(node, name, str(e))
            return
        if node.domain not in ("", "ai.onnx"):
            self._problem(node, name, f"domain {node.domain!r} is not supported")
            return
        ins = [self.resolve(i) if i else "" for i in node.input]
        if any(i in self.poisoned for i in ins if i):
            self.poisoned.update(node.output)
            if node.op_type not in LOWERINGS and node.op_type not in ("Shape", "Size", "If", "Constant"):
                self._problem(node, name, "operator not supported")
            return
        missing = [i for i in ins if i and i not in self.graph.tensors]
        if missing:
            self._problem(node, name, f"inputs {missing} are not defined")
            return
        try:
            check_attributes(node, opset)
            if self._fold(node, ins, opset):
                return
            if node.op_type == "If":
                self._inline_if(node, ins, opset)
                return
            fn = LOWERINGS.get(node.op_type)
            if fn is None:
                raise OpUnsupported("operator not supported")
            ctx = LowerCtx(self, node, opset)
            start = len(self.graph.nodes)
            fn(ctx)
            if getattr(ctx, "size_read", False):
                for n in self.graph.nodes[start:]:
                    if "sym" not in n.attrs:
                        n.attrs["from_size"] = True
            if self.sym_dims:
                from . import symbolic
                symbolic.node_dims(self, self.graph.nodes[start:])
            for o in node.output:
                if o and self.resolve(o) not in self.graph.tensors:
                    raise ConversionError(f"lowering of {node.op_type} did not produce output {o!r}")
            for o, v in self._pending.items():  # a shape program's node: its value at this size
                self.known[self.resolve(o)] = v
            if any(i in self.size_values for i in node.input[1:]) and node.op_type in ("Expand", "Tile"):
                # its output dims may need its shape input computed at run time (bounds.derive_rules)
                g = self.graph
                g.metadata.setdefault("size_inputs", {})[ctx.name] = node.input[1]
        except OpUnsupported as e:
            self._problem(node, name, str(e))
        except ConversionError as e:
            self._problem(node, name, str(e))
        except Exception as e:  # a defect in edgert, or a case nothing above refuses (MemoryError, ...)
            self._problem(node, name, f"internal error ({type(e).__name__}: {e})")

    def _problem(self, node, name: str, why: str) -> None:
        self.problems.append((name, node.op_type, why))
        self.poisoned.update(o for o in node.output if o)

    # ---- folding -------------------------------------------------------------
    def _fold_by_lowering(self, node, opset: int) -> bool:
        """Lowers a node whose inputs are constants and folds what it emitted with edgert's
        own op references (the specification the kernels and onnxruntime are checked
        against); what is too costly stays a node. False, with the graph as it was, when
        the lowering refuses the node (the caller then evaluates it with onnx)."""
        g = self.graph
        start, tensors, names, derived = len(g.nodes), set(g.tensors), dict(self.names), dict(self.derived)
        sources = dict(g.metadata.get("const_sources") or {})
        try:
            LOWERINGS[node.op_type](LowerCtx(self, node, opset))
        except ConversionError:  # OpUnsupported included
            del g.nodes[start:]
            for t in set(g.tensors) - tensors:
                del g.tensors[t]
            self.names, self.derived = names, derived
            g.metadata["const_sources"] = sources
            return False
        g.nodes[start:] = fold_nodes(g, g.nodes[start:])
        return True

    def _value(self, name: str) -> np.ndarray | None:
        """A constant's data, or the value at this size of a shape program's tensor."""
        t = self.graph.tensors[name]
        return t.data if t.is_const else self.known.get(name)

    def _fixed(self, onnx_name: str) -> bool:
        """The ONNX value does not follow the bounded sizes: not from Shape arithmetic, or
        followed by expressions that are all constants."""
        if onnx_name not in self.size_values or onnx_name in self.fixed_sizes:
            return True
        s = self.sym.get(onnx_name)
        return s is not None and all(e.is_const for e in s.reshape(-1))

    def _add_folded(self, onnx_name: str, val: np.ndarray) -> None:
        """A folded node's output; one computed from input sizes is recorded (edgert name ->
        ONNX name) for bounds.derive_rules, which asks for it at run time when it varies."""
        self._add_const_value(onnx_name, val)
        if onnx_name in self.size_values and onnx_name not in self.fixed_sizes:
            self.graph.metadata.setdefault("size_constants", {})[self.resolve(onnx_name)] = onnx_name

    def _fold(self, node, ins: list[str], opset: int) -> bool:
        """True when the node was evaluated into constants now. A node of a shape program
        (its output in self.runtime) is evaluated too, for its value at this size
        (self._pending, recorded once lowered), and False is returned: it is lowered to
        run-time nodes; Shape itself becomes the `shape` op."""
        g = self.graph
        op = node.op_type
        self._pending = {}
        if op == "Constant":
            if len(node.attribute) != 1 or len(node.output) != 1:
                raise ConversionError("Constant needs exactly one value attribute and one output")
            a = node.attribute[0]
            if a.name == "value":
                val = tensor_to_array(a.t, "value")
            elif a.name == "value_float":
                val = np.array(a.f, np.float32)
            elif a.name == "value_floats":
                val = np.array(list(a.floats), np.float32)
            elif a.name == "value_int":
                val = np.array(a.i, np.int64)
            elif a.name == "value_ints":
                val = np.array(list(a.ints), np.int64)
            else:
                raise OpUnsupported(f"Constant attribute {a.name!r} is not supported")
            self._add_const_value(node.output[0], val)
            return True
        if op in ("Shape", "Size") and ins and ins[0]:
            shape = np.array(g.tensors[ins[0]].shape, np.int64)
            if op == "Size":
                val = np.array(math.prod(g.tensors[ins[0]].shape), np.int64)
            else:
                attrs = {a.name: a.i for a in node.attribute}
                r = len(shape)
                start = attrs.get("start", 0)
                end = attrs.get("end", r)
                start = min(max(start + r if start < 0 else start, 0), r)
                end = min(max(end + r if end < 0 else end, 0), r)
                val = shape[start:end]
            if self.sym_dims:
                from . import symbolic
                symbolic.shape_value(self, node, ins[0], op, int(start) if op == "Shape" else 0,
                                     int(end) if op == "Shape" else 0)
            if node.output[0] in self.runtime:
                if op == "Size":
                    raise OpUnsupported("Size in a computation kept for run time is not supported yet")
                name = node.name or node.output[0]
                self.emit("shape", [ins[0]], [node.output[0]], {"start": int(start), "end": int(end)}, name)
                self.known[node.output[0]] = val
                return True
            self._add_folded(node.output[0], val)
            return True
        if op in _NO_FOLD or op in ("If", "Loop", "Scan"):
            return False
        present = [i for i in ins if i]
        values = [self._value(i) if i else None for i in ins]
        if any(i and v is None for i, v in zip(ins, values)):
            return False
        if not present and op not in ("ConstantOfShape", "Range", "EyeLike"):
            return False
        run_time = any(o in self.runtime for o in node.output if o)
        if op in FOLD_WITH_OWN_REFERENCES and op in LOWERINGS and not run_time and all(
                g.tensors[i].is_const for i in present):
            return self._fold_by_lowering(node, opset)
        n = check_fold_size(node, values)
        itemsize = max([np.asarray(v).dtype.itemsize for v in values if v is not None] + [4])
        if n is not None and n * itemsize > MAX_FOLDED_BYTES:
            raise ConversionError(f"the constant output would take about {n * itemsize} bytes, more than the "
                                  f"converter's limit of {MAX_FOLDED_BYTES} for a constant it computes")
        try:
            outs = _eval_onnx_node(node, values, opset)
        except OpUnsupported:
            if op in LOWERINGS:  # what onnx's evaluator cannot compute (Pad with negative pads) is lowered
                return False
            raise
        for oname, val in zip(node.output, outs):
            if oname and np.asarray(val).nbytes > MAX_FOLDED_BYTES:
                raise ConversionError(f"constant output {oname!r} takes {np.asarray(val).nbytes} bytes, more than "
                                      f"the converter's limit of {MAX_FOLDED_BYTES} for a constant it computes")
        if self.sym_dims and any(i in self.sym for i in node.input if i):
            from . import symbolic
            symbolic.evaluate(self, node, ins, outs)
        if run_time:
            self._pending = {o: np.asarray(v) for o, v in zip(node.output, outs) if o}
            return False
        if self.sym_dims and all(self._fixed(i) for i in node.input if i):
            # computed from sizes that do not follow the bounds (a batch of 1): a constant
            self.fixed_sizes.update(o for o in node.output if o)
        for oname, val in zip(node.output, outs):
            if oname:
                self._add_folded(oname, np.asarray(val))
        if op == "Transpose" and node.output[0]:  # another layout of the same weight (edgert inspect)
            sources = dict(g.metadata.get("const_sources") or {})
            sources[self.resolve(node.output[0])] = sources.get(present[0], present[0])
            g.metadata["const_sources"] = sources
        return True

    def _inline_if(self, node, ins: list[str], opset: int) -> None:
        cond = self.graph.const(ins[0])
        if cond is None:
            raise OpUnsupported(
                "condition depends on runtime data; fix the inputs it depends on with --input-value NAME=VALUE")
        attrs = {a.name: a.g for a in node.attribute}
        cond = np.asarray(cond).reshape(-1)
        if cond.size != 1:
            raise ConversionError(f"condition must hold one value, got {cond.size}")
        branch = attrs["then_branch" if bool(cond[0]) else "else_branch"]
        if len(branch.output) != len(node.output):
            raise ConversionError(f"the branch has {len(branch.output)} outputs, the node {len(node.output)}")
        nodes = check_graph(branch, set(self.names) | set(self.graph.tensors))
        self._initializers(branch)
        n_before = len(self.problems)
        self._nodes(nodes, opset)
        if len(self.problems) != n_before:
            self.poisoned.update(node.output)
            return
        for out, bout in zip(node.output, branch.output):
            if out:
                self.alias(out, self.resolve(bout.name))


def _const_tensor(name: str, arr: np.ndarray):
    from ..ir import Tensor

    return Tensor(name, tuple(int(d) for d in arr.shape), arr.dtype, arr)


def _np_dtype(elem_type: int) -> np.dtype:
    return dtypes.np_of(elem_type)


def _fmt_dims(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _eval_onnx_node(node, values: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """Evaluates one ONNX node on constant inputs with onnx's reference evaluator."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{k}" if v is not None else "" for k, v in enumerate(values)]
    n2 = onnx.NodeProto()
    n2.CopyFrom(node)
    del n2.input[:]
    n2.input.extend(names)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for n, v in zip(names, values) if v is not None]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([n2], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        res = ReferenceEvaluator(model).run(None, {n: v for n, v in zip(names, values) if v is not None})
    except Exception as e:  # the reference raises many kinds of errors
        raise OpUnsupported(f"constant folding failed: {type(e).__name__}: {e}") from None
    it = iter(res)
    return [next(it) if o else None for o in node.output]


def load_onnx(model) -> Any:
    """Loads an ONNX model from a path, bytes or ModelProto and checks it before any
    conversion: the protobuf parses, names are text, tensor shapes are within the
    converter's limits and match their data, and external data is read only from
    regular files inside the model's folder (docs/design.md, "Untrusted ONNX:
    converter limits")."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        m, base, what = model, None, "model"
    elif isinstance(model, (bytes, bytearray, memoryview)):
        try:
            m = onnx.load_from_string(bytes(model))
        except Exception as e:
            raise OnnxFormatError(f"not an ONNX model ({type(e).__name__}: {e})") from None
        base, what = None, "model"
    else:
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ModelFormatError(f"{path}: no such file")
        if not os.path.isfile(path):
            raise OnnxFormatError(f"{path}: not a regular file")
        try:
            m = onnx.load(path, load_external_data=False)
        except Exception as e:
            raise OnnxFormatError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
        base, what = os.path.dirname(os.path.abspath(path)), path
    if not m.HasField("graph") or (not m.graph.node and not m.graph.output):
        raise OnnxFormatError(f"{what}: not an ONNX model (no graph)")
    external = [t for t, _ in _all_tensors(m) if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        if isinstance(model, onnx.ModelProto):
            m2 = onnx.ModelProto()
            m2.CopyFrom(m)  # the caller's ModelProto is not modified
            m = m2
            external = [t for t, _ in _all_tensors(m) if t.data_location == onnx.TensorProto.EXTERNAL]
        for t in external:
            _read_external_data(t, base)
    for t, where in _all_tensors(m):
        _check_tensor(t, where)
    _check_structure(m)
    return m


def _check_structure(m) -> None:
    """The main graph's structure and its nodes' attributes, checked before anything
    (the import of quantized models included) walks the graph."""
    check_graph(m.graph, set())
    opset = max([op.version for op in m.opset_import if op.domain in ("", "ai.onnx")] + [0])
    problems = []
    for node in m.graph.node:
        if node.domain in ("", "ai.onnx") and opset:
            try:
                check_attributes(node, opset)
            except ConversionError as e:
                problems.append((_label(node), node.op_type, str(e)))
    if problems:
        raise UnsupportedError(problems)


# ---- checks of hostile input ---------------------------------------------------------

def _all_tensors(m):
    """(TensorProto, description) of every tensor the model holds: initializers and
    tensor attributes, in the main graph, subgraphs and functions."""
    A = __import__("onnx").AttributeProto
    graphs = [m.graph]
    nodes = [n for f in m.functions for n in f.node]
    while graphs or nodes:
        if graphs:
            g = graphs.pop()
            for t in g.initializer:
                yield t, f"initializer {t.name!r}"
            for st in g.sparse_initializer:
                yield st.values, f"sparse initializer {st.values.name!r}"
                yield st.indices, f"sparse initializer {st.values.name!r} (indices)"
            nodes.extend(g.node)
            continue
        n = nodes.pop()
        for a in n.attribute:
            where = f"attribute {a.name!r} of node {_label(n)!r}"
            if a.type == A.TENSOR or a.HasField("t"):
                yield a.t, where
            for t in a.tensors:
                yield t, where
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values, where
                yield a.sparse_tensor.indices, where
            if a.HasField("g"):
                graphs.append(a.g)
            graphs.extend(a.graphs)


def _label(node) -> str:
    name = node.name or (node.output[0] if node.output else node.op_type)
    return name if isinstance(name, str) else repr(name)


_SUBBYTE = {"INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2"}

# Element types stored one value per entry of a typed field (when there is no raw_data).
_TYPED_FIELDS = {1: "float_data", 6: "int32_data", 7: "int64_data", 11: "double_data", 3: "int32_data",
                 2: "int32_data", 4: "int32_data", 5: "int32_data", 9: "int32_data", 10: "int32_data",
                 16: "int32_data", 12: "uint64_data", 13: "uint64_data", 14: "float_data", 15: "double_data",
                 8: "string_data"}


def _check_tensor(t, where: str) -> None:
    """Shape within limits and raw data of the right length (before anything reads it)."""
    import onnx

    if isinstance(t.name, bytes):
        raise OnnxFormatError(f"{where}: the tensor name is not valid UTF-8")
    try:
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
    except Exception:
        if not t.dims and not t.raw_data and t.data_type == 0:
            return  # an empty placeholder (an unset attribute)
        raise ConversionError(f"{where}: unsupported element type {t.data_type}") from None
    dims = check_shape(where, t.dims, dt)
    if not t.HasField("raw_data") and t.data_location != onnx.TensorProto.EXTERNAL:
        T = onnx.TensorProto
        field = _TYPED_FIELDS.get(t.data_type)
        if field is not None:
            n = math.prod(dims) * (2 if t.data_type in (T.COMPLEX64, T.COMPLEX128) else 1)
            have = len(getattr(t, field))
            if have != n:
                raise ConversionError(f"{where}: shape {list(dims)} needs {n} values, the tensor holds {have}")
    if t.HasField("raw_data") and t.data_location != onnx.TensorProto.EXTERNAL:
        n = math.prod(dims)
        name = onnx.TensorProto.DataType.Name(t.data_type) if t.data_type in onnx.TensorProto.DataType.values() \
            else ""
        need = (n * {"INT2": 2, "UINT2": 2}.get(name, 4) + 7) // 8 if name in _SUBBYTE else n * dt.itemsize
        if name != "STRING" and len(t.raw_data) != need:
            raise ConversionError(f"{where}: shape {list(dims)} needs {need} bytes of data, the tensor holds "
                                  f"{len(t.raw_data)}")


def tensor_to_array(t, where: str) -> np.ndarray:
    """numpy_helper.to_array with ConversionError instead of the errors of a malformed
    tensor."""
    from onnx import numpy_helper

    _check_tensor(t, where)
    try:
        return numpy_helper.to_array(t)
    except Exception as e:
        raise ConversionError(f"{where}: cannot read its data ({type(e).__name__}: {e})") from None


def _read_external_data(t, base: str | None) -> None:
    """Reads a tensor's external data into raw_data. The location must be a relative
    path without '..' that resolves (symbolic links included) to a regular file inside
    the model's folder; offset and length must lie within that file."""
    import onnx

    info = {e.key: e.value for e in t.external_data}
    where = f"tensor {t.name!r}"
    loc = info.get("location", "")
    if base is None:
        raise ConversionError(f"{where} keeps its data in an external file ({loc!r}); convert the model from "
                              "its path so that the file can be found next to it")
    if not isinstance(loc, str) or not loc or "\0" in loc:
        raise ConversionError(f"{where}: external data has no valid location")
    parts = re.split(r"[\\/]", loc)
    if os.path.isabs(loc) or loc.startswith("\\") or re.match(r"^[A-Za-z]:", loc):
        raise ConversionError(f"{where}: external data location {loc!r} is an absolute path; it must be "
                              "relative to the model's folder")
    if ".." in parts:
        raise ConversionError(f"{where}: external data location {loc!r} contains '..'; it must stay inside "
                              "the model's folder")
    root = os.path.realpath(base)
    full = os.path.realpath(os.path.join(root, loc))
    if os.path.commonpath([root, full]) != root:
        raise ConversionError(f"{where}: external data location {loc!r} resolves to {full}, outside the model's "
                              f"folder {root}")
    nums = {}
    for key in ("offset", "length"):
        if key in info:
            try:
                nums[key] = int(info[key])
            except ValueError:
                raise ConversionError(f"{where}: external data {key} {info[key]!r} is not an integer") from None
            if nums[key] < 0:
                raise ConversionError(f"{where}: external data {key} {nums[key]} is negative")
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ConversionError(f"{where}: cannot open external data {loc!r} ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConversionError(f"{where}: external data {loc!r} is not a regular file")
        offset = nums.get("offset", 0)
        length = nums.get("length", st.st_size - offset)
        if offset > st.st_size or offset + length > st.st_size:
            raise ConversionError(f"{where}: external data {loc!r} has {st.st_size} bytes; offset {offset} and "
                                  f"length {length} go past its end")
        if length > MAX_TENSOR_BYTES:
            raise ConversionError(f"{where}: external data of {length} bytes is larger than the converter's limit "
                                  f"of {MAX_TENSOR_BYTES}")
        chunks, pos = [], offset
        while pos < offset + length:
            b = os.pread(fd, min(offset + length - pos, 1 << 24), pos)
            if not b:
                raise ConversionError(f"{where}: external data {loc!r} ended early")
            chunks.append(b)
            pos += len(b)
    finally:
        os.close(fd)
    t.raw_data = b"".join(chunks)
    del t.external_data[:]
    t.data_location = onnx.TensorProto.DEFAULT


def check_graph(g, outer: set[str]) -> list:
    """The graph's nodes in execution order (the file's order when it is one; nodes
    listed out of order are accepted, as onnxruntime accepts them). Refuses graphs that
    no runtime can execute, naming the nodes involved: names that are not text, an
    output produced twice, an input nothing produces, a cycle, no outputs. `outer`:
    names visible from an enclosing graph."""
    if not g.output:
        raise ConversionError("the graph has no outputs")
    for vi in list(g.input) + list(g.output) + list(g.initializer):
        if isinstance(vi.name, bytes):
            raise OnnxFormatError(f"graph input/output/initializer name {vi.name!r} is not valid UTF-8")
        if "\0" in vi.name:
            raise ConversionError(f"graph input/output/initializer name {vi.name!r} contains a NUL character")
    defined = {vi.name: "a graph input" for vi in g.input}
    defined.update((t.name, "an initializer") for t in g.initializer)
    producer: dict[str, int] = {}
    nodes = list(g.node)
    for k, n in enumerate(nodes):
        for field in (n.name, n.op_type, n.domain, *n.input, *n.output):
            if isinstance(field, bytes):
                raise OnnxFormatError(f"node {k}: name, op type or tensor name {field!r} is not valid UTF-8")
            if "\0" in field:
                raise ConversionError(f"node {_label(n)!r}: name {field!r} contains a NUL character")
        for o in n.output:
            if not o:
                continue
            if o in producer:
                raise ConversionError(f"node {_label(n)!r} ({n.op_type}): output {o!r} is also produced by node "
                                      f"{_label(nodes[producer[o]])!r}")
            if o in defined:
                raise ConversionError(f"node {_label(n)!r} ({n.op_type}): output {o!r} is also {defined[o]}")
            producer[o] = k
    deps: list[set[int]] = []
    missing = []
    for n in nodes:
        d = set()
        for i in n.input:
            if not i:
                continue
            if i in producer:
                d.add(producer[i])
            elif i not in defined and i not in outer:
                missing.append(f"node {_label(n)!r} ({n.op_type}) reads {i!r}")
        for i in _subgraph_inputs(n):
            if i in producer:
                d.add(producer[i])
        deps.append(d)
    if missing:
        raise ConversionError("tensors that no node, initializer or graph input produces:\n  " + "\n  ".join(missing))
    users: list[list[int]] = [[] for _ in nodes]
    count = [len(d) for d in deps]
    for k, d in enumerate(deps):
        for j in d:
            users[j].append(k)
    ready = [k for k, c in enumerate(count) if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for u in users[k]:
            count[u] -= 1
            if count[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        left = {k for k in range(len(nodes)) if count[k] > 0}
        # Walk back along unresolved inputs until a node repeats: that is a cycle.
        k, seen, path = min(left), {}, []
        while k not in seen:
            seen[k] = len(path)
            path.append(k)
            k = min(j for j in deps[k] if j in left)
        cycle = path[seen[k]:][::-1]
        raise ConversionError("the graph has a cycle: " + " -> ".join(
            f"{_label(nodes[j])!r} ({nodes[j].op_type})" for j in cycle + cycle[:1]))
    for o in g.output:
        if o.name not in producer and o.name not in defined and o.name not in outer:
            raise ConversionError(f"graph output {o.name!r} is never produced")
    return [nodes[k] for k in order]


def _subgraph_inputs(node) -> set[str]:
    """Names read by the nodes of a node's subgraphs (outer-scope references among them)."""
    out: set[str] = set()
    stack = [a.g for a in node.attribute if a.HasField("g")] + [g for a in node.attribute for g in a.graphs]
    while stack:
        g = stack.pop()
        for n in g.node:
            out.update(i for i in n.input if i)
            stack.extend(a.g for a in n.attribute if a.HasField("g"))
            stack.extend(x for a in n.attribute for x in a.graphs)
    return out


def check_attributes(node, opset: int) -> None:
    """Attributes of the types the op's ONNX schema states, required attributes and
    required inputs present."""
    import onnx

    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:
        return  # unknown op: reported by the lowering lookup
    Opt = onnx.defs.OpSchema.FormalParameterOption
    for k, f in enumerate(schema.inputs):
        if f.option == Opt.Single and (k >= len(node.input) or not node.input[k]):
            raise ConversionError(f"required input {k} ({f.name}) is missing")
    if len(node.input) > schema.max_input:
        raise ConversionError(f"{len(node.input)} inputs, the ONNX schema allows at most {schema.max_input}")
    present = set()
    for a in node.attribute:
        if isinstance(a.name, bytes):
            raise OnnxFormatError(f"attribute name {a.name!r} is not valid UTF-8")
        present.add(a.name)
        spec = schema.attributes.get(a.name)
        if spec is not None and int(a.type) != int(spec.type.value):
            T = onnx.AttributeProto.AttributeType
            have = T.Name(a.type) if a.type in T.values() else str(a.type)
            raise ConversionError(f"attribute {a.name!r} has type {have}, the ONNX schema says {spec.type.name}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in present:
            raise ConversionError(f"required attribute {name!r} is missing")


_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater", "Less",
              "GreaterOrEqual", "LessOrEqual", "Where", "Max", "Min", "Mean", "Sum", "BitShift", "PRelu",
              "BitwiseAnd", "BitwiseOr", "BitwiseXor"}


def check_fold_size(node, values: list[np.ndarray | None]) -> int | None:
    """Refuses, before evaluating a node on constants, an output whose size (computed
    from the constant inputs, without overflow) exceeds the converter's limits: the
    shape-making ops (ConstantOfShape, Expand, Tile, Range, OneHot, Pad, Resize,
    Upsample), broadcasting ops, MatMul/Gemm and Gather."""
    op = node.op_type

    def ints(k):
        v = values[k] if k < len(values) else None
        if v is None:
            return None
        v = np.asarray(v)
        if v.dtype.kind not in "iuf" or v.size > 64:
            return None
        with np.errstate(all="ignore"):
            return [int(x) if np.isfinite(x) else MAX_TENSOR_ELEMENTS + 1 for x in v.reshape(-1).tolist()]

    def shape(k):
        v = values[k] if k < len(values) else None
        return list(np.shape(v)) if v is not None else None

    n = None
    dims = None  # output dims, when known: each must fit too (numpy overflows on huge dims of empty arrays)
    if op == "ConstantOfShape":
        dims = ints(0)
    elif op in ("Expand", "Tile"):
        x, s = shape(0), ints(1)
        if x is not None and s is not None:
            if op == "Tile":
                if len(s) != len(x):
                    raise ConversionError(f"{len(s)} repeats for an input of rank {len(x)}")
                dims = [max(a, 1) * b for a, b in zip(x, s)]  # numpy overflows on empty inputs too
            else:
                r = max(len(x), len(s))
                xx, ss = [1] * (r - len(x)) + x, [1] * (r - len(s)) + s
                dims = [max(a, b) for a, b in zip(xx, ss)]
    elif op == "Range" and all(v is not None for v in values[:3]) and len(values) >= 3:
        try:
            start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in values[:3])
        except (IndexError, ValueError, TypeError):
            return
        if not all(math.isfinite(v) for v in (start, limit, delta)) or delta == 0:
            raise ConversionError(f"Range({start}, {limit}, {delta}) has no finite length")
        dims = [max(math.ceil((limit - start) / delta), 0)]
    elif op == "Reshape":
        s = ints(1)
        if s is not None:
            dims = [d for d in s if d > 0]  # each dim within limits; the total is the input's
    elif op == "OneHot":
        i, d = shape(0), ints(1)
        if i is not None and d:
            dims = i + [d[0]]
    elif op == "Pad":
        x, p = shape(0), ints(1)
        if x is not None and p is not None and len(p) == 2 * len(x):
            dims = [x[k] + p[k] + p[k + len(x)] for k in range(len(x))]
    elif op in ("Resize", "Upsample"):
        x = shape(0)
        if x is not None:
            sizes = ints(3) if op == "Resize" else None
            if len(values) == 2 or op == "Upsample":  # Resize-10 and Upsample-9: (X, scales)
                scales = values[1] if len(values) > 1 else None
            else:
                scales = values[2] if len(values) > 2 else None
            if scales is None and op == "Upsample":  # Upsample-7: an attribute
                scales = next((list(a.floats) for a in node.attribute if a.name == "scales"), None)
            has_axes = any(a.name == "axes" for a in node.attribute)
            if sizes:
                dims = sizes
            elif scales is not None and np.size(scales) > 0:
                if np.size(scales) != len(x) and not has_axes:
                    raise ConversionError(f"{np.size(scales)} scales for an input of rank {len(x)}")
                sc = np.asarray(scales, np.float64).reshape(-1)
                if not np.all(np.isfinite(sc)):
                    raise ConversionError("Resize scales are not finite")
                along = [max(x + [1])] * len(sc) if has_axes else x
                dims = [math.floor(max(d, 1) * float(c)) for d, c in zip(along, sc)]
    elif op in _BROADCAST or op in ("MatMul", "Gemm", "Gather"):
        shapes = [shape(k) for k in range(len(values)) if values[k] is not None]
        if op in ("MatMul", "Gemm") and len(shapes) >= 2:
            a, b = shapes[0], shapes[1]
            a, b = ([1] + a if len(a) == 1 else a), (b + [1] if len(b) == 1 else b)
            if len(a) >= 2 and len(b) >= 2:
                r = max(len(a), len(b)) - 2
                batch = [max(x, y) for x, y in zip([1] * (r - len(a) + 2) + a[:-2], [1] * (r - len(b) + 2) + b[:-2])]
                n = math.prod(batch) * max(a[-2:]) * max(b[-2:])
        elif op == "Gather" and len(shapes) == 2:
            axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 0)
            d = shapes[0]
            if d and -len(d) <= axis < len(d):
                n = math.prod(shapes[1]) * (math.prod(d) // max(d[axis], 1))
        elif shapes:
            r = max(len(s) for s in shapes)
            n = math.prod(max([1] + [([1] * (r - len(s)) + s)[k] for s in shapes]) for k in range(r))
    if dims is not None:
        if any(d > MAX_TENSOR_ELEMENTS for d in dims):
            raise ConversionError(f"an output dimension of {max(dims)} is larger than the converter's limit of "
                                  f"{MAX_TENSOR_ELEMENTS}")
        n = math.prod(max(d, 0) for d in dims)
    if n is not None and n > MAX_TENSOR_ELEMENTS:
        raise ConversionError(f"the output would have {n} elements, more than the converter's limit of "
                              f"{MAX_TENSOR_ELEMENTS}")
    return n


def size_values(nodes, inputs) -> set[str]:
    """The ONNX tensors whose values are computed from the shapes of run-time tensors and
    from constants alone (Shape or Size of a run-time tensor, and what is computed from
    them and constants): what a conversion at a fixed size folds into constants, and a
    bounded conversion may compute at run time instead (a shape program). nodes: in
    execution order; inputs: the graph's input names."""
    data, sized = set(inputs), set()
    for n in nodes:
        ins = [i for i in n.input if i] + sorted(_subgraph_inputs(n))
        outs = [o for o in n.output if o]
        if n.op_type in ("Shape", "Size") and n.domain in ("", "ai.onnx"):
            if any(i in data or i in sized for i in ins[:1]):
                sized.update(outs)
        elif any(i in data for i in ins) or n.op_type in _NO_FOLD:
            data.update(outs)
        elif any(i in sized for i in ins):
            sized.update(outs)
    return sized


def run_time_closure(nodes, sized: set[str], wanted: set[str]) -> set[str]:
    """The tensors of `sized` to compute at run time so that those of `wanted` are: the
    wanted ones and, back to the Shape nodes, every sized tensor they are computed from
    (a Shape's input too: it reads that tensor's run-time shape)."""
    need = set(wanted) & sized
    for n in reversed(nodes):
        if any(o in need for o in n.output):
            need.update(i for i in n.input if i in sized)
    return need


def import_onnx(model, input_shapes=None, input_values=None, run_time=frozenset(), sym_dims=None) -> Graph:
    """run_time: ONNX tensors computed from the input size to compute at run time instead
    of folding them (bounded conversions, edgert/converter/bounds.py); sym_dims: {input:
    {dim: symdim expression}} of the bounded dims, from which the values of Shape
    arithmetic are also computed as expressions (LowerCtx.sym_const)."""
    m = load_onnx(model)
    imp = OnnxImporter(m, input_shapes, input_values, run_time)
    imp.sym_dims = dict(sym_dims or {})
    return imp.run()
