"""Bounded dimensions combined with the converter's other features (docs/runtime.md,
"Bounded dimensions"): pruning, int8 and fallback partitions are stages of the one
pipeline, applied alike at every sample size. Each file runs at >= 20 random sizes
within its bounds (odd, prime and both extremes included) against onnxruntime."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert.converter.prune import magnitude
from edgert.errors import ConversionError
from edgert.runtime import reader
from edgert.runtime import session as runtime

PRIMES = [p for p in range(2, 200) if all(p % d for d in range(2, int(p ** 0.5) + 1))]
H, W = (9, 61), (7, 53)  # bounds of the helper nets


def sizes(rng, hb=H, wb=W, n=24) -> list[tuple[int, int]]:
    """n (h, w) pairs within the bounds: every corner, odd and prime sizes, then random."""
    def prime(lo, hi):
        return int(rng.choice([p for p in PRIMES if lo <= p <= hi]))

    def odd(lo, hi):
        return min(int(rng.integers(lo, hi + 1)) | 1, hi - (hi % 2 == 0))

    out = [(hb[0], wb[0]), (hb[1], wb[1]), (hb[0], wb[1]), (hb[1], wb[0]), (prime(*hb), prime(*wb)),
           (odd(*hb), odd(*wb)), (prime(*hb), wb[1]), (hb[0], prime(*wb)), (odd(*hb), prime(*wb))]
    while len(out) < n:
        s = (int(rng.integers(hb[0], hb[1] + 1)), int(rng.integers(wb[0], wb[1] + 1)))
        if s not in out:
            out.append(s)
    return out


def against_ort(data: bytes, model: bytes, rng, rel: float = 1e-3, hb=H, wb=W) -> tuple[int, float]:
    """Runs the file and onnxruntime at sizes(); (sizes tried, largest relative error:
    max |diff| / max |reference| per output)."""
    sess = runtime.Session(data, max_contexts=1)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    worst, tried = 0.0, sizes(rng, hb, wb)
    for h, w in tried:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        for got, want in zip(sess.run(None, {"x": x}), ref.run(None, {"x": x})):
            assert got.shape == want.shape, (h, w)
            err = float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-12))
            assert err <= rel, f"at {h}x{w}: relative error {err:.2e}"
            worst = max(worst, err)
    print(f"{len(tried)} sizes, max relative error {worst:.2e}")
    return len(tried), worst


def _w(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def cnn(weights: dict[str, np.ndarray] | None = None, erf: bool = False) -> bytes:
    """x [1, 3, H, W] -> conv 3x3 (8) -> relu -> conv 3x3 stride 2 (16) -> relu -> conv 1x1 (16)
    -> relu [-> erf] -> conv 3x3 (4): the middle layers are what pruning may touch (the first
    and last weighted layers are always kept). weights replaces initializers by name."""
    rng = np.random.default_rng(7)
    inits = {"w1": _w(rng, "w1", (8, 3, 3, 3)), "b1": _w(rng, "b1", (8,)), "w2": _w(rng, "w2", (16, 8, 3, 3)),
             "b2": _w(rng, "b2", (16,)), "w3": _w(rng, "w3", (16, 16, 1, 1)), "b3": _w(rng, "b3", (16,)),
             "w4": _w(rng, "w4", (4, 16, 3, 3)), "b4": _w(rng, "b4", (4,))}
    for k, v in (weights or {}).items():
        inits[k] = numpy_helper.from_array(v.astype(np.float32), k)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2"),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3"),
             helper.make_node("Relu", ["c3"], ["r3"], name="relu3")]
    last = "r3"
    if erf:  # an op handed to the fallback runtime, between edgert nodes
        nodes += [helper.make_node("Erf", ["r3"], ["e"], name="erf"),
                  helper.make_node("Add", ["e", "r2"], ["s"], name="skip")]
        last = "s"
    nodes.append(helper.make_node("Conv", [last, "w4", "b4"], ["y"], pads=[1, 1, 1, 1], name="conv4"))
    g = helper.make_graph(nodes, "cnn", [x], [y], list(inits.values()))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _inits() -> dict[str, np.ndarray]:
    from onnx import load_from_string
    return {t.name: numpy_helper.to_array(t) for t in load_from_string(cnn()).graph.initializer}


BOUNDS = {"x": [1, 3, H, W]}


def test_bounds_with_magnitude_pruning():
    """Decided once, applied alike: the middle layers lose the same weights at every
    size, so the file equals the ONNX model with those weights zeroed, at any size."""
    data = edgert.convert(cnn(), None, input_shapes=BOUNDS, prune=0.7)
    w = _inits()
    pruned = cnn({k: magnitude.prune_tensor(w[k], 0.7) for k in ("w2", "w3")})
    assert reader.read(data)["bounds"] is not None
    n, worst = against_ort(data, pruned, np.random.default_rng(1))
    assert n >= 20


def test_bounds_with_channel_pruning():
    """Channel pruning removes the same channels at every size: equal to the ONNX model
    whose removed channels are zero (relu(0) = 0 feeds nothing to the next layer)."""
    data = edgert.convert(cnn(), None, input_shapes=BOUNDS, prune=0.5, prune_method="channel")
    w = _inits()
    keep2 = np.sort(np.argsort(-np.abs(w["w2"]).reshape(16, -1).sum(1), kind="stable")[:8])
    w3 = w["w3"][:, keep2]  # conv3's importance is measured after conv2's channels left it
    keep3 = np.sort(np.argsort(-np.abs(w3).reshape(16, -1).sum(1), kind="stable")[:8])
    zeroed = {}
    for name, bias, keep in (("w2", "b2", keep2), ("w3", "b3", keep3)):
        drop = np.setdiff1d(np.arange(16), keep)
        zeroed[name], zeroed[bias] = w[name].copy(), w[bias].copy()
        zeroed[name][drop] = 0
        zeroed[bias][drop] = 0
    layers = {n["name"]: n for n in reader.read(data)["nodes"]}
    assert "conv3" in layers
    n, worst = against_ort(data, cnn(zeroed), np.random.default_rng(2))
    assert n >= 20


def test_bounds_pruning_keeps_dense_kernels_where_the_size_varies():
    """The 1x1 layer is sparse enough for the sparse kernel, whose column count would
    follow the size: it keeps the dense kernel (with compressed weights) instead."""
    data = edgert.convert(cnn(), None, input_shapes=BOUNDS, prune=0.9)
    ops = [n["op"] for n in reader.read(data)["nodes"]]
    assert "spmm" not in ops
    static = edgert.convert(cnn(), None, input_shapes={"x": [1, 3, 61, 53]}, prune=0.9)
    assert "spmm" in [n["op"] for n in reader.read(static)["nodes"]]


def test_bounds_with_pruning_and_calibration(tmp_path):
    """With calibration data, pruning measures sensitivity on the graph at the data's size
    and the report is written; the file still runs at every size."""
    rng = np.random.default_rng(3)
    calib = {"x": rng.standard_normal((4, 3, 32, 32)).astype(np.float32)}
    report = tmp_path / "r.json"
    data = edgert.convert(cnn(), None, input_shapes=BOUNDS, prune=0.5, calibration=calib, report=str(report))
    assert report.exists()
    sess = runtime.Session(data, max_contexts=1)
    for h, w in sizes(rng)[:6]:
        assert sess.run(None, {"x": np.ones((1, 3, h, w), np.float32)})[0].shape == (1, 4, (h + 1) // 2, (w + 1) // 2)


def test_bounds_with_int8(tmp_path):
    """int8 through the one pipeline: calibrated once, at the calibration data's size; at
    that size bit-identical to the static int8 file, and every size runs close to
    onnxruntime's float result: int8 error, not 1e-3 (a static int8 file of this random
    net is off by up to 14% of the output's range at its own calibration size)."""
    rng = np.random.default_rng(4)
    calib = {"x": rng.standard_normal((8, 3, 32, 32)).astype(np.float32)}
    bounded = edgert.convert(cnn(), None, input_shapes=BOUNDS, quantize="int8", calibration=calib)
    static = edgert.convert(cnn(), None, input_shapes={"x": [1, 3, 32, 32]}, quantize="int8", calibration=calib)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_array_equal(runtime.Session(bounded).run(None, {"x": x})[0],
                                  runtime.Session(static).run(None, {"x": x})[0])
    n, worst = against_ort(bounded, cnn(), rng, rel=0.3)
    assert n >= 20


