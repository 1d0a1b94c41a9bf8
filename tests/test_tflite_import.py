"""`edgert convert model.tflite` (docs/tflite.md): real MediaPipe models and random float
models against LiteRT, the TFLite signature kept at the boundary, and hostile files
refused with a ConversionError."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import edgert
from edgert.errors import ConversionError

Interpreter = pytest.importorskip("ai_edge_litert.interpreter").Interpreter


def _litert(model: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in it.get_output_details()}


def _check_against_litert(model: bytes, feeds: dict[str, np.ndarray], rtol: float = 1e-3) -> bytes:
    data = edgert.convert(model)
    sess = edgert.Session(data)
    it = Interpreter(model_content=model)
    want_in = [(d["name"], list(d["shape"]), np.dtype(d["dtype"])) for d in it.get_input_details()]
    assert [(i.name, list(i.shape), np.dtype(i.dtype)) for i in sess.get_inputs()] == want_in
    ref = _litert(model, feeds)
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    assert list(got) == list(ref)
    for k, r in ref.items():
        assert got[k].shape == r.shape, k
        err = float(np.max(np.abs(got[k] - r))) / max(float(np.max(np.abs(r))), 1e-6)
        assert err <= rtol, (k, err)
    return data


@pytest.mark.parametrize("name", ["mp_face_detection", "mp_face_detection_full", "mp_face_landmark"])
def test_mediapipe_models_match_litert(real_model, name):
    from tools import models
    model = real_model(name).read_bytes()
    for seed in range(2):
        _check_against_litert(model, models.example_inputs(name, seed))


def test_mediapipe_face_detection_transposes(real_model):
    """Layout changes stay at the edges: the input's, and one per reshape branch."""
    from edgert.converter.pipeline import build_graph
    from edgert.converter.frontend.tflite_import import load_tflite
    g = build_graph(load_tflite(real_model("mp_face_detection")))
    assert g.op_counts().get("transpose", 0) <= 5
    assert g.op_counts()["conv2d"] > 30


# ---- random float models written by edgert's own TFLite writer ----------------------

