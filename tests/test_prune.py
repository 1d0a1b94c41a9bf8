"""Post-training pruning (edgert/converter/prune, docs/sparse.md): magnitude and channel
pruning on tiny graphs and the digits CNN, sensitivity choice, the report and the CLI."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
from onnx import helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.append(ROOT)  # an installed edgert comes first

import edgert  # noqa: E402
from edgert.converter import pipeline as converter  # noqa: E402
from edgert.runtime import reader as fmt  # noqa: E402
from edgert.converter.prune import channel, layers, magnitude, sensitivity  # noqa: E402
from tests.helpers import make_model, run_ort  # noqa: E402

DATA = os.path.join(os.path.dirname(edgert.__file__), "data")  # the installed package's
DIGITS = os.path.join(DATA, "digits_cnn.onnx")


def _digits_accuracy(data: bytes, limit: int = 120) -> float:
    d = np.load(os.path.join(DATA, "digits_test.npz"))
    s = edgert.Session(data)
    x, y = d["input"][:limit], d["label"][:limit]
    return float(np.mean([s.run(None, {"input": x[k:k + 1]})[0].argmax() == y[k] for k in range(len(x))]))


def test_prune_tensor_exact_count():
    w = np.arange(1, 101, dtype=np.float32).reshape(10, 10) * np.where(np.arange(100) % 2, 1, -1).reshape(10, 10)
    p = magnitude.prune_tensor(w, 0.3)
    assert np.count_nonzero(p) == 70
    assert np.all(np.abs(w[p == 0]) <= 30)


def test_magnitude_layer_scope_skips_first_and_last():
    g = converter.build_graph(DIGITS)
    names = [n.name for n in layers.prunable(g)]
    from edgert.converter.prune import prune_graph

    info = prune_graph(g, 0.5, "magnitude")
    assert set(info["excluded"]) == {names[0], names[-1]}
    for n in layers.prunable(g):
        w = g.const(n.inputs[1])
        zeros = 1 - np.count_nonzero(w) / w.size
        assert (abs(zeros - 0.5) < 0.01) if n.name in names[1:-1] else zeros < 0.01


def test_global_fractions_meet_target():
    g = converter.build_graph(DIGITS)
    names = [n.name for n in layers.prunable(g)][1:-1]
    fr = magnitude.global_fractions(g, names, 0.6)
    sizes = {n.name: g.const(n.inputs[1]).size for n in layers.prunable(g)}
    total = sum(sizes[k] * f for k, f in fr.items()) / sum(sizes[k] for k in names)
    assert abs(total - 0.6) < 0.01


def test_sensitivity_choose_prefers_cheap_layers():
    table = {"a": {0.0: 0.0, 0.5: 0.01, 0.75: 0.02}, "b": {0.0: 0.0, 0.5: 1.0, 0.75: 2.0}}
    assert sensitivity.choose(table, {"a": 100, "b": 100}, 0.35) == {"a": 0.75}
    got = sensitivity.choose(table, {"a": 100, "b": 100}, 0.6)
    assert got["a"] == 0.75 and got["b"] == 0.5


def _chain_model(rng, zero_channels=()):
    """conv3x3 -> relu -> depthwise -> relu -> conv1x1 -> relu -> pool -> flatten -> gemm."""
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b2 = rng.standard_normal(16).astype(np.float32)
    for c in zero_channels:
        w2[c], b2[c] = 0, -1.0  # a dead channel: relu(-1) = 0 everywhere
    dw = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    dwb = np.zeros(16, np.float32)
    w3 = rng.standard_normal((12, 16, 1, 1)).astype(np.float32)
    w4 = rng.standard_normal((12 * 4, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "dw", "dwb"], ["c3"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Conv", ["r3", "w3"], ["c4"]), helper.make_node("Relu", ["c4"], ["r4"]),
             helper.make_node("MaxPool", ["r4"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "w4"], ["y"])]
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    inits = dict(w1=w1, b1=b1, w2=w2, b2=b2, dw=dw, dwb=dwb, w3=w3, w4=w4)
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x}


def test_channel_removes_dead_channels_exactly():
    """Channels whose output is always 0 carry nothing: removing them (lowest L1 norm)
    through the depthwise conv, the 1x1 conv's inputs and on to the flatten must leave
    the output unchanged."""
    rng = np.random.default_rng(0)
    m, feeds = _chain_model(rng, zero_channels=(1, 5, 9, 14))
    g = converter.build_graph(m)
    conv2 = layers.prunable(g)[1]
    grp = channel.trace(g, conv2)
    assert grp is not None and [e.kind for e in grp.edits][0] == "producer_conv"
    assert "depthwise" in [e.kind for e in grp.edits] and "conv_in" in [e.kind for e in grp.edits]
    kept = channel.apply(g, {conv2.name: 0.25})
    assert kept[conv2.name] == (12, 16)
    y = edgert.Session(converter.serialize(g)).run(None, feeds)[0]
    np.testing.assert_allclose(y, run_ort(m, feeds)[0], rtol=1e-4, atol=1e-4)


def test_channel_follows_flatten_into_gemm():
    rng = np.random.default_rng(1)
    m, feeds = _chain_model(rng)
    g = converter.build_graph(m)
    conv4 = layers.prunable(g)[3]  # the 1x1 conv whose channels reach the flatten
    kept = channel.apply(g, {conv4.name: 0.5})
    assert kept[conv4.name] == (6, 12)
    gemm = layers.prunable(g)[-1]
    assert g.const(gemm.inputs[1]).shape[0] == 6 * 4
    edgert.Session(converter.serialize(g)).run(None, feeds)


def test_residual_add_left_unpruned():
    rng = np.random.default_rng(2)
    w1 = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Conv", ["a", "w2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    x = rng.standard_normal((1, 4, 2, 2)).astype(np.float32)
    g = converter.build_graph(make_model(nodes, {"x": x}, ["y"], {"w1": w1, "w2": w2}))
    assert channel.groups(g) == []


def test_channel_digits_macs_and_report(tmp_path):
    rep = tmp_path / "r.json"
    data = edgert.convert(DIGITS, prune=0.25, prune_method="channel", report=rep)
    r = json.loads(rep.read_text())
    assert r["before"]["macs"] >= 1.25 * r["after"]["macs"]
    assert r["after"]["file_bytes"] < r["before"]["file_bytes"]
    assert np.isfinite(r["sqnr_db"]) and r["sqnr_inputs"] == "random"
    assert _digits_accuracy(data) > 0.4  # no fine-tuning: the drop is reported, not hidden


def test_sensitivity_with_calibration(tmp_path):
    rep = tmp_path / "r.json"
    data = edgert.convert(DIGITS, prune=0.5, calibration=os.path.join(DATA, "digits_calib.npz"), report=rep)
    r = json.loads(rep.read_text())
    assert r["scope"] == "sensitivity" and r["sqnr_inputs"] == "calibration"
    nz0, nz1 = r["before"]["weights_nonzero"], r["after"]["weights_nonzero"]
    assert nz1 < nz0
    assert _digits_accuracy(data) >= _digits_accuracy(edgert.convert(DIGITS)) - 0.03


def test_channel_sensitivity_digits(tmp_path):
    rep = tmp_path / "r.json"
    data = edgert.convert(DIGITS, prune=0.25, prune_method="channel", report=rep,
                          calibration=os.path.join(DATA, "digits_calib.npz"))
    r = json.loads(rep.read_text())
    assert r["before"]["macs"] >= 1.25 * r["after"]["macs"]
    assert _digits_accuracy(data) >= 0.85  # uniform 25 % without calibration: ~0.67


def test_cli_convert_prune(tmp_path):
    from click.testing import CliRunner

    from edgert.cli.main import main

    out = tmp_path / "m.edgert"
    res = CliRunner().invoke(main, ["convert", DIGITS, "-o", str(out), "--prune", "0.5", "--prune-method",
                                    "magnitude", "--prune-exclude", "/7/Conv", "--report", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "SQNR" in res.output
    r = json.loads((tmp_path / "r.json").read_text())
    assert "/7/Conv" in r["excluded"] and list(r["layers"]) == ["/3/Conv"]
    assert fmt.read(out.read_bytes())["file_bytes"] == out.stat().st_size


def test_magnitude_50_with_int8():
    base = _digits_accuracy(edgert.convert(DIGITS), limit=360)
    data = edgert.convert(DIGITS, prune=0.5, quantize="int8", calibration=os.path.join(DATA, "digits_calib.npz"))
    assert _digits_accuracy(data, limit=360) >= base - 0.01
