"""ONNX -> .edgert: one pipeline of stages over the graphs of one conversion.

A conversion holds one graph per sample size: a static conversion has one; a bounded
one (input_shapes with (LO, HI) dims, edgert/converter/bounds.py) has the model converted
at several sizes within the bounds, graphs[0] at the upper bounds being the one written.
Every stage acts on all of them alike, so that the graphs stay alike and the
differences between them are only what the size changes (from which the bounds stage
derives the run-time rules):

    load        the ONNX model checked once; QDQ parameters stripped; bounds resolved
    build       import (onnxruntime partitions carved before it) and graph passes, per
                size; the partition groups are chosen once, at the first size
    partitions  onnxruntime payloads made one for every size (size-dependent dims
                symbolic)
    prune       decided once (on the calibration graph, else the upper bounds') and
                applied identically to every graph
    quantize    calibrated once (on the graph at the calibration data's size) and
                applied with the same parameters to every graph
    litert      LiteRT partitions carved from the optimized (quantized) graphs
    sparse      sparse kernels and storage, the same nodes in every graph
    bounds      run-time rules from the graphs' differences, scratch over the sizes; values
                computed from the input size that no rule follows are computed at run
                time instead (shape programs): the stages from build on run again with
                them kept as nodes
    serialize   plan the arena, write the file (bounded: every size tried in the
                runtime's shape pass, bounds.settle)
    check       the file loaded in the C runtime and run at every sample size
    summary     the partitions on stderr (progress=True)
"""
from __future__ import annotations

import copy
import dataclasses
import os
import tempfile
from typing import Any, Callable

import numpy as np

from . import passes
from ..errors import ConversionError, EdgertError
from .emit import serialize
from .frontend.onnx_import import import_onnx, load_onnx
from .frontend.tflite_import import import_tflite, load_tflite, sniff_tflite
from .tflite.reader import Model as TfliteModel
from .ir import Graph
from .options import ConvertOptions
from .partitioner import DEFAULT_MAX_PARTITIONS

__all__ = ["convert", "ConvertOptions", "build_graph", "serialize", "write_atomic", "STAGES"]


def build_graph(model, input_shapes: dict[str, Any] | None = None, input_values: dict[str, Any] | None = None,
                optimize: bool = True, fallback: dict[str, Any] | None = None,
                plan: list[list[str]] | None = None, run_time=frozenset(), sym_dims=None) -> Graph:
    """The optimized edgert graph of an ONNX model (path, bytes or ModelProto); bounded
    dimensions (LO, HI) are built at their upper bound.
    fallback: {"fallback", "fallback_ops", "delegate", "max_partitions"} as convert
    takes them; onnxruntime partitions are carved here, before import (as `plan` says
    when given: the groups, as node names, of g.metadata["partition_plan"] of the same
    model at another size); for litert the names of the nodes to carve after passes
    and quantization go to g.metadata["litert_nodes"]. run_time: ONNX tensors computed
    from the input size to keep as run-time nodes (bounded conversions' shape programs)."""
    from .bounds import has_bounds, upper
    shapes = {k: [int(d) for d in v] for k, v in upper(input_shapes or {}).items()}
    bounded = has_bounds(input_shapes)
    fb = fallback or {}
    if isinstance(model, TfliteModel):
        if fb.get("fallback", "off") != "off":
            raise ConversionError("--fallback is not supported for .tflite models yet")
        g = import_tflite(model, shapes)
    elif fb.get("fallback", "off") == "off":
        g = import_onnx(model, shapes, input_values, run_time, sym_dims)
    else:
        from .partitioner import import_with_fallback
        g, litert_nodes, requested = import_with_fallback(load_onnx(model), shapes, input_values, fb["fallback"],
                                                          fb.get("fallback_ops") or (), fb.get("delegate"),
                                                          fb.get("max_partitions", DEFAULT_MAX_PARTITIONS), plan,
                                                          run_time)
        if litert_nodes:
            g.metadata["litert_nodes"] = (sorted(litert_nodes), requested)
    if bounded:
        g.metadata["bounded"] = True  # passes that would change structure with the size skip it
    if optimize:
        g.metadata["passes"] = passes.run_pipeline(g)
    else:
        from .passes import dce
        dce.run(g)
        g.toposort()
    return g