def _random_graph(seed: int):
    """A random NCHW float32 IR graph of convolutions, pools and element-wise ops."""
    from edgert.converter.ir import Graph
    from edgert.converter.ops import registry
    rng = np.random.default_rng(seed)
    g = Graph()
    c, h, w = int(rng.integers(1, 6)), int(rng.integers(6, 20)), int(rng.integers(6, 20))
    g.add_tensor("x", (1, c, h, w), np.float32)
    g.inputs.append("x")
    cur = "x"

    def emit(op, ins, attrs):
        out = g.unique_name(op)
        node = g.add_node(op, ins, [out], attrs)
        ((shape, dt),) = registry.get(op).infer(node, g)
        g.add_tensor(out, shape, dt)
        return out

    for _ in range(int(rng.integers(3, 8))):
        kind = rng.choice(["conv", "dwconv", "maxpool", "avgpool", "add", "act", "pad", "concat", "prelu",
                           "resize", "deconv", "softmax"])
        if kind in ("resize", "deconv") and g.tensors[cur].numel > 4000:
            kind = "act"
        c, h, w = g.tensors[cur].shape[1:]
        if kind in ("conv", "dwconv"):
            k = int(rng.choice([k for k in (1, 3, 5) if k <= min(h, w)]))
            s = int(rng.integers(1, 3))
            m = c if kind == "dwconv" else int(rng.integers(1, 9))
            cg = 1 if kind == "dwconv" else c
            wt = g.add_const(rng.standard_normal((m, cg, k, k)).astype(np.float32) * 0.4, "w")
            b = g.add_const(rng.standard_normal(m).astype(np.float32) * 0.1, "b")
            p = (k - 1) // 2 if rng.random() < 0.6 else 0
            act = [{}, {"act": "relu"}, {"act": "clip", "act_a": 0.0, "act_b": 6.0},
                   {"act": "clip", "act_a": -1.0, "act_b": 1.0}][int(rng.integers(0, 4))]
            cur = emit("conv2d", [cur, wt, b], {"group": c if kind == "dwconv" else 1, "kernel": [k, k],
                                               "strides": [s, s], "dilations": [1, 1], "pads": [p, p, p, p],
                                               **act})
        elif kind in ("maxpool", "avgpool") and min(h, w) >= 3:
            cur = emit("max_pool2d" if kind == "maxpool" else "avg_pool2d", [cur],
                       {"kernel": [2, 2], "strides": [2, 2], "dilations": [1, 1], "pads": [0, 0, 0, 0],
                        "ceil_mode": False, "count_include_pad": False})
        elif kind == "add":
            other = g.add_const(rng.standard_normal((1, c, 1, 1)).astype(np.float32), "bias")
            cur = emit(str(rng.choice(["add", "mul", "sub"])), [cur, other], {})
        elif kind == "act":
            op = str(rng.choice(["relu", "sigmoid", "tanh", "hard_swish"]))
            cur = emit(op, [cur], {})
        elif kind == "pad":
            cur = emit("pad", [cur], {"pads": [0, 0, 1, 2, 0, 0, 1, 0], "mode": "constant", "value": 0.0})
        elif kind == "concat":
            cur = emit("concat", [cur, emit("relu", [cur], {})], {"axis": 1})
        elif kind == "prelu":
            slope = g.add_const(rng.uniform(0, 0.5, (1, c, 1, 1)).astype(np.float32), "slope")
            cur = emit("prelu", [cur, slope], {})
        elif kind == "resize":
            coord = str(rng.choice(["half_pixel", "align_corners", "asymmetric"]))
            cur = emit("resize", [cur], {"mode": "linear", "coord": coord, "scales": [1.0, 1.0, 2.0, 2.0],
                                         "shape": [1, c, 2 * h, 2 * w]})
        elif kind == "deconv":
            m = int(rng.integers(1, 6))
            wt = g.add_const(rng.standard_normal((c, m, 2, 2)).astype(np.float32) * 0.4, "wt")
            b = g.add_const(rng.standard_normal(m).astype(np.float32) * 0.1, "bt")
            cur = emit("conv_transpose2d", [cur, wt, b], {"group": 1, "kernel": [2, 2], "strides": [2, 2],
                                                          "dilations": [1, 1], "pads": [0, 0, 0, 0],
                                                          "output_padding": [0, 0]})
        elif kind == "softmax":
            cur = emit("softmax", [cur], {"axis": 1})
    if rng.random() < 0.5:  # a classifier head: mean over space, fully connected, softmax
        c = g.tensors[cur].shape[1]
        cur = emit("reduce_mean", [cur], {"axes": [2, 3], "keepdims": True})
        cur = emit("reshape", [cur], {"shape": [1, c]})
        k = int(rng.integers(2, 10))
        wt = g.add_const(rng.standard_normal((c, k)).astype(np.float32) * 0.4, "fc")
        cur = emit("gemm", [cur, wt], {})
        cur = emit("softmax", [cur], {"axis": 1})
    g.outputs.append(cur)
    return g


@pytest.mark.parametrize("seed", range(24))
def test_random_models_match_litert(seed):
    from edgert.converter.tflite.writer import write_tflite
    g = _random_graph(seed)
    model = write_tflite(g)
    rng = np.random.default_rng(100 + seed)
    feeds = {"x": rng.standard_normal(g.tensors["x"].shape).astype(np.float32)}
    data = _check_against_litert(model, feeds)
    # the writer's NCHW<->NHWC edges cancel against edgert's NCHW interior: no transpose left
    from edgert.runtime import reader
    ops = [n["op"] for n in reader.read(data)["nodes"]]
    assert "transpose" not in ops


# ---- refusals -----------------------------------------------------------------------

