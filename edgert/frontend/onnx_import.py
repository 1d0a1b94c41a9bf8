"""ONNX front end: an ONNX model with fixed input shapes becomes an edgert Graph.

The importer walks the ONNX nodes in order as an abstract interpreter. A node whose
inputs are all constants is evaluated now (with onnx's reference implementation), so
the shape computations exporters emit (Shape, Gather, Concat, Cast, Unsqueeze, ...)
disappear; Shape and Size are answered from the static shapes. Every other node is
lowered by the function registered for its op type in edgert/frontend/onnx_ops/,
which emits edgert ops whose output shapes come from each op's `infer`.
Problems are collected for every node, so one error lists them all.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from .. import dtypes
from .. import ops as edgert_ops
from ..errors import ConversionError, ModelFormatError, UnsupportedError
from ..ir import Graph
from ..ops import OpUnsupported

MIN_OPSET, MAX_OPSET = 7, 28

LOWERINGS: dict[str, Callable[["LowerCtx"], None]] = {}

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
        return self.graph.tensors[self.input(i)].shape

    def dtype(self, i: int) -> np.dtype:
        return self.graph.tensors[self.input(i)].dtype

    def const(self, i: int) -> np.ndarray | None:
        name = self.input(i)
        return self.graph.const(name) if name else None

    def require_const(self, i: int, what: str) -> np.ndarray:
        v = self.const(i)
        if v is None:
            self.fail(f"{what} (input {i}) must be constant after folding; it depends on runtime data")
        return v

    # ---- attributes -----------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default: Any = None) -> Any:
        import onnx
        from onnx import numpy_helper

        a = self._attrs.get(name)
        if a is None:
            return default
        T = onnx.AttributeProto
        if a.type == T.INT:
            return int(a.i)
        if a.type == T.FLOAT:
            return float(a.f)
        if a.type == T.STRING:
            return a.s.decode("utf-8")
        if a.type == T.INTS:
            return [int(x) for x in a.ints]
        if a.type == T.FLOATS:
            return [float(x) for x in a.floats]
        if a.type == T.STRINGS:
            return [s.decode("utf-8") for s in a.strings]
        if a.type == T.TENSOR:
            return numpy_helper.to_array(a.t)
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
    def __init__(self, model, input_shapes: dict[str, list[int]] | None, input_values: dict[str, np.ndarray] | None):
        self.model = model
        self.input_shapes = dict(input_shapes or {})
        self.input_values = dict(input_values or {})
        self.graph = Graph()
        self.names: dict[str, str] = {}  # ONNX name -> edgert tensor name
        self.derived: dict[tuple[str, str], str] = {}  # (constant, how) -> LowerCtx.derived_const
        self.problems: list[tuple[str, str, str]] = []
        self.poisoned: set[str] = set()
        self.opset = 0

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
        self._graph_inputs(m.graph)
        self._initializers(m.graph)
        self._nodes(m.graph.node, self.opset)
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
                value = np.asarray(self.input_values.pop(vi.name)).astype(dt)
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
            self.graph.add_tensor(vi.name, dims, dt)
            self.graph.inputs.append(vi.name)
        if unfixed:
            raise ConversionError(
                "symbolic input dimensions must be fixed with --input-shape NAME=D0,D1,... :\n  " + "\n  ".join(unfixed))
        extra = sorted(set(self.input_shapes) | set(self.input_values))
        if extra:
            known = [vi.name for vi in g.input if vi.name not in init_names]
            raise ConversionError(f"unknown input name(s) {extra}; the model's inputs are {known}")

    def _initializers(self, g) -> None:
        from onnx import numpy_helper

        for init in g.initializer:
            if init.name in self.graph.tensors:
                continue  # an input value given by the caller overrides the default
            arr = numpy_helper.to_array(init)
            self._add_const_value(init.name, arr)

    def _add_const_value(self, name: str, arr: np.ndarray) -> None:
        arr = np.require(np.asarray(arr), requirements="C")
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
            if self._fold(node, ins, opset):
                return
            if node.op_type == "If":
                self._inline_if(node, ins, opset)
                return
            fn = LOWERINGS.get(node.op_type)
            if fn is None:
                raise OpUnsupported("operator not supported")
            ctx = LowerCtx(self, node, opset)
            fn(ctx)
            for o in node.output:
                if o and self.resolve(o) not in self.graph.tensors:
                    raise ConversionError(f"lowering of {node.op_type} did not produce output {o!r}")
        except OpUnsupported as e:
            self._problem(node, name, str(e))
        except ConversionError as e:
            self._problem(node, name, str(e))

    def _problem(self, node, name: str, why: str) -> None:
        self.problems.append((name, node.op_type, why))
        self.poisoned.update(o for o in node.output if o)

    # ---- folding -------------------------------------------------------------
    def _fold(self, node, ins: list[str], opset: int) -> bool:
        g = self.graph
        op = node.op_type
        if op == "Constant":
            import onnx
            from onnx import numpy_helper
            a = node.attribute[0]
            if a.name == "value":
                val = numpy_helper.to_array(a.t)
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
            del onnx
            self._add_const_value(node.output[0], val)
            return True
        if op in ("Shape", "Size") and ins and ins[0]:
            shape = np.array(g.tensors[ins[0]].shape, np.int64)
            if op == "Size":
                val = np.array(int(np.prod(shape)), np.int64)
            else:
                attrs = {a.name: a.i for a in node.attribute}
                r = len(shape)
                start = attrs.get("start", 0)
                end = attrs.get("end", r)
                start = min(max(start + r if start < 0 else start, 0), r)
                end = min(max(end + r if end < 0 else end, 0), r)
                val = shape[start:end]
            self._add_const_value(node.output[0], val)
            return True
        if op in _NO_FOLD or op in ("If", "Loop", "Scan"):
            return False
        present = [i for i in ins if i]
        if not all(g.tensors[i].is_const for i in present):
            return False
        if not present and op not in ("ConstantOfShape", "Range", "EyeLike"):
            return False
        outs = _eval_onnx_node(node, [g.tensors[i].data if i else None for i in ins], opset)
        for oname, val in zip(node.output, outs):
            if oname:
                self._add_const_value(oname, np.asarray(val))
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
        branch = attrs["then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"]
        self._initializers(branch)
        n_before = len(self.problems)
        self._nodes(branch.node, opset)
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
    """Loads an ONNX model from a path, bytes or ModelProto, with external data."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as e:
            raise ModelFormatError(f"not an ONNX model: {e}") from None
    path = os.fspath(model)
    if not os.path.exists(path):
        raise ModelFormatError(f"{path}: no such file")
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise ModelFormatError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    if not m.graph.node and not m.graph.output:
        raise ModelFormatError(f"{path}: not an ONNX model (no graph)")
    try:
        from onnx.external_data_helper import load_external_data_for_model
        load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
    except Exception as e:
        raise ModelFormatError(f"{path}: cannot load external data: {e}") from None
    return m


def import_onnx(model, input_shapes=None, input_values=None) -> Graph:
    m = load_onnx(model)
    return OnnxImporter(m, input_shapes, input_values).run()


def _load_lowerings() -> None:
    import importlib
    import pkgutil

    from . import onnx_ops

    for mod in pkgutil.iter_modules(onnx_ops.__path__):
        importlib.import_module(f"{onnx_ops.__name__}.{mod.name}")


_load_lowerings()
