"""Symbolic dimensions (edgert/converter/symdim.py): canonical forms, evaluation,
intervals, simplification over bounds and the programs the runtime evaluates."""
from __future__ import annotations

import itertools
import random

import pytest

from edgert.converter import symdim as S

H, W, T = S.sym(0, "H"), S.sym(1, "W"), S.sym(2, "T")


@pytest.mark.parametrize("a,b", [
    (H + H, 2 * H),
    ((H + 1) * 2 - 2, 2 * H),
    (S.floordiv(2 * H + 64, 32), S.floordiv(H, 16) + 2),
    (S.floordiv(S.floordiv(H, 2), 2), S.floordiv(H, 4)),
    (S.ceildiv(H, 32), S.floordiv(H + 31, 32)),
    (S.mod(4 * H + 3, 4), S.const(3)),
    (S.mod(8 - S.mod(T, 8), 8), S.mod(-T, 8)),
    (S.min_(T, T + 3), T),
    (S.max_(T, T - 1, 5, 7), S.max_(7, T)),
    (S.floordiv(T * 384 * 2, T * 2), S.const(384)),
    (S.floordiv(H * W * 3, 3), H * W),
    (H * W - W * H, S.const(0)),
])
def test_equal_expressions_compare_equal(a, b):
    assert a == b and hash(a) == hash(b)


@pytest.mark.parametrize("e,text", [
    (S.ceildiv(H, 32), "ceil(H/32)"),
    (S.floordiv(T, 2), "floor(T/2)"),
    (64 - T, "64 - T"),
    (S.min_(T, 64), "min(T, 64)"),
    (2 * H + 1, "2*H + 1"),
    (S.ceildiv(H, 32) * S.ceildiv(W, 32), "ceil(H/32)*ceil(W/32)"),
    (S.const(7), "7"),
])
def test_text(e, text):
    assert str(e) == text


def _random_expr(rng: random.Random, depth: int) -> S.Expr:
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([H, W, T, S.const(rng.randint(-9, 40))])
    a, b = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
    k = rng.randint(1, 33) * rng.choice([1, 1, 1, -1])
    return rng.choice([
        lambda: a + b, lambda: a - b, lambda: a * b, lambda: S.floordiv(a, k), lambda: S.ceildiv(a, k),
        lambda: S.mod(a, k), lambda: S.min_(a, b), lambda: S.max_(a, b), lambda: -a,
        lambda: S.floordiv(a, S.max_(b, 1)), lambda: a * k + b,
    ])()


def _reference(e: S.Expr, vals) -> int:
    return e.evaluate(vals)


def test_random_expressions_programs_and_intervals():
    """Every random expression: its program computes its value (run_program, the
    runtime's reference), decoding the program gives an equal value, the interval holds
    every value of the box, and simplify() keeps the value."""
    rng = random.Random(7)
    box = [(1, 40), (3, 17), (1, 9)]
    points = [list(p) for p in itertools.product((1, 2, 7, 40), (3, 4, 17), (1, 5, 9))]
    for _ in range(150):
        e = _random_expr(rng, 4)
        try:
            words = S.program(e)
        except OverflowError:
            continue
        d = S.decode(words, ["H", "W", "T"])
        simple = S.simplify(e, box)
        lo, hi = e.interval(box)
        for p in points:
            try:
                v = e.evaluate(p)
            except ZeroDivisionError:
                with pytest.raises(ZeroDivisionError):
                    S.run_program(words, p)
                continue
            assert S.run_program(words, p) == v, (str(e), p)
            assert d.evaluate(p) == v, (str(e), str(d), p)
            assert simple.evaluate(p) == v, (str(e), str(simple), p)
            assert lo <= v <= hi, (str(e), p, lo, hi)


def test_canonical_forms_keep_values():
    """Construction simplifies; the value at every point stays that of the plain
    arithmetic it was built from."""
    rng = random.Random(3)
    for _ in range(60):
        k, c = rng.randint(1, 40), rng.randint(-50, 50)
        m = rng.randint(2, 9)
        for h in range(1, 70):
            vals = [h, 5, 3]
            assert S.floordiv(k * H + c, m).evaluate(vals) == (k * h + c) // m
            assert S.ceildiv(k * H + c, m).evaluate(vals) == -((-(k * h + c)) // m)
            assert S.mod(k * H + c, m).evaluate(vals) == (k * h + c) % m
            assert S.mod(c - S.mod(H, m), m).evaluate(vals) == (c - h % m) % m


def test_simplify_over_the_bounds():
    assert S.simplify(S.min_(T, 512), [(1, 1), (1, 1), (1, 128)]) == T
    assert S.simplify(S.max_(T - 200, 0), [(1, 1), (1, 1), (1, 128)]) == S.const(0)
    assert S.simplify(S.mod(T, 64), [(1, 1), (1, 1), (1, 63)]) == T
    assert S.equal_over(S.floordiv(H + 31, 32), S.ceildiv(H, 32), [(1, 1000)])
    assert not S.equal_over(S.floordiv(H, 32), S.ceildiv(H, 32), [(1, 1000)])


def test_comparisons_decide_only_what_always_holds():
    assert H + 1 > H
    with pytest.raises(S.Undecided):
        bool(H > 3)
    with pytest.raises(ValueError):
        int(H)
    assert int(S.const(5)) == 5


def test_program_limits_and_bad_programs():
    with pytest.raises(ZeroDivisionError):
        S.floordiv(H, 0)
    e = H
    for k in range(60):
        e = e * W + k
    with pytest.raises(OverflowError):
        S.program(e)
    for bad in ([], [S.OP_ADD], [S.OP_CONST, S.OP_CONST], [S.OP_CONST32], [99]):
        with pytest.raises(ValueError):
            S.stack_depth(bad)
