"""shape (ONNX Shape in a shape program: docs/runtime.md, "Shape programs"): the numpy
reference against onnxruntime; the C kernel in bounded files, reading the run-time shape
of an input and of a computed tensor, against onnxruntime at every size; malformed shape
nodes refused at load."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import edgert
from edgert.converter.ir import Graph
from edgert.converter.ops import get as get_op
from edgert.converter.pipeline import build_graph, serialize
from edgert.errors import ModelFormatError
from tests.helpers import make_model, run_ort


@pytest.mark.parametrize("start,end", [(None, None), (1, None), (0, -1), (-2, None), (2, 2), (-9, 9)])
def test_reference_matches_onnxruntime(start, end):
    x = np.zeros((2, 3, 5), np.float32)
    kw = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    want = run_ort(make_model(helper.make_node("Shape", ["x"], ["y"], **kw), {"x": x}, ["y"], opset=17), {"x": x})[0]
    r = 3
    s = min(max((start or 0) + (r if (start or 0) < 0 else 0), 0), r)
    e = min(max((r if end is None else end) + (r if end is not None and end < 0 else 0), 0), r)
    node = type("N", (), {"attrs": {"start": s, "end": e}})
    got = get_op("shape").reference(node, [x])[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _sized_shape():
    """x [1, 2, H, W]; y = Shape(MaxPool(x, 3, stride 2, ceil))[2:] and z = Shape(x)[-1:],
    both graph outputs: run-time shapes read from a computed tensor and from the input."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             helper.make_node("Shape", ["p"], ["y"], start=2), helper.make_node("Shape", ["x"], ["z"], start=-1)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "H", "W"])
    outs = [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("y", "z")]
    m = helper.make_model(helper.make_graph(nodes, "shape", [x], outs), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_kernel_reads_run_time_shapes():
    model = _sized_shape()
    bounds = {"x": [1, 2, (3, 30), (5, 21)]}
    assert build_graph(model, {"x": [1, 2, 30, 21]}, run_time={"y", "z"}).op_counts().get("shape") == 2
    sess = edgert.Session(edgert.convert(model, None, input_shapes=bounds))
    for h, w in ((3, 5), (30, 21), (17, 8), (4, 20), (29, 13)):
        x = np.zeros((1, 2, h, w), np.float32)
        for got, want in zip(sess.run(None, {"x": x}), run_ort(model, {"x": x})):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=str((h, w)))


def _graph(start: int, end: int, out_shape, out_dtype=np.int64) -> Graph:
    g = Graph()
    g.add_tensor("x", (2, 3), np.float32)
    g.inputs.append("x")
    g.add_tensor("y", out_shape, out_dtype)
    g.add_node("shape", ["x"], ["y"], {"start": start, "end": end}, "s")
    g.outputs.append("y")
    return g


@pytest.mark.parametrize("start,end,out_shape,out_dtype,message", [
    (0, 3, (3,), np.int64, r"dims 0\.\.3 of a rank-2 input do not give output \[3\]"),
    (1, 0, (0,), np.int64, r"dims 1\.\.0 of a rank-2 input"),
    (0, 2, (1,), np.int64, r"do not give output \[1\]"),
    (0, 2, (2,), np.int32, "dtype"),
])
def test_bad_shape_refused_at_load(start, end, out_shape, out_dtype, message):
    with pytest.raises(ModelFormatError, match=message):
        edgert.Session(serialize(_graph(start, end, out_shape, out_dtype)))


def test_static_file_reads_its_input_shape():
    sess = edgert.Session(serialize(_graph(0, 2, (2,))))
    np.testing.assert_array_equal(sess.run(None, {"x": np.zeros((2, 3), np.float32)})[0], [2, 3])
