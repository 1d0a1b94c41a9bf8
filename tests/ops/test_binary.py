"""Element-wise binary ops with broadcasting, where, variadic Sum/Mean/Max/Min: the numpy
reference against onnxruntime, and the C kernels end to end."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.pipeline import build_graph, serialize
from edgert.converter.ir import Graph
from edgert.converter.ops import get as get_op
from tests.helpers import assert_close, check_against_ort, make_model, run_edgert, run_ort
from tests.ops.test_unary import reference

BCAST = [  # (shape of a, shape of b)
    ((2, 3, 4, 5), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (3, 1, 1)),
    ((2, 3, 4, 5), (1,)),
    ((2, 3, 4, 5), ()),
    ((2, 3, 4, 5), (5,)),
    ((2, 3, 4, 5), (2, 1, 4, 1)),
    ((1, 3, 1, 5), (2, 1, 4, 1)),
    ((), (2, 3, 4, 5)),
    ((4, 1), (3, 1, 5)),
    ((1, 1, 1, 1, 1, 2, 1, 3), (2, 2, 1, 3)),
]


def _values(shape, dtype, seed, nonzero=False, positive=False):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if dtype.kind == "f":
        v = rng.standard_normal(shape) * 3
        if positive:
            v = np.abs(v) + 0.1
        v = np.asarray(v, dtype)
        if v.size > 3 and not positive:
            v.flat[:3] = [0.0, -2.5, 1e4] if not nonzero else [1.0, -2.5, 1e4]
        return v
    info = np.iinfo(dtype)
    lo, hi = (max(info.min, -100), min(info.max, 100))
    if positive:
        lo = 1
    v = rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dtype)
    if nonzero:
        v[v == 0] = 1
    return np.asarray(v, dtype)


def _model(op, a, b, attrs=None, opset=18):
    return make_model(helper.make_node(op, ["a", "b"], ["y"], **(attrs or {})), {"a": a, "b": b}, ["y"], opset=opset)


def _check(model, feeds, rtol=1e-6, atol=1e-7):
    """Reference against onnxruntime, then edgert against onnxruntime."""
    want = run_ort(model, feeds)
    with np.errstate(all="ignore"):
        assert_close(reference(model, feeds)[0], want[0], rtol, atol, what="reference")
    check_against_ort(model, feeds, rtol, atol)


ARITH = ["Add", "Sub", "Mul", "Div", "Min", "Max"]


@pytest.mark.parametrize("shapes", BCAST, ids=[f"{a}x{b}" for a, b in BCAST])
@pytest.mark.parametrize("op", ARITH + ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_broadcast_float(op, shapes):
    a = _values(shapes[0], np.float32, 1)
    b = _values(shapes[1], np.float32, 2, nonzero=True)
    _check(_model(op, a, b), {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("op", ARITH + ["Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"])
def test_integer(op, dtype):
    a = _values((3, 4, 5), dtype, 3)
    b = _values((4, 1), dtype, 4, nonzero=True)
    _check(_model(op, a, b), {"a": a, "b": b})


def test_int16_against_reference():
    for op in ARITH + ["Equal", "Less"]:
        a = _values((3, 7), np.int16, 5)
        b = _values((7,), np.int16, 6, nonzero=True)
        m = _model(op, a, b)
        assert_close(run_edgert(m, {"a": a, "b": b})[0], reference(m, {"a": a, "b": b})[0], what=op)


def test_integer_wrap_truncation_and_division_by_zero():
    a = np.array([127, -128, -7, 7, -7, 5, -128, 0], np.int8)
    b = np.array([1, -1, 2, -2, -2, 0, -1, 0], np.int8)
    for op, want in (("Add", [-128, 127, -5, 5, -9, 5, 127, 0]),
                     ("Sub", [126, -127, -9, 9, -5, 5, -127, 0]),
                     ("Mul", [127, -128, -14, -14, 14, 0, -128, 0]),
                     ("Div", [127, -128, -3, -3, 3, 0, -128, 0])):
        got = run_edgert(_model(op, a, b), {"a": a, "b": b})[0]
        np.testing.assert_array_equal(got, np.array(want, np.int8), err_msg=op)
        np.testing.assert_array_equal(reference(_model(op, a, b), {"a": a, "b": b})[0], want, err_msg=op)
    big = np.array([2**31 - 1, -(2**31)], np.int32)
    got = run_edgert(_model("Mul", big, np.array([2, -1], np.int32)), {"a": big, "b": np.array([2, -1], np.int32)})[0]
    np.testing.assert_array_equal(got, [-2, -(2**31)])


def test_float_special_values():
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, 3.0], np.float32)
    b = np.array([1.0, np.nan, np.inf, 2.0, 0.0, -0.0], np.float32)
    for op in ARITH + ["Equal", "Less", "Greater"]:
        m = _model(op, a, b)
        with np.errstate(all="ignore"):
            want = reference(m, {"a": a, "b": b})[0]
        got = run_edgert(m, {"a": a, "b": b})[0]
        assert_close(got, want, what=op)


def test_pow():
    a = _values((3, 4), np.float32, 7, positive=True)
    b = _values((4,), np.float32, 8)
    _check(_model("Pow", a, b, opset=15), {"a": a, "b": b}, rtol=1e-5, atol=1e-6)
    # integer exponents go through a cast; a constant 2 becomes a multiplication
    e = np.array([0, 1, 2, 3], np.int64)
    _check(_model("Pow", a, e, opset=15), {"a": a, "b": e}, rtol=1e-5, atol=1e-6)
    m = make_model(helper.make_node("Pow", ["a", "two"], ["y"]), {"a": a}, ["y"], {"two": np.array(2.0, np.float32)})
    assert [n.op for n in build_graph(m).nodes] == ["mul"]
    check_against_ort(m, {"a": a}, rtol=1e-6, atol=0)
    for dt in (np.int32, np.int64):
        x = np.array([2, -3, 0, 5, 1, -1, 7], dt)
        y = np.array([3, 3, 0, 2, 9, 5, 1], dt)
        _check(_model("Pow", x, y, opset=15), {"a": x, "b": y})
    # negative integer exponents truncate 1/x^-e toward zero
    x = np.array([2, 1, -1, -1, 0], np.int32)
    y = np.array([-1, -5, -2, -3, 2], np.int32)
    np.testing.assert_array_equal(run_edgert(_model("Pow", x, y), {"a": x, "b": y})[0], [0, 1, 1, -1, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(dtype, fmod):
    a = _values((3, 4, 5), dtype, 9)
    b = _values((5,), dtype, 10, nonzero=True)
    if np.dtype(dtype).kind == "f":
        b = np.where(np.abs(b) < 0.5, 1.5, b).astype(dtype)
        if not fmod:  # onnxruntime has no float fmod=0 (added in opset 28): reference only
            m = _model("Mod", a, b, {"fmod": 0})
            assert_close(run_edgert(m, {"a": a, "b": b})[0], np.mod(a, b).astype(dtype), rtol=1e-5, atol=1e-5)
            return
    _check(_model("Mod", a, b, {"fmod": fmod}), {"a": a, "b": b}, rtol=1e-5, atol=1e-5)


def test_mod_float_special_cases():
    x = np.array([0, -0.0, 0, -0.0, -3, 3, -1, 1, np.inf, -np.inf, 1, 1, np.nan, 1], np.float32)
    y = np.array([-2, 2, 2, -2, np.inf, np.inf, -np.inf, -np.inf, 2, 2, 0, -0.0, 2, np.nan], np.float32)
    want = np.array([-0.0, 0, 0, -0.0, np.inf, 3, -1, -np.inf, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
                    np.float32)
    got = run_edgert(_model("Mod", x, y, {"fmod": 0}), {"a": x, "b": y})[0]
    np.testing.assert_array_equal(got, want)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


def test_logic_and_bitwise():
    a = _values((2, 3, 4), np.bool_, 11)
    b = _values((3, 1), np.bool_, 12)
    for op in ("And", "Or", "Xor", "Equal"):
        _check(_model(op, a, b), {"a": a, "b": b})
    for dt in (np.int8, np.uint8, np.int16, np.int32, np.int64):
        x = _values((2, 3, 4), dt, 13)
        y = _values((4,), dt, 14)
        for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
            _check(_model(op, x, y), {"a": x, "b": y})
        m = make_model(helper.make_node("BitwiseNot", ["a"], ["y"]), {"a": x}, ["y"], opset=18)
        check_against_ort(m, {"a": x})


def test_bitshift():
    x = np.array([16, 4, 1, 255, 128, 7], np.uint8)
    s = np.array([1, 2, 3, 1, 7, 0], np.uint8)
    for d in ("LEFT", "RIGHT"):
        _check(_model("BitShift", x, s, {"direction": d}, opset=11), {"a": x, "b": s})
    # signed types (ONNX opset 28): arithmetic right shift, out-of-range amounts
    x = np.array([-8, 4, -1, 64, 1, -64, -8, 4], np.int8)
    s = np.array([1, 2, 127, 1, 7, 1, -1, 9], np.int8)
    left = run_edgert(_model("BitShift", x, s, {"direction": "LEFT"}, opset=11), {"a": x, "b": s})[0]
    right = run_edgert(_model("BitShift", x, s, {"direction": "RIGHT"}, opset=11), {"a": x, "b": s})[0]
    np.testing.assert_array_equal(left, [-16, 16, 0, -128, -128, -128, 0, 0])
    np.testing.assert_array_equal(right, [-4, 1, -1, 32, 0, -32, -1, 0])
    x32 = np.array([-2**31, 1, -1, 5], np.int32)
    s32 = np.array([1, 31, 32, -3], np.int32)
    right = run_edgert(_model("BitShift", x32, s32, {"direction": "RIGHT"}), {"a": x32, "b": s32})[0]
    np.testing.assert_array_equal(right, [-2**30, 0, -1, 0])


@pytest.mark.parametrize("slope_shape", [(5,), (3, 1, 1), (1,), (), (2, 1, 4, 5)])
def test_prelu(slope_shape):
    x = _values((2, 3, 4, 5), np.float32, 15)
    s = _values(slope_shape, np.float32, 16)
    _check(_model("PRelu", x, s), {"a": x, "b": s})
    m = make_model(helper.make_node("PRelu", ["a", "s"], ["y"]), {"a": x}, ["y"], {"s": s})
    check_against_ort(m, {"a": x})


def test_prelu_rejects_slope_that_grows_x():
    x = np.ones((3, 1), np.float32)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model("PRelu", x, np.ones((3, 4), np.float32)))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_, np.int16, np.float16])
def test_where(dtype):
    c = _values((3, 1, 5), np.bool_, 17)
    x = _values((4, 5), dtype, 18)
    y = _values((3, 4, 1), dtype, 19)
    m = make_model(helper.make_node("Where", ["c", "x", "y"], ["z"]), {"c": c, "x": x, "y": y}, ["z"])
    feeds = {"c": c, "x": x, "y": y}
    if dtype in (np.int16, np.bool_):  # no onnxruntime kernels
        assert_close(run_edgert(m, feeds)[0], np.where(c, x, y))
    else:
        check_against_ort(m, feeds)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic(op):
    vals = {"a": _values((2, 3, 4), np.float32, 20), "b": _values((3, 1), np.float32, 21),
            "c": _values((4,), np.float32, 22)}
    m = make_model(helper.make_node(op, list(vals), ["y"]), vals, ["y"], opset=13)
    _check(m, vals, rtol=1e-6, atol=1e-6)
    m = make_model(helper.make_node(op, ["a"], ["y"]), {"a": vals["a"]}, ["y"], opset=13)
    check_against_ort(m, {"a": vals["a"]})


def test_fused_activation_on_add():
    a = _values((2, 8, 5, 5), np.float32, 23)
    b = _values((8, 1, 1), np.float32, 24)
    for act in ("Relu", "Sigmoid", "Tanh"):
        nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node(act, ["s"], ["y"])]
        m = make_model(nodes, {"a": a, "b": b}, ["y"])
        g = build_graph(m)
        assert [n.op for n in g.nodes] == ["add"] and g.nodes[0].attrs.get("act"), act
        assert_close(get_op("add").reference(g.nodes[0], [a, b])[0], run_ort(m, {"a": a, "b": b})[0], 1e-5, 1e-6)
        check_against_ort(m, {"a": a, "b": b}, rtol=1e-5, atol=1e-6)


def test_in_place_chain_and_threads():
    shape = (4, 64, 16, 17)  # 69632 elements: the kernels split the work over threads
    vals = {k: _values(s, np.float32, 30 + i, nonzero=True)
            for i, (k, s) in enumerate({"a": shape, "b": (64, 1, 1), "c": shape, "d": (17,)}.items())}
    nodes = [helper.make_node("Add", ["a", "b"], ["t1"]), helper.make_node("Mul", ["t1", "c"], ["t2"]),
             helper.make_node("Div", ["t2", "d"], ["t3"]), helper.make_node("Sub", ["t3", "a"], ["y"])]
    m = make_model(nodes, vals, ["y"])
    data = edgert.convert(m)
    want = run_ort(m, vals)[0]
    for threads in (1, 2):
        (got,) = edgert.Session(data, threads=threads).run(None, vals)
        assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_rank_8_and_empty():
    a = _values((2, 1, 2, 1, 2, 1, 2, 3), np.float32, 40)
    b = _values((1, 2, 1, 2, 1, 2, 1, 1), np.float32, 41)
    _check(_model("Add", a, b), {"a": a, "b": b})
    g = Graph()
    g.add_tensor("a", (0, 3), np.float32)
    g.add_tensor("b", (3,), np.float32)
    g.inputs += ["a", "b"]
    node = g.add_node("add", ["a", "b"], ["y"])
    shape, dt = get_op("add").infer(node, g)[0]
    g.add_tensor("y", shape, dt)
    g.outputs.append("y")
    sess = edgert.Session(serialize(g))
    (got,) = sess.run(None, {"a": np.zeros((0, 3), np.float32), "b": np.ones(3, np.float32)})
    assert got.shape == (0, 3)


@pytest.mark.parametrize("op,dt", [("Add", np.float16), ("Sub", np.float64), ("And", np.int32),
                                   ("BitwiseAnd", np.float32), ("Less", np.bool_), ("PRelu", np.int32)])
def test_rejected_dtype(op, dt):
    a = np.ones((2, 3), dt)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model(op, a, a, opset=18))


def test_rejected_mixed_pow_and_runtime_float_exponent_on_int():
    x = np.ones((3,), np.int32)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model("Pow", x, np.ones((3,), np.float32), opset=15))


def test_c_prepare_rejects_bad_shapes():
    """A hand-made file whose add output does not match the broadcast fails to load."""
    g = Graph()
    g.add_tensor("a", (2, 3), np.float32)
    g.add_tensor("b", (3,), np.float32)
    g.inputs += ["a", "b"]
    g.add_node("add", ["a", "b"], ["y"], {"act": 0})
    g.add_tensor("y", (4, 3), np.float32)
    g.outputs.append("y")
    with pytest.raises(edgert.EdgertError):
        edgert.Session(serialize(g))


@pytest.mark.parametrize("op,dtype,words", [("add", np.float32, [99, 0.0, 0.0]), ("add", np.float32, []),
                                            ("add", np.int32, [1, 0.0, 0.0]), ("mod", np.int32, [2]),
                                            ("mod", np.int32, []), ("bitshift", np.uint8, [-1])])
def test_c_prepare_rejects_bad_parameter_words(monkeypatch, op, dtype, words):
    """The runtime checks parameter words itself (a file is untrusted)."""
    monkeypatch.setattr(get_op(op), "pack", lambda node, graph: list(words))
    g = Graph()
    g.add_tensor("a", (2, 3), dtype)
    g.add_tensor("b", (3,), dtype)
    g.inputs += ["a", "b"]
    g.add_node(op, ["a", "b"], ["y"])
    g.add_tensor("y", (2, 3), dtype)
    g.outputs.append("y")
    with pytest.raises(edgert.EdgertError):
        edgert.Session(serialize(g))
