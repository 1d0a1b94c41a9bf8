"""Expression rules (docs/format.md, PARAM_EXPR and OUTDIM_EXPR): parameters and reshape
dims computed from the input size by Shape arithmetic that no `dim + c` rule follows
(pads to a fixed length or to a multiple of 8, a split into equal halves, a reshape to
[2H, 2W]) follow the ONNX arithmetic as expressions the runtime evaluates: each model
runs at >= 20 random sizes (extremes, odd, prime) against onnxruntime. Hostile programs
are refused at load, and a program that divides by zero or overflows fails the run
with a message, never a crash."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from onnx import TensorProto, helper

import edgert
from edgert import fileformat as fmt
from edgert.converter import symdim
from edgert.errors import EdgertError, ModelFormatError
from edgert.runtime import reader
from edgert.runtime import session as runtime

from tests.test_bounded_models import _i64, _model, _ort, _pad_time, random_sizes, run_sizes


def pad_to_64() -> bytes:
    return _pad_time("pad_to_64", [helper.make_node("Sub", ["c64", "T"], ["p"])], [_i64("c64", [64])])


def pad_to_multiple_of_8() -> bytes:
    return _pad_time("pad_to_8", [helper.make_node("Mod", ["T", "c8"], ["r"]), helper.make_node("Sub", ["c8", "r"], ["q"]),
                                  helper.make_node("Mod", ["q", "c8"], ["p"])], [_i64("c8", [8])])


def split_halves(opset: int = 18) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", 4])
    attrs = {"num_outputs": 2} if opset >= 18 else {}
    g = helper.make_graph([helper.make_node("Split", ["x"], ["a", "b"], axis=1, name="split_halves", **attrs),
                           helper.make_node("Relu", ["b"], ["c"])],
                          "g", [x], [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "ac"])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def reshape_2h_2w() -> bytes:
    """x [1, H, W, 4] -> Reshape to [2H, 2W] (shape from Shape(x) * 2) -> Transpose."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "H", "W", 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "one", "three"], ["hw"]),
             helper.make_node("Mul", ["hw", "two"], ["hw2"]),
             helper.make_node("Reshape", ["x", "hw2"], ["r"], name="reshape_2h_2w"),
             helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])]
    return _model(nodes, [x], ["y"], [_i64("one", [1]), _i64("three", [3]), _i64("two", [2])])


def _expr_rules(data: bytes) -> list[str]:
    info = reader.read(data)
    names = [s["name"] for s in info["bounds"]["symbols"]]
    return [str(symdim.decode(r["code"], names)) for r in info["bounds"]["exprs"]]


