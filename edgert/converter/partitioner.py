"""Fallback partitions at conversion (docs/partitions.md, "Conversion").

Nodes edgert cannot run, or that the user hands off with --fallback-ops, are grouped
into partitions; each partition becomes one `partition` node (edgert/converter/ops/partition.py)
whose payload another runtime executes.

- onnxruntime: carved from the ONNX model BEFORE import. The importer's own verdict
  (its problem list) says which nodes edgert cannot run; those and the forced nodes are
  grouped, and each group is replaced by one placeholder node that the importer turns
  into the `partition` node, building the payload (an ONNX model of the group's
  original nodes) once it knows the boundary tensors' static shapes.
- litert: carved from the edgert graph AFTER passes and quantization, since the TFLite
  writer consumes edgert IR (so int8 payloads carry edgert's own quantization).

Grouping (both backends): the chosen nodes form maximal connected groups whose
contraction keeps the graph acyclic; then two partitions separated by a small edgert
segment are merged with it when crossing the boundary costs more than the segment
computes (`absorb_segments`).
"""
from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any, Callable, Iterable

import numpy as np

from .. import dtypes
from ..errors import ConversionError, UnsupportedError

BACKENDS = ("onnxruntime", "litert")
FALLBACKS = ("off",) + BACKENDS
DEFAULT_MAX_PARTITIONS = 8
PLACEHOLDER_DOMAIN = "ai.edgert.partition"

# Cost model of the segment-absorbing rule, in units of one multiply-add (about a
# nanosecond on the boards edgert targets). Calling another runtime costs a fixed
# overhead (its session run: tens of microseconds) plus copying each boundary byte
# in or out.
PARTITION_FIXED_COST = 20_000
BYTE_COST = 1.0
MAX_ABSORBED_NODES = 16


# ---- grouping (shared by both backends) --------------------------------------------

