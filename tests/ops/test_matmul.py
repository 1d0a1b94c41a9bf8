"""matmul (ONNX MatMul): the numpy reference against onnxruntime, and the C kernel end to
end over rank-1 operands, batch broadcasting (folded into rows or one GEMM per batch
element), constant weights, sizes around the SGEMM tiles, fused activation, several
threads, plus rejected cases and corrupted parameters."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.pipeline import build_graph
from tests.helpers import assert_close, check_against_ort, make_model, run_ort
from tests.ops.test_reduce import _graph_reference, mutate_params

RTOL = ATOL = 1e-4


def _mm_model(a, b, const_b=False):
    feeds, consts = {"a": a}, {}
    (consts if const_b else feeds)["b"] = b
    return make_model(helper.make_node("MatMul", ["a", "b"], ["y"]), feeds, ["y"], consts, opset=13), feeds


def _check(model, feeds, threads=1):
    want = run_ort(model, feeds)
    assert_close(_graph_reference(model, feeds)[0], want[0], RTOL, ATOL, what="numpy reference")
    if threads == 1:
        return check_against_ort(model, feeds, RTOL, ATOL)
    got = edgert.Session(edgert.convert(model), threads=threads).run(None, feeds)
    assert_close(got[0], want[0], RTOL, ATOL, what=f"{threads} threads")


SHAPES = [
    ((5,), (5,)),
    ((7,), (7, 3)),
    ((4, 7), (7,)),
    ((3, 4, 7), (7,)),
    ((9,), (2, 9, 5)),
    ((3, 5), (5, 17)),
    ((2, 3, 5), (5, 17)),
    ((2, 3, 5), (1, 5, 17)),
    ((2, 3, 33, 20), (20, 18)),
    ((2, 1, 4, 6), (3, 6, 5)),
    ((1, 4, 6), (2, 3, 6, 5)),
    ((2, 3, 4, 6), (2, 3, 6, 5)),
    ((3, 1, 6), (3, 6, 1)),
    ((1, 65), (65, 300)),
    ((130, 300), (300, 20)),
]


@pytest.mark.parametrize("shapes", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
@pytest.mark.parametrize("const_b", [False, True], ids=["runtimeB", "constB"])
def test_matmul(shapes, const_b):
    rng = np.random.default_rng(len(shapes[0]) * 100 + shapes[0][-1])
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    model, feeds = _mm_model(a, b, const_b)
    _check(model, feeds)


def test_threads():
    rng = np.random.default_rng(2)
    for sa, sb in (((4, 50, 64), (64, 70)), ((3, 20, 40), (3, 40, 30)), ((1, 200), (200, 600))):
        a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
        model, feeds = _mm_model(a, b, const_b=True)
        _check(model, feeds, threads=2)


def test_fused_activation():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 5, 8)).astype(np.float32), rng.standard_normal((8, 6)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, {"a": a}, ["y"], {"b": b}, opset=13)
    assert [n.op for n in build_graph(model).nodes] == ["matmul"]
    _check(model, {"a": a})


def test_rejected():
    a = np.ones((2, 3), np.int32)
    model = make_model(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a}, ["y"], {"b": np.ones((3, 4), np.int32)})
    with pytest.raises(edgert.EdgertError):
        edgert.convert(model)
    model = make_model(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": np.ones((2, 3), np.float32)}, ["y"],
                       {"b": np.ones((4, 4), np.float32)})
    with pytest.raises(edgert.EdgertError):
        edgert.convert(model)


def test_prepare_rejects_bad_params():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    model, feeds = _mm_model(a, b)
    mutate_params(model, feeds)
