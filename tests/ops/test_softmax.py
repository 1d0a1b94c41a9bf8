"""softmax, log_softmax, hardmax: the numpy reference against onnxruntime, and the C kernels
end to end (last axis, inner axes, opset < 13 flattening, large values, ties, threads),
plus rejected cases."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from tests.helpers import assert_close, check_against_ort, make_model, run_ort
from tests.ops.test_reduce import _graph_reference

OPS = ["Softmax", "LogSoftmax", "Hardmax"]


def _model(op, x, opset=13, **attrs):
    return make_model(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x}, ["y"], opset=opset)


CASES = [((3, 4, 5), None), ((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), -1), ((2, 3, 4, 7), -3),
         ((1, 3), None), ((37,), 0), ((2, 1, 3), 1)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax(op, shape, axis, opset):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 3
    attrs = {} if axis is None else {"axis": axis}
    m = _model(op, x, opset, **attrs)
    want = run_ort(m, {"x": x})
    assert_close(_graph_reference(m, {"x": x})[0], want[0], what="numpy reference")
    check_against_ort(m, {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_large_values_and_ties(op):
    x = np.array([[1000.0, 1001.0, 1002.0, 1002.0], [-1e30, 0.0, -np.inf, 5.0],
                  [3.0, 3.0, 3.0, 3.0]], np.float32)
    for axis in (-1, 0):
        check_against_ort(_model(op, x, axis=axis), {"x": x})


@pytest.mark.parametrize("op", OPS)
def test_large_threads(op):
    rng = np.random.default_rng(1)
    for shape, axis in (((64, 12, 97), -1), ((8, 300, 20), 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        m = _model(op, x, axis=axis)
        want = run_ort(m, {"x": x})[0]
        got = edgert.Session(edgert.convert(m), threads=2).run(None, {"x": x})[0]
        assert_close(got, want, what=f"{shape} axis {axis}")


def test_rejected():
    x = np.zeros((2, 3), np.float16)
    with pytest.raises(edgert.EdgertError, match="float16"):
        edgert.convert(_model("Softmax", x))
    with pytest.raises(edgert.EdgertError, match="out of range"):
        edgert.convert(_model("Softmax", x.astype(np.float32), axis=2))


def test_prepare_rejects_bad_params():
    from tests.ops.test_reduce import mutate_params

    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    for op in OPS:
        for opset, axis in ((13, 1), (11, 1), (13, -1)):
            mutate_params(_model(op, x, opset, axis=axis), {"x": x})


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [-1, 1])
def test_out_of_place(op, axis):
    # Single-node models run in place (the input dies at the node); here the input is
    # used again afterwards, so the output gets its own buffer.
    x = np.random.default_rng(3).standard_normal((3, 70, 9)).astype(np.float32)
    nodes = [helper.make_node(op, ["x"], ["y"], axis=axis), helper.make_node("Neg", ["x"], ["z"])]
    m = make_model(nodes, {"x": x}, ["y", "z"], opset=13)
    check_against_ort(m, {"x": x})