def _acyclic(n: int, deps: list[set[int]], cluster: list[int]) -> bool:
    """True when contracting every cluster to one vertex leaves the graph acyclic."""
    succ: dict[int, set[int]] = {}
    indeg: dict[int, int] = {c: 0 for c in set(cluster)}
    for i in range(n):
        for j in deps[i]:
            a, b = cluster[j], cluster[i]
            if a != b and b not in succ.setdefault(a, set()):
                succ[a].add(b)
                indeg[b] += 1
    ready = [c for c, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        c = ready.pop()
        seen += 1
        for s in succ.get(c, ()):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return seen == len(indeg)


def _clusters(n: int, groups: list[set[int]]) -> list[int]:
    cluster = list(range(n))
    for k, grp in enumerate(groups):
        for i in grp:
            cluster[i] = n + k
    return cluster


def group_nodes(n: int, deps: list[set[int]], chosen: set[int]) -> list[list[int]]:
    """Groups the chosen node indices (0..n-1 in execution order; deps[i] = producers of
    node i) into connected groups such that contracting each group keeps the graph
    acyclic. Greedy in execution order: a node joins the groups of its chosen producers
    when the contraction stays acyclic, else starts a group."""
    groups: list[set[int]] = []
    owner: dict[int, int] = {}
    for i in range(n):
        if i not in chosen:
            continue
        groups.append({i})
        mine = len(groups) - 1
        owner[i] = mine
        for gk in sorted({owner[j] for j in deps[i] if j in owner} - {mine}):
            trial = [set(g) for g in groups]
            trial[mine] |= trial[gk]
            trial[gk] = set()
            if _acyclic(n, deps, _clusters(n, [g for g in trial if g])):
                groups = trial
                for j in groups[mine]:
                    owner[j] = mine
    return sorted((sorted(g) for g in groups if g), key=lambda g: g[0])


def _reach(start: Iterable[int], edges: list[set[int]]) -> set[int]:
    seen, stack = set(), list(start)
    while stack:
        i = stack.pop()
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def absorb_segments(n: int, deps: list[set[int]], groups: list[list[int]], can_run: Callable[[int], bool],
                    compute: Callable[[int], float], crossing_bytes: Callable[[set[int], set[int]], int]
                    ) -> tuple[list[list[int]], list[int]]:
    """Merges partitions A and B (B after A) with the edgert segment S between them (the
    nodes reachable from A that reach B) when S is small (<= MAX_ABSORBED_NODES), the
    backend runs every node of S, the merged group keeps the graph acyclic, and
        PARTITION_FIXED_COST + BYTE_COST * (bytes crossing between A, S and B)
    exceeds the compute estimate of S. Returns the groups and the absorbed nodes."""
    succ: list[set[int]] = [set() for _ in range(n)]
    for i in range(n):
        for j in deps[i]:
            succ[j].add(i)
    absorbed: list[int] = []
    changed = True
    while changed and len(groups) > 1:
        changed = False
        sets = [set(g) for g in groups]
        down = [_reach(g, succ) for g in sets]  # nodes each partition reaches
        up = [_reach(g, deps) for g in sets]  # nodes that reach each partition
        owner = {i: k for k, g in enumerate(sets) for i in g}
        for a in range(len(groups)):
            for b in range(len(groups)):
                if a == b or not (down[a] & sets[b]):
                    continue
                seg = (down[a] & up[b]) - sets[a] - sets[b]
                if not seg or len(seg) > MAX_ABSORBED_NODES or any(i in owner for i in seg):
                    continue
                if not all(can_run(i) for i in seg):
                    continue
                cost = PARTITION_FIXED_COST + BYTE_COST * crossing_bytes(sets[a] | sets[b], seg)
                if cost <= sum(compute(i) for i in seg):
                    continue
                trial = [g for k, g in enumerate(sets) if k not in (a, b)] + [sets[a] | sets[b] | seg]
                if not _acyclic(n, deps, _clusters(n, trial)):
                    continue
                absorbed += sorted(seg)
                groups = sorted((sorted(g) for g in trial), key=lambda g: g[0])
                changed = True
                break
            if changed:
                break
    return groups, absorbed


def check_count(groups: list[list[int]], labels: Callable[[int], str], max_partitions: int) -> None:
    if len(groups) > max_partitions:
        lines = [f"  partition_{k}: " + ", ".join(labels(i) for i in g[:8]) + (" ..." if len(g) > 8 else "")
                 for k, g in enumerate(groups)]
        raise ConversionError(
            f"the model needs {len(groups)} fallback partitions, more than --max-partitions {max_partitions} "
            "(each one is a call into another runtime):\n" + "\n".join(lines)
            + f"\nraise the limit with --max-partitions {len(groups)} (max_partitions={len(groups)}) "
              "or hand more nodes off with --fallback-ops so that partitions join")


def select_forced(names: list[str], op_types: list[str], fallback_ops: Iterable[str]) -> set[int]:
    """Indices of the nodes --fallback-ops names (a node name, an op type, or "all");
    ConversionError naming every entry that matches nothing."""
    chosen: set[int] = set()
    unknown = []
    for item in fallback_ops:
        if item == "all":
            chosen.update(range(len(names)))
            continue
        hit = {i for i, (nm, op) in enumerate(zip(names, op_types)) if nm == item or op == item}
        if not hit:
            unknown.append(item)
        chosen |= hit
    if unknown:
        ops = sorted(set(op_types))
        raise ConversionError(
            f"--fallback-ops {', '.join(repr(u) for u in unknown)}: neither a node name nor an op type of the model "
            f"(its op types: {', '.join(ops)}; `edgert convert` error messages and `edgert inspect` name the nodes)")
    return chosen


# ---- onnxruntime: carving the ONNX model -------------------------------------------

class DataDependentShape(ConversionError):
    """A partition output whose shape follows the data; `tensor` names it."""

    def __init__(self, message: str, tensor: str):
        super().__init__(message)
        self.tensor = tensor


@dataclasses.dataclass
class OnnxPartition:
    """One group of the ONNX model and what its placeholder node needs."""

    index: int
    name: str
    nodes: list  # NodeProto of the original nodes, in execution order
    inputs: list[str]  # boundary input names (ONNX), payload order
    outputs: list[str]  # boundary output names (ONNX), payload order
    initializers: list  # TensorProto the nodes read
    delegate: str | None = None


def normalize(model):
    """A copy of the model whose top-level nodes all have distinct names (the name the
    importer reports: the node's name, else its first output, else its op type)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    seen: set[str] = set()
    for node in m.graph.node:
        base = node.name or (node.output[0] if node.output else node.op_type)
        name, k = base, 1
        while name in seen:
            name = f"{base}__{k}"
            k += 1
        seen.add(name)
        node.name = name
    return m


def _node_reads(node) -> list[str]:
    from .frontend.onnx_import import _subgraph_inputs

    return [i for i in node.input if i] + sorted(_subgraph_inputs(node))


def onnx_dependencies(nodes) -> list[set[int]]:
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    return [{producer[i] for i in _node_reads(n) if i in producer} for n in nodes]


def static_shapes(model) -> dict[str, tuple[list[int], int]]:
    """(dims, item size) of every tensor whose static shape ONNX shape inference finds
    (initializers included)."""
    import onnx

    out: dict[str, tuple[list[int], int]] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:
        return out
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if not tt.HasField("shape") or any(d < 0 for d in dims):
            continue
        try:
            out[vi.name] = (dims, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)).itemsize)
        except Exception:
            continue
    for t in model.graph.initializer:
        try:
            out[t.name] = (list(t.dims), np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize)
        except Exception:
            continue
    return out


def with_input_shapes(model, shapes: dict[str, list[int]]):
    """A copy of the model with the given graph input dims fixed (for shape inference)."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, shapes[vi.name]):
                d.Clear()
                d.dim_value = int(v)
    return m


def carve_onnx(model, chosen: set[int], delegate: str | None, max_partitions: int,
               shapes: dict[str, list[int]], absorb: bool = True, plan: list[list[str]] | None = None):
    """(ONNX model with each group replaced by a placeholder node, {placeholder name:
    OnnxPartition}). `model` must be normalized; `chosen` indexes its nodes. plan: the
    groups as node names (a conversion at another size of the same model), used as
    they are instead of grouping `chosen` again."""
    import onnx
    from onnx import helper

    from .frontend.onnx_import import check_graph

    order = check_graph(model.graph, set())
    pos = {id(n): k for k, n in enumerate(model.graph.node)}
    nodes = list(order)
    idx_in_order = {pos[id(n)]: k for k, n in enumerate(nodes)}
    chosen_o = {idx_in_order[i] for i in chosen}
    deps = onnx_dependencies(nodes)
    at = {n.name: k for k, n in enumerate(nodes)}
    groups = [[at[nm] for nm in grp] for grp in plan] if plan is not None else group_nodes(len(nodes), deps, chosen_o)
    if plan is None and absorb and len(groups) > 1:
        known = static_shapes(with_input_shapes(model, shapes))
        sizes = {k: math.prod(d) * item for k, (d, item) in known.items()}

        def compute(i: int) -> float:
            """Multiply-adds of node i (output elements for ops without a reduction)."""
            node = nodes[i]
            outs = [o for o in node.output if o]
            if not outs or any(o not in known for o in outs):
                return math.inf
            n_out = sum(math.prod(known[o][0]) for o in outs)
            if node.op_type in ("Conv", "ConvTranspose") and len(node.input) > 1:
                w = known.get(node.input[1])
                return math.inf if w is None else float(n_out * math.prod(w[0][1:]))
            if node.op_type in ("MatMul", "Gemm"):
                a = known.get(node.input[0])
                if a is None or not a[0]:
                    return math.inf
                trans_a = any(t.name == "transA" and t.i for t in node.attribute)
                return float(n_out * (a[0][0] if trans_a and len(a[0]) == 2 else a[0][-1]))
            return float(n_out)

        def crossing(part: set[int], seg: set[int]) -> int:
            total = 0
            for i in seg:
                for t in _node_reads(nodes[i]):
                    if any(t in nodes[j].output for j in part):
                        total += sizes.get(t, 0)
            for j in part:
                for t in _node_reads(nodes[j]):
                    if any(t in nodes[i].output for i in seg):
                        total += sizes.get(t, 0)
            return total

        groups, _ = absorb_segments(len(nodes), deps, groups, lambda i: True, compute, crossing)
    check_count(groups, lambda i: f"{nodes[i].name} ({nodes[i].op_type})", max_partitions)
    inits = {t.name: t for t in model.graph.initializer}
    graph_inputs = {vi.name for vi in model.graph.input}
    graph_outputs = [o.name for o in model.graph.output]
    readers: dict[str, set[int]] = {}
    for k, n in enumerate(nodes):
        for t in _node_reads(n):
            readers.setdefault(t, set()).add(k)
    in_group = {i for g in groups for i in g}
    placeholders = []
    parts: dict[str, OnnxPartition] = {}
    for k, grp in enumerate(groups):
        members = set(grp)
        produced = {o for i in grp for o in nodes[i].output if o}
        ins: list[str] = []
        used_inits = []
        for i in grp:
            for t in _node_reads(nodes[i]):
                if t in produced or t in ins:
                    continue
                if t in inits and t not in graph_inputs:
                    if all(x.name != t for x in used_inits):
                        used_inits.append(inits[t])
                    continue
                ins.append(t)
        outs = [o for i in grp for o in nodes[i].output
                if o and (o in graph_outputs or any(r not in members for r in readers.get(o, ())))]
        name = f"partition_{k}"
        parts[name] = OnnxPartition(k, name, [nodes[i] for i in grp], ins, outs, used_inits, delegate)
        placeholders.append(helper.make_node("Partition", ins, outs, name=name, domain=PLACEHOLDER_DOMAIN))
    carved = onnx.ModelProto()
    carved.CopyFrom(model)
    del carved.graph.node[:]
    first = {g[0]: k for k, g in enumerate(groups)}
    for i, n in enumerate(nodes):
        if i in first:
            carved.graph.node.append(placeholders[first[i]])
        elif i not in in_group:
            carved.graph.node.append(n)
    return carved, parts


def build_onnx_payload(part: OnnxPartition, model, inputs: list[tuple[str, tuple, np.dtype, Any]]):
    """(payload bytes, boundary input names kept, [(shape, dtype)] of the outputs).
    inputs: (name, shape, dtype, constant value or None) of each boundary input as the
    edgert graph holds it. Constant inputs become initializers of the payload."""
    import onnx
    from onnx import helper, numpy_helper

    g_inputs, inits, kept = [], list(part.initializers), []
    for name, shape, dt, value in inputs:
        if value is not None:
            inits.append(numpy_helper.from_array(np.asarray(value, dt), name))
            continue
        g_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                                      list(shape)))
        kept.append(name)
    outputs = [helper.make_empty_tensor_value_info(o) for o in part.outputs]
    graph = helper.make_graph(list(part.nodes), part.name, g_inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="edgert")
    m.ir_version = model.ir_version
    m.functions.extend(model.functions)
    types = _output_types(m, part)
    del m.graph.output[:]
    for o, (shape, dt) in zip(part.outputs, types):
        m.graph.output.append(helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(dt), list(shape)))
    try:
        onnx.checker.check_model(m)
    except Exception as e:
        raise ConversionError(f"{part.name}: its ONNX payload does not check ({e})") from None
    data = m.SerializeToString()
    _check_runs(part, data)
    return data, kept, types


