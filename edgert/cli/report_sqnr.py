"""Error per layer for `edgert report --reference MODEL.onnx --calibration DATA`.

Three measurements on the same sample inputs (at most SAMPLES of the calibration set):
- edgert fp32 against onnxruntime, per layer: the reference imported and optimized as
  the converter does, run by the C runtime with every float tensor exposed, compared
  with onnxruntime's values of the tensors of the same name in the reference model;
- int8 against fp32, per layer (int8 files only): edgert.converter.quant.report's SQNR, from
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

from ..converter.quant.report import sqnr

SAMPLES = 32


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


def per_layer(model: str, info: dict, reference: str, calibration: Any, samples: int = SAMPLES,
              progress: bool | None = None) -> dict:
    from ..converter.pipeline import build_graph
    from ..converter.quant.calibrate import batches, exposed_session, float_tensors, load_calibration
    from ..runtime.session import Session

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

    file_vs_ort = _file_layers(model, info, feeds, osess, onames, ort_inputs, progress)

    int8_vs_fp32: dict[str, float] = {}
    if int8:
        from ..converter.quant.pipeline import quantize_graph

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

    columns = [{"key": "file_vs_ort", "label": "file vs ort"}]
    if int8:
        columns.append({"key": "int8_vs_fp32", "label": "int8 vs fp32"})
    columns.append({"key": "fp32_vs_ort", "label": "fp32 vs ort"})
    rows = []
    seen = set()
    for node in info["nodes"]:  # the file's layers first, in its order
        t = info["tensors"][node["outputs"][0]]["name"] if node["outputs"] else ""
        if t in file_vs_ort:
            seen.add(t)
            rows.append({"node": node["name"], "op": node["op"], "tensor": t, "file_vs_ort": file_vs_ort[t],
                         "fp32_vs_ort": fp32_vs_ort.get(t), "int8_vs_fp32": int8_vs_fp32.get(t)})
    for node in g.nodes:
        for t in node.outputs[:1]:
            r = {"node": node.name, "op": node.op, "tensor": t, "file_vs_ort": None,
                 "fp32_vs_ort": fp32_vs_ort.get(t), "int8_vs_fp32": int8_vs_fp32.get(t)}
            if t not in seen and any(r[c["key"]] is not None for c in columns):
                rows.append(r)
    matched = sum(1 for r in rows if r["file_vs_ort"] is not None)
    note = (f"{len(feeds)} samples of the calibration data; ort = onnxruntime on the reference. "
            f"File vs ort: each layer's output read from the file itself (the prefix of the graph ending at "
            f"that layer, run by the runtime; int8 values dequantized) against onnxruntime's tensor of the "
            f"same name in the reference ({matched} of {len(info['nodes'])} layers matched; a fused layer "
            f"carries the name of its last ONNX output). fp32 vs ort: the reference imported and optimized as by the "
            f"converter, run in fp32 by edgert")
    if int8:
        note += ("; int8 vs fp32: the converter's quantization report, recomputed by quantizing the reference "
                 f"again ({qmeta.get('calibration_method', 'percentile')} calibration, as recorded in the file)")
    note += ". Graph outputs of this file against onnxruntime: " + ", ".join(
        f"{k} {v:.1f} dB" if math.isfinite(v) else f"{k} exact" for k, v in out_acc.result().items()) + "."
    return {"columns": columns, "layers": rows, "note": note,
            "outputs_vs_ort_db": {k: (v if math.isfinite(v) else None) for k, v in out_acc.result().items()},
            "samples": len(feeds)}


def _dequant(info: dict, raw: bytes, t: dict):
    """(scale, zero point) of a per-tensor quantized tensor, None when it has none or is
    quantized per channel."""
    if t["quant"] is None or "quant" not in info["sections"]:
        return None
    from .. import fileformat as fmt

    sec = info["sections"]["quant"]
    axis, count, so, zo, _ = fmt._QUANT.unpack_from(raw, sec["offset"] + t["quant"] * fmt.QUANT_SIZE)
    if count != 1:
        return None
    base = info["sections"]["constants"]["offset"]
    scale = float(np.frombuffer(raw, "<f4", 1, base + so)[0])
    zp = int(np.frombuffer(raw, "<i4", 1, base + zo)[0])
    return scale, zp


def _file_layers(model: str, info: dict, feeds: list, osess, onames: list[str], ort_inputs: set,
                 progress: bool | None = None) -> dict[str, float]:
    """SQNR of every layer output of the file whose name onnxruntime also computes."""
    from ..converter.progress import Progress
    from ..runtime.session import Session
    from .subgraph import prefix

    with open(model, "rb") as f:
        raw = f.read()
    ort_vals = [dict(zip(onames, osess.run(None, {k: v for k, v in feed.items() if k in ort_inputs})))
                for feed in feeds]
    acc = _Acc()
    bar = Progress("error per layer", len(info["nodes"]), progress)
    for k, node in enumerate(info["nodes"]):
        bar.update(k + 1)
        if not node["outputs"]:
            continue
        t = info["tensors"][node["outputs"][0]]
        if t["name"] not in onames or t["dtype"] not in ("float32", "int8", "uint8", "float16"):
            continue
        q = _dequant(info, raw, t) if t["dtype"] in ("int8", "uint8") else None
        if t["dtype"] in ("int8", "uint8") and q is None:
            continue
        sess = Session(prefix(raw, k))
        names = {i.name for i in sess.get_inputs()}
        for feed, ov in zip(feeds, ort_vals):
            (got,) = sess.run(None, {n: v for n, v in feed.items() if n in names})
            got = got.astype(np.float64)
            if q is not None:
                got = (got - q[1]) * q[0]
            acc.add(t["name"], ov[t["name"]], got)
        sess.close()
    bar.close()
    return acc.result()
