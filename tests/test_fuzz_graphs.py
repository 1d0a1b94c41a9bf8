"""tools/fuzz_graphs.py in CI: a fixed-seed budget of random graphs against onnxruntime and
the float64 ONNX reference, with no crash and no unexplained mismatch allowed."""
from __future__ import annotations

import pytest

from tools import fuzz_graphs

SEED = 20261128
GRAPHS = 1000


@pytest.fixture(scope="module")
def summary():
    args = fuzz_graphs.build_parser().parse_args(["--seed", str(SEED), "--graphs", str(GRAPHS), "--jobs", "1",
                                                  "--quiet"])
    return fuzz_graphs.run(args)


def test_enough_graphs_ran(summary):
    assert summary["cases"] == GRAPHS
    assert summary["op_types"] >= 40
    assert summary["counts"].get("pass", 0) >= GRAPHS // 2, summary["counts"]


def test_no_crash(summary):
    crashes = [f for f in summary["failures"] if f["cls"] in ("crash", "tool_error")]
    assert not crashes, "\n".join(f"case {f['index']}: {f['kind']}: {f['detail']}" for f in crashes)


def test_no_unexplained_mismatch(summary):
    bad = [f for f in summary["failures"] if f["cls"] == "mismatch"]
    assert not bad, "\n".join(f"case {f['index']} ({f['kind']}, ops {f['ops']}): {f['detail']}" for f in bad)