@pytest.mark.parametrize("make,lo,hi,exprs", [
    (pad_to_64, 2, 64, [lambda t: 64 - t]),
    (pad_to_multiple_of_8, 1, 64, [lambda t: (8 - t % 8) % 8]),
    (split_halves, 2, 64, [lambda t: (t + 1) // 2, lambda t: t // 2]),
])
def test_parameters_from_shape_arithmetic_follow_every_size(make, lo, hi, exprs):
    model = make()
    data = edgert.convert(model, None, input_shapes={"x": [1, (lo, hi), 4]})
    info = reader.read(data)
    assert info["version"] == "1.3"
    # the rules are the ONNX arithmetic: each program gives its value at every size
    rules = info["bounds"]["exprs"]
    assert len(rules) == len(exprs)
    for r, want in zip(sorted(rules, key=lambda r: r["target"]), exprs):
        for t in range(lo, hi + 1):
            assert symdim.run_program(r["code"], {0: t, ("in", 0, 1): t}) == want(t)
    rng = np.random.default_rng(hi + lo)
    ref = _ort(model)
    run_sizes(data, lambda f: ref.run(None, f), lambda t: {"x": rng.standard_normal((1, t, 4)).astype(np.float32)},
              random_sizes(rng, lo, hi))


def test_equal_split_without_num_outputs_runs_the_even_sizes():
    """Split into two equal outputs (opset 13, no sizes): onnxruntime runs even sizes only;
    the file runs them and refuses the odd ones with the constraint."""
    model = split_halves(13)
    data = edgert.convert(model, None, input_shapes={"x": [1, (2, 80), 4]})
    x = runtime.Session(data).get_inputs()[0]
    assert x.steps[1] == (2, [0]) and x.constraints == ["T: a multiple of 2"]
    rng = np.random.default_rng(5)
    ref = _ort(model)
    sizes = [v for v in random_sizes(rng, 2, 80, 60) if v % 2 == 0][:24]
    run_sizes(data, lambda f: ref.run(None, f), lambda t: {"x": rng.standard_normal((1, t, 4)).astype(np.float32)},
              sizes)
    with pytest.raises(EdgertError, match=r"input 'x' dim 1 is 7"):
        runtime.Session(data).run(None, {"x": np.zeros((1, 7, 4), np.float32)})


def test_reshape_dims_beyond_dim_plus_c():
    model = reshape_2h_2w()
    data = edgert.convert(model, None, input_shapes={"x": [1, (1, 40), (3, 33), 4]})
    assert sorted(_expr_rules(data)) == ["2*H", "2*W"], _expr_rules(data)
    ref = _ort(model)
    rng = np.random.default_rng(9)
    hs, ws = random_sizes(rng, 1, 40), random_sizes(rng, 3, 33)
    pairs = list(zip(hs, ws))
    run_sizes(data, lambda f: ref.run(None, f),
              lambda k: {"x": rng.standard_normal((1, pairs[k][0], pairs[k][1], 4)).astype(np.float32)},
              list(range(len(pairs))))


# ---- hostile programs ------------------------------------------------------------------

def _with_program(monkeypatch, words: list[int], rule_edit=None) -> bytes:
    """pad_to_64's bounded file with its PARAM_EXPR rule's program replaced by `words`
    (and the rule's fields by rule_edit(rule) when given), written as is: the converter's
    own tries at every size would refuse it."""
    from edgert.converter import bounds as bounds_

    derive = bounds_.derive_from_expressions

    def derive_and_replace(g, bounds):
        dims = derive(g, bounds)
        k = next(j for j, r in enumerate(bounds.rules) if r[1] == fmt.RULE_PARAM_EXPR)
        r = bounds.rules[k]
        bounds.rules[k] = (r[0], r[1], len(bounds.code), len(words), r[4], 0)
        if rule_edit is not None:
            bounds.rules[k] = rule_edit(bounds.rules[k])
        bounds.code += list(words)
        return dims

    monkeypatch.setattr(bounds_, "derive_from_expressions", derive_and_replace)
    monkeypatch.setattr(bounds_, "settle", lambda serialize_fn, g, *a: serialize_fn(g))
    monkeypatch.setattr(bounds_, "check_with_runtime", lambda *a, **k: None)
    return edgert.convert(pad_to_64(), None, input_shapes={"x": [1, (2, 64), 4]})


def C(v: int) -> int:
    return symdim.OP_CONST | (v & 0xFFFFFF) << 8


SYM0 = symdim.OP_SYM
# 64 - T, the right program
GOOD = [C(64), SYM0, symdim.OP_SUB]


@pytest.mark.parametrize("words,edit,message", [
    ([99], None, "expression word 0 is invalid"),  # unknown opcode
    ([symdim.OP_ADD], None, "expression word 0 is invalid"),  # stack underflow
    ([symdim.OP_SYM | 5 << 8], None, "expression word 0 is invalid"),  # no symbol 5
    ([symdim.OP_DIM | (7 * 8) << 8], None, "expression word 0 is invalid"),  # no input 7
    ([symdim.OP_DIM | 5 << 8], None, "expression word 0 is invalid"),  # input 0 has 3 dims
    ([C(1), C(2)], None, "leaves 2 values"),
    ([symdim.OP_CONST32], None, "expression word 1 is invalid"),  # no value word
    ([C(1)] * 17 + [symdim.OP_ADD] * 16, None, "expression word 16 is invalid"),  # a stack of 17
    ([C(1)] + [C(1), symdim.OP_ADD] * 128, None, "expression of 257 words"),
    ([C(5)], None, r"BOUNDS rule for parameter \d+ gives 5"),  # not the file's word at the upper bound
    (GOOD, lambda r: (r[0], r[1], r[2], 0, r[4], 0), "operand out of range"),  # empty
    (GOOD, lambda r: (r[0], r[1], r[2] + 1, r[3], r[4], 0), "operand out of range"),  # past the code
    (GOOD, lambda r: (r[0], r[1], 1 << 30, r[3], r[4], 0), "operand out of range"),
    (GOOD, lambda r: (r[0], r[1], r[2], r[3], r[4], 1), "operand out of range"),  # add must be 0
    (GOOD, lambda r: (r[0], r[1], r[2], r[3], 1000, 0), "operand out of range"),  # no such word
    (GOOD, lambda r: (r[0], fmt.RULE_OUTDIM_EXPR, r[2], r[3], 8 * 3, 0), "operand out of range"),  # no output 3
])
def test_loader_refuses_hostile_programs(monkeypatch, words, edit, message):
    data = _with_program(monkeypatch, words, edit)
    with pytest.raises(ModelFormatError, match=message):
        runtime.Session(data)


def test_the_right_program_loads(monkeypatch):
    data = _with_program(monkeypatch, GOOD)
    assert runtime.Session(data).run(None, {"x": np.zeros((1, 5, 4), np.float32)})[0].shape == (1, 64, 4)


def test_programs_that_fail_at_run_time_fail_the_run(monkeypatch):
    """A program that divides by zero at some size, overflows, or gives a parameter
    beyond int32 fails that run with a message; the session runs other sizes after it."""
    # floor(0 / (T - 10)) + 64 - T: 64 - T at every size but 10, where it divides by zero
    div0 = [C(0), SYM0, C(10), symdim.OP_SUB, symdim.OP_FLOORDIV, C(64), symdim.OP_ADD, SYM0, symdim.OP_SUB]
    # (T - 64) * 2^30 * 2^30 * 2^30 + 64 - T: 64 - T at the upper bound, beyond 2^62 below it
    big = [SYM0, C(64), symdim.OP_SUB] + [symdim.OP_CONST32, 1 << 30, symdim.OP_MUL] * 3 + [
        C(64), symdim.OP_ADD, SYM0, symdim.OP_SUB]
    # (2^31 - 64) * (64 - T) + 64 - T, beyond int32 below the upper bound
    wide = [symdim.OP_CONST32, (1 << 31) - 64, C(64), SYM0, symdim.OP_SUB, symdim.OP_MUL, C(64), symdim.OP_ADD,
            SYM0, symdim.OP_SUB]
    for words, size, message in [(div0, 10, "divides by zero"), (big, 5, "overflows"), (wide, 60, "would be")]:
        with monkeypatch.context() as m:
            data = _with_program(m, words)
        sess = runtime.Session(data)
        with pytest.raises(EdgertError, match=message):
            sess.run(None, {"x": np.zeros((1, size, 4), np.float32)})
        assert sess.run(None, {"x": np.zeros((1, 64, 4), np.float32)})[0].shape == (1, 64, 4)


# ---- every tensor's dims as expressions (symshape) ---------------------------------------

def window_net() -> bytes:
    """x [1, 3, H, W] -> Conv 3x3 stride 2 SAME_UPPER -> MaxPool 3x3 stride 2 ceil_mode ->
    Conv 3x3 dilation 2, pads 1 -> ConvTranspose 3x3 stride 2 output_padding 1 ->
    Resize x2 (nearest)."""
    rng = np.random.default_rng(3)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    w = lambda name, shape: helper.make_tensor(name, TensorProto.FLOAT, shape,  # noqa: E731
                                               (rng.standard_normal(int(np.prod(shape))) * 0.3).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
             helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["c2", "w3"], ["t1"], kernel_shape=[3, 3], strides=[2, 2],
                              output_padding=[1, 1]),
             helper.make_node("Resize", ["t1", "", "scales"], ["y"], mode="nearest")]
    inits = [w("w1", [4, 3, 3, 3]), w("w2", [4, 4, 3, 3]), w("w3", [4, 2, 3, 3]),
             helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])]
    return _model(nodes, [x], ["y"], inits)