def onnx_intermediate_bytes(payload: bytes) -> int | None:
    """Bytes of the tensors an ONNX payload computes inside itself (not its outputs), by
    ONNX shape inference: what its backend holds outside edgert's arena, before the
    backend's own overhead. None when a shape stays unknown."""
    import onnx

    m = onnx.shape_inference.infer_shapes(onnx.load_from_string(payload))
    outs = {o.name for o in m.graph.output}
    total = 0
    for vi in m.graph.value_info:
        if vi.name in outs:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if not tt.HasField("shape") or any(d < 0 for d in dims):
            return None
        try:
            item = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).itemsize
        except Exception:
            return None
        total += int(np.prod(dims, dtype=np.int64)) * item
    return total


def _check_runs(part: OnnxPartition, payload: bytes) -> None:
    """onnxruntime accepts the payload (a node it has no kernel for is refused now, not
    on the board)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(payload, opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise ConversionError(f"{part.name} ({', '.join(n.name for n in part.nodes)}): onnxruntime cannot load "
                              f"its payload: {str(e).strip().splitlines()[-1]}") from None


def _output_types(m, part: OnnxPartition) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Static (shape, dtype) of each payload output: ONNX shape inference, else a run of
    the payload on random inputs (twice: a shape that changes with the data is refused)."""
    import onnx

    found: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
        for vi in inferred.graph.output:
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if tt.elem_type and tt.HasField("shape") and all(d >= 0 for d in dims):
                found[vi.name] = (tuple(dims), np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)))
    except Exception:
        pass
    producer = {o: n for n in part.nodes for o in n.output}
    for o in part.outputs:
        if o not in found and producer[o].op_type in DATA_DEPENDENT_OPS:
            raise DataDependentShape(
                f"{part.name}: output {o!r} of {producer[o].op_type} has a data-dependent shape; edgert needs "
                "static shapes: bound it (for example concatenate a fixed block and slice a fixed count)", o)
    if len(found) < len(part.outputs):
        runs = [_run_sample(m, kind) for kind in _SAMPLE_KINDS]
        for k, o in enumerate(part.outputs):
            if o in found:
                continue
            got = {tuple(r[k].shape) for r in runs}
            if len(got) > 1:
                raise DataDependentShape(
                    f"{part.name}: output {o!r} has a data-dependent shape ({' or '.join(str(list(g)) for g in got)} "
                    "depending on the input values); edgert needs static shapes: end the partition before it or "
                    "bound the output (for example concatenate a fixed block and slice a fixed count)", o)
            found[o] = (tuple(runs[0][k].shape), runs[0][k].dtype)
    out = []
    for o in part.outputs:
        shape, dt = found[o]
        if not dtypes.supported(dt):
            raise ConversionError(f"{part.name}: output {o!r} has dtype {dt}, which edgert files cannot hold")
        out.append((shape, dt))
    return out