def _tiny() -> bytes:
    from edgert.converter.ir import Graph
    from edgert.converter.ops import registry
    from edgert.converter.tflite.writer import write_tflite
    g = Graph()
    g.add_tensor("x", (1, 2, 4, 4), np.float32)
    g.inputs.append("x")
    w = g.add_const(np.ones((3, 2, 3, 3), np.float32), "w")
    node = g.add_node("conv2d", ["x", w], ["y"], {"group": 1, "kernel": [3, 3], "strides": [1, 1],
                                                  "dilations": [1, 1], "pads": [1, 1, 1, 1]})
    ((shape, dt),) = registry.get("conv2d").infer(node, g)
    g.add_tensor("y", shape, dt)
    g.outputs.append("y")
    return write_tflite(g)


def test_tiny_model_converts():
    edgert.Session(edgert.convert(_tiny()))


@pytest.mark.parametrize("cut", [8, 16, 40, 100, 200, -64, -1])
def test_truncated_files_refused(cut):
    data = _tiny()
    with pytest.raises(ConversionError, match="tflite"):
        edgert.convert(data[:cut] if cut > 0 else data[:len(data) + cut])


def test_bad_root_offset_refused():
    data = bytearray(_tiny())
    struct.pack_into("<I", data, 0, len(data) + 1000)
    with pytest.raises(ConversionError, match="outside the file"):
        edgert.convert(bytes(data))


def _import_or_refuse(data: bytes) -> None:
    """The importer itself (edgert.convert wraps unexpected exceptions in a
    ConversionError, which would hide them): a graph, or a ConversionError."""
    from edgert.converter.frontend.tflite_import import import_tflite
    try:
        import_tflite(data)
    except ConversionError:
        pass


def test_corrupted_files_give_clear_errors():
    """Every 32-bit word overwritten with a hostile value: a ConversionError or a graph,
    never another exception (IndexError, struct.error, ...)."""
    data = _tiny()
    rng = np.random.default_rng(0)
    for pos in range(0, len(data) - 4, 4):
        for value in rng.choice([0xFFFFFFFF, 0x7FFFFFFF, len(data), 3, 0x80000000, 0xFFFF], 2):
            bad = bytearray(data)
            struct.pack_into("<I", bad, pos, int(value))
            _import_or_refuse(bytes(bad))


def test_corrupted_real_model(real_model):
    """Random words and bytes of a real model overwritten: a graph or a ConversionError."""
    data = real_model("mp_face_detection").read_bytes()
    rng = np.random.default_rng(1)
    for _ in range(150):
        bad = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, (len(data) - 4) // 4)) * 4
            struct.pack_into("<I", bad, pos, int(rng.choice([0xFFFFFFFF, 0x7FFFFFF0, 1 << 20, 7, 0])))
        _import_or_refuse(bytes(bad))
    for cut in rng.integers(8, len(data), 20):
        with pytest.raises(ConversionError):
            from edgert.converter.frontend.tflite_import import import_tflite
            import_tflite(data[:int(cut)])


def test_absurd_shapes_refused():
    from edgert.converter.tflite import schema as S
    for shape in [(1 << 20, 1 << 20, 1 << 10), (2**31 - 1, 3)]:
        tensors = [S.TensorDef(shape, 0, 0, "a"), S.TensorDef(shape, 0, 0, "b")]
        model = S.serialize([S.RELU], tensors, [S.OperatorDef(0, [0], [1])], [0], [1], [b""])
        with pytest.raises(ConversionError, match="limit|elements"):
            _import_strict(model)
    # a constant whose buffer does not hold its shape
    tensors = [S.TensorDef((1, 4), 0, 0, "a"), S.TensorDef((1000, 4), 0, 1, "w"), S.TensorDef((1, 4), 0, 0, "y")]
    model = S.serialize([S.ADD], tensors, [S.OperatorDef(0, [0, 1], [2])], [0], [2], [b"", b"\0" * 16])
    with pytest.raises(ConversionError, match="buffer of 16 bytes"):
        _import_strict(model)


