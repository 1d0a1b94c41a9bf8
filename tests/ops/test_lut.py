"""Unary ops on int8 by table lookup (edgert/converter/ops/lut.py): kernel == reference, and the
tables follow the float op."""
import numpy as np
import pytest

from edgert.converter.ir import Node
from edgert.converter.ops.lut import build_table

from .s8_util import assert_same, rand_s8, run_node


@pytest.mark.parametrize("op,attrs", [("sigmoid", {}), ("tanh", {}), ("hard_swish", {}), ("silu", {}),
                                      ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}), ("relu", {}),
                                      ("leaky_relu", {"alpha": 0.1}), ("gelu", {"approximate": "none"})])
def test_table_op(op, attrs):
    rng = np.random.default_rng(0)
    x = rand_s8(rng, (3, 5, 7))
    node = Node(op, ["x"], ["y"], dict(attrs))
    s_in, z_in, s_out, z_out = 0.05, 10, 0.01, -20
    table = build_table(node, s_in, z_in, s_out, z_out)
    got, want = run_node(op, [(x, False), (table, True)], attrs)
    assert_same(got, want, op)
    # the table is the float op between the two quantizations, within half a step
    from edgert.converter import ops
    real = ((np.arange(-128, 128) - z_in) * s_in).astype(np.float32)
    ref = ops.get(op).reference(node, [real])[0]
    deq = (table.astype(np.float64) - z_out) * s_out
    inside = (ref > (-128 - z_out) * s_out) & (ref < (127 - z_out) * s_out)
    assert np.all(np.abs(deq - ref)[inside] <= s_out / 2 + 1e-6)


def test_in_place_chain():
    rng = np.random.default_rng(1)
    x = rand_s8(rng, (1000,))
    t = np.arange(-128, 128)[::-1].astype(np.int8)
    got, want = run_node("tanh", [(x, False), (t, True)], {}, threads=2)
    assert_same(got, want, "reversed table")