# ONNX ops whose output shape follows the input values.
DATA_DEPENDENT_OPS = {"NonZero", "NonMaxSuppression", "Unique", "Compress", "StringSplit"}
# Inputs the payload runs on when shape inference leaves an output shape unknown: a
# shape that differs between them follows the data.
_SAMPLE_KINDS = ("normal", "half_zero", "zero", "large")


def _run_sample(m, kind: str) -> list[np.ndarray]:
    import onnx
    import onnxruntime as ort

    rng = np.random.default_rng(len(kind))
    feeds = {}
    for vi in m.graph.input:
        tt = vi.type.tensor_type
        dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        shape = [d.dim_value for d in tt.shape.dim]
        if dt.kind == "f":
            x = rng.standard_normal(shape)
            x = {"normal": x, "half_zero": x * (rng.random(shape) < 0.5), "zero": 0 * x, "large": 100 * x}[kind]
            feeds[vi.name] = x.astype(dt)
        elif dt.kind == "b":
            feeds[vi.name] = (rng.integers(0, 2, shape) if kind != "zero" else np.zeros(shape)).astype(dt)
        else:
            feeds[vi.name] = (rng.integers(0, 2, shape) if kind != "zero" else np.zeros(shape)).astype(dt)
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return [np.asarray(v) for v in sess.run(None, feeds)]
    except Exception as e:
        raise ConversionError(f"onnxruntime cannot run the partition {m.graph.name!r} to find its output shapes: "
                              f"{type(e).__name__}: {e}") from None


def emit_placeholder(importer, node) -> None:
    """The importer's handling of a placeholder node: the `partition` edgert node."""
    part: OnnxPartition = importer.partitions[node.name]
    g = importer.graph
    ins = []
    for name in part.inputs:
        t = g.tensors[importer.resolve(name)]
        ins.append((name, t.shape, t.dtype, t.data if t.is_const else None, t.name))
    try:
        payload, kept, types = build_onnx_payload(part, importer.model, [x[:4] for x in ins])
    except DataDependentShape as e:
        importer.data_dependent.append(e.tensor)
        raise
    edgert_ins = [x[4] for x in ins if x[0] in kept]
    const = g.add_const(np.frombuffer(payload, np.uint8).copy(), f"{part.name}_payload")
    attrs = {"backend": "onnxruntime", "index": part.index, "delegate": part.delegate,
             "nodes": [n.name for n in part.nodes], "ops": [n.op_type for n in part.nodes],
             "backend_bytes": onnx_intermediate_bytes(payload),
             "output_shapes": [list(s) for s, _ in types], "output_dtypes": [str(d) for _, d in types]}
    importer.emit("partition", edgert_ins + [const], list(part.outputs), attrs, part.name)


