"""The random-graph tester's minimal cases (tests/data/fuzz_cases/, written by
tools/fuzz_graphs.py when it shrinks a failure): every one converts and gives the answer
its folder names (the ONNX text's, from the source its record.json gives), so a bug the
tester found stays fixed. The folder's README says what each case was."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import edgert

CASES = sorted(p for p in (pathlib.Path(__file__).resolve().parent / "data" / "fuzz_cases").iterdir() if p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_minimal_case(case):
    record = json.loads((case / "record.json").read_text())
    feeds = dict(np.load(case / "inputs.npz"))
    expected = np.load(case / "expected.npz")
    sess = edgert.Session(edgert.convert(str(case / "model.onnx"), None))
    outs = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    assert sorted(names) == sorted(expected.files), (names, expected.files)
    for name, got in zip(names, outs):
        want = expected[name]
        assert got.shape == want.shape, (record["detail"], name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=record["detail"])
