"""gemm (ONNX Gemm): the numpy reference against onnxruntime, and the C kernel end to end
over transA / transB / alpha / beta, every C broadcast, constant and runtime B, sizes
around the SGEMM tiles, the matrix-vector paths, fused activations, several threads,
plus rejected cases and corrupted parameters."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.pipeline import build_graph
from tests.helpers import assert_close, check_against_ort, make_model, run_ort
from tests.ops.test_reduce import _graph_reference, mutate_params

RTOL = ATOL = 1e-4


def _gemm_model(a, b, c=None, const_b=True, const_c=True, opset=13, **attrs):
    ins = ["a", "b"] + (["c"] if c is not None else [])
    feeds, consts = {"a": a}, {}
    (consts if const_b else feeds)["b"] = b
    if c is not None:
        (consts if const_c else feeds)["c"] = c
    return make_model(helper.make_node("Gemm", ins, ["y"], **attrs), feeds, ["y"], consts, opset=opset), feeds


def _check(model, feeds, threads=1):
    want = run_ort(model, feeds)
    assert_close(_graph_reference(model, feeds)[0], want[0], RTOL, ATOL, what="numpy reference")
    if threads == 1:
        return check_against_ort(model, feeds, RTOL, ATOL)
    got = edgert.Session(edgert.convert(model), threads=threads).run(None, feeds)
    assert_close(got[0], want[0], RTOL, ATOL, what=f"{threads} threads")


SIZES = [(1, 1, 1), (3, 5, 7), (4, 16, 8), (5, 17, 33), (1, 33, 300), (70, 1, 65), (65, 130, 17), (2, 300, 260)]


@pytest.mark.parametrize("mnk", SIZES, ids=[f"{m}x{n}x{k}" for m, n, k in SIZES])
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)], ids=["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("const_b", [True, False], ids=["constB", "runtimeB"])
def test_gemm(mnk, trans, const_b):
    m, n, k = mnk
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(np.float32)
    c = rng.standard_normal((n,)).astype(np.float32)
    model, feeds = _gemm_model(a, b, c, const_b=const_b, transA=trans[0], transB=trans[1], alpha=0.75, beta=1.5)
    _check(model, feeds)


@pytest.mark.parametrize("c_shape", [None, (), (1,), (6,), (5, 1), (1, 6), (5, 6)], ids=str)
def test_c_broadcast(c_shape):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    c = None if c_shape is None else rng.standard_normal(c_shape).astype(np.float32)
    model, feeds = _gemm_model(a, b, c, const_c=False, beta=-0.5)
    _check(model, feeds)
    model, feeds = _gemm_model(a, b, c, beta=0.0, alpha=2.0)
    _check(model, feeds)


def test_defaults_and_threads():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((90, 200)).astype(np.float32), rng.standard_normal((150, 200)).astype(np.float32)
    c = rng.standard_normal((150,)).astype(np.float32)
    model, feeds = _gemm_model(a, b, c, transB=1)
    _check(model, feeds, threads=2)
    model, feeds = _gemm_model(a[:1], b, c, transB=1, const_b=False)
    _check(model, feeds, threads=2)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "LeakyRelu"])
def test_fused_activation(op):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 20)).astype(np.float32), rng.standard_normal((7, 20)).astype(np.float32)
    c = rng.standard_normal((7,)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["t"], transB=1), helper.make_node(op, ["t"], ["y"])]
    model = make_model(nodes, {"a": a}, ["y"], {"b": b, "c": c}, opset=13)
    assert [n.op for n in build_graph(model).nodes] == ["gemm"]
    _check(model, {"a": a})


def test_rejected():
    a = np.ones((2, 3), np.float64)
    model = make_model(helper.make_node("Gemm", ["a", "b"], ["y"]), {"a": a}, ["y"], {"b": np.ones((3, 4))})
    with pytest.raises(edgert.EdgertError):
        edgert.convert(model)


def test_prepare_rejects_bad_params():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    model, feeds = _gemm_model(a, b, rng.standard_normal((4,)).astype(np.float32), const_b=False, alpha=0.5)
    mutate_params(model, feeds)
    model, feeds = _gemm_model(a.T.copy(), b, transA=1, const_b=False)
    mutate_params(model, feeds)