def convert(model, output: str | os.PathLike | None = None, options: ConvertOptions | None = None,
            **kwargs: Any) -> bytes:
    """Converts an ONNX model (path, bytes or onnx.ModelProto) or a .tflite model (path or
    bytes, recognized by its "TFL3" identifier; docs/tflite.md) to the .edgert format and
    returns the file's bytes; also writes them to `output` when given (atomically: no
    partial file on failure).

    The settings are a ConvertOptions (edgert/converter/options.py) and/or keyword
    arguments of the same names, which override its fields:

    input_shapes fixes symbolic input dimensions ({"x": [1, 3, 224, 224]}); a (LO, HI)
    pair gives a dimension bounds instead ({"x": [1, 3, 48, (32, 960)]}: one file for
    every width within them, docs/runtime.md "Bounded dimensions"); inputs sharing an
    ONNX dimension name share its bounds, and need not be listed;
    input_values freezes inputs to constants ({"sr": 16000}), removing them from the
    converted model's inputs (useful when an input only selects a branch);
    optimize: run the graph passes (default True).

    sparse: True stores sparse constants compressed and runs sparse enough 1x1 conv,
    gemm and matmul weights with the sparse kernel; "storage" only compresses (outputs
    identical to the dense file); False neither (docs/sparse.md).
    prune: target fraction of weights to remove (edgert/converter/prune: prune_method "magnitude"
    or "channel", prune_scope "layer" or "global", prune_exclude node names,
    calibration {input: array} or an .npz path for per-layer sensitivity); report: a
    JSON path for the size / MACs / SQNR summary of pruning.

    quantize: None (float), "int8", "fp16" or "dynamic" (docs/quantization.md). int8
    takes `calibration` (a dict {input name: samples stacked on axis 0}, an .npz path or
    a folder of .npz), `calibration_method` (minmax, percentile, entropy, mse) and
    optionally `calibration_samples` (a cap), `keep_fp32` (node names that stay float),
    `sqnr_target` (dB: keep the worst layers float until every output reaches it) and
    `report` (per-tensor SQNR as JSON; merged into the pruning report when both run).
    A model that is already quantized (ONNX QuantizeLinear/DequantizeLinear pairs, or
    QLinearConv/QLinearMatMul) converts to int8 with its own parameters, without
    calibration. progress: a progress bar on stderr (default: when it is a terminal).

    fallback: "off" (nodes edgert cannot run are an error), "onnxruntime" or "litert":
    such nodes, and those `fallback_ops` names (node names, op types or "all"), run in
    partitions that the other runtime computes (docs/partitions.md); `delegate` (a
    name or a path) is recorded for the runtime; more than `max_partitions`
    partitions is an error.

    Bounds combine with every other option (docs/runtime.md, "Bounded dimensions").
    """
    opts = ConvertOptions.build(options, **kwargs)
    job = Job(opts, model)
    try:
        for stage in STAGES:
            stage(job)
    except (EdgertError, ModuleNotFoundError):  # a missing package (onnx on a runtime-only install) says which
        raise
    except Exception as e:  # a defect, or an input no check refuses (MemoryError, ...): still a clear error
        raise ConversionError(f"internal error while converting ({type(e).__name__}: {e})") from e
    if output is not None:
        write_atomic(output, job.data)
    return job.data


# ---- what flows through the stages ---------------------------------------------------

@dataclasses.dataclass
class Sample:
    """The model converted at one size: values[k] is symbol k's size (empty when static)."""

    values: list[int]
    shapes: dict[str, list]
    graph: Graph


