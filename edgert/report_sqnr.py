"""Error per layer for `edgert report --reference MODEL.onnx --calibration DATA`.

Three measurements on the same sample inputs (at most SAMPLES of the calibration set):
- edgert fp32 against onnxruntime, per layer: the reference imported and optimized as
  the converter does, run by the C runtime with every float tensor exposed, compared
  with onnxruntime's values of the tensors of the same name in the reference model;
- int8 against fp32, per layer (int8 files only): edgert.quant.report's SQNR, from
  quantizing the reference again with the file's recorded calibration method,
  calibration samples and float-kept nodes on DATA;
- the file's graph outputs against onnxruntime: the .edgert file itself run on the
  samples.
SQNR (dB) = 10 log10(sum ref^2 / sum (ref - x)^2) over all samples.
"""
from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from typing import Any

import numpy as np

SAMPLES = 32


def sqnr(sig: float, noise: float) -> float:
    if noise <= 0:
        return math.inf
    if sig <= 0:
        return -math.inf
    return 10.0 * math.log10(sig / noise)


class _Acc:
    def __init__(self) -> None:
        self.sig: dict[str, float] = {}
        self.noise: dict[str, float] = {}

    def add(self, key: str, ref: np.ndarray, got: np.ndarray) -> None:
        r = np.asarray(ref, np.float64)
        g = np.asarray(got, np.float64)
        if r.shape != g.shape:
            if r.size != g.size:
                return
            g = g.reshape(r.shape)
        self.sig[key] = self.sig.get(key, 0.0) + float(np.sum(r * r))
        self.noise[key] = self.noise.get(key, 0.0) + float(np.sum((r - g) ** 2))

    def result(self) -> dict[str, float]:
        return {k: sqnr(self.sig[k], self.noise[k]) for k in self.sig}


def _ort_session(reference: str, names: list[str]):
    """onnxruntime on the reference with `names` (node outputs that exist in it) added
    as graph outputs; returns (session, output names)."""
    import onnx
    import onnxruntime as ort

    m = onnx.load(reference)
    produced = {o for n in m.graph.node for o in n.output if o}
    have = {o.name for o in m.graph.output}
    extra = [n for n in names if n in produced and n not in have]
    for n in extra:
        m.graph.output.append(onnx.ValueInfoProto(name=n))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess, [o.name for o in sess.get_outputs()]


def per_layer(model: str, info: dict, reference: str, calibration: Any, samples: int = SAMPLES) -> dict:
    from .converter import build_graph
    from .quant.calibrate import batches, exposed_session, float_tensors, load_calibration
    from .runtime import Session

    meta = info.get("metadata") or {}
    qmeta = meta.get("quantization") if isinstance(meta.get("quantization"), dict) else {}
    shapes = {info["tensors"][i]["name"]: info["tensors"][i]["shape"] for i in info["inputs"]}
    data = load_calibration(calibration)
    g = build_graph(reference, {k: v for k, v in shapes.items()})
    feeds = batches(g, data, samples)
    int8 = qmeta.get("quantize") == "int8"

    # edgert fp32, every float tensor
    names = [t for t in float_tensors(g) if t not in g.inputs]
    fsess, fnames = exposed_session(g, names)
    osess, onames = _ort_session(os.fspath(reference), names)
    ort_inputs = {i.name for i in osess.get_inputs()}
    vs_ort = _Acc()
    for feed in feeds:
        fv = dict(zip(fnames, fsess.run(None, feed)))
        ov = dict(zip(onames, osess.run(None, {k: v for k, v in feed.items() if k in ort_inputs})))
        for t in names:
            if t in ov and t in fv:
                vs_ort.add(t, ov[t], fv[t])
    fsess.close()
    fp32_vs_ort = vs_ort.result()

    # the file's outputs against onnxruntime
    fsess = Session(model)
    out_acc = _Acc()
    file_outs = [o.name for o in fsess.get_outputs()]
    out_names = meta.get("output_names") or file_outs
    for feed in feeds:
        got = fsess.run(None, {k: v for k, v in feed.items() if k in {i.name for i in fsess.get_inputs()}})
        ov = dict(zip(onames, osess.run(None, {k: v for k, v in feed.items() if k in ort_inputs})))
        for name, fname, arr in zip(out_names, file_outs, got):
            if name in ov:
                out_acc.add(fname, ov[name], arr)
    fsess.close()

    int8_vs_fp32: dict[str, float] = {}
    if int8:
        from .quant.pipeline import quantize_graph

        h = copy.deepcopy(g)
        with tempfile.TemporaryDirectory() as tmp:
            rep = os.path.join(tmp, "q.json")
            quantize_graph(h, "int8", data, qmeta.get("calibration_method", "percentile"),
                           qmeta.get("fp32_nodes") or (), None, rep, None,
                           qmeta.get("calibration_samples"))
            with open(rep) as f:
                doc = json.load(f)
        for t, v in doc.get("tensors", {}).items():
            int8_vs_fp32[t] = math.inf if v.get("sqnr_db") is None else float(v["sqnr_db"])

    columns = []
    if int8:
        columns.append({"key": "int8_vs_fp32", "label": "int8 vs fp32"})
    columns.append({"key": "fp32_vs_ort", "label": "edgert fp32 vs onnxruntime"})
    rows = []
    for node in g.nodes:
        for t in node.outputs[:1]:
            r = {"node": node.name, "op": node.op, "tensor": t,
                 "fp32_vs_ort": fp32_vs_ort.get(t), "int8_vs_fp32": int8_vs_fp32.get(t)}
            if any(r[c["key"]] is not None for c in columns):
                rows.append(r)
    matched = sum(1 for r in rows if r["fp32_vs_ort"] is not None)
    note = (f"{len(feeds)} samples of the calibration data. Per layer: the reference imported and optimized "
            f"as by the converter, run in fp32 by edgert, against onnxruntime on tensors of the same name "
            f"({matched} of {len(g.nodes)} layers matched; fused layers keep the name of their last "
            f"ONNX output)")
    if int8:
        note += ("; int8 vs fp32: the converter's quantization report, recomputed by quantizing the reference "
                 f"again ({qmeta.get('calibration_method', 'percentile')} calibration, as recorded in the file)")
    note += ". Graph outputs of this file against onnxruntime: " + ", ".join(
        f"{k} {v:.1f} dB" if math.isfinite(v) else f"{k} exact" for k, v in out_acc.result().items()) + "."
    return {"columns": columns, "layers": rows, "note": note,
            "outputs_vs_ort_db": {k: (v if math.isfinite(v) else None) for k, v in out_acc.result().items()},
            "samples": len(feeds)}
