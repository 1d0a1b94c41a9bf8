"""gemm on int8: C kernel == numpy reference (edgert/converter/ops/gemm_s8.py)."""
import numpy as np
import pytest

from edgert.converter.ops import OpUnsupported

from .s8_util import assert_same, rand_qp, rand_s8, run_node


@pytest.mark.parametrize("m,n,k", [(1, 10, 32), (5, 17, 40), (3, 130, 7), (64, 1, 300), (2, 65, 1)])
@pytest.mark.parametrize("trans_b", [True, False])
def test_matches_reference(m, n, k, trans_b):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rand_s8(rng, (m, k))
    b = rand_s8(rng, (n, k) if trans_b else (k, n))
    qp, shift = rand_qp(rng, n, m_lo=1e-3, m_hi=0.2)
    for azp, yzp, lo, hi in ((0, 0, -128, 127), (-128, 3, 3, 127), (127, -128, -100, 90)):
        attrs = dict(trans_b=trans_b, a_zp=azp, y_zp=yzp, out_min=lo, out_max=hi, shift=shift)
        got, want = run_node("gemm", [(a, False), (b, True), (qp, True)], attrs, threads=2)
        assert_same(got, want, f"{m}x{n}x{k}")


def test_rejects_float_options():
    rng = np.random.default_rng(0)
    a, b = rand_s8(rng, (2, 4)), rand_s8(rng, (4, 3))
    qp, shift = rand_qp(rng, 3)
    for extra in (dict(alpha=2.0), dict(trans_a=True), dict(act="relu")):
        with pytest.raises(OpUnsupported):
            run_node("gemm", [(a, False), (b, True), (qp, True)], dict(shift=shift, **extra))
