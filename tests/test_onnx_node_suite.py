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


def test_allowlist_covers_the_op_types():
    """98 op types pass every case; 133 are clean (some cases pass, every other is
    rejected at conversion, none computed wrongly: test_node_case checks the last part)."""
    by_op = {}
    for c in ALL:
        by_op.setdefault(op_type_of(c), []).append(c.name)
    by_op = {op: names for op, names in by_op.items() if "+" not in op}
    full = [op for op, names in by_op.items() if all(n in ALLOWED for n in names)]
    clean = [op for op, names in by_op.items() if any(n in ALLOWED for n in names)]
    assert len(full) >= 95, f"only {len(full)} op types pass all their cases: {sorted(full)}"
    assert len(clean) >= 125, f"only {len(clean)} op types pass some cases: {sorted(clean)}"


def test_allowlist_names_exist():
    names = {c.name for c in ALL}
    assert ALLOWED <= names, sorted(ALLOWED - names)[:10]
