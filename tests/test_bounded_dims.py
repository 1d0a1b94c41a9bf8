"""Bounded dynamic dimensions: one file planned for the upper bounds runs every size
within them (docs/runtime.md, "Bounded dimensions"), checked against onnxruntime."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import edgert
from edgert import fileformat as fmt
from edgert.runtime import reader
from edgert.runtime import session as runtime
from edgert.errors import ConversionError, InputError


def _ort(path_or_bytes):
    src = path_or_bytes if isinstance(path_or_bytes, bytes) else str(path_or_bytes)
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def rec(real_model, tmp_path_factory):
    src = real_model("ppocr_rec")
    out = tmp_path_factory.mktemp("bounded") / "rec.edgert"
    edgert.convert(src, out, input_shapes={"x": [1, 3, 48, (32, 960)]})
    return src, out


def test_ppocr_rec_widths_match_onnxruntime(rec):
    src, path = rec
    ref = _ort(src)
    sess = runtime.Session(path)
    rng = np.random.default_rng(0)
    for w in (96, 320, 960, 32, 100):
        x = rng.standard_normal((1, 3, 48, w)).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-3, rtol=0)


def test_ppocr_rec_file_and_inputs(rec):
    _, path = rec
    info = reader.read(path.read_bytes())
    assert info["version"] == "1.3"
    assert info["bounds"]["symbols"] == [{"name": "p2o.DynamicDimension.1", "lo": 32, "hi": 960}]
    (x,) = runtime.Session(path).get_inputs()
    assert x.shape == [1, 3, 48, "p2o.DynamicDimension.1"]
    assert x.bounds == [(1, 1), (3, 3), (48, 48), (32, 960)]
    assert x.nbytes == 3 * 48 * 960 * 4  # the upper bound


def test_ppocr_rec_arena_is_planned_for_the_upper_bound(rec, real_model, tmp_path):
    _, path = rec
    static = edgert.convert(real_model("ppocr_rec"), tmp_path / "s.edgert", input_shapes={"x": [1, 3, 48, 960]})
    assert reader.read(path.read_bytes())["arena_bytes"] == reader.read(static)["arena_bytes"]


def test_no_allocation_at_any_size(rec):
    _, path = rec
    sess = runtime.Session(path, max_contexts=1)
    sess.run(None, {"x": np.zeros((1, 3, 48, 960), np.float32)})
    before = runtime.alloc_count()
    for w, steps in ((96, 12), (320, 40), (960, 120), (32, 4), (500, 62)):
        out = sess.run(None, {"x": np.ones((1, 3, 48, w), np.float32)})[0]
        assert out.shape == (1, steps, 6625)
    assert runtime.alloc_count() == before


def test_out_of_bounds_names_input_dim_and_bound(rec):
    _, path = rec
    sess = runtime.Session(path)
    with pytest.raises(InputError, match=r"input 'x' dim 3 is 1000, outside the bounds 32\.\.960"):
        sess.run(None, {"x": np.zeros((1, 3, 48, 1000), np.float32)})
    with pytest.raises(InputError, match=r"input 'x' dim 3 is 16, outside the bounds 32\.\.960"):
        sess.run(None, {"x": np.zeros((1, 3, 48, 16), np.float32)})
    with pytest.raises(InputError, match=r"input 'x' dim 2 is fixed at 48, got 40"):
        sess.run(None, {"x": np.zeros((1, 3, 40, 96), np.float32)})
    # The session still runs after refused shapes.
    assert sess.run(None, {"x": np.zeros((1, 3, 48, 96), np.float32)})[0].shape == (1, 12, 6625)


def test_minilm_shared_symbol(real_model, tmp_path):
    src = real_model("minilm")
    out = tmp_path / "minilm.edgert"
    # attention_mask shares 'sequence_length' with input_ids and takes its bounds.
    edgert.convert(src, out, input_shapes={"input_ids": [1, (8, 128)]})
    sess = runtime.Session(out)
    assert [t.bounds for t in sess.get_inputs()] == [[(1, 1), (8, 128)]] * 2
    ref = _ort(src)
    rng = np.random.default_rng(1)
    for s in (8, 32, 128):
        feeds = {"input_ids": rng.integers(0, 30000, (1, s)).astype(np.int64),
                 "attention_mask": np.ones((1, s), np.int64)}
        feeds["attention_mask"][0, s // 2:] = 0
        for got, want in zip(sess.run(None, feeds), ref.run(None, feeds)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-3, rtol=0)
    with pytest.raises(InputError, match="both are 'sequence_length'"):
        sess.run(None, {"input_ids": np.zeros((1, 8), np.int64), "attention_mask": np.ones((1, 9), np.int64)})


def _shape_expression_model() -> bytes:
    """y = Reshape(x, Concat(Shape(x)[0:1], [-1])) * 2 + a Range-free Expand of a bias
    to Shape(x): shape arithmetic on the symbolic dim 'n'."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i1"], ["n"], axis=0),
        helper.make_node("Concat", ["one", "n", "two", "two"], ["shp"], axis=0),
        helper.make_node("Reshape", ["x", "shp"], ["r"]),
        helper.make_node("Expand", ["bias", "shp"], ["e"]),
        helper.make_node("Add", ["r", "e"], ["t"]),
        helper.make_node("Transpose", ["t"], ["y"], perm=[0, 2, 3, 1]),
    ]
    inits = [helper.make_tensor("i1", TensorProto.INT64, [1], [1]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1]),
             helper.make_tensor("two", TensorProto.INT64, [1], [2]),
             helper.make_tensor("bias", TensorProto.FLOAT, [1, 1, 2, 2], [0.5, -1.0, 2.0, 3.0])]
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return m.SerializeToString()


