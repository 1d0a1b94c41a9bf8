"""conv2d on int8: the C kernel gives exactly the numpy reference's bytes
(edgert/converter/ops/conv2d_s8.py), over paths (depthwise, grouped, im2col, 1x1, 1-D), odd
shapes, padding, strides, dilations, zero points, rounding ties and saturation."""
import numpy as np
import pytest

from edgert.errors import EdgertError
from edgert.converter.ops import OpUnsupported

from .s8_util import assert_same, rand_qp, rand_s8, run_node

CASES = [
    # (N, C, H, W), M, group, kernel, strides, dilations, pads
    ((1, 3, 7, 9), 5, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 8, 6, 5), 8, 8, (3, 3), (2, 1), (1, 1), (0, 1, 2, 1)),      # depthwise
    ((1, 4, 9, 9), 8, 4, (5, 5), (1, 1), (2, 2), (4, 4, 4, 4)),      # depthwise x2, dilated
    ((1, 6, 5, 7), 9, 3, (3, 1), (1, 2), (1, 1), (1, 0, 1, 0)),      # grouped
    ((1, 16, 11, 13), 7, 1, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),   # pointwise, > one pixel block
    ((1, 5, 3, 3), 4, 1, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),      # one output pixel
    ((3, 2, 4, 70), 3, 1, (2, 3), (3, 2), (1, 2), (1, 2, 0, 3)),
    # more than 1024 taps: windows gathered a part of the channels at a time
    ((1, 343, 1, 40), 6, 1, (1, 3), (1, 1), (1, 1), (0, 1, 0, 1)),   # parts of 340 and 3 channels
    ((1, 130, 6, 30), 5, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),   # 112 and 18
    ((1, 120, 5, 41), 4, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),   # stride 2
    ((1, 4, 18, 18), 3, 1, (17, 17), (1, 1), (1, 1), (0, 0, 0, 0)),  # a window of more than 256 taps
    # windows across the edge beside runs of 17 or more: dilated, padded unevenly, stride 2
    ((1, 8, 9, 40), 5, 1, (3, 3), (1, 1), (2, 2), (2, 3, 1, 2)),
    ((1, 6, 7, 45), 4, 1, (3, 5), (2, 2), (1, 1), (1, 2, 1, 2)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_reference(case):
    rng = np.random.default_rng(case)
    shape, m, group, k, s, d, pads = CASES[case]
    x = rand_s8(rng, shape)
    w = rand_s8(rng, (m, shape[1] // group) + k)
    qp, shift = rand_qp(rng, m)
    for xzp, yzp, lo, hi in ((0, 0, -128, 127), (-128, 127, -128, 127), (127, -128, -128, 127), (5, -7, -7, 60)):
        attrs = dict(group=group, kernel=list(k), strides=list(s), dilations=list(d), pads=list(pads), x_zp=xzp,
                     y_zp=yzp, out_min=lo, out_max=hi, shift=shift)
        got, want = run_node("conv2d", [(x, False), (w, True), (qp, True)], attrs)
        assert_same(got, want, f"case {case} zp {xzp}/{yzp}")
        assert got.size < 16 or len(np.unique(got)) > 3  # not all saturated


def test_rank1d_and_threads():
    rng = np.random.default_rng(9)
    x = rand_s8(rng, (2, 6, 37))
    w = rand_s8(rng, (10, 6, 5))
    qp, shift = rand_qp(rng, 10)
    attrs = dict(group=1, kernel=[1, 5], strides=[1, 2], pads=[0, 2, 0, 1], rank1d=True, x_zp=-3, y_zp=4,
                 out_min=-128, out_max=127, shift=shift)
    for threads in (1, 2):
        got, want = run_node("conv2d", [(x, False), (w, True), (qp, True)], attrs, threads=threads)
        assert_same(got, want, "rank1d")


def test_rounding_ties_and_saturation():
    # 1x1 conv with one weight 1: acc = x - x_zp + bias; mult 2**30, shift 31 halves it,
    # so odd accumulators are exact ties (half up: -1.5 -> -1, 1.5 -> 2).
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 16, 16)
    w = np.ones((2, 1, 1, 1), np.int8)
    w[1] = -128
    qp = np.array([[0, 2**30], [3, 2**31 - 1]], np.int32)
    attrs = dict(group=1, kernel=[1, 1], x_zp=0, y_zp=0, out_min=-128, out_max=127, shift=31)
    got, want = run_node("conv2d", [(x, False), (w, True), (qp, True)], attrs)
    assert_same(got, want, "ties")
    flat = got[0, 0].reshape(-1).astype(int)
    assert flat[128 - 3] == -1 and flat[128 + 3] == 2  # -1.5 -> -1, 1.5 -> 2
    assert got[0, 1].min() == -128 and got[0, 1].max() == 127  # channel 1 saturates both ways
    attrs["shift"] = 62
    got, want = run_node("conv2d", [(x, False), (w, True), (qp, True)], attrs)
    assert_same(got, want, "shift 62")
    assert not got.any()


def test_accumulator_bound_is_enforced():
    rng = np.random.default_rng(3)
    x = rand_s8(rng, (1, 3, 4, 4))
    w = rand_s8(rng, (2, 3, 3, 3))
    qp = np.array([[2**31 - 100, 1], [0, 1]], np.int32)
    with pytest.raises((OpUnsupported, EdgertError)):
        run_node("conv2d", [(x, False), (w, True), (qp, True)],
                 dict(group=1, kernel=[3, 3], x_zp=0, y_zp=0, out_min=-128, out_max=127, shift=5))


def test_rejects_activation_and_bad_table():
    rng = np.random.default_rng(4)
    x = rand_s8(rng, (1, 3, 4, 4))
    w = rand_s8(rng, (2, 3, 3, 3))
    qp, shift = rand_qp(rng, 2)
    base = dict(group=1, kernel=[3, 3], x_zp=0, y_zp=0, out_min=-128, out_max=127, shift=shift)
    with pytest.raises(OpUnsupported):
        run_node("conv2d", [(x, False), (w, True), (qp, True)], dict(base, act="relu"))
    with pytest.raises(OpUnsupported):
        run_node("conv2d", [(x, False), (w, True), (qp[:1], True)], base)
    with pytest.raises(OpUnsupported):
        run_node("conv2d", [(x, False), (w, True), (qp, True)], dict(base, shift=63))


def test_depthwise_direct_path():
    # planes whose reached extent exceeds the padded-copy limit run the direct loops
    from edgert.converter.ops.conv2d_s8 import DW_PAD_MAX

    rng = np.random.default_rng(11)
    side = int((DW_PAD_MAX / 2) ** 0.5) + 3
    x = rand_s8(rng, (1, 2, side, side))
    w = rand_s8(rng, (2, 1, 3, 3))
    qp, shift = rand_qp(rng, 2)
    attrs = dict(group=2, kernel=[3, 3], pads=[1, 0, 1, 2], x_zp=-9, y_zp=4, out_min=-128, out_max=127,
                 shift=shift)
    got, want = run_node("conv2d", [(x, False), (w, True), (qp, True)], attrs, threads=2)
    assert_same(got, want, "direct depthwise")
