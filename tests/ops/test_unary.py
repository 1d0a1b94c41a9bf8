"""Element-wise unary ops: the numpy reference against onnxruntime, and the C kernels end
to end (one-node ONNX models through edgert) on odd shapes and edge values."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.frontend.onnx_import import import_onnx
from edgert.converter.ir import Graph
from edgert.converter.ops import get as get_op
from tests.helpers import assert_close, check_against_ort, make_model, run_edgert, run_ort

OPSET = 20
SHAPE = (2, 3, 5, 7)  # 210 elements, odd inner dimension


def reference(model, feeds):
    """The edgert graph's numpy meaning (lowering + edgert.converter.ops reference), no passes."""
    g = import_onnx(model)
    env = {k: np.asarray(v) for k, v in feeds.items()}
    for n in g.nodes:
        ins = [None if not i else env[i] if i in env else g.tensors[i].data for i in n.inputs]
        for name, val in zip(n.outputs, get_op(n.op).reference(n, ins)):
            env[name] = val
    return [env[o] for o in g.outputs]


def _data(kind: str, shape=SHAPE, seed=0) -> np.ndarray:
    """Random float32 values in the op's domain, with edge values at the front."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if kind == "unit":  # (-1, 1)
        edge = [0.0, -0.0, 0.5, -0.5, 0.999, -0.999]
        v = rng.uniform(-0.99, 0.99, n)
    elif kind == "pos":  # (0, inf)
        edge = [1.0, 1e-6, 1e3, 0.5, 2.0]
        v = rng.uniform(0.01, 10.0, n)
    elif kind == "ge1":  # [1, inf)
        edge = [1.0, 1.5, 100.0]
        v = rng.uniform(1.0, 10.0, n)
    elif kind == "trig":  # moderate range, away from tan's poles
        edge = [0.0, -0.0, 1.0, -1.0, 1.5, -1.5]
        v = rng.uniform(-1.5, 1.5, n)
    elif kind == "small":  # exp/sinh/cosh: keep results finite in float32
        edge = [0.0, -0.0, 20.0, -20.0, 80.0, -80.0]
        v = rng.standard_normal(n) * 4
    else:  # general: negatives, zeros, halves (round), large values
        edge = [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 1e-7, -1e-7, 60.0, -60.0, 1e4, -1e4, 3.0, -3.0]
        v = rng.standard_normal(n) * 3
    k = min(len(edge), n)
    v[:k] = edge[:k]
    return v.astype(np.float32).reshape(shape)


# ONNX op -> (attributes, data kind, rtol, atol)
FLOAT_OPS = {
    "Relu": ({}, "any", 0, 0),
    "Sigmoid": ({}, "any", 1e-5, 1e-6),
    "Tanh": ({}, "any", 1e-5, 1e-6),
    "Exp": ({}, "small", 1e-5, 1e-6),
    "Log": ({}, "pos", 1e-5, 1e-6),
    "Abs": ({}, "any", 0, 0),
    "Neg": ({}, "any", 0, 0),
    "Sqrt": ({}, "pos", 1e-6, 0),
    "Reciprocal": ({}, "pos", 1e-6, 0),
    "Floor": ({}, "any", 0, 0),
    "Ceil": ({}, "any", 0, 0),
    "Round": ({}, "any", 0, 0),
    "Erf": ({}, "any", 1e-5, 1e-6),
    "Sin": ({}, "any", 1e-4, 1e-6),
    "Cos": ({}, "any", 1e-4, 1e-6),
    "Tan": ({}, "trig", 1e-4, 1e-6),
    "Asin": ({}, "unit", 1e-5, 1e-6),
    "Acos": ({}, "unit", 1e-5, 1e-6),
    "Atan": ({}, "any", 1e-5, 1e-6),
    "Sinh": ({}, "small", 1e-5, 1e-6),
    "Cosh": ({}, "small", 1e-5, 1e-6),
    "Asinh": ({}, "any", 1e-5, 1e-6),
    "Acosh": ({}, "ge1", 1e-5, 1e-6),
    "Atanh": ({}, "unit", 1e-5, 1e-6),
    "Softplus": ({}, "small", 1e-5, 1e-6),
    "Softsign": ({}, "any", 1e-6, 1e-7),
    "Elu": ({"alpha": 0.7}, "any", 1e-5, 1e-6),
    "Selu": ({}, "any", 1e-5, 1e-6),
    "Celu": ({"alpha": 1.3}, "any", 1e-5, 1e-6),
    "LeakyRelu": ({"alpha": 0.1}, "any", 1e-6, 0),
    "ThresholdedRelu": ({"alpha": 0.5}, "any", 0, 0),
    "HardSigmoid": ({"alpha": 0.3, "beta": 0.4}, "any", 1e-6, 1e-7),
    "HardSwish": ({}, "any", 1e-5, 1e-6),
    "Gelu": ({}, "any", 1e-5, 1e-6),
    "Mish": ({}, "small", 1e-5, 1e-6),
    "Sign": ({}, "any", 0, 0),
    "Shrink": ({"lambd": 0.7, "bias": 0.2}, "any", 1e-6, 1e-7),
}


def _model(op, x, attrs=None, opset=OPSET):
    return make_model(helper.make_node(op, ["x"], ["y"], **(attrs or {})), {"x": x}, ["y"], opset=opset)


@pytest.mark.parametrize("op", sorted(FLOAT_OPS))
def test_float_op(op):
    attrs, kind, rtol, atol = FLOAT_OPS[op]
    x = _data(kind)
    model = _model(op, x, attrs)
    want = run_ort(model, {"x": x})
    assert_close(reference(model, {"x": x})[0], want[0], max(rtol, 1e-6), max(atol, 1e-7), what=f"{op} reference")
    check_against_ort(model, {"x": x}, rtol=max(rtol, 1e-6), atol=max(atol, 1e-7))


def test_gelu_tanh_and_defaults():
    x = _data("any", (3, 17))
    check_against_ort(_model("Gelu", x, {"approximate": "tanh"}), {"x": x}, rtol=1e-5, atol=1e-6)
    for op in ("Elu", "LeakyRelu", "HardSigmoid", "ThresholdedRelu", "Celu", "Shrink"):
        check_against_ort(_model(op, x), {"x": x}, rtol=1e-5, atol=1e-6)


def test_softplus_large_values_stay_finite():
    x = np.array([-100.0, -20.0, 0.0, 20.0, 100.0, 1e30], np.float32)
    (got,) = run_edgert(_model("Softplus", x), {"x": x})
    np.testing.assert_allclose(got, [0.0, 2.0611537e-09, np.log(2.0), 20.0, 100.0, 1e30], rtol=1e-6, atol=1e-12)


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 8388607.5, 1e10, -3.7], np.float32)
    (got,) = run_edgert(_model("Round", x), {"x": x})
    np.testing.assert_array_equal(got, np.round(x))


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_signed_integer_ops(op, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    x = rng.integers(info.min + 1, info.max, size=(3, 11), dtype=dtype)
    x.flat[:4] = [0, -1, 1, info.max]
    model = _model(op, x)
    if dtype != np.int16:  # onnxruntime has no int16 kernels for these
        check_against_ort(model, {"x": x})
    # Negating the most negative value wraps, as two's complement.
    x.flat[0] = info.min
    (got,) = run_edgert(model, {"x": x})
    assert_close(got, reference(model, {"x": x})[0])


def test_nan_and_inf_pass_through():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.0], np.float32)
    for op in ("Relu", "Abs", "Neg", "Sigmoid", "Tanh", "Sign", "Floor", "Round", "Sqrt"):
        model = _model(op, x)
        with np.errstate(all="ignore"):
            want = reference(model, {"x": x})[0]
        (got,) = run_edgert(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True, err_msg=op)


def test_chain_runs_in_place():
    x = _data("any", (4, 33))
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
             helper.make_node("Neg", ["b"], ["c"]), helper.make_node("Tanh", ["c"], ["y"])]
    check_against_ort(make_model(nodes, {"x": x}, ["y"]), {"x": x}, rtol=1e-5, atol=1e-6)


def test_large_tensor_uses_threads():
    x = _data("any", (4, 64, 16, 17))
    model = _model("Gelu", x)
    data = edgert.convert(model)
    want = run_ort(model, {"x": x})[0]
    for threads in (1, 2):
        (got,) = edgert.Session(data, threads=threads).run(None, {"x": x})
        assert_close(got, want, rtol=1e-5, atol=1e-6)


# ---- clip ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("bounds", [(-2, 3), (None, 3), (-2, None), (None, None), (5, 1)])
def test_clip_constant_bounds(dtype, bounds):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 4, 5)) * 4).astype(dtype) if dtype != np.uint8 else \
        rng.integers(0, 10, (3, 4, 5)).astype(dtype)
    lo, hi = bounds
    if dtype == np.uint8 and lo is not None:
        lo = abs(lo)
    names, inits = ["x"], {}
    for nm, v in (("lo", lo), ("hi", hi)):
        names.append(nm if v is not None else "")
        if v is not None:
            inits[nm] = np.array(v, dtype)
    node = helper.make_node("Clip", names, ["y"])
    model = make_model(node, {"x": x}, ["y"], inits, opset=13)
    ort_ok = not (dtype == np.uint8 and lo is None and hi is None)
    if ort_ok:
        check_against_ort(model, {"x": x})
    assert_close(run_edgert(model, {"x": x})[0], reference(model, {"x": x})[0])


def test_clip_runtime_bounds_and_old_opset():
    x = _data("any", (5, 6))
    lo, hi = np.array(-1.0, np.float32), np.array(2.0, np.float32)
    model = make_model(helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), {"x": x, "lo": lo, "hi": hi}, ["y"])
    check_against_ort(model, {"x": x, "lo": lo, "hi": hi})
    model = make_model(helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25), {"x": x}, ["y"], opset=10)
    check_against_ort(model, {"x": x})


def test_clip_int_bounds_beyond_dtype_range_are_clamped():
    g = Graph()
    g.add_tensor("x", (6,), np.int8)
    g.inputs.append("x")
    node = g.add_node("clip", ["x"], ["y"], {"min": -1000, "max": 100})
    shape, dt = get_op("clip").infer(node, g)[0]
    g.add_tensor("y", shape, dt)
    g.outputs.append("y")
    from edgert.converter.pipeline import serialize

    x = np.array([-128, -5, 0, 99, 100, 127], np.int8)
    (got,) = edgert.Session(serialize(g)).run(None, {"x": x})
    np.testing.assert_array_equal(got, [-128, -5, 0, 99, 100, 100])


# ---- bool, classification, copy ---------------------------------------------------------


def test_not():
    x = np.random.default_rng(3).random((3, 4, 5)) > 0.5
    check_against_ort(_model("Not", x), {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_isnan_isinf(dtype):
    x = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 1e-7, -np.nan], dtype)
    check_against_ort(_model("IsNaN", x), {"x": x})
    for attrs in ({}, {"detect_positive": 0}, {"detect_negative": 0}):
        check_against_ort(_model("IsInf", x, attrs), {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64])
def test_copy(dtype):
    g = Graph()
    g.add_tensor("x", (3, 5), dtype)
    g.inputs.append("x")
    g.add_node("copy", ["x"], ["y"])
    g.add_tensor("y", (3, 5), dtype)
    g.outputs.append("y")
    from edgert.converter.pipeline import serialize

    x = (np.arange(15).reshape(3, 5) % 7).astype(dtype)
    (got,) = edgert.Session(serialize(g)).run(None, {"x": x})
    assert_close(got, x)


def test_identity_and_dropout_are_the_input():
    x = _data("any", (3, 4))
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["b"]),
             helper.make_node("Dropout", ["b"], ["c", "mask"]), helper.make_node("Neg", ["c"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y", "mask"], opset=13)
    got = check_against_ort(model, {"x": x})
    assert got[1].dtype == np.bool_ and got[1].all()


def test_swish():
    x = _data("any", (3, 7))
    for alpha in (1.0, 0.5):
        model = _model("Swish", x, {"alpha": alpha}, opset=24)
        with np.errstate(over="ignore"):
            want = x / (1 + np.exp(-alpha * x.astype(np.float64)))
        assert_close(run_edgert(model, {"x": x})[0], want.astype(np.float32), rtol=1e-5, atol=1e-6)


# ---- rejections -----------------------------------------------------------------------------


@pytest.mark.parametrize("op,dtype", [("Relu", np.int32), ("Sqrt", np.float16), ("Exp", np.float64),
                                      ("Not", np.int32), ("Abs", np.uint8), ("Sigmoid", np.int64)])
def test_rejected_dtype(op, dtype):
    x = np.ones((2, 3), dtype)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model(op, x, opset=OPSET))


def test_rejected_attribute_values():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model("Gelu", x, {"approximate": "fast"}))
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model("Celu", x, {"alpha": 0.0}))
    x = np.ones((2, 3), np.float32)
    t = np.array(True)
    nodes = helper.make_node("Dropout", ["x", "", "t"], ["y"])
    with pytest.raises(edgert.EdgertError):
        edgert.convert(make_model(nodes, {"x": x, "t": t}, ["y"], opset=13))
    nodes = helper.make_node("Dropout", ["x"], ["y", "mask"])
    with pytest.raises(edgert.EdgertError):  # before opset 10 the mask's meaning is unclear
        edgert.convert(make_model(nodes, {"x": x}, ["y", "mask"], opset=9))


def _one_node_file(op, attrs, dtype=np.float32, shape=(2, 3)):
    g = Graph()
    g.add_tensor("x", shape, dtype)
    g.inputs.append("x")
    node = g.add_node(op, ["x"], ["y"], attrs)
    out_shape, out_dt = get_op(op).infer(node, g)[0]
    g.add_tensor("y", out_shape, out_dt)
    g.outputs.append("y")
    from edgert.converter.pipeline import serialize

    return serialize(g)


@pytest.mark.parametrize("op,attrs,words", [("gelu", {}, [7]), ("gelu", {}, []), ("clip", {}, [0.0, 1.0]),
                                            ("isinf", {}, [1, 2]), ("elu", {}, []), ("celu", {}, [0.0])])
def test_c_prepare_rejects_bad_parameter_words(monkeypatch, op, attrs, words):
    """The runtime checks parameter words itself (a file is untrusted)."""
    monkeypatch.setattr(get_op(op), "pack", lambda node, graph: list(words))
    with pytest.raises(edgert.EdgertError):
        edgert.Session(_one_node_file(op, attrs))