def test_operator_reading_its_own_output_refused():
    """A cycle through one operator: its input is never computed before it."""
    from edgert.converter.tflite import schema as S
    tensors = [S.TensorDef((1, 4), 0, 0, "a"), S.TensorDef((1, 4), 0, 0, "b")]
    model = S.serialize([S.ADD], tensors, [S.OperatorDef(0, [0, 1], [1])], [0], [1], [b""])
    with pytest.raises(ConversionError, match="read before it is computed"):
        _import_strict(model)


def _import_strict(data: bytes):
    from edgert.converter.frontend.tflite_import import import_tflite
    return import_tflite(data)


def test_buffer_out_of_range_refused():
    from edgert.converter.tflite import reader
    m = reader.read_model(_tiny())
    # find the tensor's buffer index field by value and point it past the buffers
    data = bytearray(_tiny())
    n = len(m.buffers)
    w = next(t for t in m.subgraphs[0].tensors if t.buffer > 0)
    hits = [p for p in range(0, len(data) - 4, 4) if struct.unpack_from("<I", data, p)[0] == w.buffer]
    refused = 0
    for p in hits:
        bad = bytearray(data)
        struct.pack_into("<I", bad, p, n + 5)
        try:
            reader.read_model(bytes(bad))
        except ConversionError as e:
            refused += "buffer" in str(e)
    assert refused >= 1


def test_unsupported_ops_listed_together():
    """Every unsupported operator is named with its output tensors, in one error."""
    from edgert.converter.tflite import schema as S
    tensors = [S.TensorDef((1, 4), 0, 0, "a"), S.TensorDef((1, 4), 0, 0, "b"), S.TensorDef((1, 4), 0, 0, "c")]
    ops = [S.OperatorDef(0, [0], [1]), S.OperatorDef(1, [1], [2])]
    model = S.serialize([8, 11], tensors, ops, [0], [2], [b""])  # FLOOR, L2_NORMALIZATION
    with pytest.raises(ConversionError) as e:
        edgert.convert(model)
    msg = str(e.value)
    assert "FLOOR" in msg and "'b'" in msg and "L2_NORMALIZATION" in msg and "'c'" in msg


def test_not_tflite_is_onnx_error():
    with pytest.raises(Exception, match="ONNX|onnx"):
        edgert.convert(b"\x00" * 64)


# ---- MediaPipe's Convolution2DTransposeBias ------------------------------------------

