"""Quantized conversion end to end: int8 with calibration on the shipped digits CNN,
QDQ import of an onnxruntime-quantized model, fp16 and dynamic, mixed precision and
the SQNR report, the command line."""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import edgert
from edgert.runtime import reader as fmt

DATA = os.path.join(os.path.dirname(edgert.__file__), "data")
DIGITS = os.path.join(DATA, "digits_cnn.onnx")
CALIB = os.path.join(DATA, "digits_calib.npz")


def _digits_test():
    d = np.load(os.path.join(DATA, "digits_test.npz"))
    return d["input"], d["label"]


def _accuracy(data: bytes, x: np.ndarray, labels: np.ndarray) -> float:
    sess = edgert.Session(data)
    out = np.concatenate([sess.run(None, {"input": x[k:k + 1]})[0] for k in range(len(x))])
    return float((out.argmax(1) == labels).mean())


@pytest.fixture(scope="module")
def digits_int8():
    return edgert.convert(DIGITS, quantize="int8", calibration=CALIB)


def test_digits_int8_accuracy_and_ops(digits_int8):
    x, labels = _digits_test()
    fp32 = _accuracy(edgert.convert(DIGITS), x, labels)
    int8 = _accuracy(digits_int8, x, labels)
    assert int8 >= fp32 - 0.003
    info = fmt.read(digits_int8)
    ops = [n["op"] for n in info["nodes"]]
    assert ops.count("conv2d") == 3 and "quantize_linear" in ops and ops[-1] == "dequantize_linear"
    dtypes = {t["name"]: t["dtype"] for t in info["tensors"]}
    assert dtypes["input"] == "float32" and dtypes["logits"] == "float32"
    weights = [t for t in info["tensors"] if t["storage"] == "constant" and t["dtype"] == "int8"]
    assert sum(t["nbytes"] for t in weights) >= 14000
    assert len(digits_int8) < 0.33 * os.path.getsize(DIGITS)
    assert info["metadata"]["quantization"]["quantize"] == "int8"


@pytest.mark.parametrize("method", ["percentile", "entropy", "mse"])
def test_calibration_methods(method):
    x, labels = _digits_test()
    data = edgert.convert(DIGITS, quantize="int8", calibration=CALIB, calibration_method=method,
                          calibration_samples=64)
    assert _accuracy(data, x[:120], labels[:120]) >= 0.95


def test_calibration_sources(tmp_path):
    d = dict(np.load(CALIB))
    folder = tmp_path / "calib"
    folder.mkdir()
    np.savez(folder / "a.npz", input=d["input"][:10])
    np.savez(folder / "b.npz", input=d["input"][10:20])
    a = edgert.convert(DIGITS, quantize="int8", calibration=str(folder))
    b = edgert.convert(DIGITS, quantize="int8", calibration={"input": d["input"][:20]})
    assert a == b
    # a list of feed dicts (batches, as an onnxruntime calibration reader yields them)
    c = edgert.convert(DIGITS, quantize="int8", calibration=[{"input": d["input"][k:k + 5]} for k in (0, 5, 10, 15)])
    assert c == b
    with pytest.raises(edgert.ConversionError, match="list of feed dicts, not int"):
        edgert.convert(DIGITS, quantize="int8", calibration=3)
    with pytest.raises(edgert.ConversionError, match="different inputs"):
        edgert.convert(DIGITS, quantize="int8", calibration=[{"input": d["input"][:2]}, {"x": d["input"][:2]}])
    with pytest.raises(edgert.ConversionError):
        edgert.convert(DIGITS, quantize="int8", calibration={"other": d["input"]})
    with pytest.raises(edgert.ConversionError):
        edgert.convert(DIGITS, quantize="int8")


