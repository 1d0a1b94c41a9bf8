"""ONNX's node test suite through edgert: allow-listed cases must pass, every other case
must be rejected cleanly at convert time (never converted and computed wrongly)."""
from __future__ import annotations


import pytest

from tools.node_suite import ALLOWLIST, cases, op_type_of, run_case

ALL = cases()
ALLOWED = {line.strip() for line in open(ALLOWLIST) if line.strip() and not line.startswith("#")}


@pytest.mark.parametrize("case", ALL, ids=[c.name for c in ALL])
def test_node_case(case):
    status, why = run_case(case)
    if case.name in ALLOWED:
        assert status == "pass", why
    else:
        assert status in ("pass", "rejected"), f"{status}: {why}"


def test_allowlist_covers_80_op_types():
    by_op = {}
    for c in ALL:
        by_op.setdefault(op_type_of(c), []).append(c.name)
    full = [op for op, names in by_op.items() if "+" not in op and all(n in ALLOWED for n in names)]
    assert len(full) >= 80, f"only {len(full)} op types pass all their cases: {sorted(full)}"


def test_allowlist_names_exist():
    names = {c.name for c in ALL}
    assert ALLOWED <= names, sorted(ALLOWED - names)[:10]