@dataclasses.dataclass
class Job:
    """One conversion: its options and what the stages have made so far."""

    options: ConvertOptions
    model: Any  # a path, bytes or ModelProto; the checked ModelProto after `load`
    source: str | None = None
    values: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # frozen inputs
    input_shapes: dict[str, list] | None = None  # bounded: with the inputs that share a symbol
    bounds: Any = None  # bounds.Bounds, None for a static conversion
    qdq: Any = None  # quant.qdq.QdqParams of an already-quantized model
    samples: list[Sample] = dataclasses.field(default_factory=list)
    invalid: list = dataclasses.field(default_factory=list)  # sizes the ONNX model itself cannot run
    calib: Graph | None = None  # bounded: the graph at the calibration data's size
    run_time: set[str] = dataclasses.field(default_factory=set)  # bounded: ONNX tensors of shape programs
    sample_fallback: str | None = None  # bounded: why the expressions did not cover the model
    quant_summary: dict | None = None
    initial: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # state inputs' initial values
    data: bytes = b""

    @property
    def graphs(self) -> list[Graph]:
        return [s.graph for s in self.samples]

    def all_graphs(self) -> list[Graph]:
        """Every graph a stage must change alike: the samples' and the calibration one."""
        return self.graphs + ([self.calib] if self.calib is not None else [])

    def sym_dims(self) -> dict[str, dict[int, Any]] | None:
        """{input: {dim: symdim expression}} of the bounded dims (None when static)."""
        if self.bounds is None:
            return None
        from . import symdim
        out: dict[str, dict[int, Any]] = {}
        for name, dim, k in self.bounds.binds:
            out.setdefault(name, {})[dim] = symdim.sym(k, self.bounds.symbols[k].name)
        return out

    def fallback(self) -> dict[str, Any]:
        o = self.options
        return {"fallback": o.fallback, "fallback_ops": list(o.fallback_ops), "delegate": o.delegate,
                "max_partitions": o.max_partitions}

    def build(self, shapes: dict[str, list], plan: list[list[str]] | None = None) -> Graph:
        """The optimized graph of the model at `shapes` (QDQ models: without activation
        fusions, so that each tensor the model quantizes stays a tensor)."""
        o = self.options
        g = build_graph(self.model, shapes, self.values, o.optimize and self.qdq is None, self.fallback(), plan,
                        self.run_time, self.sym_dims())
        if self.qdq is not None and o.optimize:
            from .quant import qdq as qdq_import
            g.metadata["passes"] = qdq_import.optimize(g)
        if o.state:
            from . import state as state_
            state_.check_graph(g, o.state)
            g.metadata["state_pairs"] = o.state
            g.metadata["state_initial"] = self.initial
        return g


# ---- the stages ---------------------------------------------------------------------

def stage_load(job: Job) -> None:
    o = job.options
    job.values = {k: np.asarray(v) for k, v in (o.input_values or {}).items()}
    m = job.model
    job.source = os.path.basename(os.fspath(m)) if isinstance(m, (str, os.PathLike)) else None
    if sniff_tflite(m):
        _load_tflite(job)
        return
    job.model = load_onnx(m)  # checked once (limits, external data inside the model's folder)
    if o.state:
        from . import state as state_
        job.model, job.initial = state_.prepare_model(job.model, o.state, job.values)
    if o.quantize in (None, "int8"):
        from .quant import qdq as qdq_import
        job.model, job.qdq = qdq_import.strip(job.model)
    job.input_shapes = {k: list(v) for k, v in o.input_shapes.items()} if o.input_shapes else o.input_shapes
    if o.bounded:
        from . import bounds as bounds_
        job.bounds = bounds_.resolve(job.model, job.input_shapes, job.values)


