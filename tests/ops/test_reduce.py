"""reduce_* and argmax / argmin: the numpy reference against onnxruntime, and the C kernels
end to end (contiguous, strided and general axis patterns; keepdims both ways; negative
axes; int and bool dtypes; several threads), plus rejected cases."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
import edgert.fileformat
from edgert.converter.frontend.onnx_import import import_onnx
from edgert.converter.ops import get as get_op
from tests.helpers import assert_close, check_against_ort, make_model, run_ort

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
       "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def _graph_reference(model, feeds):
    """The edgert graph's numpy meaning (lowering + each op's reference)."""
    g = import_onnx(model)
    env = {k: np.asarray(v) for k, v in feeds.items()}
    for n in g.nodes:
        ins = [None if not i else env[i] if i in env else g.tensors[i].data for i in n.inputs]
        for name, val in zip(n.outputs, get_op(n.op).reference(n, ins)):
            env[name] = val
    return [env[o] for o in g.outputs]


def _data(op, shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        lo, hi = (-3, 4) if op != "ReduceProd" else (-2, 3)
        return rng.integers(lo, hi, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.4
    if op == "ReduceLogSum":
        return rng.uniform(0.1, 2.0, shape).astype(dtype)
    if op == "ReduceProd":
        return (rng.uniform(0.7, 1.3, shape) * rng.choice([-1, 1], shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _reduce_model(op, x, axes, keepdims=1, opset=18, noop=None):
    """axes: None (attribute/input left out) or a list. From opset 18 (13 for ReduceSum)
    axes are a constant input, before as an attribute."""
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs, inits = ["x"], {}
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    if axes is not None:
        if as_input:
            inputs.append("axes")
            inits["axes"] = np.array(axes, np.int64)
        else:
            attrs["axes"] = axes
    node = helper.make_node(op, inputs, ["y"], **attrs)
    return make_model(node, {"x": x}, ["y"], inits, opset=opset)


CASES = [
    ((3, 4, 5), [1]),
    ((3, 4, 5), [-1]),
    ((3, 4, 5), [0]),
    ((3, 4, 5), [0, 2]),        # general: reduced-kept-reduced
    ((2, 3, 4, 5), [1, 3]),     # general: kept-reduced-kept-reduced
    ((2, 3, 4, 5), [0, 2, 3]),  # the MVN pattern
    ((2, 1, 7, 1), [1, 2]),     # size-1 dimensions dropped
    ((5, 7), None),             # all axes
    ((17,), [0]),
]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", CASES, ids=[f"{s}-{a}" for s, a in CASES])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_f32(op, shape, axes, keepdims):
    x = _data(op, shape)
    m = _reduce_model(op, x, axes, keepdims)
    want = run_ort(m, {"x": x})
    assert_close(_graph_reference(m, {"x": x})[0], want[0], what="numpy reference")
    check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"])
def test_reduce_opset_11_attribute_axes(op):
    x = _data(op, (4, 6, 3))
    check_against_ort(_reduce_model(op, x, [-2], 0, opset=11), {"x": x})
    check_against_ort(_reduce_model(op, x, [0, 2], 1, opset=11), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_reduce_noop_with_empty_axes(op):
    x = _data(op, (3, 4))
    m = _reduce_model(op, x, [], 1, noop=1)
    want = run_ort(m, {"x": x})
    assert_close(_graph_reference(m, {"x": x})[0], want[0], what="numpy reference")
    check_against_ort(m, {"x": x})
    # Without noop, empty axes reduce everything.
    check_against_ort(_reduce_model(op, x, [], 0, noop=0), {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("axes", [[1], [0, 2], None])
def test_reduce_int(op, dtype, axes):
    x = _data(op, (3, 4, 5), dtype)
    check_against_ort(_reduce_model(op, x, axes, 1), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_bool(op):
    x = _data(op, (4, 3, 5), np.bool_)
    for axes in ([1], [0, 2]):
        m = _reduce_model(op, x, axes, 0, opset=20)
        want = np.any(x, axis=tuple(axes)) if op == "ReduceMax" else np.all(x, axis=tuple(axes))
        got = check_against_ort(m, {"x": x})[0]
        assert_close(got, want)


def test_reduce_large_threads():
    x = _data("ReduceSum", (64, 3, 500), seed=3)
    for op, axes in (("ReduceSum", [2]), ("ReduceMean", [1]), ("ReduceMax", [0, 2]), ("ReduceLogSumExp", [2])):
        m = _reduce_model(op, x, axes, 1)
        want = run_ort(m, {"x": x})[0]
        sess = edgert.Session(edgert.convert(m), threads=2)
        assert_close(sess.run(None, {"x": x})[0], want, what=op)


def test_reduce_nan_and_inf():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, 0.5], [np.inf, 1.0, 2.0]], np.float32)
    m = _reduce_model("ReduceMax", x, [1], 0)
    got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
    assert np.isnan(got[0]) and got[1] == 2.0 and got[2] == np.inf
    m = _reduce_model("ReduceLogSumExp", x[1:], [1], 0)
    check_against_ort(m, {"x": x[1:]})


ARG_CASES = [((3, 4, 5), 1, 1), ((3, 4, 5), -1, 0), ((3, 4, 5), 0, 1), ((7,), 0, 0), ((2, 9), 1, 1)]


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape,axis,keepdims", ARG_CASES)
@pytest.mark.parametrize("last", [0, 1])
def test_arg(op, shape, axis, keepdims, last):
    rng = np.random.default_rng(1)
    x = rng.integers(-2, 3, shape).astype(np.float32)  # many ties
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    m = make_model(node, {"x": x}, ["y"], opset=13)
    want = run_ort(m, {"x": x})
    assert_close(_graph_reference(m, {"x": x})[0], want[0], what="numpy reference")
    check_against_ort(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_arg_int(dtype):
    x = np.random.default_rng(2).integers(-5, 5, (4, 6)).astype(dtype)
    for op in ("ArgMax", "ArgMin"):
        node = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0)
        m = make_model(node, {"x": x}, ["y"], opset=13)
        want = (np.argmax if op == "ArgMax" else np.argmin)(x, axis=1)
        got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
        assert_close(got, want.astype(np.int64))


def test_rejected():
    x = _data("ReduceSum", (3, 4))
    # axes depending on runtime data
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"])
    m = make_model(node, {"x": x, "axes": np.array([1], np.int64)}, ["y"], opset=13)
    with pytest.raises(edgert.EdgertError, match="axes"):
        edgert.convert(m)
    # integer mean, axis out of range, repeated axes
    xi = x.astype(np.int32)
    with pytest.raises(edgert.EdgertError, match="int32"):
        edgert.convert(_reduce_model("ReduceMean", xi, [1], 1))
    with pytest.raises(edgert.EdgertError, match="out of range"):
        edgert.convert(_reduce_model("ReduceSum", x, [2], 1))
    with pytest.raises(edgert.EdgertError, match="repeated"):
        edgert.convert(_reduce_model("ReduceSum", x, [1, -1], 1))
    # float16 argmax
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=0)
    m = make_model(node, {"x": x.astype(np.float16)}, ["y"], opset=13)
    with pytest.raises(edgert.EdgertError, match="float16"):
        edgert.convert(m)


# ---- prepare rejects bad parameters (the file is untrusted) -----------------------------

BAD_WORDS = [0xFFFFFFFF, 0, 1, 2, 3, 7, 8, 99, 0x7FFFFFFF, 0x80000000, 0x3F800000, 0x7FC00000]


def mutate_params(model, feeds):
    """Converts `model`, then sets each parameter word in turn to each of BAD_WORDS: every
    load must succeed (and then run) or fail with an EdgertError."""
    import struct

    data = edgert.convert(model)
    n, toff = struct.unpack_from("<I", data, 28)[0], struct.unpack_from("<Q", data, 32)[0]
    secs = {}
    for k in range(n):
        kind, _, off, size, _, _ = struct.unpack_from("<IIQQII", data, toff + 32 * k)
        secs[kind] = (off, size)
    off, size = secs[5]  # PARAMS
    accepted = 0
    for w in range(size // 4):
        for bad in BAD_WORDS:
            d = bytearray(data)
            struct.pack_into("<I", d, off + 4 * w, bad)
            edgert.fileformat.seal(d)
            try:
                sess = edgert.Session(bytes(d))
            except edgert.EdgertError:
                continue
            accepted += 1
            sess.run(None, feeds)
    return accepted


def test_prepare_rejects_bad_params():
    x = _data("ReduceSum", (3, 4, 5))
    for op in ("ReduceSum", "ReduceMax"):
        for axes in ([1], [0, 2], None):
            mutate_params(_reduce_model(op, x, axes, 1), {"x": x})
            mutate_params(_reduce_model(op, x, axes, 0), {"x": x})
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0)
    mutate_params(make_model(node, {"x": x}, ["y"], opset=13), {"x": x})