def import_with_fallback(model, shapes, values, fallback: str, fallback_ops, delegate, max_partitions: int,
                         plan: list[list[str]] | None = None, run_time=frozenset()):
    """The edgert graph of an ONNX model whose unsupported (and forced) nodes run as
    onnxruntime partitions; for litert, the graph and the node names to carve later.
    The onnxruntime groups, as node names, are left in g.metadata["partition_plan"];
    given as `plan` (the same model at another size), they are carved as they are.
    run_time: as import_onnx takes it (a bounded conversion's shape programs)."""
    from .frontend.onnx_import import OnnxImporter

    if fallback == "onnxruntime":
        try:
            import onnxruntime  # noqa: F401  (checks and shapes every payload)
        except ImportError:
            raise ConversionError("--fallback onnxruntime needs the onnxruntime package at conversion: "
                                  "pip install 'edgert[ort]'") from None
    norm = normalize(model)
    names = [n.name for n in norm.graph.node]
    op_types = [n.op_type for n in norm.graph.node]
    index = {nm: k for k, nm in enumerate(names)}
    forced = select_forced(names, op_types, fallback_ops)
    if fallback == "litert":
        try:
            g = OnnxImporter(norm, shapes, values, run_time).run()
        except UnsupportedError as e:
            raise ConversionError(
                "LiteRT partitions are made from nodes edgert imports; these cannot be imported:\n"
                + "\n".join(f"  {n or '<unnamed>'} ({op}): {why}" for n, op, why in e.problems)
                + "\nrun them with onnxruntime instead: --fallback onnxruntime (fallback='onnxruntime')") from None
        requested = {item: {nm for nm, op in zip(names, op_types) if item in (nm, op, "all")}
                     for item in fallback_ops}
        return g, {names[i] for i in forced}, requested
    if plan is not None:
        return _import_plan(norm, shapes, values, delegate, max_partitions, plan, run_time), set(), {}
    chosen = set(forced)
    for _ in range(len(names) + 1):
        if chosen:
            carved, parts = carve_onnx(norm, chosen, delegate, max_partitions, shapes)
        else:
            carved, parts = norm, {}
        imp = _importer(carved, parts, shapes, values, run_time)
        try:
            g = imp.run()
            g.metadata["partition_plan"] = [[n.name for n in p.nodes] for p in parts.values()]
            return g, set(), {}
        except UnsupportedError as e:
            # A partition output whose shape follows the data pulls its readers in: the
            # partition ends where the model bounds it again (or the error stays).
            grow = {k for k, n in enumerate(norm.graph.node) if set(n.input) & set(imp.data_dependent)} - chosen
            if grow:
                chosen |= grow
                continue
            new, stuck = set(), []
            for name, op, why in e.problems:
                if name in parts or name not in index:
                    stuck.append((name, op, why))
                elif index[name] not in chosen:
                    new.add(index[name])
            if stuck:
                raise ConversionError(
                    "these nodes cannot be placed in a fallback partition:\n"
                    + "\n".join(f"  {n or '<unnamed>'} ({op}): {why}" for n, op, why in stuck)) from None
            if not new:
                raise
            chosen |= new
    raise ConversionError("fallback partitioning did not converge")


def _importer(carved, parts: dict, shapes, values, run_time):
    """The importer of a carved model whose partition nodes become placeholders."""
    from .frontend.onnx_import import OnnxImporter
    imp = OnnxImporter(carved, shapes, values, run_time)
    imp.partitions, imp.emit_placeholder = parts, emit_placeholder
    return imp


def _import_plan(norm, shapes, values, delegate, max_partitions: int, plan: list[list[str]], run_time=frozenset()):
    """The graph of `norm` with exactly the partitions of `plan` (node names per group)."""
    if plan:
        carved, parts = carve_onnx(norm, set(), delegate, max_partitions, shapes, plan=plan)
    else:
        carved, parts = norm, {}
    imp = _importer(carved, parts, shapes, values, run_time)
    try:
        g = imp.run()
    except UnsupportedError as e:
        raise ConversionError(
            f"at input shapes {shapes} the model needs other fallback partitions than at the upper bounds:\n"
            + "\n".join(f"  {n or '<unnamed>'} ({op}): {why}" for n, op, why in e.problems)) from None
    g.metadata["partition_plan"] = [list(grp) for grp in plan]
    return g


# ---- bounded dimensions: one payload for every size ----------------------------------

def _partition_nodes(graphs: list, name: str) -> list:
    """The node `name` of each graph (the same model converted at another size)."""
    out = []
    for g in graphs:
        n = next((m for m in g.nodes if m.name == name and m.op == "partition"), None)
        if n is None:
            raise ConversionError("the converted graph changes with the input size (bounded dimensions need one "
                                  f"graph for every size): {name} is missing at some sizes")
        out.append(n)
    return out