def _load_tflite(job: Job) -> None:
    """A .tflite model (docs/tflite.md): the options that do not apply to it yet refused."""
    o = job.options
    for name, unsupported in (("state", bool(o.state)), ("input_values", bool(o.input_values)),
                              ("bounded input_shapes", o.bounded),
                              ("fallback", o.fallback != "off" or bool(o.fallback_ops))):
        if unsupported:
            raise ConversionError(f"{name} is not supported for .tflite models yet (docs/tflite.md)")
    job.model = load_tflite(job.model)
    job.input_shapes = {k: list(v) for k, v in o.input_shapes.items()} if o.input_shapes else o.input_shapes


def stage_build(job: Job) -> None:
    """The graph at each sample size (static: the one size). Partition groups are
    chosen at the first (upper) size and carved alike at the others."""
    if job.bounds is None:
        job.samples = [Sample([], job.input_shapes or {}, job.build(job.input_shapes))]
        return
    from . import bounds as bounds_
    ort_cache: dict = {}
    plan = None
    values = bounds_.sample_values(job.bounds)
    if _one_conversion(job):
        values = values[:1]  # the upper bounds; the rules come from the expressions (stage_bounds)
    for v in values:
        shapes = bounds_.concrete(job.input_shapes, job.bounds, v)
        try:
            g = job.build(shapes, plan)
        except ConversionError as e:
            # A size the ONNX model itself cannot run (onnxruntime fails too) is no sample;
            # the runtime must refuse it (stage_check). Else edgert cannot follow it.
            why = bounds_.model_fails_at(job.model, shapes, job.values, ort_cache)
            if why is not None and not job.samples:
                raise ConversionError(f"bounded dimensions: the model cannot run at the upper bounds {v} (onnxruntime "
                                      f"fails too: {why}); give upper bounds it runs") from None
            if why is None:
                raise ConversionError(f"bounded dimensions: the model does not convert at sizes {v} within the "
                                      f"bounds: {e}") from None
            feeds = {k: a for k, a in bounds_.onnx_input_feeds(job.model, shapes, job.values).items()
                     if k not in job.values}
            job.invalid.append((v, feeds, why))
            continue
        plan = g.metadata.get("partition_plan", plan)
        job.samples.append(Sample(v, shapes, g))
    if _needs_calibration_graph(job.options, job.qdq):
        job.calib = job.build(bounds_.concrete(job.input_shapes, job.bounds, _calibration_sizes(job)), plan)


def stage_partitions(job: Job) -> None:
    if job.bounds is not None and any(n.op == "partition" for n in job.graphs[0].nodes):
        from .partitioner import share_payloads
        share_payloads(job.all_graphs(), job.bounds)


def stage_prune(job: Job) -> None:
    """Pruning is decided on one graph (the calibration data's size when pruning uses
    calibration, else the first) and copied to the others, which keep their sizes."""
    o = job.options
    if not o.prune:
        return
    from .prune import prune_with_report, transplant
    decide = job.calib if job.calib is not None and o.calibration is not None else job.graphs[0]
    before = [dict(n.attrs) for n in decide.nodes]
    prune_with_report(decide, o.prune, o.prune_method, o.prune_scope, o.prune_exclude, o.calibration, o.report)
    for g in job.all_graphs():
        if g is not decide:
            transplant(decide, before, g)


def stage_quantize(job: Job) -> None:
    o = job.options
    if o.quantize is None and job.qdq is None:
        return
    from .quant.pipeline import quantize_graph
    mode = o.quantize or "int8"
    if job.bounds is None:
        g, job.quant_summary = quantize_graph(job.graphs[0], mode, o.calibration, o.calibration_method, o.keep_fp32,
                                              o.sqnr_target, o.report, o.progress, o.calibration_samples, job.qdq,
                                              merge_report=bool(o.prune))
        job.samples[0].graph = g
        return
    keep = set(o.keep_fp32)
    calibrated = None
    if mode == "int8" and job.qdq is None:
        keep |= _size_dependent_gap(job.graphs) | _from_shape_programs(job.graphs[0])
        keep, calibrated = _calibrate(job, keep)
    for s in job.samples:
        s.graph, job.quant_summary = quantize_graph(s.graph, mode, o.calibration, o.calibration_method, keep,
                                                    qdq=job.qdq, calibrated=calibrated, gemm_as_conv=False)
    job.calib = None  # its work is done: later stages change the samples only