def test_bounds_with_onnxruntime_partition():
    """A partition (Erf, and the Add that joins it to the skip connection) between edgert
    nodes: its payload has symbolic dims, its output shapes follow the input size by the
    file's rules, and the backend gets the run's shapes."""
    model = cnn(erf=True)
    data = edgert.convert(model, None, input_shapes=BOUNDS, fallback="onnxruntime", fallback_ops=["Erf", "Add"])
    info = reader.read(data)
    (part,) = info["metadata"]["partitions"]
    assert part["ops"] == ["Erf", "Add"]
    n, worst = against_ort(data, model, np.random.default_rng(5))
    assert n >= 20


def test_bounds_with_partition_and_pruning_and_int8():
    """Every stage at once: pruning, int8 and a partition, at every size."""
    rng = np.random.default_rng(6)
    calib = {"x": rng.standard_normal((8, 3, 40, 40)).astype(np.float32)}
    data = edgert.convert(cnn(erf=True), None, input_shapes=BOUNDS, fallback="onnxruntime", fallback_ops=["Erf"],
                          prune=0.5, quantize="int8", calibration=calib)
    sess = runtime.Session(data, max_contexts=1)
    for h, w in sizes(rng)[:8]:
        assert sess.run(None, {"x": rng.standard_normal((1, 3, h, w)).astype(np.float32)})[0].shape == \
            (1, 4, (h + 1) // 2, (w + 1) // 2)


def test_partition_output_that_no_rule_follows_is_refused():
    """A partition whose output dim is no boundary input dim plus a constant (a stride-2
    pool inside it) cannot get its shape from the file's rules: refused, naming it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("Relu", ["p"], ["y"], name="relu")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ConversionError, match=r"partition_0 \(pool\): its output 'p' dim 2 follows the input size"):
        edgert.convert(model.SerializeToString(), None, input_shapes={"x": [1, 3, (8, 32), (8, 32)]},
                       fallback="onnxruntime", fallback_ops=["MaxPool"])


def test_bounds_with_litert_partition():
    """A LiteRT partition (the 1x1 layer): one .tflite written for the upper bounds, whose
    interpreter the backend resizes to each run's shapes."""
    pytest.importorskip("ai_edge_litert")
    model = cnn()
    data = edgert.convert(model, None, input_shapes=BOUNDS, fallback="litert", fallback_ops=["conv3"])
    (part,) = reader.read(data)["metadata"]["partitions"]
    assert part["backend"] == "litert" and part["nodes"] == ["conv3"]
    n, worst = against_ort(data, model, np.random.default_rng(8))
    assert n >= 20


def test_litert_partition_that_does_not_resize_is_refused():
    """A payload holding a shape of its own (a flatten's RESHAPE target) does not follow
    the input size: checked at every sample size and refused, naming the partition."""
    pytest.importorskip("ai_edge_litert")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], axis=1, name="flat"),
             helper.make_node("Sigmoid", ["f"], ["y"], name="sig")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ConversionError, match=r"partition_0 \(flat\): its LiteRT payload, written for the upper "
                                              r"bounds, does not follow the input size"):
        edgert.convert(model.SerializeToString(), None, input_shapes={"x": [1, 3, (8, 32), (8, 32)]},
                       fallback="litert", fallback_ops=["flat"])