def _deconv_model(custom: bool, x_shape, w, bias, padding: str, stride: tuple[int, int]) -> bytes:
    """y = transposed convolution of input x by w [O, kH, kW, I] plus bias: TFLite's
    TRANSPOSE_CONV (custom False) or MediaPipe's custom op (custom True)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as fb
    n, h, wd, c = x_shape
    o, kh, kw, _ = w.shape
    sh, sw = stride
    if padding == "same":
        oh, ow = h * sh, wd * sw
    else:
        oh, ow = (h - 1) * sh + kh, (wd - 1) * sw + kw
    m = fb.ModelT()
    m.version = 3
    code = fb.OperatorCodeT()
    code.version = 1
    if custom:
        code.builtinCode = code.deprecatedBuiltinCode = fb.BuiltinOperator.CUSTOM
        code.customCode = "Convolution2DTransposeBias"
    else:
        code.builtinCode = code.deprecatedBuiltinCode = fb.BuiltinOperator.TRANSPOSE_CONV
    m.operatorCodes = [code]
    m.buffers = [fb.BufferT()]
    tensors = []

    def tensor(name, shape, dtype, data=None):
        t = fb.TensorT()
        t.shape, t.name = list(shape), name
        t.type = fb.TensorType.FLOAT32 if dtype == np.float32 else fb.TensorType.INT32
        t.buffer = 0
        if data is not None:
            b = fb.BufferT()
            b.data = list(np.ascontiguousarray(data, dtype).tobytes())
            m.buffers.append(b)
            t.buffer = len(m.buffers) - 1
        tensors.append(t)
        return len(tensors) - 1

    xi = tensor("x", x_shape, np.float32)
    wi = tensor("w", w.shape, np.float32, w)
    bi = tensor("bias", bias.shape, np.float32, bias)
    yi = tensor("y", (n, oh, ow, o), np.float32)
    op = fb.OperatorT()
    op.opcodeIndex = 0
    op.outputs = [yi]
    if custom:
        op.inputs = [xi, wi, bi]
        op.customOptions = list(struct.pack("<3i", 1 if padding == "same" else 2, sw, sh))
    else:
        si = tensor("output_shape", (4,), np.int32, np.array([n, oh, ow, o], np.int32))
        op.inputs = [si, wi, xi, bi]
        op.builtinOptionsType = fb.BuiltinOptions.TransposeConvOptions
        opts = fb.TransposeConvOptionsT()
        opts.padding = fb.Padding.SAME if padding == "same" else fb.Padding.VALID
        opts.strideW, opts.strideH = sw, sh
        op.builtinOptions = opts
    sg = fb.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, [xi], [yi], [op], "main"
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("seed", range(6))
def test_convolution2d_transpose_bias(seed):
    """The custom op in edgert equals LiteRT's builtin TRANSPOSE_CONV on the same weights
    (LiteRT itself has no kernel for the custom op without MediaPipe)."""
    rng = np.random.default_rng(seed)
    x_shape = (1, int(rng.integers(2, 9)), int(rng.integers(2, 9)), int(rng.integers(1, 6)))
    k = int(rng.integers(1, 5))
    w = rng.standard_normal((int(rng.integers(1, 6)), k, k, x_shape[3])).astype(np.float32)
    bias = rng.standard_normal(w.shape[0]).astype(np.float32)
    padding = ["same", "valid"][seed % 2]
    stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    ref = _litert(_deconv_model(False, x_shape, w, bias, padding, stride), feeds)["y"]
    builtin = edgert.Session(edgert.convert(_deconv_model(False, x_shape, w, bias, padding, stride)))
    custom = edgert.Session(edgert.convert(_deconv_model(True, x_shape, w, bias, padding, stride)))
    for sess in (builtin, custom):
        y = sess.run(None, feeds)[0]
        assert y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(ref))))


# ---- the command line ---------------------------------------------------------------

def test_cli_convert_inspect_bench(tmp_path, real_model):
    """`edgert convert face_landmark.tflite`, then inspect and bench --profile on the file:
    NHWC input named as in the model, node names from the TFLite tensors."""
    from click.testing import CliRunner
    from edgert.cli.main import main
    src = real_model("mp_face_landmark")
    out = tmp_path / "fl.edgert"
    r = CliRunner().invoke(main, ["convert", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.is_file()
    r = CliRunner().invoke(main, ["inspect", str(out)])
    assert r.exit_code == 0, r.output
    assert "input_1" in r.output and "192" in r.output and "conv2d_20" in r.output
    r = CliRunner().invoke(main, ["bench", str(out), "--profile", "--runs", "2"])
    assert r.exit_code == 0, r.output
    assert "conv2d" in r.output


def test_cli_refuses_fallback_for_tflite(tmp_path):
    from click.testing import CliRunner
    from edgert.cli.main import main
    src = tmp_path / "m.tflite"
    src.write_bytes(_tiny())
    r = CliRunner().invoke(main, ["convert", str(src), "-o", str(tmp_path / "m.edgert"), "--fallback", "litert"])
    assert r.exit_code != 0
    assert "not supported for .tflite" in r.output


# ---- one-op models built with LiteRT's schema module --------------------------------

def _one_op(code: int, inputs, outputs, options=None, options_type: int = 0) -> bytes:
    """A one-operator model: inputs [(name, shape, dtype, constant or None)], outputs
    [(name, shape, dtype)]; the inputs without a constant are the model's inputs."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as fb
    types = {np.dtype(np.float32): fb.TensorType.FLOAT32, np.dtype(np.int32): fb.TensorType.INT32,
             np.dtype(np.int64): fb.TensorType.INT64}
    m = fb.ModelT()
    m.version = 3
    oc = fb.OperatorCodeT()
    oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
    m.operatorCodes = [oc]
    m.buffers = [fb.BufferT()]
    tensors, graph_in = [], []
    for name, shape, dtype, data in list(inputs) + [(n, s, d, None) for n, s, d in outputs]:
        t = fb.TensorT()
        t.shape, t.name, t.type, t.buffer = list(shape), name, types[np.dtype(dtype)], 0
        if data is not None:
            b = fb.BufferT()
            b.data = list(np.ascontiguousarray(data, dtype).tobytes())
            m.buffers.append(b)
            t.buffer = len(m.buffers) - 1
        tensors.append(t)
    graph_in = [k for k, (_, _, _, d) in enumerate(inputs) if d is None]
    op = fb.OperatorT()
    op.opcodeIndex = 0
    op.inputs = list(range(len(inputs)))
    op.outputs = list(range(len(inputs), len(inputs) + len(outputs)))
    if options is not None:
        op.builtinOptionsType, op.builtinOptions = options_type, options
    sg = fb.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, graph_in, op.outputs, [op], "main"
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _one_op_cases():
    from ai_edge_litert import schema_py_generated as fb
    B, O = fb.BuiltinOperator, fb.BuiltinOptions
    f32, i32, i64 = np.float32, np.int32, np.int64
    x4 = ("x", (1, 5, 7, 4), f32, None)
    cases = []

    def opts(cls, **kw):
        o = cls()
        for k, v in kw.items():
            setattr(o, k, v)
        return o

    for (oh, ow) in ((10, 14), (3, 4), (11, 9)):
        for align, half in ((False, False), (False, True), (True, False)):
            cases.append((f"nearest_{oh}x{ow}_{int(align)}{int(half)}", B.RESIZE_NEAREST_NEIGHBOR,
                          [x4, ("size", (2,), i32, np.array([oh, ow], i32))], [("y", (1, oh, ow, 4), f32)],
                          opts(fb.ResizeNearestNeighborOptionsT, alignCorners=align, halfPixelCenters=half),
                          O.ResizeNearestNeighborOptions))
    cases.append(("squeeze", B.SQUEEZE, [("x", (1, 5, 1, 4), f32, None)], [("y", (5, 4), f32)],
                  opts(fb.SqueezeOptionsT, squeezeDims=[0, 2]), O.SqueezeOptions))
    cases.append(("mirror_pad", B.MIRROR_PAD, [x4, ("p", (4, 2), i32, np.array([[0, 0], [1, 2], [3, 0], [0, 1]], i32))],
                  [("y", (1, 8, 10, 5), f32)], opts(fb.MirrorPadOptionsT, mode=0), O.MirrorPadOptions))
    cases.append(("depth_to_space", B.DEPTH_TO_SPACE, [("x", (1, 3, 2, 8), f32, None)], [("y", (1, 6, 4, 2), f32)],
                  opts(fb.DepthToSpaceOptionsT, blockSize=2), O.DepthToSpaceOptions))
    cases.append(("space_to_depth", B.SPACE_TO_DEPTH, [("x", (1, 4, 6, 3), f32, None)], [("y", (1, 2, 3, 12), f32)],
                  opts(fb.SpaceToDepthOptionsT, blockSize=2), O.SpaceToDepthOptions))
    cases.append(("split", B.SPLIT, [("axis", (), i32, np.array(3, i32)), x4],
                  [("a", (1, 5, 7, 2), f32), ("b", (1, 5, 7, 2), f32)], opts(fb.SplitOptionsT, numSplits=2),
                  O.SplitOptions))
    cases.append(("split_v", B.SPLIT_V, [x4, ("s", (3,), i32, np.array([1, -1, 2], i32)), ("axis", (), i32, np.array(1, i32))],
                  [("a", (1, 1, 7, 4), f32), ("b", (1, 2, 7, 4), f32), ("c", (1, 2, 7, 4), f32)],
                  opts(fb.SplitVOptionsT, numSplits=3), O.SplitVOptions))
    cases.append(("strided_slice", B.STRIDED_SLICE,
                  [x4, ("b", (4,), i32, np.array([0, 1, -1, 0], i32)), ("e", (4,), i32, np.array([1, 5, 0, 3], i32)),
                   ("s", (4,), i32, np.array([1, 2, -2, 1], i32))],
                  [("y", (1, 2, 3, 3), f32)], opts(fb.StridedSliceOptionsT, beginMask=1, endMask=0), O.StridedSliceOptions))
    cases.append(("strided_slice_shrink", B.STRIDED_SLICE,
                  [x4, ("b", (4,), i32, np.array([0, 2, 0, 1], i32)), ("e", (4,), i32, np.array([1, 3, 7, 4], i32)),
                   ("s", (4,), i32, np.array([1, 1, 1, 1], i32))],
                  [("y", (1, 7, 3), f32)], opts(fb.StridedSliceOptionsT, shrinkAxisMask=2, endMask=4),
                  O.StridedSliceOptions))
    cases.append(("gather", B.GATHER, [x4, ("i", (3,), i32, np.array([6, 0, 2], i32))], [("y", (1, 5, 3, 4), f32)],
                  opts(fb.GatherOptionsT, axis=2), O.GatherOptions))
    for out_t in (i32, i64):
        cases.append((f"arg_max_{np.dtype(out_t)}", B.ARG_MAX, [x4, ("a", (1,), i32, np.array([3], i32))],
                      [("y", (1, 5, 7), out_t)],
                      opts(fb.ArgMaxOptionsT, outputType=fb.TensorType.INT32 if out_t is i32 else fb.TensorType.INT64),
                      O.ArgMaxOptions))
    for name in ("MAXIMUM", "MINIMUM"):
        cases.append((name.lower(), getattr(B, name), [x4, ("c", (4,), f32, np.array([0.5, -0.5, 0, 1], f32))],
                      [("y", (1, 5, 7, 4), f32)], None, 0))
    for name in ("EXP", "SQRT", "RSQRT", "ABS", "NEG", "LOG"):
        cases.append((name.lower(), getattr(B, name), [x4], [("y", (1, 5, 7, 4), f32)], None, 0))
    return cases


