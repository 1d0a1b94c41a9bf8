"""Pooling on int8: C kernels == numpy references (edgert/converter/ops/pool_s8.py)."""
import numpy as np
import pytest

from edgert.converter.quant.fixedpoint import quantize_multiplier

from .s8_util import assert_same, rand_s8, run_node

GEOMS = [
    dict(kernel=[2, 2], strides=[2, 2]),
    dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel=[3, 2], strides=[2, 3], pads=[1, 0, 1, 1], ceil_mode=True),
    dict(kernel=[3, 3], strides=[1, 1], dilations=[2, 1], pads=[2, 1, 0, 1]),
]


@pytest.mark.parametrize("g", range(len(GEOMS)))
def test_max_and_avg(g):
    rng = np.random.default_rng(g)
    x = rand_s8(rng, (2, 3, 9, 10))
    geom = GEOMS[g]
    got, want = run_node("max_pool2d", [(x, False)], geom)
    assert_same(got, want, "max")
    for zp in (-128, 0, 37):
        for include in (False, True):
            got, want = run_node("avg_pool2d", [(x, False)], dict(geom, zp=zp, count_include_pad=include))
            assert_same(got, want, f"avg zp {zp} include {include}")


def test_avg_rounds_half_away_from_zero():
    x = np.array([[[[1, 2], [-1, -2]]]], np.int8)  # windows of 2: sums 3 and -3 -> 2 and -2
    got, want = run_node("avg_pool2d", [(x, False)], dict(kernel=[1, 2], zp=0))
    assert_same(got, want, "ties")
    assert got.reshape(-1).tolist() == [2, -2]


@pytest.mark.parametrize("shape", [(1, 4, 7, 7), (2, 3, 1, 1), (1, 2, 3, 4, 5), (2, 70, 13)])
def test_global(shape):
    rng = np.random.default_rng(len(shape))
    x = rand_s8(rng, shape)
    size = int(np.prod(shape[2:]))
    for xzp, yzp, ratio in ((0, 0, 1.0), (-128, 5, 0.7), (20, -128, 3.0)):
        mult, shift = quantize_multiplier(ratio / size)
        got, want = run_node("global_avg_pool", [(x, False)], dict(x_zp=xzp, y_zp=yzp, mult=mult, shift=shift))
        assert_same(got, want, "gap")
    got, want = run_node("global_max_pool", [(x, False)], {})
    assert_same(got, want, "gmp")