def test_litert_strided_partition_output_is_refused():
    """A stride-2 layer in a LiteRT partition: its payload resizes (explicit pads, not
    SAME), but its output size is no boundary dim plus a constant."""
    pytest.importorskip("ai_edge_litert")
    with pytest.raises(ConversionError, match=r"partition_0 \(conv2, conv3\): its output 'r3' dim 2 follows"):
        edgert.convert(cnn(), None, input_shapes=BOUNDS, fallback="litert", fallback_ops=["conv2", "conv3"])


def test_convert_options_object_and_keywords(tmp_path):
    opts = edgert.ConvertOptions(input_shapes=BOUNDS, prune=0.7)
    a = edgert.convert(cnn(), None, opts)
    b = edgert.convert(cnn(), None, input_shapes=BOUNDS, prune=0.7)
    assert a == b
    c = edgert.convert(cnn(), None, opts, prune=None)  # a keyword overrides the object's field
    assert c == edgert.convert(cnn(), None, input_shapes=BOUNDS)
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'prune_metod'; valid options: .*prune_method"):
        edgert.convert(cnn(), None, prune_metod="channel")
    with pytest.raises(TypeError, match="must be an edgert.ConvertOptions"):
        edgert.convert(cnn(), None, {"x": [1, 3, 32, 32]})
    for bad, message in (({"sparse": "yes"}, "sparse must be one of"), ({"prune": 1.5}, r"--prune must be in \[0, 1\)"),
                         ({"prune_method": "l2"}, "--prune-method must be one of"),
                         ({"quantize": "int4"}, "quantize must be one of"),
                         ({"fallback": "tvm"}, "not one of off, onnxruntime, litert"),
                         ({"delegate": "edgetpu"}, "--delegate needs a fallback runtime"),
                         ({"max_partitions": 0}, "max_partitions must be a positive integer"),
                         ({"input_shapes": {"x": [1, "W"]}}, "must be an integer or a \\(LO, HI\\) pair")):
        with pytest.raises(ConversionError, match=message):
            edgert.ConvertOptions(**bad)
    with pytest.raises(dataclasses_frozen_error()):
        opts.prune = 0.1