@pytest.mark.parametrize("case", _one_op_cases(), ids=lambda c: c[0])
def test_one_op_models_match_litert(case):
    name, code, ins, outs, options, options_type = case
    model = _one_op(code, ins, outs, options, options_type)
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((1, 5, 7, 4)).astype(np.float32) if ins[0][0] == "x" else None
    feeds = {}
    for n, shape, dtype, data in ins:
        if data is None:
            v = rng.standard_normal(shape).astype(dtype)
            feeds[n] = np.abs(v) + 0.1 if name in ("sqrt", "rsqrt", "log") else v
    del x
    ref = _litert(model, feeds)
    sess = edgert.Session(edgert.convert(model))
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for k, r in ref.items():
        assert got[k].dtype == r.dtype and got[k].shape == r.shape, k
        np.testing.assert_allclose(got[k], r, rtol=1e-5, atol=1e-5)


# ---- what is refused for now (docs/tflite.md, "Not done yet") ------------------------

def test_integer_model_refused_clearly():
    from tools import tflite_tiny
    with pytest.raises(ConversionError, match="integer-quantized models are not supported yet"):
        edgert.convert(tflite_tiny.chain((1, 4), ["add", "mul"], int8_scale=0.05))


def test_variables_and_subgraphs_refused_clearly():
    import flatbuffers
    from ai_edge_litert import schema_py_generated as fb
    from tools import tflite_tiny
    m = fb.ModelT.InitFromPackedBuf(tflite_tiny.add_chain((1, 4), 1), 0)
    code = fb.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = fb.BuiltinOperator.VAR_HANDLE, 127, 1
    m.operatorCodes.append(code)
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = len(m.operatorCodes) - 1, [], [0]
    m.subgraphs[0].operators.append(op)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ConversionError, match="VAR_HANDLE.*resource variables are not supported yet"):
        edgert.convert(bytes(b.Output()))
    m = fb.ModelT.InitFromPackedBuf(tflite_tiny.add_chain((1, 4), 1), 0)
    m.subgraphs.append(m.subgraphs[0])
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(ConversionError, match="2 subgraphs"):
        edgert.convert(bytes(b.Output()))


