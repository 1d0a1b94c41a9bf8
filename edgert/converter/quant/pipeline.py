"""The converter's quantization step: `quantize_graph(g, mode, ...)` turns an optimized
float graph into its int8, fp16 or dynamic form and returns what it did."""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ...errors import ConversionError
from ..ir import Graph
from . import METHODS, MODES, gemm_rows
from .calibrate import batches, load_calibration, observe
from .prepare import prepare_for_int8
from .report import measure, worst_node
from .rewrite import ANCHORS, PASSTHROUGH, quantize_int8, qparams_from_ranges
from .tables import fold_into_tables
from .weights import to_dynamic, to_fp16

REPORT_SAMPLES = 64


def calibrate(g: Graph, feeds: list, method: str, progress: bool | None = None) -> tuple[dict, dict]:
    """(qparams, means) of int8 from running the float graph `g` (after
    prepare_for_int8) on `feeds`; quantize_graph(calibrated=(qparams, means, count))
    applies them to the same graph converted at another size."""
    means = {n.inputs[0]: None for n in g.nodes if n.op in ANCHORS and n.inputs}
    ranges = observe(g, feeds, method, progress, means=means)
    share_weight_ranges(g, ranges, means)
    share_concat_ranges(g, ranges)
    return qparams_from_ranges(ranges), means


def quantize_graph(g: Graph, mode: str, calibration: Any = None, method: str = "percentile", keep_fp32=(),
                   sqnr_target: float | None = None, report: str | os.PathLike | None = None,
                   progress: bool | None = None, max_samples: int | None = None, qdq=None,
                   merge_report: bool = False, calibrated=None, gemm_as_conv: bool = True) -> tuple[Graph, dict]:
    """Returns (quantized graph, summary for the file's metadata).

    int8 needs `calibration` (see edgert.converter.quant.calibrate.load_calibration) unless `qdq`
    (edgert.converter.quant.qdq.QdqParams from an already-quantized model) gives the parameters.
    keep_fp32 names nodes (or their output tensors) that stay float; sqnr_target (dB)
    keeps further nodes float, worst first, until every graph output reaches it;
    report writes per-tensor SQNR as JSON (under "quantization" of the JSON already in
    that file when merge_report). gemm_as_conv: int8 gemms of many rows run as 1x1
    convolutions (edgert/converter/quant/gemm_rows.py); off for bounded sizes, whose one graph
    must not depend on the row count."""
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
    elif calibrated is not None:  # parameters calibrated on this graph at another size (bounded dims)
        prepare_for_int8(g, keep)
        qparams, means, count = calibrated
        summary = {"quantize": "int8", "calibration_method": method, "calibration_samples": count}
    else:
        if calibration is None:
            raise ConversionError("int8 quantization needs calibration data (--calibration DATA)")
        prepare_for_int8(g, keep)
        feeds = batches(g, load_calibration(calibration), max_samples)
        qparams, means = calibrate(g, feeds, method, progress)
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
    if gemm_as_conv:
        gemm_rows.run(res.graph)  # same output bytes, the tiled GEMM for many rows
    return res.graph, summary


def _num(v: float) -> float | None:
    """A JSON-safe rounded number (None for an infinite SQNR: no error at all)."""
    return round(v, 2) if math.isfinite(v) else None


def share_concat_ranges(g: Graph, ranges: dict) -> None:
    """A concat's inputs take its output's range (the int8 rule of TFLite's
    CONCATENATION), back through the data-movement ops before them, to the node that
    computes the values: that node then requantizes straight to the output's scale, and
    the int8 concat only copies (otherwise it requantizes every byte). Only for inputs
    that nothing else reads (nor the graph's outputs); the output's range covers the
    inputs' ranges, so this costs an input at most the resolution of the wider range."""
    consumers = g.consumers()
    producers = g.producers()
    outputs = set(g.outputs)
    for node in g.nodes:
        if node.op != "concat" or not node.outputs or node.outputs[0] not in ranges:
            continue
        y = node.outputs[0]
        for t in dict.fromkeys(node.inputs):  # each input once, in order
            reader = node
            while (t in ranges and t not in outputs and t in producers
                   and all(c is reader for c in consumers.get(t, []))):
                ranges[t] = ranges[y]
                p = producers[t]
                if (p.op not in PASSTHROUGH or len(p.outputs) != 1 or not p.inputs
                        or (p.op == "resize" and p.attrs.get("mode") != "nearest")):
                    break
                reader, t = p, p.inputs[0]


def share_weight_ranges(g: Graph, ranges: dict, means: dict) -> None:
    """Nodes that read one constant weight (an unrolled recurrence, Siamese towers) get
    one input range, one output range and one input mean (bias correction): their int8
    weights and requantization parameters are then equal, so the file stores them once.
    The union of the ranges covers every use, at a precision close to the per-use
    ranges since the uses see alike data."""
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        while parent.setdefault(t, t) != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    users: dict[str, list] = {}
    for n in g.nodes:
        if n.op in ANCHORS and len(n.inputs) > 1 and n.inputs[1] and g.tensors[n.inputs[1]].is_const:
            users.setdefault(n.inputs[1], []).append(n)
    for nodes in users.values():
        for pick in (lambda n: n.inputs[0], lambda n: n.outputs[0]):
            names = [pick(n) for n in nodes if pick(n) in ranges]
            for t in names[1:]:
                parent[find(t)] = find(names[0])
    sets: dict[str, list[str]] = {}
    for t in parent:
        sets.setdefault(find(t), []).append(t)
    for names in sets.values():
        if len(names) < 2:
            continue
        lo = min(float(ranges[t][0]) for t in names)
        hi = max(float(ranges[t][1]) for t in names)
        for t in names:
            ranges[t] = (lo, hi)
        ms = [means[t] for t in names if means.get(t) is not None]
        if len(ms) == len(names) and len({m.shape for m in ms}) == 1:
            avg = np.mean(np.stack(ms), axis=0)
            for t in names:
                means[t] = avg
