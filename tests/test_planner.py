"""Memory planner: offsets, aliasing, lower bound and the independent verifier."""
from __future__ import annotations

import numpy as np
import pytest

from edgert.converter import planner
from edgert.errors import ConversionError
from edgert.converter.ir import Graph


def chain(n: int, size: int = 1000) -> Graph:
    """x -> transpose -> transpose ... (n nodes), each output `size` floats."""
    g = Graph()
    g.add_tensor("t0", (size, 1), np.float32)
    g.inputs = ["t0"]
    for k in range(n):
        shape = (size, 1) if k % 2 else (1, size)
        g.add_tensor(f"t{k + 1}", shape, np.float32)
        g.add_node("transpose", [f"t{k}"], [f"t{k + 1}"], {"perm": [1, 0]})
    g.outputs = [f"t{n}"]
    return g


def test_chain_reuses_two_buffers():
    g = chain(6)
    p = planner.plan(g)
    planner.verify(g, p)
    # Two tensors alive per step: the arena needs exactly two aligned buffers.
    assert p.lower_bound == 2 * 4000
    assert p.arena_bytes == 2 * 4032
    assert len({p.offsets[t] for t in g.tensors}) == 2


def test_reshape_is_a_view():
    g = Graph()
    g.add_tensor("x", (4, 6), np.float32)
    g.add_tensor("y", (24,), np.float32)
    g.add_tensor("z", (6, 4), np.float32)
    g.inputs, g.outputs = ["x"], ["z"]
    g.add_node("reshape", ["x"], ["y"], {"shape": [24]})
    g.add_node("reshape", ["y"], ["z"], {"shape": [6, 4]})
    p = planner.plan(g)
    planner.verify(g, p)
    assert p.offsets["x"] == p.offsets["y"] == p.offsets["z"]
    assert p.aliases["z"] == ("y", "view")


def test_branches_keep_live_tensors_apart():
    g = Graph()
    g.add_tensor("x", (8, 8), np.float32)
    g.inputs = ["x"]
    for name in ("a", "b", "c"):
        g.add_tensor(name, (8, 8), np.float32)
    g.add_tensor("y", (24, 8), np.float32)
    g.add_node("transpose", ["x"], ["a"], {"perm": [1, 0]})
    g.add_node("transpose", ["x"], ["b"], {"perm": [1, 0]})
    g.add_node("transpose", ["a"], ["c"], {"perm": [1, 0]})
    g.add_node("concat", ["a", "b", "c"], ["y"], {"axis": 0})
    g.outputs = ["y"]
    p = planner.plan(g)
    planner.verify(g, p)
    assert p.arena_bytes <= 1.05 * p.lower_bound + 64 * 5


def test_verifier_catches_overlap():
    g = chain(3)
    p = planner.plan(g)
    bad = planner.Plan(dict(p.offsets), {}, {}, p.arena_bytes, p.lower_bound)
    bad.offsets["t1"] = bad.offsets["t0"]  # t0 and t1 are both alive at step 0
    with pytest.raises(ConversionError, match="share arena bytes"):
        planner.verify(g, bad)


def test_verifier_catches_out_of_arena():
    g = chain(2)
    p = planner.plan(g)
    p.arena_bytes = 64
    with pytest.raises(ConversionError, match="outside the arena"):
        planner.verify(g, p)


def test_lower_bound_counts_peak_step():
    g = chain(1, size=10)
    p = planner.plan(g)
    assert p.lower_bound == 80