def test_input_shapes_must_restate_the_model():
    data = _tiny()
    edgert.convert(data, input_shapes={"x": [1, 2, 4, 4]})
    with pytest.raises(ConversionError, match="other sizes are not supported yet"):
        edgert.convert(data, input_shapes={"x": [1, 2, 8, 8]})


@pytest.mark.parametrize("per_channel", [False, True])
def test_int8_weights_behind_dequantize(per_channel):
    """int8 constants with per-tensor or per-channel scales behind DEQUANTIZE fold to the
    float32 values LiteRT computes: y = x + dequantize(w)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as fb
    rng = np.random.default_rng(int(per_channel))
    q = rng.integers(-128, 128, (3, 4)).astype(np.int8)
    scale = rng.uniform(0.01, 0.1, 4 if per_channel else 1).astype(np.float32)
    zp = rng.integers(-3, 4, scale.size).astype(np.int64) if not per_channel else np.zeros(4, np.int64)
    m = fb.ModelT()
    m.version = 3
    m.operatorCodes = []
    for code in (fb.BuiltinOperator.DEQUANTIZE, fb.BuiltinOperator.ADD):
        c = fb.OperatorCodeT()
        c.builtinCode, c.deprecatedBuiltinCode, c.version = code, code, 2
        m.operatorCodes.append(c)
    wbuf = fb.BufferT()
    wbuf.data = list(q.tobytes())
    m.buffers = [fb.BufferT(), wbuf]

    def tensor(name, ttype, buf=0, quant=None):
        t = fb.TensorT()
        t.shape, t.name, t.type, t.buffer = [3, 4], name, ttype, buf
        t.quantization = quant
        return t

    qp = fb.QuantizationParametersT()
    qp.scale, qp.zeroPoint, qp.quantizedDimension = scale.tolist(), zp.tolist(), 1
    tensors = [tensor("x", fb.TensorType.FLOAT32), tensor("wq", fb.TensorType.INT8, 1, qp),
               tensor("w", fb.TensorType.FLOAT32), tensor("y", fb.TensorType.FLOAT32)]
    deq, add = fb.OperatorT(), fb.OperatorT()
    deq.opcodeIndex, deq.inputs, deq.outputs = 0, [1], [2]
    add.opcodeIndex, add.inputs, add.outputs = 1, [0, 2], [3]
    add.builtinOptionsType, add.builtinOptions = fb.BuiltinOptions.AddOptions, fb.AddOptionsT()
    sg = fb.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, [0], [3], [deq, add], "main"
    m.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    model = bytes(b.Output())
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    ref = _litert(model, feeds)["y"]
    np.testing.assert_allclose(ref, feeds["x"] + (q.astype(np.float64) - zp) * scale, rtol=1e-6, atol=1e-6)
    got = edgert.Session(edgert.convert(model)).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
