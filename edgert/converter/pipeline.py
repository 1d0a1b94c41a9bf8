"""ONNX -> .edgert: import, graph passes, memory plan, verify, serialize."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from . import passes
from ..errors import ConversionError, EdgertError
from .frontend.onnx_import import import_onnx, load_onnx
from .emit import serialize
from .ir import Graph
from .partitioner import DEFAULT_MAX_PARTITIONS, FALLBACKS


def build_graph(model, input_shapes: dict[str, Any] | None = None, input_values: dict[str, Any] | None = None,
                optimize: bool = True, fallback: dict[str, Any] | None = None, run_time=frozenset()) -> Graph:
    """The optimized edgert graph of an ONNX model (path, bytes or ModelProto); bounded
    dimensions (LO, HI) are built at their upper bound.
    fallback: {"fallback", "fallback_ops", "delegate", "max_partitions"} as convert
    takes them; onnxruntime partitions are carved here, before import; for litert the
    names of the nodes to carve after passes and quantization go to
    g.metadata["litert_nodes"]. run_time: ONNX tensors computed from the input size to
    keep as run-time nodes (bounded conversions' shape programs)."""
    from .bounds import upper
    shapes = {k: [int(d) for d in v] for k, v in upper(input_shapes or {}).items()}
    fb = fallback or {}
    if fb.get("fallback", "off") == "off":
        g = import_onnx(model, shapes, input_values, run_time)
    else:
        from .partitioner import import_with_fallback
        g, litert_nodes, requested = import_with_fallback(load_onnx(model), shapes, input_values, fb["fallback"],
                                                  fb.get("fallback_ops") or (), fb.get("delegate"),
                                                  fb.get("max_partitions", DEFAULT_MAX_PARTITIONS))
        if litert_nodes:
            g.metadata["litert_nodes"] = (sorted(litert_nodes), requested)
    if optimize:
        g.metadata["passes"] = passes.run_pipeline(g)
    else:
        from .passes import dce
        dce.run(g)
        g.toposort()
    return g


def convert(model, output: str | os.PathLike | None = None, input_shapes: dict[str, Any] | None = None,
            input_values: dict[str, Any] | None = None, optimize: bool = True, *, sparse: bool | str = True,
            prune: float | None = None, prune_method: str = "magnitude", prune_scope: str = "layer",
            prune_exclude: Any = (), calibration: Any = None, report: str | os.PathLike | None = None,
            quantize: str | None = None, calibration_method: str = "percentile", keep_fp32: Any = (),
            sqnr_target: float | None = None, calibration_samples: int | None = None,
            progress: bool | None = None, fallback: str = "off", fallback_ops: Any = (),
            delegate: str | None = None, max_partitions: int = DEFAULT_MAX_PARTITIONS) -> bytes:
    """Converts an ONNX model to the .edgert format and returns the file's bytes; also
    writes them to `output` when given (atomically: no partial file on failure).

    input_shapes fixes symbolic input dimensions ({"x": [1, 3, 224, 224]}); a (LO, HI)
    pair gives a dimension bounds instead ({"x": [1, 3, 48, (32, 960)]}: one file for
    every width within them, docs/runtime.md "Bounded dimensions"); inputs sharing an
    ONNX dimension name share its bounds, and need not be listed;
    input_values freezes inputs to constants ({"sr": 16000}), removing them from the
    converted model's inputs (useful when an input only selects a branch).

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
    """
    fb = _check_fallback(fallback, fallback_ops, delegate, max_partitions)
    values = {k: np.asarray(v) for k, v in (input_values or {}).items()}
    src = os.path.basename(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else None
    model = load_onnx(model)  # checked once (limits, external data inside the model's folder)
    from . import bounds as bounds_
    if bounds_.has_bounds(input_shapes):
        if prune:
            raise ConversionError("bounded dimensions cannot be combined with --prune yet")
        if fb["fallback"] != "off":
            raise ConversionError("bounded dimensions cannot be combined with --fallback partitions yet: a "
                                  "partition's payload has static shapes; convert one file per size, or fix "
                                  "the dimension")
        input_shapes = {k: list(v) for k, v in input_shapes.items()}
        bounds = bounds_.resolve(model, input_shapes, values)
        try:
            data = _convert_bounded(model, input_shapes, bounds, values, optimize, sparse, quantize, src,
                                    calibration, calibration_method, keep_fp32, calibration_samples, progress)
        except EdgertError:
            raise
        except Exception as e:
            raise ConversionError(f"internal error while converting ({type(e).__name__}: {e})") from e
        if output is not None:
            write_atomic(output, data)
        return data
    try:
        data = _convert(model, input_shapes, values, optimize, sparse, prune, prune_method, prune_scope,
                        prune_exclude, calibration, report, quantize, calibration_method, keep_fp32, sqnr_target,
                        calibration_samples, progress, src, fb)
    except EdgertError:
        raise
    except Exception as e:  # a defect, or an input no check above refuses (MemoryError, ...): still a clear error
        raise ConversionError(f"internal error while converting ({type(e).__name__}: {e})") from e
    if output is not None:
        write_atomic(output, data)
    return data


def _convert(model, input_shapes, values, optimize, sparse, prune, prune_method, prune_scope, prune_exclude,
             calibration, report, quantize, calibration_method, keep_fp32, sqnr_target, calibration_samples,
             progress, src, fb=None) -> bytes:
    qdq = None
    if quantize in (None, "int8"):
        from .quant import qdq as qdq_import
        model, qdq = qdq_import.strip(model)
    g = build_graph(model, input_shapes, values, optimize and qdq is None, fb)
    if qdq is not None and optimize:
        g.metadata["passes"] = qdq_import.optimize(g)
    if prune:
        from .prune import prune_with_report
        prune_with_report(g, prune, prune_method, prune_scope, prune_exclude, calibration, report)
    quant_summary = None
    if quantize is not None or qdq is not None:
        from .quant.pipeline import quantize_graph
        g, quant_summary = quantize_graph(g, quantize or "int8", calibration, calibration_method, keep_fp32,
                                          sqnr_target, report, progress, calibration_samples, qdq,
                                          merge_report=bool(prune))
    litert_nodes = g.metadata.pop("litert_nodes", None)
    if litert_nodes:
        from .partitioner import carve_ir
        carve_ir(g, set(litert_nodes[0]), fb["delegate"], fb["max_partitions"], litert_nodes[1])
    if sparse:
        from . import sparse as sparse_
        sparse_.apply(g, kernels=sparse is True, storage=True)
    meta: dict[str, Any] = {"source": src}
    if quant_summary is not None:
        meta["quantization"] = quant_summary
    data = serialize(g, meta)
    if progress:
        from .partitioner import metadata as partition_metadata, print_summary
        print_summary(partition_metadata(g), {t.name: (list(t.shape), str(t.dtype)) for t in g.tensors.values()})
    return data


def _check_fallback(fallback, fallback_ops, delegate, max_partitions) -> dict[str, Any]:
    fallback = "off" if fallback in (None, False) else fallback
    if fallback not in FALLBACKS:
        raise ConversionError(f"fallback {fallback!r} is not one of {', '.join(FALLBACKS)}")
    ops = [fallback_ops] if isinstance(fallback_ops, str) else list(fallback_ops or ())
    if ops and fallback == "off":
        raise ConversionError("--fallback-ops needs a fallback runtime: --fallback onnxruntime or --fallback litert")
    if delegate is not None and fallback == "off":
        raise ConversionError("--delegate needs a fallback runtime: --fallback onnxruntime or --fallback litert")
    if isinstance(max_partitions, bool) or not isinstance(max_partitions, int) or max_partitions < 1:
        raise ConversionError(f"max_partitions must be a positive integer, got {max_partitions!r}")
    return {"fallback": fallback, "fallback_ops": ops, "delegate": None if delegate is None else str(delegate),
            "max_partitions": max_partitions}


def _convert_bounded(model, input_shapes, bounds, values, optimize, sparse, quantize, src, calibration=None,
                     calibration_method="percentile", keep_fp32=(), calibration_samples=None, progress=None) -> bytes:
    """A file for every size within the bounds (edgert/converter/bounds.py): converted at each
    sample size, rules derived from the differences, checked in the C runtime. Values
    computed from the input size that no rule follows are computed at run time instead
    (shape programs): the samples are converted again with them kept as nodes. int8 is
    calibrated once, on the graph at the calibration data's size, and those parameters
    quantize the graph at every sample size alike."""
    from . import bounds as bounds_
    run_time: set[str] = set()
    why = ""
    while True:
        try:
            graphs, vals, invalid = _bounded_samples(model, input_shapes, bounds, values, optimize, sparse, quantize,
                                                     calibration, calibration_method, keep_fp32,
                                                     calibration_samples, progress, run_time)
            bounds.rules = []
            bounds_.derive_rules(graphs, bounds, vals)
            break
        except bounds_.NeedsRunTime as e:
            if e.names <= run_time:
                raise ConversionError(str(e)) from None
            run_time |= e.names
            why = str(e)
        except ConversionError as e:
            if not run_time:
                raise
            raise ConversionError(f"{why}; computing it at run time instead fails: {e}") from None
    summary = graphs[0].metadata.pop("quantization_summary", None)
    g = graphs[0]
    g.metadata["bounds"] = bounds
    g.metadata["scratch_at_least"] = bounds_.sweep_scratch(graphs)
    meta = {"source": src, "bounds": {s.name: [s.lo, s.hi] for s in bounds.symbols}}
    if summary is not None:
        meta["quantization"] = summary
    data = bounds_.settle(lambda g: serialize(g, meta), g, bounds, input_shapes)
    bounds_.check_with_runtime(data, graphs, bounds, vals, invalid)
    return data


def _bounded_samples(model, input_shapes, bounds, values, optimize, sparse, quantize, calibration,
                     calibration_method, keep_fp32, calibration_samples, progress, run_time):
    """(graphs, their symbols' values, invalid sizes) of a bounded conversion: the graph at
    each sample size, quantized and with sparse kernels as asked; run_time: ONNX tensors
    kept as run-time nodes (shape programs). invalid: (values, feeds, onnxruntime's
    error) of the sample sizes the ONNX model itself cannot run."""
    from . import bounds as bounds_
    from .quant.pipeline import quantize_graph
    vals, graphs, invalid, ort_cache = [], [], [], {}
    for v in bounds_.sample_values(bounds):
        shapes = bounds_.concrete(input_shapes, bounds, v)
        try:
            graphs.append(build_graph(model, shapes, values, optimize, run_time=run_time))
            vals.append(v)
        except ConversionError as e:
            # A size the ONNX model itself cannot run (onnxruntime fails too) is no sample;
            # the runtime must refuse it (check_with_runtime). Else edgert cannot follow it.
            why = bounds_.model_fails_at(model, shapes, values, ort_cache)
            if why is not None and not graphs:
                raise ConversionError(f"bounded dimensions: the model cannot run at the upper bounds {v} (onnxruntime "
                                      f"fails too: {why}); give upper bounds it runs") from None
            if why is None:
                raise ConversionError(f"bounded dimensions: the model does not convert at sizes {v} within the "
                                      f"bounds: {e}") from None
            feeds = {k: a for k, a in bounds_.onnx_input_feeds(model, shapes, values).items() if k not in values}
            invalid.append((v, feeds, why))
    calibrated = None
    if quantize == "int8":
        # int8 global average pooling folds 1 / (spatial size) into its multiplier: it stays
        # float where that size follows the input size.
        keep_fp32 = set(keep_fp32 or ()) | {
            n.name for k, n in enumerate(graphs[0].nodes) if n.op == "global_avg_pool"
            and any(g.tensors[g.nodes[k].inputs[0]].shape != graphs[0].tensors[n.inputs[0]].shape for g in graphs)}
        calibrated = _calibrate_bounded(model, input_shapes, bounds, values, optimize, calibration,
                                        calibration_method, keep_fp32, calibration_samples, progress, run_time)
    summary = None
    for i, g in enumerate(graphs):
        if quantize is not None:
            g, summary = quantize_graph(g, quantize, calibration, calibration_method, keep_fp32,
                                        calibrated=calibrated, gemm_as_conv=False)
            graphs[i] = g
        if sparse:
            from . import sparse as sparse_
            sparse_.apply(g, kernels=sparse is True, storage=True)
    if summary is not None:
        graphs[0].metadata["quantization_summary"] = summary
    return graphs, vals, invalid


def _calibrate_bounded(model, input_shapes, bounds, values, optimize, calibration, method, keep_fp32, max_samples,
                       progress, run_time=frozenset()):
    """(qparams, means, samples) of int8 for a bounded conversion: the symbols take the
    sizes of the calibration data (every bounded input's samples must share them)."""
    from . import bounds as bounds_
    from .quant.calibrate import batches, load_calibration
    from .quant.pipeline import calibrate
    from .quant.prepare import prepare_for_int8
    if calibration is None:
        raise ConversionError("int8 quantization needs calibration data (--calibration DATA)")
    data = load_calibration(calibration)
    sizes: list[int | None] = [None] * len(bounds.symbols)
    for name, dim, sym in bounds.binds:
        if name not in data:
            raise ConversionError(f"calibration data lacks input {name!r}; it has {sorted(data)}")
        arr = np.asarray(data[name])
        rank = len(input_shapes[name])
        size = arr.shape[1 + dim] if arr.ndim == rank + 1 else arr.shape[dim] if arr.ndim == rank and dim > 0 else None
        s = bounds.symbols[sym]
        if size is None or not s.lo <= size <= s.hi or sizes[sym] not in (None, size):
            raise ConversionError(f"calibration data for {name!r} has shape {list(arr.shape)}: dimension {dim} must "
                                  f"be one size within {s.lo}..{s.hi}, shared by every input with {s.name!r}")
        sizes[sym] = size
    g = build_graph(model, bounds_.concrete(input_shapes, bounds, sizes), values, optimize, run_time=run_time)
    keep = set(keep_fp32 or ())
    prepare_for_int8(g, keep)
    feeds = batches(g, data, max_samples)
    qparams, means = calibrate(g, feeds, method, progress)
    return qparams, means, len(feeds)


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
