"""Constant folding at its edges: what onnx's evaluator cannot compute is lowered and run
(or folded) by edgert's own kernels, and a convolution or product too costly to
evaluate at convert time is left to the runtime, as onnxruntime runs it. The graphs
are the random-graph tester's minimal cases (tools/fuzz_graphs.py)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.runtime import reader
from tests.helpers import check_against_ort, make_model


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_with_negative_pads_on_a_constant(mode, seed):
    """Pad that crops (negative pads) a constant feeding the graph: the importer's
    evaluation of it failed ("index can't contain negative values"); random pads,
    cropping and growing mixed, at least one negative."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.integers(5, 9, 4))
    # reflect and edge need an axis of at least 2 after the crop, and reflect pads below it
    pads = rng.integers(-2, 3, 8) if mode == "constant" else rng.integers(-1, 2, 8)
    pads[int(rng.integers(0, 8))] = -1
    c = rng.standard_normal(shape).astype(np.float32)
    out_shape = [d + int(pads[k]) + int(pads[k + 4]) for k, d in enumerate(shape)]
    x = rng.standard_normal(out_shape).astype(np.float32)
    nodes = [helper.make_node("Pad", ["c", "p"], ["t"], mode=mode), helper.make_node("Add", ["x", "t"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"c": c, "p": pads.astype(np.int64)}, opset=19)
    check_against_ort(model, {"x": x})


def test_pad_with_negative_pads_at_run_time():
    x = np.random.default_rng(3).standard_normal((1, 2, 5, 6)).astype(np.float32)
    pads = np.array([0, 0, -1, 2, 0, -1, 1, -2], np.int64)
    model = make_model(helper.make_node("Pad", ["x", "p"], ["y"]), {"x": x}, ["y"], {"p": pads}, opset=19)
    check_against_ort(model, {"x": x})


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
def test_costly_constant_products_run_in_the_runtime(op):
    """A convolution (or product) of constants far above the folding limit: folding it
    died with a MemoryError asking for tens of GiB; it now stays a node of the file and
    gives onnxruntime's values."""
    rng = np.random.default_rng(0)
    if op == "Conv":
        c = rng.standard_normal((1, 64, 128, 128)).astype(np.float32)
        w = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
        first = helper.make_node("Conv", ["c", "w"], ["t"], pads=[1, 1, 1, 1])
        out_shape = (1, 64, 128, 128)
    else:
        c = rng.standard_normal((512, 1024)).astype(np.float32)
        w = (rng.standard_normal((1024, 256)) * 0.05).astype(np.float32)
        first = helper.make_node("MatMul", ["c", "w"], ["t"])
        out_shape = (512, 256)
    x = rng.standard_normal(out_shape).astype(np.float32)
    model = make_model([first, helper.make_node("Add", ["x", "t"], ["y"])], {"x": x}, ["y"], {"c": c, "w": w},
                       opset=19)
    check_against_ort(model, {"x": x}, rtol=1e-3, atol=1e-3)
    ops = [n["op"] for n in reader.read(edgert.convert(model))["nodes"]]
    assert ops[0] in ("conv2d", "matmul", "gemm"), ops


def test_cheap_constant_products_are_still_folded():
    rng = np.random.default_rng(1)
    c = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["c", "w"], ["t"]), helper.make_node("Add", ["x", "t"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"c": c, "w": w}, opset=19)
    check_against_ort(model, {"x": x})
    assert [n["op"] for n in reader.read(edgert.convert(model))["nodes"]] == ["add"]
