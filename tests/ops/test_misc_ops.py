"""cumsum, trilu, topk: the numpy reference against onnxruntime and the C kernels end to
end (axes, exclusive / reverse, k offsets, ties, NaN, dtypes), plus rejected cases."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.helpers import make_model
from tests.ops.test_shape_ops import check, data, one_node, rejects

RNG = np.random.default_rng(2)
I64 = np.int64


# ---- cumsum -------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_cumsum(axis, exclusive, reverse, dtype):
    x = data((3, 4, 5), dtype)
    m = one_node("CumSum", x, {"a": np.array(axis, I64)}, opset=14, exclusive=exclusive, reverse=reverse)
    check(m, {"x": x}, rtol=1e-5, atol=1e-5, threads=(1,))


def test_cumsum_int32_axis_input_and_wraparound():
    x = np.array([2**31 - 1, 1, 5], np.int32)
    m = one_node("CumSum", x, {"a": np.array([0], np.int32)}, opset=14)
    check(m, {"x": x}, expected=[np.array([2**31 - 1, -(2**31), -(2**31) + 5], np.int32)], threads=(1,))


def test_cumsum_rejects_runtime_axis_and_dtype():
    x = data((3, 4))
    m = make_model(helper.make_node("CumSum", ["x", "a"], ["y"]), {"x": x, "a": np.array(0, I64)}, ["y"], opset=14)
    rejects(m, "constant")
    rejects(one_node("CumSum", data((3, 4), np.int8), {"a": np.array(0, I64)}, opset=14))


# ---- trilu --------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -7, 9])
@pytest.mark.parametrize("shape", [(4, 6), (2, 5, 3), (1, 1)])
def test_trilu(upper, k, shape):
    x = data(shape)
    inits = {} if k is None else {"k": np.array(k, I64)}
    check(one_node("Trilu", x, inits, opset=14, upper=upper), {"x": x}, threads=(1,))


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.bool_, np.float16])
def test_trilu_dtypes(dtype):
    x = data((3, 4), dtype)
    m = one_node("Trilu", x, {"k": np.array(1, I64)}, opset=14, upper=0)
    check(m, {"x": x}, expected=[np.tril(x, 1)], threads=(1,))


def test_trilu_huge_k():
    x = data((3, 4))
    m = one_node("Trilu", x, {"k": np.array(-(2**40), I64)}, opset=14, upper=1)
    check(m, {"x": x}, threads=(1,))


# ---- topk ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,k", [((10,), 0, 3), ((4, 9), 1, 4), ((4, 9), 0, 2), ((3, 5, 6), -2, 5),
                                          ((3, 5, 6), 2, 0), ((2, 70), 1, 70)])
@pytest.mark.parametrize("largest", [0, 1])
def test_topk(shape, axis, k, largest):
    x = RNG.permutation(int(np.prod(shape))).astype(np.float32).reshape(shape)  # distinct values
    m = one_node("TopK", x, {"k": np.array([k], I64)}, opset=11, outputs=("v", "i"), axis=axis, largest=largest)
    check(m, {"x": x}, threads=(1,))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.int8, np.int16])
@pytest.mark.parametrize("largest", [0, 1])
def test_topk_ties_prefer_lower_index(dtype, largest):
    x = RNG.integers(0, 4, (3, 12)).astype(dtype)
    m = one_node("TopK", x, {"k": np.array([5], I64)}, opset=11, outputs=("v", "i"), largest=largest)
    order = np.argsort(-x.astype(np.int64) if largest else x, axis=1, kind="stable")[:, :5]
    want = [np.take_along_axis(x, order, 1), order.astype(I64)]
    check(m, {"x": x}, expected=want, threads=(1,))


def test_topk_nan_ranks_highest():
    x = np.array([[1.0, np.nan, 3.0, -np.inf, np.nan, 2.0]], np.float32)
    for largest, idx in ((1, [1, 4, 2, 5]), (0, [3, 0, 5, 2])):
        m = one_node("TopK", x, {"k": np.array([4], I64)}, opset=11, outputs=("v", "i"), largest=largest)
        check(m, {"x": x}, expected=[x[:, idx], np.array([idx], I64)], threads=(1,))


def test_topk_opset9_attr():
    x = data((3, 8))
    check(one_node("TopK", x, opset=9, outputs=("v", "i"), k=3), {"x": x}, threads=(1,))


def test_topk_rejects():
    x = data((3, 8))
    rejects(one_node("TopK", x, {"k": np.array([9], I64)}, opset=11, outputs=("v", "i")))
    m = make_model(helper.make_node("TopK", ["x", "k"], ["v", "i"]), {"x": x, "k": np.array([2], I64)}, ["v", "i"],
                   opset=11)
    rejects(m, "constant")
    rejects(one_node("TopK", data((3, 8), np.bool_), {"k": np.array([2], I64)}, opset=11, outputs=("v", "i")))
