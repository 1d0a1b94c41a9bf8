"""add and mul on int8 with quantization attrs: C kernel == numpy reference
(edgert/converter/ops/binary_s8.py), with broadcasting, ties and saturation. int8 add without
them keeps its wrapping integer meaning."""
import numpy as np
import pytest

from edgert.converter.quant.fixedpoint import narrow_multipliers

from .s8_util import assert_same, rand_s8, run_node

SHAPES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (3, 1, 5)), ((1, 7), (6, 1)), ((), (4,)), ((5, 1, 1), (1,))]


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_add(sa, sb):
    rng = np.random.default_rng(len(sa) * 7 + len(sb))
    a, b = rand_s8(rng, sa), rand_s8(rng, sb)
    for ra, rb, zps in ((0.7, 0.3, (3, -2, 4)), (3.0, 0.01, (-128, 127, 0)), (0.5, 0.5, (0, 0, 0))):
        (ma, mb), shift = narrow_multipliers([ra, rb], 15)
        attrs = dict(a_zp=zps[0], b_zp=zps[1], y_zp=zps[2], a_mult=ma, b_mult=mb, shift=shift, out_min=-128,
                     out_max=127)
        got, want = run_node("add", [(a, False), (b, False)], attrs)
        assert_same(got, want, f"add {sa} {sb}")


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_mul(sa, sb):
    rng = np.random.default_rng(len(sa) * 5 + len(sb))
    a, b = rand_s8(rng, sa), rand_s8(rng, sb)
    for r, zps, lo in ((0.01, (3, -2, 4), -128), (0.5, (-128, 127, 0), 0), (1e-5, (0, 0, 0), -128)):
        (mult,), shift = narrow_multipliers([r], 14)
        attrs = dict(a_zp=zps[0], b_zp=zps[1], y_zp=zps[2], mult=mult, shift=shift, out_min=lo, out_max=127)
        got, want = run_node("mul", [(a, False), (b, True)], attrs)
        assert_same(got, want, f"mul {sa} {sb}")


def test_add_ties():
    # a_mult = 2**14 with shift 15: y = (a + b) / 2, so odd sums are ties (rounded up)
    a = np.arange(-128, 128, dtype=np.int8)
    b = np.zeros(256, np.int8)
    attrs = dict(a_zp=0, b_zp=0, y_zp=0, a_mult=2**14, b_mult=2**14, shift=15, out_min=-128, out_max=127)
    got, want = run_node("add", [(a, False), (b, False)], attrs)
    assert_same(got, want, "ties")
    assert got[128 - 1] == 0 and got[128 + 1] == 1 and got[128 - 3] == -1


def test_extreme_products_fit():
    # the largest |(a - a_zp) (b - b_zp)| times the largest multiplier, both signs
    a = np.array([-128, 127, -128, 127], np.int8)
    b = np.array([-128, 127, 127, -128], np.int8)
    for zps in ((127, 127, 0), (-128, -128, 5), (127, -128, -3)):
        attrs = dict(a_zp=zps[0], b_zp=zps[1], y_zp=zps[2], mult=2**14 - 1, shift=31, out_min=-128, out_max=127)
        got, want = run_node("mul", [(a, False), (b, False)], attrs)
        assert_same(got, want, "mul extremes")
        attrs = dict(a_zp=zps[0], b_zp=zps[1], y_zp=zps[2], a_mult=2**15 - 1, b_mult=2**15 - 1, shift=1,
                     out_min=-128, out_max=127)
        got, want = run_node("add", [(a, False), (b, False)], attrs)
        assert_same(got, want, "add extremes")


def test_plain_int8_add_still_wraps():
    a = np.array([100, -100], np.int8)
    got, want = run_node("add", [(a, False), (a, False)], {})
    assert_same(got, want, "wrap")
    assert list(got) == [-56, 56]


@pytest.mark.parametrize("sa,sb", [((2, 16, 40, 33), (1, 16, 1, 1)), ((3, 5, 97, 31), (3, 5, 97, 31)),
                                   ((1, 40000), (1,))])
def test_threads_split_rows(sa, sb):
    """Outputs above the parallel threshold split by rows over 3 threads: the same bytes
    as the reference, rows starting mid-broadcast included."""
    rng = np.random.default_rng(11)
    a, b = rand_s8(rng, sa), rand_s8(rng, sb)
    (ma, mb), shift = narrow_multipliers([0.7, 0.3], 15)
    attrs = dict(a_zp=3, b_zp=-2, y_zp=4, a_mult=ma, b_mult=mb, shift=shift, out_min=-128, out_max=127)
    got, want = run_node("add", [(a, False), (b, False)], attrs, threads=3)
    assert_same(got, want, f"add {sa} {sb} threads")
    (mult,), shift = narrow_multipliers([0.01], 14)
    attrs = dict(a_zp=3, b_zp=-2, y_zp=4, mult=mult, shift=shift, out_min=-128, out_max=127)
    got, want = run_node("mul", [(a, False), (b, True)], attrs, threads=3)
    assert_same(got, want, f"mul {sa} {sb} threads")
