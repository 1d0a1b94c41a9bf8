"""Hostile ONNX given to the converter: every case ends in a ConversionError that says
what is wrong (naming the node when one is involved), quickly and without reading
outside the model's folder; the legitimate variants (external data inside the folder,
nodes listed out of order) still convert and match onnxruntime."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert

DIGITS = pathlib.Path(edgert.__file__).parent / "data" / "digits_cnn.onnx"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _x(shape=(1, 4)):
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))


def _y():
    return helper.make_empty_tensor_value_info("y")


def _convert_error(m, match, **kw) -> str:
    t = time.perf_counter()
    with pytest.raises(edgert.ConversionError, match=match) as e:
        edgert.convert(m.SerializeToString() if isinstance(m, onnx.ModelProto) else m, **kw)
    assert time.perf_counter() - t < 10, "refusals happen before any large allocation"
    return str(e.value)


def _run_both(path_or_model, feeds):
    data = edgert.convert(path_or_model)
    with edgert.Session(data) as s:
        got = s.run(None, feeds)
    src = str(path_or_model) if not isinstance(path_or_model, onnx.ModelProto) else path_or_model.SerializeToString()
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# ---- corrupt protobufs ---------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 10, 100, 1000, -7, -1])
def test_truncated_protobuf(tmp_path, cut):
    data = DIGITS.read_bytes()
    data = data[:cut] if cut > 0 else data[:len(data) + cut]
    p = tmp_path / "t.onnx"
    p.write_bytes(data)
    for src in (data, p):
        with pytest.raises(edgert.ConversionError) as e:
            edgert.convert(src)
        assert isinstance(e.value, edgert.ModelFormatError) or "tensor" in str(e.value) or "graph" in str(e.value)
        assert "DecodeError" not in type(e.value).__name__


def test_garbage_and_directory(tmp_path):
    with pytest.raises(edgert.OnnxFormatError, match="not an ONNX model"):
        edgert.convert(b"\xff" * 64)
    with pytest.raises(edgert.OnnxFormatError, match="not a regular file"):
        edgert.convert(tmp_path)


def test_invalid_utf8_names():
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_x()], [_y()])
    data = m.SerializeToString().replace(b"Relu", b"R\xffl\xfe")
    with pytest.raises(edgert.ConversionError, match="UTF-8"):
        edgert.convert(data)


# ---- graph structure -----------------------------------------------------------------

def test_cycle_names_the_nodes():
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="add_a"),
             helper.make_node("Relu", ["a"], ["c"], name="relu_c"),
             helper.make_node("Relu", ["a"], ["y"], name="out")]
    msg = _convert_error(_model(nodes, [_x()], [_y()]), "cycle")
    assert "'add_a'" in msg and "'relu_c'" in msg and "'out'" not in msg


def test_self_loop():
    nodes = [helper.make_node("Add", ["x", "y"], ["y"], name="loop")]
    _convert_error(_model(nodes, [_x()], [_y()]), "cycle: 'loop'")


def test_nodes_out_of_order_still_convert():
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"),
             helper.make_node("Neg", ["x"], ["a"], name="first")]
    m = _model(nodes, [_x()], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    _run_both(m, {"x": np.array([[-1, 2, -3, 4]], np.float32)})


def test_missing_input_names_the_node():
    nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="adder")]
    _convert_error(_model(nodes, [_x()], [_y()]), r"'adder' \(Add\) reads 'nowhere'")


def test_missing_required_input():
    nodes = [helper.make_node("Gather", ["x", ""], ["y"], name="g")]
    _convert_error(_model(nodes, [_x()], [_y()]), r"g \(Gather\): required input 1 \(indices\) is missing")


def test_duplicate_output_names():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="one"),
             helper.make_node("Neg", ["x"], ["y"], name="two")]
    _convert_error(_model(nodes, [_x()], [_y()]), "'two' .*'y' is also produced by node 'one'")
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="shadow")]
    _convert_error(_model(nodes, [_x()], [_y()]), "'shadow'.*also a graph input")


def test_empty_graph():
    _convert_error(_model([], [_x()], []), "no outputs|no graph")
    _convert_error(_model([helper.make_node("Relu", ["x"], ["y"])], [_x()], []), "no outputs")
    _convert_error(_model([], [_x()], [_y()]), "'y' is never produced")


def test_wrong_attribute_types():
    nodes = [helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=[1, 2])]
    _convert_error(_model(nodes, [_x()], [_y()]), r"flat \(Flatten\): attribute 'axis' has type INTS.*INT")
    nodes = [helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha="x")]
    _convert_error(_model(nodes, [_x()], [_y()]), r"lr \(LeakyRelu\): attribute 'alpha' has type STRING")
    nodes = [helper.make_node("Constant", [], ["y"], name="k")]
    _convert_error(_model(nodes, [_x()], [_y()]), r"k \(Constant\).*exactly one value")
    # The If branches are required attributes.
    c = numpy_helper.from_array(np.array(True), "c")
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch")]
    _convert_error(_model(nodes, [_x()], [_y()], [c]), r"branch \(If\): required attribute 'else_branch'")


def test_bad_initializers():
    ok = numpy_helper.from_array(np.ones(4, np.float32), "w")
    for dims, match in [([-4], "negative dimension"), ([2**40], "limit"), ([5], "needs 20 bytes.*holds 16"),
                        ([2**62, 2**62, 0], "limit")]:
        w = onnx.TensorProto()
        w.CopyFrom(ok)
        del w.dims[:]
        w.dims.extend(dims)
        nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
        _convert_error(_model(nodes, [_x()], [_y()], [w]), match)
    w = onnx.TensorProto()
    w.CopyFrom(ok)
    w.data_type = 1000
    _convert_error(_model([helper.make_node("Add", ["x", "w"], ["y"])], [_x()], [_y()], [w]),
                   "unsupported element type 1000")


def test_graph_input_dims():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    _convert_error(_model(nodes, [_x((65536, 65536))], [_y()]), r"'x' of shape \[65536, 65536\].*limit")
    _convert_error(_model(nodes, [_x((1, "n"))], [_y()]), "must be >= 0", input_shapes={"x": [1, -4]})
    _convert_error(_model(nodes, [_x((1, -4))], [_y()]), r"dimension\(s\) 1")
    _convert_error(_model(nodes, [_x((1, "n"))], [_y()]), "limit", input_shapes={"x": [1, 2**31]})


def test_zero_dims_are_valid():
    # Empty tensors are legal ONNX: they convert and run as in onnxruntime.
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    m = _model(nodes, [_x((0, 4))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, 4])])
    _run_both(m, {"x": np.zeros((0, 4), np.float32)})


def test_typed_data_count():
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    w.dims[0] = 5  # 4 values for 5 elements
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    _convert_error(_model(nodes, [_x()], [_y()], [w]), r"initializer 'w': shape \[5\] needs 5 values, the tensor holds 4")


def _qdq_conv(scale, zero_point, axis=0):
    """x -> Conv with DequantizeLinear(int8 weight [2, 1, 1, 1], scale, zero point)."""
    inits = [numpy_helper.from_array(np.array([3, -5], np.int8).reshape(2, 1, 1, 1), "wq"),
             numpy_helper.from_array(np.asarray(scale, np.float32), "ws"),
             numpy_helper.from_array(np.asarray(zero_point, np.int8), "wz")]
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dq_w", axis=axis),
             helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    return _model(nodes, [_x((1, 1, 4, 4))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
                  inits, opset=13)


def test_quantized_weights():
    m = _qdq_conv([0.5, 0.25], [0, 0])
    _run_both(m, {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)})
    _convert_error(_qdq_conv([0.5, 0.25, 1.0], [0, 0, 0]), r"dq_w \(DequantizeLinear\): 3 scales do not match axis 0")
    _convert_error(_qdq_conv([0.5, 0.25], [0, 0], axis=7), r"dq_w \(DequantizeLinear\): 2 scales do not match axis 7")
    _convert_error(_qdq_conv([0.5, 0.25], [0, 0, 0]), r"dq_w \(DequantizeLinear\): scale of shape \[2\] and zero point")


def test_nul_in_names():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r\0elu")]
    _convert_error(_model(nodes, [_x()], [_y()]), r"'r\\x00elu': name 'r\\x00elu' contains a NUL character")


def test_quantized_gemm_with_scales_beyond_fixed_point_stays_float(tmp_path):
    # A Gemm alpha of 1e30 makes the int8 requantization multiplier unrepresentable: the
    # node keeps its float form instead of failing.
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(0)
    calib = iter([{"input": rng.standard_normal((1, 1, 8, 8)).astype(np.float32)} for _ in range(4)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(calib, None)

    q = tmp_path / "q.onnx"
    quantize_static(str(DIGITS), str(q), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    m = onnx.load(str(q))
    gemm = next(n for n in m.graph.node if n.op_type == "Gemm")
    alpha = next(a for a in gemm.attribute if a.name == "alpha")
    alpha.f = 1e30
    from edgert.runtime import reader as fmt
    data = edgert.convert(m)
    nodes = fmt.read(data)["nodes"]
    assert any(n["op"] == "gemm" for n in nodes)


# ---- sizes that overflow -------------------------------------------------------------

HUGE = [2**31, 2**40, 2**63 - 1]


@pytest.mark.parametrize("big", HUGE)
def test_constant_of_shape_too_large(big):
    s = numpy_helper.from_array(np.array([big, 2], np.int64), "s")
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    _convert_error(_model(nodes, [_x()], [_y()], [s]), r"cos \(ConstantOfShape\).*limit of 2147483647")


def test_computed_constant_too_large():
    # 2**27 floats is within the tensor limit but 512 MiB: more than a computed constant may take.
    s = numpy_helper.from_array(np.array([2**27], np.int64), "s")
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")]
    _convert_error(_model(nodes, [_x()], [_y()], [s]), r"cos \(ConstantOfShape\).*268435456 for a constant it computes")


@pytest.mark.parametrize("op", ["Expand", "Tile", "Reshape"])
@pytest.mark.parametrize("big", HUGE)
@pytest.mark.parametrize("const_data", [False, True])
def test_shape_ops_too_large(op, big, const_data):
    vals = {"Expand": [big, 1, 4], "Tile": [big, 1], "Reshape": [big, -1]}[op]
    s = numpy_helper.from_array(np.array(vals, np.int64), "s")
    inits = [s]
    src = "x"
    if const_data:  # folded at conversion
        inits.append(numpy_helper.from_array(np.ones((1, 4), np.float32), "k"))
        src = "k"
    nodes = [helper.make_node(op, [src, "s"], ["t"], name="grow"), helper.make_node("Relu", ["t"], ["y"])]
    msg = _convert_error(_model(nodes, [_x()], [_y()], inits), rf"grow \({op}\)")
    assert "internal error" not in msg


@pytest.mark.parametrize("shape", [(0, 4), (0,)])
def test_tile_of_empty_tensor_with_huge_repeats(shape):
    # numpy's tile crashed the process on this (an empty input with overflowing repeats).
    k = numpy_helper.from_array(np.ones(shape, np.float32), "k")
    r = numpy_helper.from_array(np.array([2**62] * len(shape), np.int64), "r")
    nodes = [helper.make_node("Tile", ["k", "r"], ["t"], name="tile"), helper.make_node("Shape", ["t"], ["y"])]
    _convert_error(_model(nodes, [_x()], [_y()], [k, r]), r"tile \(Tile\).*limit")


@pytest.mark.parametrize("op", ["Upsample", "Resize"])
def test_resize_of_empty_tensor_with_huge_scales(op):
    # numpy's repeat (in onnx's reference Upsample) crashed the process on this.
    k = numpy_helper.from_array(np.ones((0, 2), np.float32), "k")
    sc = numpy_helper.from_array(np.array([24019, 4.6e18], np.float32), "sc")
    ins = ["k", "sc"] if op == "Upsample" else ["k", "", "sc"]
    nodes = [helper.make_node(op, ins, ["t"], name="up", mode="nearest"), helper.make_node("Shape", ["t"], ["y"])]
    _convert_error(_model(nodes, [_x()], [_y()], [k, sc], opset=9 if op == "Upsample" else 17), r"up \(" + op)


@pytest.mark.parametrize("start,limit,delta", [(0, 2**40, 1), (0.0, 1.0, 1e-30), (0, 10, 0), (0.0, np.inf, 1.0)])
def test_range_too_long(start, limit, delta):
    dt = np.float32 if isinstance(start, float) else np.int64
    inits = [numpy_helper.from_array(np.array(v, dt), n) for n, v in (("a", start), ("b", limit), ("d", delta))]
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["y"], name="rng")]
    _convert_error(_model(nodes, [_x()], [_y()], inits), r"rng \(Range\)")


def test_broadcast_of_constants_too_large():
    a = numpy_helper.from_array(np.ones((100000, 1), np.float32), "a")
    b = numpy_helper.from_array(np.ones((1, 100000), np.float32), "b")
    nodes = [helper.make_node("Mul", ["a", "b"], ["y"], name="outer")]
    _convert_error(_model(nodes, [_x()], [_y()], [a, b]), r"outer \(Mul\).*10000000000 elements")


def test_upsample_scales_for_another_rank():
    # The reference evaluation ran numpy's repeat for minutes on this one.
    k = numpy_helper.from_array(np.ones((2, 3, 4), np.float32), "k")
    sc = numpy_helper.from_array(np.array([24019, 4.6e18], np.float32), "sc")
    nodes = [helper.make_node("Upsample", ["k", "sc"], ["y"], name="up")]
    _convert_error(_model(nodes, [_x()], [_y()], [k, sc], opset=9), r"up \(Upsample\): 2 scales for (an input of rank 3|3 axes)")


def test_resize_too_large():
    sc = numpy_helper.from_array(np.array([1, 1, 1e6, 1e6], np.float32), "sc")
    nodes = [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up")]
    _convert_error(_model(nodes, [_x((1, 1, 8, 8))], [_y()], [sc]), r"up \(Resize\).*limit")


# ---- external data -------------------------------------------------------------------

def _external_copy(folder: pathlib.Path, location: str, data_file: pathlib.Path | None = None,
                   offset: int | None = None, length: int | None = None) -> pathlib.Path:
    """The digits CNN with its largest initializer moved to `location` (written to
    data_file, by default folder/location)."""
    m = onnx.load(str(DIGITS))
    t = max(m.graph.initializer, key=lambda t: len(t.raw_data))
    raw = t.raw_data
    target = data_file if data_file is not None else folder / location
    if data_file is None or not data_file.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\0" * (offset or 0) + raw)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    path = folder / "model.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def _digits_feeds():
    return {"input": np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)}


@pytest.mark.parametrize("location,offset", [("weights.bin", None), ("sub/dir/w.bin", None), ("w.bin", 64)])
def test_external_data_inside_the_folder(tmp_path, location, offset):
    path = _external_copy(tmp_path, location, offset=offset)
    _run_both(path, _digits_feeds())


def test_external_data_outside_the_folder(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(os.urandom(64 * 1024))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    cases = [(str(secret), "absolute path"), ("../secret.bin", r"contains '\.\.'"),
             ("sub/../../secret.bin", r"contains '\.\.'"), ("/dev/zero", "absolute path")]
    for location, match in cases:
        path = _external_copy(model_dir, location, data_file=secret)
        _convert_error(path, match)
    # A symbolic link inside the folder that leads out of it.
    os.symlink(secret, model_dir / "link.bin")
    _convert_error(_external_copy(model_dir, "link.bin", data_file=secret), "outside the model's folder")
    os.symlink(tmp_path, model_dir / "up")
    _convert_error(_external_copy(model_dir, "up/secret.bin", data_file=secret), "outside the model's folder")


def test_external_data_bad_ranges(tmp_path):
    path = _external_copy(tmp_path, "w.bin")
    size = (tmp_path / "w.bin").stat().st_size
    for offset, length, match in [(size + 1, None, "go past its end"), (0, size + 1, "go past its end"),
                                  (2**62, None, "go past its end"), (0, 2**62, "go past its end"),
                                  (-1, None, "negative"), (0, 16, "needs .* bytes of data")]:
        m = onnx.load(str(path), load_external_data=False)
        t = next(t for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL)
        del t.external_data[:]
        for k, v in (("location", "w.bin"), ("offset", offset), ("length", length)):
            if v is not None:
                e = t.external_data.add()
                e.key, e.value = k, str(v)
        path.write_bytes(m.SerializeToString())
        _convert_error(path, match)


def test_external_data_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    _convert_error(_external_copy(tmp_path, "fifo", data_file=tmp_path / "fifo"), "not a regular file")
    (tmp_path / "adir").mkdir()
    _convert_error(_external_copy(tmp_path, "adir", data_file=tmp_path / "adir"), "not a regular file")
    _convert_error(_external_copy(tmp_path, "missing.bin", data_file=tmp_path / "adir"), "cannot open")


def test_external_data_without_a_folder(tmp_path):
    path = _external_copy(tmp_path, "w.bin")
    _convert_error(path.read_bytes(), "convert the model from its path")
    _convert_error(onnx.load(str(path), load_external_data=False), "convert the model from its path")


# ---- the fuzzer ----------------------------------------------------------------------

def test_fuzz_converter_short(tmp_path):
    """A short run of tools/fuzz_converter.py: no finding (unexpected exception, hang,
    crash, or file opened outside the model's folder)."""
    seconds = os.environ.get("EDGERT_FUZZ_SECONDS", "20")
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "fuzz_converter.py"), "--seconds", seconds,
                        "--seed", os.environ.get("EDGERT_FUZZ_SEED", "0"), "--findings", str(tmp_path / "findings")],
                       capture_output=True, text=True, timeout=float(seconds) + 120)
    assert "executions:" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
