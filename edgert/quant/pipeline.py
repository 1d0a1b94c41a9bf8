"""The converter's quantization step: `quantize_graph(g, mode, ...)` turns an optimized
float graph into its int8, fp16 or dynamic form and returns what it did."""
from __future__ import annotations

import json
import math
import os
from typing import Any

from ..errors import ConversionError
from ..ir import Graph
from . import METHODS, MODES
from .calibrate import batches, load_calibration, observe
from .prepare import prepare_for_int8
from .report import measure, worst_node
from .rewrite import ANCHORS, quantize_int8, qparams_from_ranges
from .tables import fold_into_tables
from .weights import to_dynamic, to_fp16

REPORT_SAMPLES = 64


def quantize_graph(g: Graph, mode: str, calibration: Any = None, method: str = "percentile", keep_fp32=(),
                   sqnr_target: float | None = None, report: str | os.PathLike | None = None,
                   progress: bool | None = None, max_samples: int | None = None, qdq=None,
                   merge_report: bool = False) -> tuple[Graph, dict]:
    """Returns (quantized graph, summary for the file's metadata).

    int8 needs `calibration` (see edgert.quant.calibrate.load_calibration) unless `qdq`
    (edgert.quant.qdq.QdqParams from an already-quantized model) gives the parameters.
    keep_fp32 names nodes (or their output tensors) that stay float; sqnr_target (dB)
    keeps further nodes float, worst first, until every graph output reaches it;
    report writes per-tensor SQNR as JSON (under "quantization" of the JSON already in
    that file when merge_report)."""
    if mode not in MODES:
        raise ConversionError(f"quantize must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "fp16":
        names = to_fp16(g)
        g.toposort()
        return g, {"quantize": "fp16", "fp16_tensors": len(names)}
    if mode == "dynamic":
        names = to_dynamic(g)
        g.toposort()
        return g, {"quantize": "dynamic", "int8_weights": len(names)}
    if method not in METHODS:
        raise ConversionError(f"calibration method must be one of {', '.join(METHODS)}, got {method!r}")
    keep = set(keep_fp32 or ())
    feeds = None
    means = None
    weights = biases = None
    if qdq is not None:
        qparams = dict(qdq.qparams)
        weights, biases = qdq.weights, qdq.biases
        summary: dict[str, Any] = {"quantize": "int8", "source": "qdq"}
    else:
        if calibration is None:
            raise ConversionError("int8 quantization needs calibration data (--calibration DATA)")
        prepare_for_int8(g, keep)
        feeds = batches(g, load_calibration(calibration), max_samples)
        means = {n.inputs[0]: None for n in g.nodes if n.op in ANCHORS and n.inputs}
        ranges = observe(g, feeds, method, progress, means=means)
        qparams = qparams_from_ranges(ranges)
        summary = {"quantize": "int8", "calibration_method": method, "calibration_samples": len(feeds)}
    res = quantize_int8(g, qparams, keep, weights, biases, qdq is not None, means)
    sq = None
    if sqnr_target is not None or report is not None:
        if feeds is None:
            if calibration is None:
                raise ConversionError("--sqnr-target and --report need calibration data")
            feeds = batches(g, load_calibration(calibration), max_samples)
        sample = feeds[:REPORT_SAMPLES]
        sq = measure(g, res, sample)
        if sqnr_target is not None:
            for _ in range(len(g.nodes)):
                if min(sq["outputs"].values(), default=math.inf) >= sqnr_target:
                    break
                cands = {n for n in res.int8_nodes if n not in keep}
                anchors = {n.name for n in g.nodes if n.name in cands and n.op in ANCHORS}
                name = worst_node(g, res, sq["tensors"], anchors or cands)
                if name is None:
                    break
                keep.add(name)
                res = quantize_int8(g, qparams, keep, weights, biases, qdq is not None, means)
                sq = measure(g, res, sample)
            summary["sqnr_target_db"] = sqnr_target
    summary["int8_nodes"] = len(res.int8_nodes)
    summary["fp32_nodes"] = sorted(keep)
    if report is not None:
        doc = {"mode": "int8", **summary, "samples": len(feeds[:REPORT_SAMPLES]) if feeds else 0,
               "outputs_sqnr_db": {k: _num(v) for k, v in sq["outputs"].items()},
               "tensors": {t: {"sqnr_db": _num(v), "scale": res.qparams[t][0], "zero_point": res.qparams[t][1]}
                           for t, v in sq["tensors"].items()}}
        if merge_report and os.path.exists(report):
            with open(report) as f:
                doc = {**json.load(f), "quantization": doc}
        with open(report, "w") as f:
            json.dump(doc, f, indent=2)
    if sq is not None:
        summary["outputs_sqnr_db"] = {k: _num(v) for k, v in sq["outputs"].items()}
    fold_into_tables(res.graph)  # same output bytes, fewer passes
    return res.graph, summary


def _num(v: float) -> float | None:
    """A JSON-safe rounded number (None for an infinite SQNR: no error at all)."""
    return round(v, 2) if math.isfinite(v) else None