def dataclasses_frozen_error():
    import dataclasses
    return dataclasses.FrozenInstanceError


def test_ppocr_rec_bounded_with_onnxruntime_partition(real_model):
    """The real recognizer, width 32..960, with its first attention softmax handed to
    onnxruntime (both of its last dims follow the width): 24 widths against onnxruntime."""
    src = real_model("ppocr_rec")
    data = edgert.convert(src, None, input_shapes={"x": [1, 3, 48, (32, 960)]}, fallback="onnxruntime",
                          fallback_ops=["p2o.Softmax.0"])
    (part,) = reader.read(data)["metadata"]["partitions"]
    assert part["ops"] == ["Softmax"]
    rng = np.random.default_rng(9)
    widths = [32, 960, 33, 959, 37, 953, 101, 499, 641, 127] + [int(v) for v in rng.integers(32, 961, 14)]
    sess = runtime.Session(data, max_contexts=1)
    ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    worst = 0.0
    for w in widths:
        x = rng.standard_normal((1, 3, 48, w)).astype(np.float32)
        got, want = sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]
        assert got.shape == want.shape, w
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
    print(f"{len(widths)} widths, max relative error {worst:.2e}")
    assert worst <= 1e-3


def test_cli_bounds_with_channel_pruning_and_partition(tmp_path):
    """`edgert convert` builds one ConvertOptions from its flags: bounds, channel
    pruning and an onnxruntime partition together."""
    from click.testing import CliRunner

    from edgert.cli.main import main

    src = tmp_path / "m.onnx"
    src.write_bytes(cnn(erf=True))
    out = tmp_path / "m.edgert"
    res = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), "--input-shape", "x=1,3,9..61,7..53",
                                    "--prune", "0.5", "--prune-method", "channel", "--fallback", "onnxruntime",
                                    "--fallback-ops", "Erf"])
    assert res.exit_code == 0, res.output
    sess = runtime.Session(str(out), max_contexts=1)
    assert sess.get_inputs()[0].bounds == [(1, 1), (3, 3), (9, 61), (7, 53)]
    assert sess.run(None, {"x": np.ones((1, 3, 13, 29), np.float32)})[0].shape == (1, 4, 7, 15)
