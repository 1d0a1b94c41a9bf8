"""cast (ONNX Cast, CastLike): the numpy reference against onnxruntime, and the C kernel
end to end, over every pair of edgert dtypes, float16 bit patterns and saturation."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import edgert
from edgert import dtypes
from edgert.converter.pipeline import build_graph
from edgert.converter.ops.cast import cast_reference
from tests.helpers import assert_close, check_against_ort, make_model, run_edgert, run_ort
from tests.ops.test_unary import reference

TYPES = [np.float32, np.float16, np.uint8, np.int8, np.int16, np.int32, np.int64, np.bool_]


def _model(x, to, opset=19):
    node = helper.make_node("Cast", ["x"], ["y"], to=dtypes.code_of(to))
    return make_model(node, {"x": x}, ["y"], opset=opset)


def _in_range_values(src, dst, shape=(3, 5, 7), seed=0):
    """Values of type src whose conversion to dst is defined in ONNX (no float overflow)."""
    rng = np.random.default_rng(seed)
    src, dst = np.dtype(src), np.dtype(dst)
    if src == np.bool_:
        return rng.random(shape) > 0.5
    if dst == np.bool_ or dst.kind == "f":
        lo, hi = -100, 100
    else:
        info = np.iinfo(dst)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
    if src.kind == "f":
        v = rng.uniform(lo, hi, shape)
        v.flat[:4] = [0.0, 0.75, -0.75 if lo < 0 else 0.25, 2.5]
        return v.astype(src)
    info = np.iinfo(src)
    lo, hi = max(lo if dst.kind in "iu" else -1000, info.min), min(hi, info.max)
    v = rng.integers(lo, hi + 1, shape, dtype=np.int64)
    v.flat[0] = 0
    return v.astype(src)


@pytest.mark.parametrize("dst", TYPES, ids=[np.dtype(t).name for t in TYPES])
@pytest.mark.parametrize("src", TYPES, ids=[np.dtype(t).name for t in TYPES])
def test_cast_pair(src, dst):
    x = _in_range_values(src, dst)
    m = _model(x, dst)
    want = run_ort(m, {"x": x})[0]
    assert_close(reference(m, {"x": x})[0], want, rtol=0, atol=0, what="reference")
    got = run_edgert(m, {"x": x})[0]
    assert_close(got, want, rtol=0, atol=0)
    if src == dst:
        # No conversion: only the copy that gives the graph output its own name remains.
        assert [n.op for n in build_graph(m).nodes] == ["copy"]


def test_integer_narrowing_wraps():
    x = np.array([300, -129, 2**40 + 5, -(2**63), 255, -1], np.int64)
    for dst in (np.uint8, np.int8, np.int16, np.int32):
        check_against_ort(_model(x, dst), {"x": x})


def test_float_to_int_truncates_and_saturates():
    x = np.array([1.9, -1.9, 0.5, -0.5, 127.9, 128.0, -129.5, 1e10, -1e10, np.inf, -np.inf, np.nan,
                  2147483520.0, 2147483648.0, -2147483648.0, 255.5, 256.0], np.float32)
    big, imax, imin = 10**10, 2**31 - 1, -(2**31)
    expect = {
        np.int8: [1, -1, 0, 0, 127, 127, -128, 127, -128, 127, -128, 0, 127, 127, -128, 127, 127],
        np.uint8: [1, 0, 0, 0, 127, 128, 0, 255, 0, 255, 0, 0, 255, 255, 0, 255, 255],
        np.int16: [1, -1, 0, 0, 127, 128, -129, 32767, -32768, 32767, -32768, 0, 32767, 32767, -32768, 255, 256],
        np.int32: [1, -1, 0, 0, 127, 128, -129, imax, imin, imax, imin, 0, 2147483520, imax, imin, 255, 256],
        np.int64: [1, -1, 0, 0, 127, 128, -129, big, -big, 2**63 - 1, -(2**63), 0, 2147483520, 2**31, imin,
                   255, 256],
    }
    for dst, want in expect.items():
        got = run_edgert(_model(x, dst), {"x": x})[0]
        np.testing.assert_array_equal(got, np.array(want, dst), err_msg=np.dtype(dst).name)
        np.testing.assert_array_equal(cast_reference(x, dst), np.array(want, dst), err_msg=np.dtype(dst).name)
    edge = np.array([9.2233715e18, -9.2233715e18, 9.2e18, -9.2e18], np.float32)
    for dst in (np.int64, np.int32):
        np.testing.assert_array_equal(run_edgert(_model(edge, dst), {"x": edge})[0], cast_reference(edge, dst))
    (got,) = run_edgert(_model(x, np.bool_), {"x": x})
    np.testing.assert_array_equal(got, x != 0)


def test_float16_every_bit_pattern():
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    h = bits.view(np.float16)
    (got,) = run_edgert(_model(h, np.float32), {"x": h})
    want = h.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


def test_float32_to_float16_rounding():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    # plus the boundaries: max half, halfway to infinity, subnormal halves, ties
    extra = np.array([65504.0, 65519.99, 65520.0, 1e6, -1e6, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0000001,
                      2.0**-24 * 1.5, 2.0**-24 * 2.5, 2.0**-14, 2.0**-14 * (1 - 2.0**-11), 1.0 + 2.0**-11,
                      1.0 + 3 * 2.0**-11, -0.0, np.inf, -np.inf, np.nan], np.float32)
    x = np.concatenate([x, extra])
    (got,) = run_edgert(_model(x, np.float16), {"x": x})
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint16), want[ok].view(np.uint16))


def test_int_to_float16_and_float32():
    x = np.array([0, 1, -1, 2049, 65504, 65520, 70000, -70000, 16777217, 2**62], np.int64)
    for dst in (np.float16, np.float32):
        (got,) = run_edgert(_model(x, dst), {"x": x})
        np.testing.assert_array_equal(got, cast_reference(x, dst))
    check_against_ort(_model(x[:5], np.float16), {"x": x[:5]})


def test_castlike():
    x = _in_range_values(np.float32, np.int32, (4, 6))
    like = np.zeros((1,), np.int32)
    m = make_model(helper.make_node("CastLike", ["x", "like"], ["y"]), {"x": x}, ["y"], {"like": like}, opset=15)
    check_against_ort(m, {"x": x})
    m = make_model(helper.make_node("CastLike", ["x", "like"], ["y"]), {"x": x, "like": like.astype(np.float16)},
                   ["y"], opset=15)
    check_against_ort(m, {"x": x, "like": like.astype(np.float16)})


def test_large_cast_uses_threads():
    x = np.random.default_rng(6).standard_normal((4, 64, 16, 17)).astype(np.float32) * 100
    data = edgert.convert(_model(x, np.float16))
    for threads in (1, 2):
        (got,) = edgert.Session(data, threads=threads).run(None, {"x": x})
        np.testing.assert_array_equal(got, x.astype(np.float16))


@pytest.mark.parametrize("to", [TensorProto.DOUBLE, TensorProto.STRING, TensorProto.BFLOAT16,
                                TensorProto.FLOAT8E4M3FN, TensorProto.UINT16, TensorProto.UINT32])
def test_rejected_target(to):
    x = np.ones((2, 3), np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(make_model(node, {"x": x}, ["y"], opset=19))


def test_rejected_input_type():
    x = np.ones((2, 3), np.float64)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_model(x, np.float32))


@pytest.mark.parametrize("words", [[11], [], [6]])
def test_c_prepare_rejects_bad_target_word(monkeypatch, words):
    """The target word must name a supported dtype equal to the output's."""
    from edgert.converter.pipeline import serialize
    from edgert.converter.ir import Graph
    from edgert.converter.ops import get as get_op

    monkeypatch.setattr(get_op("cast"), "pack", lambda node, graph: list(words))
    g = Graph()
    g.add_tensor("x", (2, 3), np.float32)
    g.inputs.append("x")
    g.add_node("cast", ["x"], ["y"], {"to": "float16"})
    g.add_tensor("y", (2, 3), np.float16)
    g.outputs.append("y")
    with pytest.raises(edgert.EdgertError):
        edgert.Session(serialize(g))