def test_report_keep_fp32_and_sqnr_target(tmp_path):
    report = tmp_path / "r.json"
    edgert.convert(DIGITS, quantize="int8", calibration=CALIB, calibration_samples=32, report=str(report))
    r = json.loads(report.read_text())
    assert r["outputs_sqnr_db"]["logits"] > 20
    assert all("sqnr_db" in v for v in r["tensors"].values()) and len(r["tensors"]) >= 6
    kept = edgert.convert(DIGITS, quantize="int8", calibration=CALIB, calibration_samples=32, keep_fp32=["/7/Conv"])
    ops = {n["name"]: n for n in fmt.read(kept)["nodes"]}
    tensors = fmt.read(kept)["tensors"]
    assert tensors[ops["/7/Conv"]["inputs"][0]]["dtype"] == "float32"
    target = edgert.convert(DIGITS, quantize="int8", calibration=CALIB, calibration_samples=32, sqnr_target=60.0)
    q = json.loads(json.dumps(fmt.read(target)["metadata"]["quantization"]))
    assert q["fp32_nodes"]  # 60 dB is out of reach for int8: layers were kept float


def test_fp16_and_dynamic():
    x, labels = _digits_test()
    fp32 = edgert.convert(DIGITS)
    ref = edgert.Session(fp32).run(None, {"input": x[:1]})[0]
    for mode, tol, size in (("fp16", 2e-2, 0.55 * len(fp32)), ("dynamic", 0.05, len(fp32) - 500)):
        data = edgert.convert(DIGITS, quantize=mode)
        got = edgert.Session(data).run(None, {"input": x[:1]})[0]
        assert np.abs(got - ref).max() <= tol * max(1.0, np.abs(ref).max()), mode
        assert len(data) < size, mode  # dynamic: only the gemm weights (10 x 32) are int8 here


def _small_model(rng):
    """conv -> relu -> conv (depthwise) -> add (skip) -> global pool -> gemm."""
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((8, 1, 3, 3)) * 0.3).astype(np.float32)
    wf = (rng.standard_normal((5, 8)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("GlobalAveragePool", ["s"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [numpy_helper.from_array(v, n) for n, v in
             (("w1", w1), ("b1", rng.standard_normal(8).astype(np.float32) * 0.1), ("w2", w2), ("wf", wf),
              ("bf", rng.standard_normal(5).astype(np.float32) * 0.1))]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 10, 10])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_qdq_import_matches_onnxruntime(tmp_path):
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(0)
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(_small_model(rng), src)
    calib = rng.standard_normal((16, 1, 3, 10, 10)).astype(np.float32)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"x": c} for c in calib)

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    data = edgert.convert(str(dst))
    ops = [n["op"] for n in fmt.read(data)["nodes"]]
    assert ops.count("conv2d") == 2 and "gemm" in ops
    assert all(t["dtype"] == "int8" for t in fmt.read(data)["tensors"] if t["name"] == "s")
    step = float(numpy_helper.to_array(next(i for i in onnx.load(dst).graph.initializer if i.name == "y_scale")))
    sess = edgert.Session(data)
    # onnxruntime without graph optimizations runs the model as written (its exact QDQ
    # meaning); optimized, it substitutes its own int8 kernels, which round differently
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    exact = ort.InferenceSession(str(dst), so, providers=["CPUExecutionProvider"])
    fused = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    # integer requantization and float rounding disagree only near half steps; such a
    # one-step difference inside the network can reach the output as two steps
    d_exact, d_fused = [], []
    for _ in range(40):
        x = rng.standard_normal((1, 3, 10, 10)).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        d_exact.append(np.abs(got - exact.run(None, {"x": x})[0]) / step)
        d_fused.append(np.abs(got - fused.run(None, {"x": x})[0]) / step)
    d_exact, d_fused = np.concatenate(d_exact).ravel(), np.concatenate(d_fused).ravel()
    assert d_exact.max() <= 2.001 and np.mean(d_exact <= 1.001) >= 0.99
    assert np.mean(d_fused <= 1.001) >= 0.97


def test_cli(tmp_path):
    from click.testing import CliRunner

    from edgert.cli.main import main

    out = tmp_path / "d.edgert"
    r = CliRunner().invoke(main, ["convert", DIGITS, "-o", str(out), "--quantize", "int8", "--calibration", CALIB,
                                  "--calibration-method", "percentile", "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    assert fmt.read(out.read_bytes())["metadata"]["quantization"]["calibration_method"] == "percentile"
    assert json.loads((tmp_path / "r.json").read_text())["outputs_sqnr_db"]["logits"] > 20
