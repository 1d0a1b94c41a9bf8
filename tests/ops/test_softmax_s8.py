"""softmax on int8 (edgert/converter/ops/softmax_s8.py): kernel == reference, close to float."""
import numpy as np
import pytest

from edgert.converter.ops.softmax_s8 import exp_table

from .s8_util import assert_same, rand_s8, run_node


@pytest.mark.parametrize("shape,axis,flatten", [((4, 10), -1, False), ((2, 5, 3, 4), 1, False),
                                                ((2, 3, 4), 1, True), ((1, 300), 1, False)])
def test_matches_reference(shape, axis, flatten):
    rng = np.random.default_rng(len(shape))
    x = rand_s8(rng, shape)
    for s in (0.02, 0.1, 0.5):
        got, want = run_node("softmax", [(x, False), (exp_table(s), True)], dict(axis=axis, flatten=flatten))
        assert_same(got, want, f"scale {s}")


def test_close_to_float():
    rng = np.random.default_rng(5)
    x = rand_s8(rng, (8, 12))
    s = 0.05
    got, _ = run_node("softmax", [(x, False), (exp_table(s), True)], dict(axis=1))
    v = x.astype(np.float64) * s
    p = np.exp(v - v.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    assert np.abs((got.astype(np.float64) + 128) / 256 - p).max() <= 1.5 / 256
