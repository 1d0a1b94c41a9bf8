"""tools/fuzz_bounded.py in CI: random spatial graphs converted with random bounds and run
at random sizes within them (corners, odd and prime sizes), each against a static
conversion at that size and onnxruntime's shape: no wrong shape or value, no run-time
kernel or scratch error, every refusal a clear one."""
from __future__ import annotations

import pytest

from tools import fuzz_bounded

SEED = 20261128
GRAPHS = 150


@pytest.fixture(scope="module")
def summary():
    return fuzz_bounded.run(SEED, GRAPHS, None, None)


def test_enough_graphs_and_sizes_ran(summary):
    assert summary["graphs"] == GRAPHS
    assert summary["counts"].get("pass", 0) >= 30, summary["counts"]
    assert summary["sizes"] >= 30 * fuzz_bounded.SIZES, summary


def test_no_wrong_answer_no_runtime_error_no_crash(summary):
    bad = summary["failures"]
    assert not bad, "\n".join(
        f"case {f['index']} {f['cls']} {f.get('ops')} bounds {f.get('bounds')}: {f.get('why', '')} "
        + "; ".join(f"{o['size']} {o.get('kind')} {o.get('bounded', '')}" for o in f.get("sizes", [])
                    if o.get("kind") not in (None, "narrowed")) for f in bad)


def test_rejections_name_their_cause(summary):
    """A refused conversion says what (an op and why, or the sizes the model cannot run)."""
    for cause in summary["rejected_by_cause"]:
        assert "op " in cause or "cannot run" in cause or "sizes" in cause or "graph changes" in cause, cause
