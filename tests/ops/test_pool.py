"""max_pool2d, avg_pool2d, lp_pool2d, global_avg_pool, global_max_pool: the numpy
reference against onnxruntime, and the C kernels end to end over kernel sizes, strides,
dilations, asymmetric pads, ceil_mode, count_include_pad, auto_pad, 1-D pooling and
global pooling of any rank, plus rejected cases and corrupted parameters."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from tests.helpers import assert_close, check_against_ort, make_model, run_ort
from tests.ops.test_reduce import _graph_reference, mutate_params

RTOL = ATOL = 1e-4


def _model(op, x, opset=19, **attrs):
    return make_model(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x}, ["y"], opset=opset), {"x": x}


def _check(model, feeds, threads=1):
    want = run_ort(model, feeds)
    assert_close(_graph_reference(model, feeds)[0], want[0], RTOL, ATOL, what="numpy reference")
    if threads == 1:
        return check_against_ort(model, feeds, RTOL, ATOL)
    got = edgert.Session(edgert.convert(model), threads=threads).run(None, feeds)
    assert_close(got[0], want[0], RTOL, ATOL, what=f"{threads} threads")


# (shape, kernel, strides, pads, dilations, ceil_mode)
WINDOWS = [
    ((1, 3, 9, 11), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0),
    ((2, 2, 8, 7), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 0),
    ((1, 5, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 3, 10, 12), (5, 3), (2, 3), (2, 1, 0, 1), (1, 1), 1),
    ((1, 2, 12, 12), (3, 3), (1, 2), (2, 2, 1, 0), (2, 2), 0),
    ((1, 4, 7, 6), (7, 1), (1, 1), (3, 0, 3, 0), (1, 1), 0),
    ((1, 1, 5, 5), (2, 2), (3, 3), (0, 0, 1, 1), (1, 1), 1),
    ((1, 3, 6, 8), (3, 2), (2, 1), (0, 1, 1, 0), (2, 3), 1),
]


@pytest.mark.parametrize("win", WINDOWS, ids=[str(i) for i in range(len(WINDOWS))])
@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool0", "AveragePool1", "LpPool1", "LpPool2", "LpPool3"])
def test_pool(win, kind):
    shape, k, s, p, d, ceil = win
    rng = np.random.default_rng(hash((win, kind)) % 2**32)
    x = rng.standard_normal(shape).astype(np.float32)
    attrs = dict(kernel_shape=list(k), strides=list(s), pads=list(p), dilations=list(d), ceil_mode=ceil)
    op = kind.rstrip("0123")
    if op == "AveragePool":
        attrs["count_include_pad"] = int(kind[-1])
    if op == "LpPool":
        attrs["p"] = int(kind[-1])
    model, feeds = _model(op, x, opset=19 if op != "LpPool" else 18, **attrs)
    _check(model, feeds)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_auto_pad(op, auto_pad):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 9, 10)).astype(np.float32)
    model, feeds = _model(op, x, kernel_shape=[3, 2], strides=[2, 3], auto_pad=auto_pad)
    _check(model, feeds)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool1d(op):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 17)).astype(np.float32)
    attrs = dict(kernel_shape=[3], strides=[2], pads=[1, 2])
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    model, feeds = _model(op, x, opset=18, **attrs)
    _check(model, feeds)


def test_threads_and_old_opset():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 30, 31)).astype(np.float32)
    model, feeds = _model("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    _check(model, feeds, threads=2)
    model, feeds = _model("AveragePool", x, opset=7, kernel_shape=[2, 2], strides=[2, 2])
    _check(model, feeds)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 7, 9), (2, 2, 3, 4, 5), (1, 3, 1, 1), (1, 17, 33, 1)])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global(op, shape):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    model, feeds = _model(op, x, opset=13)
    _check(model, feeds)
    _check(model, feeds, threads=2)


def test_rejected():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    model, _ = _model("MaxPool", x, kernel_shape=[2, 2, 2])
    with pytest.raises(edgert.EdgertError, match="3-D"):
        edgert.convert(model)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])
    with pytest.raises(edgert.EdgertError, match="Indices"):
        edgert.convert(make_model(node, {"x": x}, ["y", "i"], opset=13))
    model, _ = _model("MaxPool", x.astype(np.uint8), kernel_shape=[2, 2], opset=13)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(model)


def test_prepare_rejects_bad_params():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 7, 6)).astype(np.float32)
    for op, extra in (("MaxPool", {}), ("AveragePool", {"count_include_pad": 1}), ("LpPool", {"p": 3})):
        model, feeds = _model(op, x, opset=18, kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], **extra)
        mutate_params(model, feeds)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_wide_rows_and_windows(op):
    # rows wider than the separable pass's buffer (chunked), and windows too wide for it
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 3, 2100)).astype(np.float32)
    model, feeds = _model(op, x, opset=18, kernel_shape=[3, 3], strides=[1, 2], pads=[1, 1, 1, 1])
    _check(model, feeds)
    x = rng.standard_normal((1, 2, 2, 700)).astype(np.float32)
    model, feeds = _model(op, x, opset=18, kernel_shape=[2, 530], strides=[1, 7], pads=[0, 3, 1, 2])
    _check(model, feeds)


def _spec_length(size: int, k: int, s: int, p0: int, p1: int, ceil: int) -> int:
    """The ONNX formula: floor or ceil((size + pads - k) / s) + 1 in exact arithmetic, and
    in ceil mode no last window that starts in the end padding."""
    num = size + p0 + p1 - k
    n = (-(-num // s) if ceil else num // s) + 1
    if ceil and n > 0 and (n - 1) * s >= size + p0:
        n -= 1
    return n


@pytest.mark.parametrize("seed", range(16))
def test_windows_larger_than_the_padded_input(seed):
    """A window longer than the padded input: the ONNX formula's length, 0 (an empty
    output) or 1; where the formula gives a negative length, edgert refuses at conversion
    with a message, never a wrong shape. Values against onnxruntime where its shape
    agrees, else against the numpy meaning (onnxruntime truncates the division toward
    zero and gives 1 window where floor gives 0: docs/ops.md, "Known deviations").
    Random sizes, windows, pads, strides and ceil modes."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(1, 7, 2))
    kh, kw = h + int(rng.integers(0, 4)), int(rng.integers(1, w + 1))
    sh = int(rng.integers(1, 5))
    pt, pb = (int(v) for v in rng.integers(0, 2, 2))
    kh = max(kh, pt + pb + 1)  # keep the window at least as long as the pads
    ceil = int(rng.integers(0, 2))
    op = ["MaxPool", "AveragePool"][seed % 2]
    attrs = dict(kernel_shape=[kh, kw], strides=[sh, 1], pads=[pt, 0, pb, 0], ceil_mode=ceil)
    x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
    model, feeds = _model(op, x, **attrs)
    oh, ow = _spec_length(h, kh, sh, pt, pb, ceil), _spec_length(w, kw, 1, 0, 0, ceil)
    if oh < 0:
        with pytest.raises(edgert.EdgertError, match="window is larger"):
            edgert.convert(model)
        return
    got = edgert.Session(edgert.convert(model)).run(None, feeds)[0]
    assert got.shape == (1, 2, oh, ow), attrs
    try:
        want = run_ort(model, feeds)[0]
    except Exception:  # noqa: BLE001  (onnxruntime refuses some of these)
        want = None
    if want is None or want.shape != got.shape:
        want = _graph_reference(model, feeds)[0]
    assert_close(got, want, RTOL, ATOL)