def stage_litert(job: Job) -> None:
    o = job.options
    names = [s.graph.metadata.pop("litert_nodes", None) for s in job.samples]
    if not names[0]:
        return
    from .partitioner import carve_ir
    carve_ir(job.graphs[0], set(names[0][0]), o.delegate, o.max_partitions, names[0][1],
             resizable=job.bounds is not None)
    if job.bounds is None:
        return
    from .partitioner import share_litert_payloads
    plan = [list(n.attrs["nodes"]) for n in job.graphs[0].nodes if n.op == "partition" and n.attrs["backend"] == "litert"]
    for g in job.graphs[1:]:
        carve_ir(g, set(names[0][0]), o.delegate, o.max_partitions, names[0][1], plan, resizable=True)
    share_litert_payloads(job.graphs)


def stage_sparse(job: Job) -> None:
    o = job.options
    if not o.sparse:
        return
    from . import sparse as sparse_
    only = _fixed_shape_nodes(job.graphs) if job.bounds is not None else None
    if job.bounds is not None and len(job.samples) == 1 and _one_conversion(job):
        from . import symshape
        dims = symshape.infer(job.graphs[0], job.bounds)
        only = {n.name for n in job.graphs[0].nodes
                if all(dims.get(i) is not None and all(e.is_const for e in dims[i]) for i in n.inputs if i)}
    for g in job.graphs:
        sparse_.apply(g, kernels=o.sparse is True, storage=True, only=only)


def stage_bounds(job: Job) -> None:
    """Rules from the graphs' differences. Values computed from the input size that vary
    in a way no rule follows (bounds.NeedsRunTime) join job.run_time, and the stages
    before this one run again, keeping them as run-time nodes (shape programs)."""
    if job.bounds is None:
        return
    from . import bounds as bounds_
    from .partitioner import partition_rules
    why = ""
    if len(job.samples) == 1 and _one_conversion(job):
        g = job.graphs[0]
        job.bounds.rules, job.bounds.code = [], []
        try:
            g.metadata["sym_dims"] = bounds_.derive_from_expressions(g, job.bounds)
            g.metadata["bounds"] = job.bounds
            g.metadata["scratch_at_least"] = bounds_.sweep_scratch(job.graphs)
            g.metadata["bounds_from"] = "expressions"
            return
        except bounds_.NeedsSamples as e:
            # the named fallback (docs/runtime.md): the model converted at the sample sizes
            job.sample_fallback = str(e)
        job.samples, job.invalid, job.calib, job.quant_summary = [], [], None, None
        for stage in STAGES[STAGES.index(stage_build):STAGES.index(stage_bounds)]:
            stage(job)
    while True:
        job.bounds.rules, job.bounds.code = [], []
        try:
            bounds_.derive_rules(job.graphs, job.bounds, [s.values for s in job.samples])
            break
        except bounds_.NeedsRunTime as e:
            if e.names <= job.run_time:
                raise ConversionError(str(e)) from None
            job.run_time |= e.names
            why = str(e)
        job.samples, job.invalid, job.calib, job.quant_summary = [], [], None, None
        try:
            for stage in STAGES[STAGES.index(stage_build):STAGES.index(stage_bounds)]:
                stage(job)
        except ConversionError as e:
            raise ConversionError(f"{why}; computing it at run time instead fails: {e}") from None
    job.bounds.rules += partition_rules(job.graphs)
    g = job.graphs[0]
    g.metadata["bounds"] = job.bounds
    from . import symshape
    g.metadata["sym_dims"] = symshape.infer(g, job.bounds)
    g.metadata["bounds_from"] = "samples"
    g.metadata["scratch_at_least"] = bounds_.sweep_scratch(job.graphs)


