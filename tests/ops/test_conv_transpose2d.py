"""conv_transpose2d (ONNX ConvTranspose): the numpy reference against onnxruntime, and the
C kernel end to end over strides, dilations, pads, output_padding, output_shape,
auto_pad, groups, 1-D, chunked column buffers, fused activation and several threads,
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


def _ct_model(x, w, b=None, const_w=True, **attrs):
    ins = ["x", "w"] + (["b"] if b is not None else [])
    feeds, consts = {"x": x}, ({"b": b} if b is not None else {})
    (consts if const_w else feeds)["w"] = w
    return make_model(helper.make_node("ConvTranspose", ins, ["y"], **attrs), feeds, ["y"], consts, opset=17), feeds


def _check(model, feeds, threads=1):
    want = run_ort(model, feeds)
    assert_close(_graph_reference(model, feeds)[0], want[0], RTOL, ATOL, what="numpy reference")
    if threads == 1:
        return check_against_ort(model, feeds, RTOL, ATOL)
    got = edgert.Session(edgert.convert(model), threads=threads).run(None, feeds)
    assert_close(got[0], want[0], RTOL, ATOL, what=f"{threads} threads")


# (N, C, H, W, M/group, kernel, strides, dilations, pads, output_padding, group)
CASES = [
    (1, 3, 5, 6, 4, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), (0, 0), 1),
    (2, 3, 4, 5, 2, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (1, 5, 6, 3, 17, (4, 4), (2, 2), (1, 1), (1, 1, 1, 1), (0, 0), 1),
    (1, 4, 5, 5, 3, (3, 2), (2, 3), (2, 1), (0, 1, 2, 0), (1, 2), 2),
    (1, 6, 4, 4, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0, 0), 6),
    (1, 2, 3, 3, 5, (1, 1), (3, 3), (1, 1), (0, 0, 0, 0), (2, 1), 1),
    (1, 33, 7, 9, 33, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), (0, 0), 1),
    (1, 8, 60, 50, 16, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0, 0), 1),  # several row chunks
    # windows tiling the output (kernel == stride): output padding cropped by the end pads,
    # groups and batch, several row chunks
    (2, 4, 5, 7, 3, (2, 3), (2, 3), (1, 1), (0, 0, 1, 1), (1, 1), 2),
    (1, 4, 70, 64, 8, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), (0, 0), 1),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_conv_transpose(case):
    n, c, h, w, mg, k, s, d, p, op, g = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, mg, *k)).astype(np.float32)
    b = rng.standard_normal((mg * g,)).astype(np.float32)
    model, feeds = _ct_model(x, wt, b, kernel_shape=list(k), strides=list(s), dilations=list(d), pads=list(p),
                             output_padding=list(op), group=g)
    _check(model, feeds)


def test_output_shape_auto_pad_and_1d():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    _check(*_ct_model(x, w, strides=[2, 2], output_shape=[10, 12]))
    _check(*_ct_model(x, w, strides=[2, 2], output_shape=[8, 9]))
    _check(*_ct_model(x, w, strides=[2, 2], auto_pad="VALID"))
    x1 = rng.standard_normal((2, 3, 7)).astype(np.float32)
    w1 = rng.standard_normal((3, 4, 3)).astype(np.float32)
    _check(*_ct_model(x1, w1, rng.standard_normal(4).astype(np.float32), strides=[2], pads=[1, 0],
                      output_padding=[1]))


def test_runtime_weights_threads_and_activation():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 8, 9, 10)).astype(np.float32)
    w = rng.standard_normal((8, 6, 3, 3)).astype(np.float32)
    _check(*_ct_model(x, w, const_w=False, strides=[2, 2], pads=[1, 1, 1, 1]), threads=2)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2]),
             helper.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"w": w}, opset=17)
    assert [n.op for n in build_graph(model).nodes] == ["conv_transpose2d"]
    _check(model, {"x": x})
    # kernel == stride (every output written once), bias and a fused sigmoid
    w2 = rng.standard_normal((8, 3, 2, 2)).astype(np.float32)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[2, 2]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"w": w2, "b": rng.standard_normal(3).astype(np.float32)},
                       opset=17)
    assert [n.op for n in build_graph(model).nodes] == ["conv_transpose2d"]
    _check(model, {"x": x})
    _check(model, {"x": x}, threads=3)  # tiling windows: pieces of (channel, row), each row's sigmoid
    # one output channel over several row chunks (a text detector's last layer), several threads
    x3 = rng.standard_normal((1, 4, 70, 64)).astype(np.float32)
    w3 = rng.standard_normal((4, 1, 2, 2)).astype(np.float32)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2]),
             helper.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, {"x": x3}, ["y"], {"w": w3}, opset=17)
    _check(model, {"x": x3}, threads=2)
    # channels enough for pieces of two or more (a chunk's GEMM and col2im as one job on
    # x86-64), over several row chunks, overlapping and tiling windows
    x4 = rng.standard_normal((1, 8, 60, 50)).astype(np.float32)
    for k, s, p in (((3, 3), [2, 2], [1, 1, 1, 1]), ((2, 2), [2, 2], [0, 0, 0, 0])):
        w4 = rng.standard_normal((8, 9, *k)).astype(np.float32)
        for threads in (2, 3):
            _check(*_ct_model(x4, w4, rng.standard_normal(9).astype(np.float32), strides=s, pads=p),
                   threads=threads)


def test_rejected():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 2, 2, 2, 2)).astype(np.float32)
    with pytest.raises(edgert.EdgertError, match="3-D"):
        edgert.convert(_ct_model(x, w)[0])


def test_prepare_rejects_bad_params():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 4, 3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    model, feeds = _ct_model(x, w, rng.standard_normal(6).astype(np.float32), strides=[2, 1], pads=[1, 0, 0, 1],
                             output_padding=[1, 0], group=2)
    mutate_params(model, feeds)


@pytest.mark.parametrize("seed", range(24))
def test_same_at_random_strides_kernels_and_sizes(seed):
    """SAME_UPPER / SAME_LOWER: output in * stride, the total padding split as the text
    says, negative (a stride longer than the kernel's extent) included, the bias over the
    extension too. Against the text as onnx's ReferenceEvaluator computes it (onnxruntime
    clamps a negative total: docs/ops.md, "Known deviations"); random ranks, sizes,
    kernels, strides and dilations."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 3))
    size = [int(v) for v in rng.integers(1, 8, rank)]
    kernel = [int(v) for v in rng.integers(1, 4, rank)]
    strides = [int(v) for v in rng.integers(1, 5, rank)]
    dilations = [int(v) for v in rng.integers(1, 3, rank)]
    x = rng.standard_normal([1, 2] + size).astype(np.float32)
    w = rng.standard_normal([2, 3] + kernel).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], auto_pad=["SAME_UPPER", "SAME_LOWER"][seed % 2],
                            kernel_shape=kernel, strides=strides, dilations=dilations)
    model = make_model(node, {"x": x}, ["y"], {"w": w, "b": b}, opset=19)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = edgert.Session(edgert.convert(model)).run(None, {"x": x})[0]
    assert got.shape[2:] == tuple(n * st for n, st in zip(size, strides)), (got.shape, size, strides)
    assert_close(got, want.astype(np.float32), 1e-4, 1e-4)