def test_runtime_shape_expression(tmp_path):
    model = _shape_expression_model()
    out = tmp_path / "m.edgert"
    edgert.convert(model, out, input_shapes={"x": [1, (2, 50), 4]})
    sess = runtime.Session(out)
    ref = _ort(model)
    rng = np.random.default_rng(20261128)
    for n in [2, 50] + [int(v) for v in rng.integers(2, 51, 18)]:  # both bounds and 18 random lengths
        x = np.arange(n * 4, dtype=np.float32).reshape(1, n, 4)
        got, want = sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]
        assert got.shape == want.shape == (1, 2, 2, n)
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_ppocr_det_sizes_match_onnxruntime(real_model, tmp_path):
    """PP-OCR det bounded 32..960: the converter finds the sizes the FPN runs (32*k + r,
    r in {0, 29, 30, 31}: the maps of the last levels must match in its Adds), the file
    refuses the others with that rule, and 20 random sizes it runs (both extremes, odd
    ones among them) match onnxruntime without allocating."""
    src = real_model("ppocr_det")
    out = tmp_path / "det.edgert"
    edgert.convert(src, out, input_shapes={"x": [1, 3, (32, 960), (32, 960)]})
    sess = runtime.Session(out, max_contexts=1)
    (x,) = sess.get_inputs()
    assert x.steps[2] == x.steps[3] == (32, [0, 29, 30, 31]), x.steps
    ref = _ort(src)
    rng = np.random.default_rng(20261128)
    runs = [v for v in range(32, 961) if v % 32 in (0, 29, 30, 31)]
    sizes = [(32, 960), (960, 32)] + [(int(rng.choice(runs)), int(rng.choice(runs))) for _ in range(18)]
    assert any(h % 2 for h, _ in sizes) and any(h % 32 for h, _ in sizes)
    for h, w in sizes:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        before = runtime.alloc_count()
        got = sess.run(None, {"x": x})[0]
        assert runtime.alloc_count() == before
        assert got.shape == want.shape, (h, w)
        np.testing.assert_allclose(got, want, atol=1e-3, rtol=0)
    for _ in range(6):
        h = int(rng.choice([v for v in range(32, 961) if v not in runs]))
        with pytest.raises(InputError, match=rf"input 'x' dim 2 is {h}: the model runs '.*' = 32\*k \+ r only"):
            sess.run(None, {"x": np.zeros((1, 3, h, 64), np.float32)})
        with pytest.raises(Exception):  # onnxruntime cannot run it either
            ref.run(None, {"x": np.zeros((1, 3, h, 64), np.float32)})


