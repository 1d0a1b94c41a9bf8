"""The short soak (tools/soak.py --short): 20,000 inferences and 2,000 session
lifecycles of the digits CNN, with identical results and no RSS growth after warm-up."""
from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_soak_short(tmp_path):
    report = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "soak.py"), "--short", "--json", str(report)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
    import json
    data = json.loads(report.read_text())
    assert data["inferences"] == 20_000 and data["cycles"] == 2_000 and data["mismatches"] == 0
    assert data["alloc_count_inference"] == 0  # run allocates nothing (docs/design.md, Memory)