def stage_serialize(job: Job) -> None:
    meta: dict[str, Any] = {"source": job.source}
    if job.bounds is not None:
        meta["bounds"] = {s.name: [s.lo, s.hi] for s in job.bounds.symbols}
        from . import symshape
        meta["output_dims"] = symshape.output_text(job.graphs[0], job.bounds, job.graphs[0].metadata["sym_dims"])
        meta["bounds_from"] = job.graphs[0].metadata.get("bounds_from")
        if job.sample_fallback is not None:
            meta["bounds_sample_fallback"] = job.sample_fallback
    if job.quant_summary is not None:
        meta["quantization"] = job.quant_summary
    if job.bounds is None:
        g = job.graphs[0]
        if not job.options.state:
            from .state import suggest
            found = suggest(g)
            if found:
                meta["state_suggestions"] = [{"output": o, "input": i, "why": why} for o, i, why in found[:4]]
        job.data = serialize(g, meta, (job.options.state, job.initial))
        return
    from . import bounds as bounds_
    # Every size tried in the runtime's shape pass: scratch raised where a size needs
    # more, sizes the model cannot run turned into a constraint (bounds.settle).
    job.data = bounds_.settle(lambda g: serialize(g, meta), job.graphs[0], job.bounds, job.input_shapes)


def stage_check(job: Job) -> None:
    if job.bounds is not None:
        from . import bounds as bounds_
        bounds_.check_with_runtime(job.data, job.graphs, job.bounds, [s.values for s in job.samples], job.invalid)


def stage_summary(job: Job) -> None:
    if job.options.progress:
        from .partitioner import metadata as partition_metadata, print_summary
        g = job.graphs[0]
        print_summary(partition_metadata(g), {t.name: (list(t.shape), str(t.dtype)) for t in g.tensors.values()})


STAGES: tuple[Callable[[Job], None], ...] = (
    stage_load, stage_build, stage_partitions, stage_prune, stage_quantize, stage_litert, stage_sparse,
    stage_bounds, stage_serialize, stage_check, stage_summary)


# ---- helpers of the stages -------------------------------------------------------------

def _one_conversion(job: Job) -> bool:
    """A bounded conversion made once, at the upper bounds, its rules from the expressions
    (bounds.derive_from_expressions), unless that already fell back to the samples or
    the options need them: fallback partitions, pruning, quantization, an
    already-quantized model (docs/runtime.md, "Expressions instead of samples")."""
    o = job.options
    return (job.bounds is not None and job.sample_fallback is None and not job.run_time and o.fallback == "off"
            and not o.prune and o.quantize is None and job.qdq is None)


def _needs_calibration_graph(o: ConvertOptions, qdq) -> bool:
    """Bounded conversions run calibration data through a graph of its own size: int8
    calibration, and pruning that measures sensitivity."""
    return (o.quantize == "int8" and qdq is None) or (bool(o.prune) and o.calibration is not None)


