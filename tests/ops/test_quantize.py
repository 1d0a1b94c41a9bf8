"""quantize_linear and dequantize_linear: numpy reference against onnxruntime, C kernel
against the reference (bytes), per tensor and per axis, ties, NaN and saturation."""
import numpy as np
import pytest
from onnx import helper

from tests.helpers import make_model, run_ort

from .s8_util import assert_same, run_node


def _x(rng, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1)[:6] = np.array([0.25, -0.25, 0.75, -0.75, 1e9, -1e9], np.float32)  # ties at scale 0.5
    return x


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("axis", [None, 1])
def test_quantize(dtype, axis):
    rng = np.random.default_rng(0)
    x = _x(rng, (2, 3, 5))
    scale = [0.5] if axis is None else [0.5, 0.25, 2.0]
    zp = [3] if axis is None else [1, -7, 0]
    if dtype == "uint8":
        zp = [z + 128 for z in zp]
    attrs = dict(scale=scale, zero_point=zp, dtype=dtype) | ({} if axis is None else {"axis": axis})
    got, want = run_node("quantize_linear", [(x, False)], attrs)
    assert_same(got, want, "quantize")
    npdt = np.int8 if dtype == "int8" else np.uint8
    s = np.array(scale if axis is not None else scale[0], np.float32)
    z = np.array(zp if axis is not None else zp[0], npdt)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **({} if axis is None else {"axis": axis}))
    ort = run_ort(make_model(node, {"x": x}, ["y"], {"s": s, "z": z}), {"x": x})[0]
    assert_same(got, ort, "onnxruntime")


def test_quantize_nan_gives_zero_point():
    x = np.array([np.nan, 1.0], np.float32)
    got, want = run_node("quantize_linear", [(x, False)], dict(scale=[1.0], zero_point=[-3]))
    assert_same(got, want, "nan")
    assert got[0] == -3


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
def test_dequantize(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (4, 3, 2), endpoint=True).astype(dtype)
    for axis, scale, zp in ((None, [0.1], [0]), (1, [0.1, 0.02, 3.0], [0, 0, 0])):
        if dtype != np.int32:
            zp = [int(info.min) + 5 * (k + 1) for k in range(len(zp))]
        attrs = dict(scale=scale, zero_point=zp) | ({} if axis is None else {"axis": axis})
        got, want = run_node("dequantize_linear", [(x, False)], attrs)
        assert_same(got, want, "dequantize")
        node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **({} if axis is None else {"axis": axis}))
        s = np.array(scale if axis else scale[0], np.float32)
        z = np.array(zp if axis else zp[0], dtype)
        ort = run_ort(make_model(node, {"x": x}, ["y"], {"s": s, "z": z}), {"x": x})[0]
        np.testing.assert_allclose(got, ort, rtol=1e-6, atol=0)


def test_onnx_pair_runs_end_to_end():
    import edgert

    rng = np.random.default_rng(2)
    x = _x(rng, (2, 8))
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])
    dq = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    relu = helper.make_node("Relu", ["y"], ["out"])
    m = make_model([q, dq, relu], {"x": x}, ["out"], {"s": np.array(0.05, np.float32), "z": np.array(-2, np.int8)})
    got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
    want = run_ort(m, {"x": x})[0]
    np.testing.assert_allclose(got, want, atol=0.05 + 1e-6)