def share_payloads(graphs: list, bounds) -> None:
    """Makes each onnxruntime partition's payload one ONNX model for every size: the
    boundary dims that differ between the graphs (the same model converted at the
    sample sizes of `bounds`) become symbolic (dim_param), everything else must be
    equal; the graphs then all hold that payload. onnxruntime runs it at the actual
    shapes the runtime passes (docs/partitions.md, "Bounded dimensions")."""
    import onnx

    for node in [n for n in graphs[0].nodes if n.op == "partition" and n.attrs.get("backend") == "onnxruntime"]:
        nodes = _partition_nodes(graphs, node.name)
        models = [onnx.load_from_string(g.const(n.inputs[-1]).tobytes()) for g, n in zip(graphs, nodes)]
        varying = _varying_dims(models)
        blobs = [_symbolic(m, varying, node.name).SerializeToString() for m in models]
        for g, n, blob in zip(graphs[1:], nodes[1:], blobs[1:]):
            if blob != blobs[0]:
                raise ConversionError(
                    f"{node.name} ({', '.join(node.attrs.get('nodes') or [])}): its ONNX payload changes with the "
                    "input size beyond its boundary shapes (a constant computed from the size reaches it), so one "
                    "payload cannot serve every size; hand the nodes computing that constant to the partition "
                    "too (--fallback-ops), fix the dimension, or convert one file per size")
        _check_runs(OnnxPartition(int(node.attrs.get("index", 0)), node.name, [], [], [], []), blobs[0])
        data = np.frombuffer(blobs[0], np.uint8).copy()
        for g, n in zip(graphs, nodes):
            t = g.tensors[n.inputs[-1]]
            t.data, t.shape = data, data.shape
            n.attrs["backend_bytes"] = node.attrs.get("backend_bytes")  # at the upper bounds: the most


def share_litert_payloads(graphs: list) -> None:
    """Makes each litert partition's payload the one written at the upper bounds
    (graphs[0]) in every graph: the runtime resizes the interpreter's inputs to each
    run's shapes. Checked here at every sample size: the upper payload, resized to that
    size's boundary shapes, must compute what the payload written at that size computes
    (a payload holding a shape of its own, a RESHAPE target or a STRIDED_SLICE end,
    would not); ConversionError naming the partition otherwise."""
    for node in [n for n in graphs[0].nodes if n.op == "partition" and n.attrs.get("backend") == "litert"]:
        nodes = _partition_nodes(graphs, node.name)
        blobs = [g.const(n.inputs[-1]).tobytes() for g, n in zip(graphs, nodes)]
        for g, n, blob in zip(graphs[1:], nodes[1:], blobs[1:]):
            if blob != blobs[0]:
                _check_resizes(node, blobs[0], blob, [g.tensors[t] for t in n.inputs[:-1]])
        data = np.frombuffer(blobs[0], np.uint8).copy()
        for g, n in zip(graphs, nodes):
            t = g.tensors[n.inputs[-1]]
            t.data, t.shape = data, data.shape
            n.attrs["backend_bytes"] = node.attrs.get("backend_bytes")


def _check_resizes(node, upper: bytes, own: bytes, inputs: list) -> None:
    """The upper-bound payload resized to `inputs`' shapes computes what `own` (the
    payload written at those shapes) computes, on random inputs."""
    from ..runtime.backends import LiteRtRunner, choose_runtime

    runtime = choose_runtime("litert", None)
    if runtime is None:
        raise ConversionError("bounded dimensions with --fallback litert need ai-edge-litert (or tflite-runtime) at "
                              "conversion, to check each LiteRT payload at the sample sizes: pip install "
                              "'edgert[litert]'")
    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal(t.shape) * 2).astype(t.dtype) if t.dtype.kind == "f"
          else rng.integers(-100, 100, t.shape).astype(t.dtype) for t in inputs]
    why = None
    try:
        got = LiteRtRunner(runtime, upper).run(xs)
        want = LiteRtRunner(runtime, own).run(xs)
        for a, b in zip(got, want):
            if a.shape != b.shape:
                why = f"an output of shape {list(a.shape)} instead of {list(b.shape)}"
            elif not np.allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(b).max()))):
                why = f"outputs off by up to {float(np.abs(a.astype(np.float64) - b).max()):.3g}"
    except Exception as e:  # noqa: BLE001 - LiteRT refusing the resize is the answer
        why = f"LiteRT cannot resize it ({type(e).__name__}: {str(e).strip().splitlines()[0][:200]})"
    if why is not None:
        raise ConversionError(
            f"{node.name} ({', '.join(node.attrs.get('nodes') or [])}): its LiteRT payload, written for the upper "
            f"bounds, does not follow the input size (resized to {[list(t.shape) for t in inputs]}: {why}); use "
            "--fallback onnxruntime, leave those nodes to edgert, fix the dimension, or convert one file per size")


