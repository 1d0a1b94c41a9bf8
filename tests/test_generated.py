"""Generated files agree with their sources, and the op list is consistent everywhere."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_files_up_to_date():
    for tool in ("tools/gen_oplist.py", "tools/gen_ops_doc.py"):
        r = subprocess.run([sys.executable, tool, "--check"], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_every_listed_op_has_python_definition_and_c_kernel():
    from edgert.converter import ops
    from edgert._oplist import OPS

    c_sources = "\n".join(p.read_text() for p in (ROOT / "csrc" / "kernels" / "ref").glob("*.c"))
    missing_py = [n for n in OPS if n not in ops.REGISTRY]
    assert not missing_py, missing_py
    for name in ops.REGISTRY:
        # Kernels are defined directly or through a family X-macro; the symbol or the name must appear.
        assert re.search(rf"\b(ert_{name}_eval|{name})\b", c_sources), f"no C kernel mentions {name}"


def test_op_codes_unique():
    text = (ROOT / "csrc" / "include" / "edgert_ops.def").read_text()
    pairs = re.findall(r"^ERT_OP\((\d+),\s*(\w+)\)", text, re.M)
    codes = [c for c, _ in pairs]
    names = [n for _, n in pairs]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    assert [int(c) for c in codes] == sorted(int(c) for c in codes), "codes must ascend (ops.c binary search)"