def test_output_dims_are_expressions_of_the_ops(tmp_path):
    """The file's outputs carry their dims as expressions derived from the ops (auto_pad
    SAME, ceil_mode, dilations, output_padding, resize scales); they give onnxruntime's
    shape at random sizes, and `edgert inspect` shows them."""
    from click.testing import CliRunner

    from edgert.cli.main import main
    model = window_net()
    path = tmp_path / "w.edgert"
    data = edgert.convert(model, path, input_shapes={"x": [1, 3, (16, 70), (16, 70)]})
    dims = reader.read(data)["metadata"]["output_dims"]["y"]
    assert dims[:2] == ["1", "2"]
    ref = _ort(model)
    rng = np.random.default_rng(2)
    box_names = {"H": 0, "W": 1}
    from edgert.converter import symdim as S
    sess = runtime.Session(data)
    for h, w in zip(random_sizes(rng, 16, 70), random_sizes(rng, 16, 70)):
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        want = ref.run(None, {"x": x})[0].shape
        got = sess.run(None, {"x": x})[0].shape
        assert got == want
        assert [_eval_text(t, {"H": h, "W": w}) for t in dims] == list(want), dims
    out = CliRunner().invoke(main, ["inspect", str(path)]).output
    assert f"output  y: float32[1, 2, {dims[2]}<=" in out, out


