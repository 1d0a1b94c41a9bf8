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


# Cases that once were unexplained mismatches: onnx.reference's departures (whole-number
# Resize coordinates, MaxPool SAME_LOWER and ceil-mode pads, AveragePool ceil-mode
# overhang), a quirk or deviation matched on a branch the output does not depend on,
# the nearest-tie detector's output length, GlobalMaxPool's NaN, onnxruntime's 0 * NaN on
# a kept Resize axis, MeanVarianceNormalization without a reference.
DECIDED = [(2028, i) for i in (605, 1262, 1533, 3861, 6959, 8364, 13686, 15152, 16439, 19445)] + \
          [(2031, i) for i in (181, 4296, 6208, 12504, 12923, 13025, 14199, 16314, 18189, 18375)]


@pytest.mark.parametrize("seed,index", DECIDED, ids=[f"{s}-{i}" for s, i in DECIDED])
def test_once_unexplained_now_decided(seed, index):
    rec = fuzz_graphs.classify(*fuzz_graphs.generate(seed, index))
    assert rec["cls"] in ("pass", "deviation", "invalid"), rec
