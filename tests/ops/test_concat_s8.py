"""concat of int8 inputs with different quantizations (edgert/converter/ops/concat_s8.py)."""
import numpy as np

from edgert.converter.quant.fixedpoint import quantize_multiplier

from .s8_util import assert_same, rand_s8, run_node


def test_requantizing_concat():
    rng = np.random.default_rng(0)
    parts = [rand_s8(rng, (2, c, 3, 4)) for c in (1, 5, 2)]
    m1, s1 = quantize_multiplier(1.7)
    m2, s2 = quantize_multiplier(0.3)
    for axis in (1,):
        attrs = dict(axis=axis, in_zp=[0, -5, 100], in_mult=[0, m1, m2], in_shift=[0, s1, s2], y_zp=3)
        got, want = run_node("concat", [(p, False) for p in parts], attrs, threads=2)
        assert_same(got, want, "concat")
        assert np.array_equal(got[:, :1], parts[0])


def test_same_quantization_is_a_copy():
    rng = np.random.default_rng(1)
    a, b = rand_s8(rng, (3, 4)), rand_s8(rng, (3, 2))
    got, want = run_node("concat", [(a, False), (b, False)], dict(axis=1))
    assert_same(got, want, "copy")