def _eval_text(text: str, env: dict) -> int:
    """A dim as inspect shows it, evaluated (ceil, floor, min, max, %, //)."""
    import math
    return int(eval(text.replace("/", "/"), {"ceil": lambda v: math.ceil(v), "floor": lambda v: math.floor(v),
                                             "min": min, "max": max}, dict(env)))


def test_the_runtime_shapes_are_checked_against_the_expressions(monkeypatch):
    """settle() compares the runtime's output shapes at every size it tries with the
    expressions: a wrong expression stops the conversion, naming the output."""
    from edgert.converter import bounds as bounds_
    settle = bounds_.settle

    def wrong(serialize_fn, g, *a):
        dims = g.metadata["sym_dims"]
        y = g.outputs[0]
        dims[y] = tuple(dims[y][:-1]) + (dims[y][-1] + symdim.floordiv(symdim.sym(0, "H"), 50),)
        return settle(serialize_fn, g, *a)

    monkeypatch.setattr(bounds_, "settle", wrong)
    with pytest.raises(edgert.errors.ConversionError, match=r"output 'y' at sizes .* by the ops' semantics"):
        edgert.convert(window_net(), None, input_shapes={"x": [1, 3, (16, 70), (16, 70)]})


# ---- one conversion instead of samples ---------------------------------------------------

def test_one_conversion_where_the_expressions_cover_the_model():
    """The spatial nets of tests/test_bounded_random_sizes.py (checked there against
    onnxruntime at 24 sizes the samples never had) are converted once, their rules from
    the expressions, and so is a GRU over T frames (its sequence_lens computed from Shape
    is T at every size); a model the expressions do not cover (a learned vector tiled to
    T steps: a constant computed from the size that a node reads as data) takes the
    sample conversions and says why."""
    from tests import test_bounded_random_sizes as spatial
    from tests.test_bounded_models import pad_tile_model, recurrent_model
    for name, make in spatial.MODELS.items():
        model, shapes, _ = make()
        md = reader.read(edgert.convert(model, None, input_shapes=shapes))["metadata"]
        assert md["bounds_from"] == "expressions", (name, md.get("bounds_sample_fallback"))
    md = reader.read(edgert.convert(recurrent_model("GRU"), None, input_shapes={"x": [1, (1, 50), 40]}))["metadata"]
    assert md["bounds_from"] == "expressions" and md["output_dims"]["y"] == ["1", "T", "10"]
    md = reader.read(edgert.convert(pad_tile_model(), None, input_shapes={"x": [1, (1, 50), 40]}))["metadata"]
    assert md["bounds_from"] == "samples" and "computed from the input size" in md["bounds_sample_fallback"]


def test_ppocr_det_from_expressions(real_model):
    """PP-OCR det over 32..960 on both sides: one conversion, the output dims
    32*ceil(H/32), the constraint the runtime's tries derive (as with the samples), and
    sizes of every residue it runs against onnxruntime."""
    src = real_model("ppocr_det")
    data = edgert.convert(src, None, input_shapes={"x": [1, 3, (32, 960), (32, 960)]})
    info = reader.read(data)
    md = info["metadata"]
    assert md["bounds_from"] == "expressions"
    h, w = (s["name"] for s in info["bounds"]["symbols"])
    assert md["output_dims"]["sigmoid_0.tmp_0"] == ["1", "1", f"32*ceil({h}/32)", f"32*ceil({w}/32)"]
    assert [s["step"] for s in info["bounds"]["symbols"]] == [[32, [0, 29, 30, 31]]] * 2
    ref = _ort(src)
    sess = runtime.Session(data, max_contexts=1)
    rng = np.random.default_rng(12)
    for hh, ww in [(32, 960), (61, 94), (191, 128), (480, 640), (959, 63)]:
        x = rng.standard_normal((1, 3, hh, ww)).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-3, rtol=0)
