"""Weights read by many nodes are stored once (docs/format.md, "Shared constants"):
unrolled LSTM, tied embeddings and Siamese towers built with onnx.helper
(tools/shared_models.py), against onnxruntime, with file sizes and the constant
accounting of `edgert inspect`."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import edgert  # noqa: E402
from edgert.runtime import reader as fmt  # noqa: E402
from edgert.cli.main import constant_usage, main  # noqa: E402
from tests.helpers import make_model, run_ort  # noqa: E402
from tools import shared_models as sm  # noqa: E402

MODELS = {
    "lstm": lambda: sm.unrolled_lstm(steps=20, input_size=64, hidden=256),
    "tied_gemm": lambda: sm.tied_embedding(head="gemm"),
    "tied_transpose": lambda: sm.tied_embedding(head="transpose"),
    "siamese": lambda: sm.siamese(),
}


def _run(data: bytes, feeds):
    return edgert.Session(data, threads=1).run(None, feeds)


def _max_err(got, want) -> float:
    return max(float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) for g, w in zip(got, want))


def _usage(data: bytes) -> dict:
    return constant_usage(fmt.read(data))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fp32_matches_onnxruntime_and_stores_each_weight_once(name):
    model, feeds = MODELS[name]()
    onnx_bytes = len(model.SerializeToString())
    data = edgert.convert(model)
    assert _max_err(_run(data, feeds), run_ort(model, feeds)) <= 1e-4
    use = _usage(data)
    assert use["bytes_by_use"] > use["unique_bytes"]  # the weights are read by several nodes
    assert use["multiple_forms"] == []
    assert len(data) <= 1.05 * onnx_bytes, (len(data), onnx_bytes)


@pytest.mark.parametrize("head", ["gemm", "transpose"])
def test_tied_head_reads_the_embedding_itself(head):
    """Gemm(h, E, transB=1) and MatMul(h, Transpose(E)) read E with trans_b: no E^T copy."""
    model, _ = sm.tied_embedding(head=head)
    info = fmt.read(edgert.convert(model))
    consts = {t["name"]: t for t in info["tensors"] if t["storage"] == "constant"}
    assert [2000, 128] in [t["shape"] for t in consts.values()] and [128, 2000] not in [t["shape"] for t in consts.values()]
    (gemm,) = [n for n in info["nodes"] if n["op"] == "gemm"]
    assert info["tensors"][gemm["inputs"][1]]["name"] == "embed.weight" and gemm["params"][1] == 1  # trans_b


def test_unrolled_lstm_weights_are_one_blob_each():
    model, feeds = MODELS["lstm"]()
    info = fmt.read(edgert.convert(model))
    shapes = [tuple(t["shape"]) for t in info["tensors"] if t["storage"] == "constant"]
    # W_ih and W_hh of each direction (transposed once for the gemm kernel), not once per step.
    assert shapes.count((64, 1024)) == 2 and shapes.count((256, 1024)) == 2
    gemms = [n for n in info["nodes"] if n["op"] == "gemm"]
    # The 40 input projections as one gemm per direction (passes/batch_gemms.py), and the
    # 40 recurrent ones less the two on the zero initial state (folded to constants).
    assert len(gemms) == 2 + 38 and len({n["inputs"][1] for n in gemms}) == 4
    assert sum(n["name"].endswith("_batched") for n in gemms) == 2


def test_int8_shared_weights_are_stored_once():
    model, feeds = MODELS["lstm"]()
    onnx_bytes = len(model.SerializeToString())
    data = edgert.convert(model, quantize="int8", calibration=sm.calibration(feeds))
    info = fmt.read(data)
    # (the input projections, batched into one gemm per direction, run as a 1x1 conv2d)
    w = [t for t in info["tensors"] if t["storage"] == "constant" and t["dtype"] == "int8"
         and tuple(t["shape"]) in ((1024, 64, 1, 1), (1024, 256))]
    assert len(w) == 4 and len({t["offset"] for t in w}) == 4
    # One requantization table per weight: the steps share their activation ranges.
    qp = [t for t in info["tensors"] if t["storage"] == "constant" and tuple(t["shape"]) == (1024, 2)]
    assert len(qp) == 4
    want = run_ort(model, feeds)
    assert _max_err(_run(data, feeds), want) <= 0.1 * float(np.max(np.abs(want[0])))
    # 4 int8 bytes per float weight plus per-step lookup tables and records; at this
    # size (2.7 MB of ONNX) the graph records are ~6 % of it (tools/bench_shared.py
    # measures the CRNN-sized model).
    assert len(data) <= 0.36 * onnx_bytes, (len(data), onnx_bytes)


def test_siamese_int8_towers_share_weights():
    model, feeds = MODELS["siamese"]()
    data = edgert.convert(model, quantize="int8", calibration=sm.calibration(feeds))
    use = _usage(data)
    # every conv weight read by both towers; the towers' gemms on the same weight became
    # one gemm over both rows (passes/batch_gemms.py), so its weight and bias are read once
    info = fmt.read(data)
    gemms = [n for n in info["nodes"] if n["op"] == "gemm"]
    assert len(gemms) == 1
    w_bytes = sum(info["tensors"][i]["nbytes"] for i in gemms[0]["inputs"][1:])  # weight and bias
    assert use["bytes_by_use"] == 2 * use["unique_bytes"] - w_bytes
    assert len(data) <= 0.27 * len(model.SerializeToString())


def test_sparse_shared_weights_are_stored_once():
    model, feeds = MODELS["lstm"]()
    data = edgert.convert(model, prune=0.9)
    info = fmt.read(data)
    sp = [t for t in info["tensors"] if t["storage"] == "sparse" and t["shape"][-1] == 1024]
    # the forward input projection, batched into one gemm (passes/batch_gemms.py) that
    # reads the model input first, is left dense by prune; the other three weights pruned
    assert len(sp) == 3
    assert len({(t["sparse"]["bitmap_offset"], t["sparse"]["values_offset"]) for t in sp}) == 3
    use = _usage(data)
    assert use["bytes_by_use"] >= 20 * use["unique_bytes"] // 2
    assert len(data) <= 0.3 * len(model.SerializeToString())
    ref = edgert.convert(model, prune=0.9, sparse=False)
    np.testing.assert_allclose(_run(data, feeds)[0], _run(ref, feeds)[0], atol=1e-5)


def test_tensors_of_different_shapes_share_equal_bytes():
    """The writer shares one CONSTANTS range between two tensors with equal bytes (here
    [1, 6] and [6]); the C loader accepts it and both read the same values."""
    c = np.arange(1, 7, dtype=np.float32) / 7
    from onnx import helper
    nodes = [helper.make_node("Add", ["x", "c1"], ["y0"]), helper.make_node("Mul", ["y0", "c2"], ["y"])]
    model = make_model(nodes, {"x": np.zeros((2, 6), np.float32)}, ["y"], {"c1": c.reshape(1, 6), "c2": c})
    data = edgert.convert(model)
    consts = [t for t in fmt.read(data)["tensors"] if t["storage"] == "constant"]
    assert len(consts) == 2 and consts[0]["offset"] == consts[1]["offset"]
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(data, {"x": x})[0], (x + c) * c, rtol=1e-6)


def test_inspect_reports_unique_bytes_and_multiple_forms(tmp_path):
    """int8 tied embedding: the Gather reads float E, the output gemm its int8 form (a 1x1
    convolution's weights: the gemm has more than gemm_rows.ROWS rows, edgert/converter/quant/gemm_rows.py)."""
    model, feeds = MODELS["tied_transpose"]()
    path = tmp_path / "tied.edgert"
    edgert.convert(model, path, quantize="int8", calibration=sm.calibration(feeds))
    r = CliRunner().invoke(main, ["inspect", "--json", str(path)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    c = d["constants"]
    assert c["unique_bytes"] == d["weights_bytes"] and c["bytes_by_use"] > c["unique_bytes"]
    (m,) = c["multiple_forms"]
    assert m["source"] == "embed.weight" and m["bytes"] == 2000 * 128 * 5
    assert sorted((f["dtype"], tuple(f["shape"]), f["bytes"]) for f in m["forms"]) == [
        ("float32", (2000, 128), 2000 * 128 * 4), ("int8", (2000, 128, 1, 1), 2000 * 128)]
    r = CliRunner().invoke(main, ["inspect", str(path)])
    assert r.exit_code == 0 and "embed.weight is stored in 2 forms (1,280,000 bytes)" in r.output


def test_inspect_counts_uses_of_the_unrolled_lstm(tmp_path):
    model, _ = MODELS["lstm"]()
    path = tmp_path / "lstm.edgert"
    edgert.convert(model, path)
    c = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(path)]).output)["constants"]
    w = 4 * 1024 * (64 + 256) * 2  # W_ih and W_hh, both directions
    assert w <= c["unique_bytes"] <= w + 64 * 1024  # plus biases, states, output layer
    # W_hh read by 19 steps (the first product folded), W_ih once: the 20 input projections
    # of a direction are one gemm (passes/batch_gemms.py)
    assert c["bytes_by_use"] >= 2 * 4 * 1024 * (64 + 19 * 256)
    assert c["multiple_forms"] == []
