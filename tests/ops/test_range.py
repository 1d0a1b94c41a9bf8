"""range (ONNX Range whose operands follow the input size: docs/runtime.md, "Shape
programs"): the numpy reference against onnxruntime; the C kernel in bounded files at
every size of a dimension, against onnxruntime; malformed range nodes refused at load,
and a run whose operands no longer give the planned length stopped."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert.converter.ir import Graph
from edgert.converter.ops.range import range_values
from edgert.converter.pipeline import build_graph, serialize
from edgert.errors import ModelFormatError
from tests.helpers import make_model, run_ort

F32, I32, I64 = np.float32, np.int32, np.int64

CASES = [(0.0, 5.0, 1.0, F32), (0.5, 7.3, 0.1, F32), (1.0, -2.0, -0.3, F32), (3.0, 3.0, 1.0, F32),
         (0.25, 1e4, 0.7, F32), (10, -3, -2, I32), (-5, 2**40, 2**37, I64), (7, 7, 3, I64), (0, 10, -1, I64),
         (2**62, -(2**62), -(2**61), I64), (-(2**31), 2**31 - 1, 2**30, I32)]


@pytest.mark.parametrize("start,limit,delta,dtype", CASES)
def test_reference_matches_onnxruntime(start, limit, delta, dtype):
    feeds = {k: np.array(v, dtype) for k, v in (("s", start), ("l", limit), ("d", delta))}
    model = make_model(helper.make_node("Range", ["s", "l", "d"], ["y"]), feeds, ["y"])
    want = run_ort(model, feeds)[0]
    got = range_values(feeds["s"], feeds["l"], feeds["d"])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _sized_range(dtype):
    """x [1, N]; y = Range over operands computed from N (n = Shape(x)[1]): float32
    Range(0.25, n * 0.7, 0.3), int32 Range(n, 0, -1) (descending), int64
    Range(-2, 3n, 2)."""
    inits = {"i1": np.array(1, I64)}
    nodes = [helper.make_node("Shape", ["x"], ["dims"]), helper.make_node("Gather", ["dims", "i1"], ["n"], axis=0)]
    if dtype == F32:
        inits.update(s=np.array(0.25, F32), k=np.array(0.7, F32), d=np.array(0.3, F32))
        nodes += [helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["nf", "k"], ["limit"]), helper.make_node("Range", ["s", "limit", "d"], ["y"])]
    elif dtype == I32:
        inits.update(zero=np.array(0, I32), d=np.array(-1, I32))
        nodes += [helper.make_node("Cast", ["n"], ["start"], to=TensorProto.INT32),
                  helper.make_node("Range", ["start", "zero", "d"], ["y"])]
    else:
        inits.update(s=np.array(-2, I64), k=np.array(3, I64), d=np.array(2, I64))
        nodes += [helper.make_node("Mul", ["n", "k"], ["limit"]), helper.make_node("Range", ["s", "limit", "d"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "N"])
    y = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)
    g = helper.make_graph(nodes, "range", [x], [y], [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("dtype", [F32, I32, I64], ids=["float32", "int32", "int64"])
def test_kernel_follows_the_size(dtype):
    model = _sized_range(dtype)
    data = edgert.convert(model, None, input_shapes={"x": [1, (1, 40)]})
    assert "range" in build_graph(model, {"x": [1, 40]}, run_time={"y"}).op_counts()
    sess = edgert.Session(data)
    for n in range(1, 41):
        x = np.zeros((1, n), np.float32)
        want = run_ort(model, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]
        assert got.dtype == want.dtype and got.shape == want.shape, n
        np.testing.assert_array_equal(got, want, err_msg=str(n))


def _graph(start, limit, delta, length: int) -> Graph:
    """One range node; operands given as arrays are constants, as (shape, dtype) graph inputs."""
    g = Graph()
    names = []
    for name, v in (("s", start), ("l", limit), ("d", delta)):
        if isinstance(v, tuple):
            g.add_tensor(name, *v)
            g.inputs.append(name)
        else:
            g.add_const(np.asarray(v), name)
        names.append(name)
    g.add_tensor("y", (length,), g.tensors["s"].dtype)
    g.add_node("range", names, ["y"], {"length": length}, "r")
    g.outputs.append("y")
    return g


@pytest.mark.parametrize("operands,length,message", [
    ((np.array(0, F32), np.array(5, I64), np.array(1, F32)), 5, "dtype"),
    ((np.array(0, F32), np.array([5, 6], F32), np.array(1, F32)), 5, "operand 1 holds 2 values, not one"),
    ((np.array(0, F32), np.array(5, F32), np.array(1, F32)), 4, "its operands give 5 values"),
    ((np.array(0, I64), np.array(5, I64), np.array(0, I64)), 5, r"give -1 values \(-1: delta 0"),
    ((np.array(0, np.int16), np.array(5, np.int16), np.array(1, np.int16)), 5, "float32, int32 or int64"),
])
def test_bad_range_refused_at_load(operands, length, message):
    with pytest.raises(ModelFormatError, match=rf"node 'r' \(range\).*{message}|{message}"):
        edgert.Session(serialize(_graph(*operands, length)))


def test_run_stops_when_the_operands_give_another_length():
    """A limit that is data (only a file written by hand has one): the run checks that the
    operands give the planned length, never writing another sequence."""
    sess = edgert.Session(serialize(_graph(np.array(1, I64), ((), I64), np.array(2, I64), 4)))
    np.testing.assert_array_equal(sess.run(None, {"l": np.array(8, I64)})[0], [1, 3, 5, 7])
    with pytest.raises(ModelFormatError, match=r"node 'r' \(range\): its operands give 5 values, the output holds 4"):
        sess.run(None, {"l": np.array(10, I64)})