def _calibration_sizes(job: Job) -> list[int]:
    """Each symbol's size in the calibration data (every bounded input's samples must
    share it)."""
    from .quant.calibrate import load_calibration
    o = job.options
    if o.calibration is None:
        raise ConversionError("int8 quantization needs calibration data (--calibration DATA)")
    raw = o.calibration
    if isinstance(raw, np.ndarray):
        names = sorted({name for name, _, _ in job.bounds.binds})
        raw = {names[0]: raw} if len(names) == 1 else raw
    data = load_calibration(raw)
    b = job.bounds
    sizes: list[int | None] = [None] * len(b.symbols)
    for name, dim, sym in b.binds:
        if name not in data:
            raise ConversionError(f"calibration data lacks input {name!r}; it has {sorted(data)}")
        arr = np.asarray(data[name])
        rank = len(job.input_shapes[name])
        size = arr.shape[1 + dim] if arr.ndim == rank + 1 else arr.shape[dim] if arr.ndim == rank and dim > 0 else None
        s = b.symbols[sym]
        if size is None or not s.lo <= size <= s.hi or sizes[sym] not in (None, size):
            raise ConversionError(f"calibration data for {name!r} has shape {list(arr.shape)}: dimension {dim} must "
                                  f"be one size within {s.lo}..{s.hi}, shared by every input with {s.name!r}")
        sizes[sym] = size
    return [int(v) for v in sizes]


def _size_dependent_gap(graphs: list[Graph]) -> set[str]:
    """int8 global average pooling folds 1 / (spatial size) into its multiplier: the
    nodes whose spatial size follows the input size stay float."""
    g0 = graphs[0]
    if not _aligned(graphs):
        return set()  # the bounds stage refuses them
    return {n.name for k, n in enumerate(g0.nodes) if n.op == "global_avg_pool"
            and any(g.tensors[g.nodes[k].inputs[0]].shape != g0.tensors[n.inputs[0]].shape for g in graphs)}


def _from_shape_programs(g: Graph) -> set[str]:
    """Names of the nodes computed from a shape program's values (anchor coordinates,
    strides and what they give): their ranges follow the input size, which one
    calibration size cannot cover, so int8 keeps them float."""
    made: set[str] = set()
    out = set()
    for n in g.nodes:
        if n.op == "shape" or any(i in made for i in n.inputs):
            made.update(n.outputs)
            out.add(n.name)
    return out


def _calibrate(job: Job, keep: set[str]) -> tuple[set[str], tuple]:
    """(nodes kept float, (qparams, means, sample count)) of int8 for a bounded
    conversion, from the calibration graph; --sqnr-target may keep more nodes float, and
    --report is measured there."""
    from .quant.calibrate import batches, load_calibration
    from .quant.pipeline import calibrate, quantize_graph
    from .quant.prepare import prepare_for_int8
    o = job.options
    g = job.calib
    probe = copy.deepcopy(g) if o.sqnr_target is not None or o.report is not None else None
    prepare_for_int8(g, keep)
    feeds = batches(g, load_calibration(o.calibration), o.calibration_samples)
    qparams, means = calibrate(g, feeds, o.calibration_method, o.progress)
    calibrated = (qparams, means, len(feeds))
    if probe is not None:
        _, summary = quantize_graph(probe, "int8", o.calibration, o.calibration_method, keep, o.sqnr_target,
                                    o.report, o.progress, o.calibration_samples, merge_report=bool(o.prune),
                                    calibrated=calibrated, gemm_as_conv=False)
        keep = set(summary["fp32_nodes"])
    return keep, calibrated


def _fixed_shape_nodes(graphs: list[Graph]) -> set[str]:
    """Names of the nodes whose input shapes are the same in every graph: the sparse
    kernel's parameters (its column count) would follow the size elsewhere. Empty when
    the graphs do not hold the same nodes (the bounds stage refuses them)."""
    g0 = graphs[0]
    if not _aligned(graphs):
        return set()
    out = set()
    for k, n in enumerate(g0.nodes):
        shapes = [[g.tensors[t].shape if t else None for t in g.nodes[k].inputs] for g in graphs]
        if all(s == shapes[0] for s in shapes):
            out.add(n.name)
    return out


def _aligned(graphs: list[Graph]) -> bool:
    """True when the graphs hold the same nodes (names and ops) in the same order."""
    g0 = graphs[0]
    return all(len(g.nodes) == len(g0.nodes) and all(a.name == b.name and a.op == b.op
                                                     for a, b in zip(g.nodes, g0.nodes)) for g in graphs)


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".edgert-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