def test_unsupported_op_refused_at_conversion(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    g = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"], name="the_cumsum")], "g", [x], [y], [axis])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(ConversionError, match=r"node 'the_cumsum': op cumsum does not support bounded dimensions yet"):
        edgert.convert(model, tmp_path / "p.edgert", input_shapes={"x": [1, (2, 9)]})


def test_static_files_unchanged(real_model, tmp_path):
    data = edgert.convert(real_model("ppocr_rec"), tmp_path / "s.edgert", input_shapes={"x": [1, 3, 48, 320]})
    assert reader.read(data)["bounds"] is None
    (x,) = runtime.Session(data).get_inputs()
    assert x.shape == [1, 3, 48, 320] and x.bounds is None


def test_int8_bounded_equals_static_int8(real_model, tmp_path):
    """int8 with bounded dimensions: calibrated once (at the calibration data's width);
    at that width the bounded file's outputs are bit-identical to a static int8 file with
    the same calibration and the same float nodes, and every width runs."""
    src = real_model("ppocr_rec")
    rng = np.random.default_rng(3)
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=(rng.standard_normal((4, 3, 48, 320)) * 0.5).astype(np.float32))
    bounded = edgert.convert(src, tmp_path / "b.edgert", input_shapes={"x": [1, 3, 48, (32, 960)]},
                             quantize="int8", calibration=str(calib))
    keep = reader.read(bounded)["metadata"]["quantization"]["fp32_nodes"]
    assert keep == ["p2o.GlobalAveragePool.0", "p2o.GlobalAveragePool.2"]  # 1/(H*W) follows the width
    static = edgert.convert(src, tmp_path / "s.edgert", input_shapes={"x": [1, 3, 48, 320]}, quantize="int8",
                            calibration=str(calib), keep_fp32=keep)
    b, s = runtime.Session(bounded), runtime.Session(static)
    x = (rng.standard_normal((1, 3, 48, 320)) * 0.5).astype(np.float32)
    np.testing.assert_array_equal(b.run(None, {"x": x})[0], s.run(None, {"x": x})[0])
    ref = _ort(src)
    before = runtime.alloc_count()
    for w in (96, 960):
        x = (rng.standard_normal((1, 3, 48, w)) * 0.5).astype(np.float32)
        got, want = b.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]
        assert got.shape == want.shape
        assert np.abs(got - want).max() < 0.5  # int8 against float (probabilities)
        assert (got.argmax(-1) == want.argmax(-1)).mean() > 0.9
    assert runtime.alloc_count() == before


def test_loader_checks_the_bounds_section(rec):
    """BOUNDS is untrusted input like the rest of the file: bounds that disagree with the
    tensors, unknown rule kinds and rules that do not reproduce the file's parameters
    are refused at load with a message."""
    import struct
    _, path = rec
    data = path.read_bytes()
    info = reader.read(data)
    off = info["sections"]["bounds"]["offset"]
    n_sym, n_bind, n_rule, _ = struct.unpack_from("<IIII", data, off)
    assert (n_sym, n_bind) == (1, 1) and n_rule > 0
    rules = off + 16 + 24 * n_sym + 12 * n_bind
    # A rule that sets a parameter word (PARAM, PARAM_SYM, SAME or SLICE): its add moved by one
    # no longer reproduces the file's words.
    param_rule = next(k for k in range(n_rule) if struct.unpack_from("<I", data, rules + 24 * k + 4)[0] in
                      (fmt.RULE_PARAM, fmt.RULE_PARAM_SYM, fmt.RULE_SAME, fmt.RULE_SLICE))

    def edited(at: int, fmt_: str, value) -> bytes:
        buf = bytearray(data)
        struct.pack_into(fmt_, buf, at, value)
        fmt.seal(buf)
        return bytes(buf)

    cases = [(edited(off + 16 + 16, "<q", 1000), r"input 'x' dim 3 is 960 in the file, not the upper bound 1000"),
             (edited(off + 16 + 8, "<q", 0), r"bounds 0\.\.960 are invalid"),
             (edited(rules + 4, "<I", 99), r"BOUNDS rule 0: node out of range or order, or kind unknown"),
             (edited(rules + 24 * param_rule + 20, "<i", 1), r"BOUNDS rule for parameter \d+ gives")]
    for bad, message in cases:
        with pytest.raises(edgert.errors.ModelFormatError, match=message):
            runtime.Session(bad)


