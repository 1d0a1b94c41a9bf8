#!/usr/bin/env python3
"""Guest instructions per frame of streaming models in the emulated arm64 Python on a
Cortex-A72 (QEMU user mode with edgert's instruction-count plugin): edgert with the state
in the session against onnxruntime fed the copied states (docs/runtime.md, "State").

    python tools/state_icount.py [--models silero_vad,dtln_1,dtln_2] [-n 4] [-k 16] [--json FILE]

Both run as a Python loop over frames in the Debian arm64 Python of tools/arm_python.sh:
edgert through its cffi ABI mode on the rpi4 build of libedgert.so (EDGERT_LIBRARY, the
package from this checkout), onnxruntime from its aarch64 wheel (one thread), the way
tools/arm_icount.py runs it. Per frame = (count(n + k frames) - count(n frames)) / k, so
start-up, loading and conversion-free set-up cancel out.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

import edgert  # noqa: E402
from edgert.cli import build as ebuild  # noqa: E402
from edgert.cli import targets  # noqa: E402
from tools import arm_icount as ic  # noqa: E402
from tools import models  # noqa: E402
from tools.bench_state import CASES, convert, onnx_model  # noqa: E402

EDGERT_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, sys.argv[4])
import edgert
s = edgert.Session(sys.argv[1])
xs = np.load(sys.argv[2])
name = s.get_inputs()[0].name
for k in range(int(sys.argv[3])):
    s.run(None, {name: xs[k % len(xs)]})
"""

ORT_SCRIPT = """
import sys, json, numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
sess = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
xs = np.load(sys.argv[2])
x_name, pairs, frozen = json.loads(sys.argv[4])
frozen = {k: np.array(v[0], dtype=v[1]) for k, v in frozen.items()}
names = [o.name for o in sess.get_outputs()]
shape = {o.name: [d if isinstance(d, int) else 1 for d in o.shape] for o in sess.get_outputs()}
slots = [(names.index(o), i) for o, i in pairs.items()]
state = {i: np.zeros(shape[o], np.float32) for o, i in pairs.items()}
for k in range(int(sys.argv[3])):
    ys = sess.run(None, {x_name: xs[k % len(xs)], **state, **frozen})
    state = {i: ys[j] for j, i in slots}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="silero_vad,dtln_1,dtln_2")
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("-k", type=int, default=16)
    ap.add_argument("--cpu", default="cortex-a72")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    work = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / "edgert-state-icount"
    work.mkdir(parents=True, exist_ok=True)
    if not (ic.ROOTFS / ".complete").exists():
        import subprocess
        subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), str(ic.ROOTFS)], check=True)
    ic.ensure_ort()
    rpi4 = targets.load("rpi4")
    lib = ebuild.compile_target(rpi4, goals=("lib",)) / "libedgert.so"
    root = str(ic.guest_root(a.cpu, work))
    python = str(ic.ROOTFS / "usr/bin/python3.11")
    (work / "ert.py").write_text(EDGERT_SCRIPT)
    (work / "ort.py").write_text(ORT_SCRIPT)
    rows = []
    print(f"{'model':12s} {'onnxruntime instr/frame':>24s} {'edgert instr/frame':>19s} {'edgert/ort':>11s}")
    for name in a.models.split(","):
        x_name, shape, pairs, frozen = CASES[name]
        src = onnx_model(name)
        if isinstance(src, bytes):
            (work / f"{name}.onnx").write_bytes(src)
            src = str(work / f"{name}.onnx")
        (work / f"{name}.edgert").write_bytes(convert(name))
        xs = (np.random.default_rng(0).standard_normal((8, *shape)) * 0.1).astype(np.float32)
        np.save(work / f"{name}.frames.npy", xs)
        spec = json.dumps([x_name, pairs, {k: [v.tolist(), str(v.dtype)] for k, v in frozen.items()}])
        env_e = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "EDGERT_LIBRARY": str(lib),
                 "PYTHONDONTWRITEBYTECODE": "1"}
        env_o = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "PYTHONPATH": str(ic.ORT_SITE),
                 "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}

        def ert_cmd(reps: int, name=name) -> list[str]:
            return ic.qemu_prefix(rpi4, a.cpu, root) + [python, str(work / "ert.py"), str(work / f"{name}.edgert"),
                                                        str(work / f"{name}.frames.npy"), str(reps), str(ROOT)]

        def ort_cmd(reps: int, name=name, src=src, spec=spec) -> list[str]:
            return ic.qemu_prefix(rpi4, a.cpu, root) + [python, str(work / "ort.py"), src,
                                                        str(work / f"{name}.frames.npy"), str(reps), spec]

        e = ic.per_inference(ert_cmd, a.n, a.k, env_e, str(work))
        o = ic.per_inference(ort_cmd, a.n, a.k, env_o, str(work))
        rows.append({"model": name, "cpu": a.cpu, "onnxruntime": o, "edgert": e, "ratio": e / o})
        print(f"{name:12s} {o:24,.0f} {e:19,.0f} {e / o:11.2f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
