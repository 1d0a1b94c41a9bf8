"""conv2d (ONNX Conv): the numpy reference against onnxruntime, and the C kernel (its
depthwise, pointwise and im2col paths) end to end over odd shapes, groups, strides,
dilations and asymmetric pads, 1-D convolution, fused activations, several threads,
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


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _conv_model(x, w, b=None, opset=17, const_w=True, **attrs):
    inputs = ["x", "w"] + (["b"] if b is not None else [])
    consts = {"b": b} if b is not None else {}
    feeds = {"x": x}
    if const_w:
        consts["w"] = w
    else:
        feeds["w"] = w
    m = make_model(helper.make_node("Conv", inputs, ["y"], **attrs), feeds, ["y"], consts, opset=opset)
    return m, feeds


def _check(model, feeds, threads=1):
    want = run_ort(model, feeds)
    assert_close(_graph_reference(model, feeds)[0], want[0], RTOL, ATOL, what="numpy reference")
    if threads == 1:
        return check_against_ort(model, feeds, RTOL, ATOL)
    got = edgert.Session(edgert.convert(model), threads=threads).run(None, feeds)
    assert_close(got[0], want[0], RTOL, ATOL, what=f"{threads} threads")
    return got


# (N, C, H, W, M, kernel, strides, dilations, pads [t, l, b, r], group)
CASES = [
    (1, 3, 9, 11, 5, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    (2, 3, 8, 7, 17, (3, 3), (2, 2), (1, 1), (0, 1, 1, 0), 1),
    (1, 5, 12, 10, 33, (5, 5), (1, 2), (1, 1), (2, 2, 2, 2), 1),
    (1, 1, 15, 13, 4, (7, 7), (2, 2), (1, 1), (3, 3, 3, 3), 1),
    (1, 17, 9, 9, 1, (3, 3), (1, 1), (2, 2), (2, 1, 0, 3), 1),
    (2, 4, 10, 6, 6, (3, 1), (1, 1), (1, 2), (1, 0, 1, 0), 2),
    (1, 33, 7, 8, 17, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1),
    (2, 17, 5, 5, 33, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1),
    (1, 16, 9, 9, 24, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 1),
    (1, 8, 6, 6, 12, (1, 1), (1, 1), (1, 1), (1, 0, 0, 1), 4),
    (1, 300, 3, 3, 70, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),   # K > one depth block
    (1, 6, 20, 40, 130, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2),  # many column blocks
    (1, 4, 2, 3, 5, (2, 3), (3, 3), (1, 1), (0, 0, 0, 0), 1),
    (1, 7, 1, 1, 9, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1),      # one pixel: matrix-vector
    (1, 7, 6, 5, 1, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 1),      # one output channel
    # at most 4 output pixels: the narrow path (B columns gathered, dot products)
    (1, 1, 1, 576, 258, (1, 256), (1, 128), (1, 1), (0, 0, 0, 0), 1),  # STFT-like, 3 outputs
    (2, 6, 3, 3, 300, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 2),    # 2x2 outputs, groups, batch
    (1, 5, 5, 3, 7, (2, 2), (1, 1), (2, 2), (0, 0, 0, 0), 1),      # dilated, 3x1 outputs
    (1, 9, 2, 2, 11, (3, 3), (1, 1), (1, 1), (1, 1, 0, 0), 1),     # padding inside the window, 1x1
    (1, 300, 2, 3, 5, (2, 3), (1, 1), (1, 1), (0, 0, 0, 1), 1),    # K > one depth block, 1x2
    # output rows of whole 16-column panels (packed panel by panel): depth blocks starting
    # inside a window, taps partly outside at both edges, dilations, stride 2 down
    (1, 96, 10, 32, 24, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    (1, 3, 6, 32, 4, (3, 3), (1, 1), (1, 2), (1, 3, 1, 1), 1),
    (2, 5, 7, 16, 9, (3, 5), (2, 1), (2, 1), (2, 2, 1, 2), 1),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_conv(case):
    n, c, h, w, m, k, s, d, p, g = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x = _f32(rng, n, c, h, w)
    wt = _f32(rng, m, c // g, *k)
    b = _f32(rng, m)
    model, feeds = _conv_model(x, wt, b, kernel_shape=list(k), strides=list(s), dilations=list(d), pads=list(p),
                               group=g)
    _check(model, feeds)


# depthwise: (N, C, H, W, multiplier, kernel, strides, dilations, pads)
DW = [
    (1, 3, 9, 11, 1, 3, 1, 1, (1, 1, 1, 1)),
    (2, 5, 12, 13, 1, 3, 2, 1, (0, 1, 1, 0)),
    (1, 17, 10, 10, 1, 5, 1, 1, (2, 2, 2, 2)),
    (1, 4, 11, 14, 1, 5, 2, 1, (1, 2, 2, 1)),
    (1, 6, 9, 9, 1, 3, 1, 2, (2, 2, 2, 2)),
    (1, 3, 12, 12, 1, 7, 1, 1, (3, 3, 3, 3)),
    (1, 2, 7, 9, 3, 3, 1, 1, (1, 1, 1, 1)),
    (1, 33, 3, 4, 1, 3, 1, 1, (1, 1, 1, 1)),
    (1, 4, 8, 8, 1, 2, 2, 1, (0, 0, 0, 0)),
    (1, 3, 4, 4, 1, 3, 1, 1, (0, 0, 0, 0)),
    (1, 3, 70, 90, 1, 3, 2, 1, (1, 1, 1, 1)),
    (1, 2, 250, 270, 1, 3, 1, 1, (1, 2, 0, 1)),   # plane too large for one padded copy: bands (ARM)
    (1, 2, 240, 260, 2, 5, 2, 2, (4, 3, 2, 1)),
]


@pytest.mark.parametrize("case", DW, ids=[str(i) for i in range(len(DW))])
def test_depthwise(case):
    n, c, h, w, mult, k, s, d, p = case
    rng = np.random.default_rng(len(DW) + hash(case) % 2**32)
    x = _f32(rng, n, c, h, w)
    wt = _f32(rng, c * mult, 1, k, k)
    b = _f32(rng, c * mult)
    model, feeds = _conv_model(x, wt, b, kernel_shape=[k, k], strides=[s, s], dilations=[d, d], pads=list(p),
                               group=c)
    _check(model, feeds)


def test_depthwise_without_planned_scratch(monkeypatch):
    """A depthwise node whose file plans no scratch (as converters before band mode did
    for large planes) still loads and runs, by the direct path."""
    from edgert.converter.ops import conv2d as conv_op

    rng = np.random.default_rng(9)
    x = _f32(rng, 1, 2, 40, 37)
    wt = _f32(rng, 2, 1, 5, 5)
    model, feeds = _conv_model(x, wt, _f32(rng, 2), kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=2)
    monkeypatch.setattr(conv_op, "depthwise_scratch_bytes", lambda g: 0)
    data = edgert.convert(model)
    got = edgert.Session(data).run(None, feeds)
    assert_close(got[0], run_ort(model, feeds)[0], RTOL, ATOL)


def test_no_bias_runtime_weights_and_threads():
    rng = np.random.default_rng(5)
    x, w = _f32(rng, 2, 6, 11, 9), _f32(rng, 10, 3, 3, 3)
    model, feeds = _conv_model(x, w, const_w=False, kernel_shape=[3, 3], pads=[1, 0, 1, 2], group=2)
    _check(model, feeds)
    _check(model, feeds, threads=2)
    x, w = _f32(rng, 1, 8, 30, 31), _f32(rng, 8, 1, 3, 3)
    model, feeds = _conv_model(x, w, _f32(rng, 8), kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8)
    _check(model, feeds, threads=2)
    x, w = _f32(rng, 1, 40, 17, 19), _f32(rng, 70, 40, 3, 3)
    model, feeds = _conv_model(x, w, _f32(rng, 70), kernel_shape=[3, 3], strides=[2, 2])
    _check(model, feeds, threads=2)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad(auto_pad):
    rng = np.random.default_rng(7)
    x, w = _f32(rng, 1, 3, 10, 9), _f32(rng, 4, 3, 4, 3)
    model, feeds = _conv_model(x, w, auto_pad=auto_pad, strides=[2, 3])
    _check(model, feeds)


def test_conv1d():
    rng = np.random.default_rng(8)
    x, w = _f32(rng, 2, 5, 23), _f32(rng, 6, 5, 3)
    model, feeds = _conv_model(x, w, _f32(rng, 6), kernel_shape=[3], strides=[2], pads=[1, 2], dilations=[2])
    _check(model, feeds)
    x, w = _f32(rng, 1, 4, 17), _f32(rng, 4, 1, 5)
    model, feeds = _conv_model(x, w, group=4, auto_pad="SAME_UPPER")
    _check(model, feeds)
    x, w = _f32(rng, 1, 6, 10), _f32(rng, 9, 6, 1)
    model, feeds = _conv_model(x, w)
    _check(model, feeds)


ACTS = [
    ("Relu", {}, {}),
    ("Clip", {}, {"lo": np.array(-0.5, np.float32), "hi": np.array(0.75, np.float32)}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, {}),
    ("HardSwish", {}, {}),
    ("Sigmoid", {}, {}),
    ("LeakyRelu", {"alpha": 0.07}, {}),
    ("Tanh", {}, {}),
]


@pytest.mark.parametrize("act", ACTS, ids=[a[0] for a in ACTS])
@pytest.mark.parametrize("kind", ["im2col", "depthwise", "stem"])
def test_fused_activation(act, kind):
    """stem: a 3x3 stride-2 convolution over 3 channels (the x86-64 build's direct
    kernel for an image network's first layer), at one and two threads."""
    op, attrs, extra = act
    rng = np.random.default_rng(9)
    c = 3 if kind == "stem" else 6
    x = _f32(rng, 2, c, 21, 38) if kind == "stem" else _f32(rng, 1, c, 9, 10)
    w = _f32(rng, c, 1, 3, 3) if kind == "depthwise" else _f32(rng, 7 if kind == "stem" else 5, c, 3, 3)
    b = _f32(rng, w.shape[0])
    stride = {"strides": [2, 2]} if kind == "stem" else {}
    conv = helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1],
                            group=c if kind == "depthwise" else 1, **stride)
    ins = ["t"] + (["lo", "hi"] if op == "Clip" else [])
    node = helper.make_node(op, ins, ["y"], **attrs)
    model = make_model([conv, node], {"x": x}, ["y"], {"w": w, "b": b, **extra}, opset=17)
    ops = [n.op for n in build_graph(model).nodes]
    assert ops == ["conv2d"], ops
    _check(model, {"x": x})
    if kind == "stem":
        _check(model, {"x": x}, threads=2)


def test_rejected():
    rng = np.random.default_rng(10)
    x, w = _f32(rng, 1, 2, 4, 4, 4), _f32(rng, 3, 2, 3, 3, 3)
    model, feeds = _conv_model(x, w)
    with pytest.raises(edgert.EdgertError, match="3-D"):
        edgert.convert(model)
    xi = rng.integers(-3, 3, (1, 2, 5, 5)).astype(np.int32)
    model = make_model(helper.make_node("Conv", ["x", "w"], ["y"]), {"x": xi.astype(np.float64)}, ["y"],
                       {"w": _f32(rng, 3, 2, 3, 3).astype(np.float64)})
    with pytest.raises(edgert.EdgertError):
        edgert.convert(model)


def test_prepare_rejects_bad_params():
    rng = np.random.default_rng(11)
    for shape_w, attrs in (((4, 3, 3, 3), {"pads": [1, 0, 1, 2], "strides": [2, 1]}),
                           ((3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
                           ((5, 3, 1, 1), {})):
        x = _f32(rng, 1, 3, 7, 6)
        model, feeds = _conv_model(x, _f32(rng, *shape_w), _f32(rng, shape_w[0]), **attrs)
        mutate_params(model, feeds)