def test_minilm_int8_bounded(real_model, tmp_path):
    """int8 MiniLM with a bounded sequence: bit-identical to the static int8 file at the
    calibration length, and every length runs."""
    src = real_model("minilm")
    rng = np.random.default_rng(4)
    calib = {"input_ids": rng.integers(0, 30000, (4, 32)).astype(np.int64), "attention_mask": np.ones((4, 32), np.int64)}
    bounded = edgert.convert(src, None, input_shapes={"input_ids": [1, (8, 128)]}, quantize="int8", calibration=calib)
    static = edgert.convert(src, None, input_shapes={"input_ids": [1, 32], "attention_mask": [1, 32]},
                            quantize="int8", calibration=calib)
    b, s = runtime.Session(bounded), runtime.Session(static)
    feeds = {"input_ids": rng.integers(0, 30000, (1, 32)).astype(np.int64), "attention_mask": np.ones((1, 32), np.int64)}
    for got, want in zip(b.run(None, feeds), s.run(None, feeds)):
        np.testing.assert_array_equal(got, want)
    for n in (8, 128):
        feeds = {"input_ids": rng.integers(0, 30000, (1, n)).astype(np.int64), "attention_mask": np.ones((1, n), np.int64)}
        assert [o.shape for o in b.run(None, feeds)] == [(1, n), (1, n), (1, n, 384), (1, 384)]


def _with_hostile_rule(monkeypatch, model, input_shapes, op, word) -> bytes:
    """The bounded file of `model` plus a rule setting parameter `word` of its first `op`
    node to (symbol - upper bound + the word's value): the file's value at the upper
    bound, where the loader checks rules, another one at every other size."""
    from edgert.converter import bounds as bounds_
    from edgert.converter import ops

    derive = bounds_.derive_rules

    def derive_and_add(graphs, bounds, values):
        derive(graphs, bounds, values)
        g = graphs[0]
        k = next(i for i, n in enumerate(g.nodes) if n.op == op)
        value = ops.get(op).pack(g.nodes[k], g)[word]
        bounds.rules.append((k, fmt.RULE_PARAM_SYM, 0, 0, word, value - bounds.symbols[0].hi))

    monkeypatch.setattr(bounds_, "derive_rules", derive_and_add)

    def samples(g, bounds):
        raise bounds_.NeedsSamples("the test adds its rule to the fitted ones")

    monkeypatch.setattr(bounds_, "derive_from_expressions", samples)
    # Written as is: the converter's own tries at every size would refuse the rule.
    monkeypatch.setattr(bounds_, "settle", lambda serialize_fn, g, *a: serialize_fn(g))
    monkeypatch.setattr(bounds_, "check_with_runtime", lambda *a, **k: None)
    return edgert.convert(model, None, input_shapes=input_shapes)


def test_hostile_rules_on_axes_and_strides_fail_runs_with_a_message(monkeypatch):
    """Rules are untrusted like the rest of the file: one that moves a concat's or split's
    axis out of range, or a convolution's or pool's stride to zero or below, fails the
    run at that size with a message (no write outside the shape, no division by zero)."""
    rng = np.random.default_rng(6)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", 6])
    parts = helper.make_tensor("sizes", TensorProto.INT64, [2], [2, 4])
    g = helper.make_graph([helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=2, name="sp"),
                           helper.make_node("Concat", ["a", "b"], ["y"], axis=2, name="cc")], "g", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [parts])
    split_concat = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, "W"])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 3, 3], rng.standard_normal(54).astype(np.float32).tolist())
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 2], name="cv"),
                           helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="mp")],
                          "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    conv_pool = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    cases = [(split_concat, {"x": [1, (1, 50), 6]}, "split", 0, (1, 40, 6), r"node 'sp' \(split\): axis -8 out of range"),
             (split_concat, {"x": [1, (1, 50), 6]}, "concat", 0, (1, 40, 6), r"node 'cc' \(concat\): axis -8 out of range"),
             (conv_pool, {"x": [1, 2, 8, (8, 50)]}, "conv2d", 3, (1, 2, 8, 48), r"node 'cv' \(conv2d\)"),
             (conv_pool, {"x": [1, 2, 8, (8, 50)]}, "max_pool2d", 3, (1, 2, 8, 48), r"'mp'")]
    for model, shapes, op, word, shape, message in cases:
        with monkeypatch.context() as m:
            data = _with_hostile_rule(m, model, shapes, op, word)
        sess = runtime.Session(data)
        with pytest.raises(edgert.EdgertError, match=message):
            sess.run(None, {"x": np.zeros(shape, np.float32)})
        hi = [d[1] if isinstance(d, tuple) else d for d in shapes["x"]]
        sess.run(None, {"x": np.zeros(hi, np.float32)})  # the session still runs at the upper bound
