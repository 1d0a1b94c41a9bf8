"""gather, gather_elements, scatter_elements, one_hot: the numpy reference against
onnxruntime, the C kernels end to end with runtime and constant indices (negative,
int32 and int64), runtime indices out of range (an error of the run naming the node,
as in onnxruntime; one_hot: off values, as ONNX says), and rejected cases."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from tests.helpers import assert_close, make_model, run_ort
from tests.ops.test_shape_ops import check, data, graph_reference, rejects, run_edgert

RNG = np.random.default_rng(1)
I64 = np.int64


def idx(shape, n, dtype=I64, neg=True):
    lo = -n if neg else 0
    return RNG.integers(lo, n, shape).astype(dtype)


# ---- gather -----------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,ishape", [
    ((5, 4), 0, (3,)), ((5, 4), 1, (2, 3)), ((3, 4, 5), 1, ()), ((3, 4, 5), -1, (4, 2)), ((7,), 0, (7,)),
    ((2, 3, 4, 5), 2, (6,)),
])
@pytest.mark.parametrize("idtype", [np.int32, np.int64])
def test_gather_runtime_indices(shape, axis, ishape, idtype):
    x = data(shape)
    i = idx(ishape, shape[axis], idtype)
    m = make_model(helper.make_node("Gather", ["x", "i"], ["y"], axis=axis), {"x": x, "i": i}, ["y"], opset=13)
    check(m, {"x": x, "i": i}, threads=(1,))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int64, np.float16, np.bool_])
def test_gather_const_indices_dtypes(dtype):
    x = data((4, 6), dtype)
    m = make_model(helper.make_node("Gather", ["x", "i"], ["y"], axis=1), {"x": x}, ["y"],
                   {"i": np.array([[5, -1], [0, 2]], I64)}, opset=13)
    check(m, {"x": x}, threads=(1,))


def test_gather_embedding_large_threads():
    table = data((500, 64))
    i = idx((4, 80), 500, neg=False)
    m = make_model(helper.make_node("Gather", ["w", "i"], ["y"]), {"i": i}, ["y"], {"w": table}, opset=13)
    check(m, {"i": i})


def run_fails(model, feeds, op, value, n):
    """edgert (1 and 2 threads), the numpy reference and onnxruntime all refuse the run."""
    with pytest.raises(IndexError, match=f"index {value} out of range"):
        graph_reference(model, feeds)
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type (its pybind exception)
        run_ort(model, feeds)
    for t in (1, 2):
        with pytest.raises(edgert.InputError) as ei:
            run_edgert(model, feeds, threads=t)
        assert ei.value.code == 501
        assert f"({op}): index {value} out of range [{-n}, {n})" in str(ei.value), str(ei.value)


@pytest.mark.parametrize("bad", [10, 2**40, -11])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_gather_runtime_out_of_range_fails(bad, dtype):
    """An embedding-style lookup (float or int8 table of 10 rows) with a hostile id."""
    x = data((10, 3), dtype)
    i = np.array([0, bad, 1], I64)
    m = make_model(helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="Gather_12"), {"x": x, "i": i},
                   ["y"], opset=13)
    run_fails(m, {"x": x, "i": i}, "gather", bad, 10)
    with pytest.raises(edgert.InputError, match="node 'Gather_12'"):
        run_edgert(m, {"x": x, "i": i})
    ok = np.array([0, -10, 9], I64)  # negative in range wraps
    assert_close(run_edgert(m, {"x": x, "i": ok})[0], x[[0, 0, 9]])


def test_gather_rejects_const_out_of_range():
    x = data((4, 3))
    m = make_model(helper.make_node("Gather", ["x", "i"], ["y"]), {"x": x}, ["y"], {"i": np.array([4], I64)}, opset=13)
    rejects(m)


def test_gather_rejects_float_indices():
    x, i = data((4, 3)), np.zeros(2, np.float32)
    m = make_model(helper.make_node("Gather", ["x", "i"], ["y"]), {"x": x, "i": i}, ["y"], opset=13)
    rejects(m)


# ---- gather_elements ------------------------------------------------------------------

@pytest.mark.parametrize("dshape,ishape,axis", [
    ((3, 4), (3, 4), 0), ((3, 4), (2, 5), 1), ((2, 3, 4), (2, 3, 4), -1), ((2, 3, 4), (1, 6, 2), 1), ((5,), (9,), 0),
])
@pytest.mark.parametrize("idtype", [np.int32, np.int64])
def test_gather_elements(dshape, ishape, axis, idtype):
    x = data(dshape)
    i = idx(ishape, dshape[axis], idtype)
    m = make_model(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis), {"x": x, "i": i}, ["y"], opset=13)
    check(m, {"x": x, "i": i})


@pytest.mark.parametrize("bad", [300, -301, 10**9, 2**40])
def test_gather_elements_out_of_range_fails(bad):
    x = data((40, 300))
    i = idx((40, 300), 300)
    i[39, 299] = bad
    m = make_model(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1), {"x": x, "i": i}, ["y"], opset=13)
    run_fails(m, {"x": x, "i": i}, "gather_elements", bad, 300)


def test_gather_elements_rejects_larger_indices():
    x = data((3, 4))
    i = np.zeros((4, 4), I64)
    m = make_model(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1), {"x": x, "i": i}, ["y"], opset=13)
    rejects(m)


# ---- scatter_elements -------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction, axis):
    x = data((4, 5))
    i = idx((3, 2) if axis == 0 else (4, 3), 4 if axis == 0 else 5)
    if reduction == "none":  # duplicates would make the result order-dependent
        i = np.stack([RNG.permutation(x.shape[axis])[: i.shape[axis]] for _ in range(i.shape[1 - (axis % 2)])],
                     axis=1 - (axis % 2)).astype(I64)
    u = data(i.shape)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis, reduction=reduction)
    m = make_model(node, {"x": x, "i": i, "u": u}, ["y"], opset=18)
    check(m, {"x": x, "i": i, "u": u}, rtol=1e-5, atol=1e-6, threads=(1,))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_scatter_elements_int_add(dtype):
    x = data((3, 4), dtype)
    i = np.array([[0, 1, 1, 3], [3, 3, 0, 0]], I64)
    u = data((2, 4), dtype)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")
    m = make_model(node, {"x": x, "i": i}, ["y"], {"u": u}, opset=18)
    want = x.copy()
    for r in range(2):
        for c in range(4):
            want[r, i[r, c]] = (want[r, i[r, c]] + u[r, c]).astype(dtype)
    check(m, {"x": x, "i": i}, expected=[want], threads=(1,))


@pytest.mark.parametrize("bad", [4, -5, 2**40])
def test_scatter_elements_out_of_range_fails(bad):
    x = data((3, 4))
    i = np.array([[0, bad], [-4, 1]], I64)
    u = data((2, 2))
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)
    m = make_model(node, {"x": x, "i": i, "u": u}, ["y"], opset=16)
    run_fails(m, {"x": x, "i": i, "u": u}, "scatter_elements", bad, 4)


def test_scatter_elements_rejects_bool_add():
    x = data((3, 4), np.bool_)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")
    m = make_model(node, {"x": x, "i": np.zeros((3, 1), I64), "u": data((3, 1), np.bool_)}, ["y"], opset=18)
    rejects(m)


# ---- one_hot -----------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("idtype", [np.int64, np.int32, np.float32])
def test_one_hot(axis, idtype):
    i = np.array([[0, 3, -1], [9, -10, 2]]).astype(idtype)  # 9 and -10 are out of range for depth 5
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=axis)
    inits = {"d": np.array(5, I64), "v": np.array([0.5, 2.0], np.float32)}
    m = make_model(node, {"i": i}, ["y"], inits, opset=11)
    # onnxruntime takes int64 indices only: the same indices as int64 give the expectation.
    i64 = i.astype(I64)
    want = run_ort(make_model(node, {"i": i64}, ["y"], inits, opset=11), {"i": i64})
    check(m, {"i": i}, expected=want, threads=(1,))


@pytest.mark.parametrize("vdtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_one_hot_value_dtypes(vdtype):
    i = np.array([1, 0, 4, 2], I64)
    v = np.array([0, 1]).astype(vdtype)
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"])
    m = make_model(node, {"i": i}, ["y"], {"d": np.array([4.0], np.float32), "v": v}, opset=11)
    want = (np.arange(4)[None, :] == np.array([1, 0, -1, 2])[:, None]).astype(vdtype)
    check(m, {"i": i}, expected=[want], threads=(1,))


def test_one_hot_rejects_runtime_depth():
    i = np.array([1, 0], I64)
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"])
    m = make_model(node, {"i": i, "d": np.array([4], I64)}, ["y"], {"v": np.array([0, 1], np.float32)}, opset=11)
    with pytest.raises(edgert.EdgertError, match="constant"):
        edgert.convert(m)


def test_scatter_elements_constant_data_is_not_modified():
    # In-place op on a constant: the planner must give the output its own buffer.
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    u = np.full((3, 2), 100, np.float32)
    m = make_model(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1), {"i": np.zeros((3, 2), I64)},
                   ["y"], {"x": x, "u": u}, opset=16)
    sess = edgert.Session(edgert.convert(m))
    for i in (np.array([[0, 1], [2, 3], [1, 1]], I64), np.zeros((3, 2), I64)):
        want = x.copy()
        np.put_along_axis(want, i, 100, axis=1)
        assert_close(sess.run(None, {"i": i})[0], want)