def _varying_dims(models: list) -> dict[str, set[int]]:
    """{graph input or output name: dims whose value differs between the models}."""
    out: dict[str, set[int]] = {}
    for vis in zip(*[list(m.graph.input) + list(m.graph.output) for m in models]):
        dims = [[d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in vis]
        for k in range(len(dims[0])):
            if any(len(d) != len(dims[0]) or d[k] != dims[0][k] for d in dims):
                out.setdefault(vis[0].name, set()).add(k)
    return out


def _symbolic(m, varying: dict[str, set[int]], part: str):
    """m with the varying boundary dims named instead of fixed (one name per dim)."""
    for vi in list(m.graph.input) + list(m.graph.output):
        for k in sorted(varying.get(vi.name, ())):
            d = vi.type.tensor_type.shape.dim[k]
            d.Clear()
            d.dim_param = f"{part}:{vi.name}:{k}"
    return m


def partition_rules(graphs: list) -> list[tuple[int, int, int, int, int, int]]:
    """BOUNDS rules (edgert/converter/bounds.py) for the partition outputs whose dims
    differ between the graphs: each such dim must equal a boundary input's dim plus a
    constant at every size, which the runtime then computes before the run (the backend
    gets these shapes and must produce them). ConversionError naming the partition
    otherwise."""
    from ..fileformat import RULE_OUTDIM
    from .bounds import _dim_rule

    g0 = graphs[0]
    rules = []
    for k, n in enumerate(g0.nodes):
        if n.op != "partition":
            continue
        nodes = [g.nodes[k] for g in graphs]
        in_shapes = [[g.tensors[t].shape if t else None for t in m.inputs[:-1]] for m, g in zip(nodes, graphs)]
        for j, o in enumerate(n.outputs):
            shapes = [g.tensors[m.outputs[j]].shape for m, g in zip(nodes, graphs)]
            for d in range(len(shapes[0])):
                vals = [s[d] for s in shapes]
                if all(v == vals[0] for v in vals):
                    continue
                rule = _dim_rule(vals, in_shapes)
                if rule is None:
                    raise ConversionError(
                        f"{n.name} ({', '.join(n.attrs.get('nodes') or [])}): its output {o!r} dim {d} follows the "
                        f"input size ({', '.join(map(str, sorted(set(vals))))} at the sample sizes) but is no "
                        "boundary input's dim plus a constant, which is what the runtime can compute for a "
                        "partition; move the partition's boundary (--fallback-ops) or fix the dimension")
                rules.append((k, RULE_OUTDIM, rule[0], rule[1], j * 8 + d, rule[2]))
    return rules


# ---- litert: carving the edgert graph ------------------------------------------------

def carve_ir(g, names: set[str], delegate: str | None, max_partitions: int,
             requested: dict[str, set[str]] | None = None, plan: list[list[str]] | None = None,
             resizable: bool = False) -> None:
    """Replaces the nodes named in `names` (edgert node names: the ONNX node each came
    from) with litert `partition` nodes whose payload the TFLite writer makes.
    requested: each --fallback-ops entry and the ONNX nodes it named; an entry none of
    whose nodes an edgert node still carries (the passes fused them into other nodes)
    is an error. plan: the groups as edgert node names (the partitions' "nodes" of the
    same model converted at another size), carved as they are; resizable: payloads that
    LiteRT will run at other sizes too (write_tflite's resizable)."""
    from .ir import Graph

    try:
        from .tflite.writer import unsupported, write_tflite
    except ImportError:
        raise ConversionError("--fallback litert needs the TFLite writer (edgert.converter.tflite.writer), which this "
                              "edgert build does not include; use --fallback onnxruntime") from None
    try:
        import flatbuffers  # noqa: F401  (the writer's serializer)
    except ImportError:
        raise ConversionError("--fallback litert needs the flatbuffers package at conversion: "
                              "pip install 'edgert[litert]'") from None
    g.toposort()
    nodes = list(g.nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.outputs}
    deps = [{producer[i] for i in n.inputs if i in producer} for n in nodes]
    chosen = {k for k, n in enumerate(nodes) if n.name in names or n.name.split("__")[0] in names}
    carried = {n.name for n in nodes} | {n.name.split("__")[0] for n in nodes}
    gone = sorted(item for item, nms in (requested or {}).items() if nms and not nms & carried)
    if gone:
        raise ConversionError(
            f"--fallback-ops {', '.join(gone)}: the graph passes merged these nodes into others (an activation "
            "fused into its convolution, a BatchNormalization folded into it); name the node they joined, "
            "or convert with --no-optimize")
    if not chosen:
        return
    at = {n.name: k for k, n in enumerate(nodes)}
    if plan is not None and any(nm not in at for grp in plan for nm in grp):
        raise ConversionError("the converted graph changes with the input size (bounded dimensions need one graph "
                              "for every size): the LiteRT partitions' nodes differ between sizes")
    groups = [[at[nm] for nm in grp] for grp in plan] if plan is not None else group_nodes(len(nodes), deps, chosen)

    def standalone(idx: Iterable[int]) -> Graph:
        return _subgraph(g, [nodes[i] for i in idx])

    def can_run(i: int) -> bool:
        return not unsupported(standalone([i]))

    def compute(i: int) -> float:
        """Multiply-adds of node i (output elements for ops without a reduction)."""
        n = nodes[i]
        out = sum(g.tensors[o].numel for o in n.outputs)
        if n.op.startswith("conv") and len(n.inputs) > 1 and n.inputs[1]:
            return float(out * math.prod(g.tensors[n.inputs[1]].shape[1:]))
        if n.op.startswith(("gemm", "matmul")) and n.inputs and g.tensors[n.inputs[0]].shape:
            return float(out * g.tensors[n.inputs[0]].shape[-1])
        return float(out)

    def crossing(part: set[int], seg: set[int]) -> int:
        outs_p = {o for j in part for o in nodes[j].outputs}
        outs_s = {o for j in seg for o in nodes[j].outputs}
        total = sum(g.tensors[t].nbytes for t in {i for j in seg for i in nodes[j].inputs if i in outs_p})
        total += sum(g.tensors[t].nbytes for t in {i for j in part for i in nodes[j].inputs if i in outs_s})
        return total

    if plan is None and len(groups) > 1:
        groups, _ = absorb_segments(len(nodes), deps, groups, can_run, compute, crossing)
    check_count(groups, lambda i: f"{nodes[i].name} ({nodes[i].op})", max_partitions)
    replaced: set[int] = set()
    new_nodes = []
    first = {grp[0]: k for k, grp in enumerate(groups)}
    for i, n in enumerate(nodes):
        if i in first:
            k = first[i]
            grp = groups[k]
            sub = standalone(grp)
            bad = unsupported(sub)
            if bad:
                raise ConversionError(
                    f"partition_{k}: LiteRT has no mapping for " + ", ".join(f"{b.name} ({b.op})" for b in bad)
                    + "; run these nodes with onnxruntime instead: --fallback onnxruntime")
            payload = write_tflite(sub, resizable=resizable)
            const = g.add_const(np.frombuffer(payload, np.uint8).copy(), f"partition_{k}_payload")
            from .ir import Node
            inner = {o for j in grp for o in nodes[j].outputs} - set(sub.outputs)
            attrs = {"backend": "litert", "index": k, "delegate": delegate,
                     "nodes": [nodes[j].name for j in grp], "ops": [nodes[j].op for j in grp],
                     "backend_bytes": int(sum(g.tensors[t].nbytes for t in inner)),
                     "output_shapes": [list(g.tensors[o].shape) for o in sub.outputs],
                     "output_dtypes": [str(g.tensors[o].dtype) for o in sub.outputs]}
            new_nodes.append(Node("partition", list(sub.inputs) + [const], list(sub.outputs), attrs, f"partition_{k}"))
            replaced.update(grp)
        elif i not in replaced and not any(i in grp for grp in groups):
            new_nodes.append(n)
    g.nodes = new_nodes
    g.toposort()
    g.remove_unused_tensors()


def _subgraph(g, members: list):
    """A standalone Graph of `members` (edgert nodes of g): its inputs are the tensors
    they read that are computed outside (constants stay constants), its outputs the
    tensors they compute that are read outside or are outputs of g."""
    from .ir import Graph

    sub = Graph()
    sub.metadata = {}
    inside = {o for n in members for o in n.outputs}
    ids = {id(n) for n in members}
    read_outside = {i for n in g.nodes if id(n) not in ids for i in n.inputs} | set(g.outputs)
    for n in members:
        for i in n.inputs:
            if i and i not in sub.tensors:
                t = g.tensors[i]
                sub.tensors[i] = t
                if not t.is_const and i not in inside:
                    sub.inputs.append(i)
        for o in n.outputs:
            sub.tensors[o] = g.tensors[o]
            if o in read_outside:
                sub.outputs.append(o)
    sub.nodes = list(members)
    return sub


# ---- reporting -------------------------------------------------------------------

def metadata(g) -> list[dict]:
    """The "partitions" list of the file's metadata (docs/format.md)."""
    out = []
    for n in g.nodes:
        if n.op != "partition":
            continue
        a = n.attrs
        out.append({"index": int(a["index"]), "backend": a["backend"], "delegate": a.get("delegate"),
                    "node": n.name, "nodes": list(a.get("nodes") or []), "ops": list(a.get("ops") or []),
                    "inputs": list(n.inputs[:-1]), "outputs": list(n.outputs),
                    "bytes": int(g.tensors[n.inputs[-1]].nbytes), "backend_bytes": a.get("backend_bytes")})
    return sorted(out, key=lambda p: p["index"])


def summary_lines(parts: list[dict], tensors: dict[str, tuple[list[int], str]] | None = None) -> list[str]:
    """Short human summary: one line per partition, then its boundary tensors."""
    lines = []
    for p in parts:
        ops: dict[str, int] = {}
        for op in p["ops"]:
            ops[op] = ops.get(op, 0) + 1
        opstr = ", ".join(f"{k}" + (f" x{v}" if v > 1 else "") for k, v in sorted(ops.items()))
        dl = f", delegate {p['delegate']}" if p.get("delegate") else ""
        lines.append(f"{p['node']}: {p['backend']}{dl}, {len(p['nodes'])} node(s) ({opstr}), "
                     f"payload {p['bytes']:,} bytes")

        def fmt(names):
            if not tensors:
                return ", ".join(names)
            return ", ".join(f"{t} {tensors[t][1]}{tensors[t][0]}" if t in tensors else t for t in names)

        lines.append(f"  in:  {fmt(p['inputs'])}")
        lines.append(f"  out: {fmt(p['outputs'])}")
    return lines


def print_summary(parts: list[dict], tensors=None, stream=None) -> None:
    if not parts:
        return
    stream = stream or sys.stderr
    print(f"fallback partitions: {len(parts)}", file=stream)
    for line in summary_lines(parts, tensors):
        print("  " + line, file=stream)
