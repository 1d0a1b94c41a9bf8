"""Guest instructions per node of a converted model on a board, under QEMU user mode
with the qemu-icount plugin (`edgert report --target BOARD`).

The plugin counts every instruction a program executes. For each node k the prefix
model of nodes 0..k (edgert.cli.subgraph) is run by the board's edgert-run with --repeat 1
and --repeat 2, one thread: the difference is one inference of the prefix, with
loading, start-up and output writing cancelled out. Node k's count is prefix k minus
prefix k-1 (node 0's includes copying the inputs in), and the last prefix is the whole
model. Counts repeat to within a fraction of a percent for a given binary, CPU model
and input.

The plugin source is found in EDGERT_ICOUNT_DIR (icount.c and qemu-plugin.h) and
compiled once into ~/.cache/edgert/icount/.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import tempfile

import numpy as np

from ..errors import EdgertError
from ..converter.progress import Progress

CACHE = pathlib.Path(os.environ.get("EDGERT_CACHE", pathlib.Path.home() / ".cache" / "edgert"))


def icount_dir() -> pathlib.Path:
    env = os.environ.get("EDGERT_ICOUNT_DIR")
    candidates = [pathlib.Path(env)] if env else []
    here = pathlib.Path(__file__).resolve().parent.parent
    candidates += [up / "shared" / "tools" / "qemu-icount" for up in (here.parent, here.parent.parent)]
    for c in candidates:
        if (c / "icount.c").exists():
            return c
    raise EdgertError("qemu-icount plugin source not found: set EDGERT_ICOUNT_DIR to the folder holding "
                      "icount.c and qemu-plugin.h")


def plugin() -> pathlib.Path:
    src = icount_dir() / "icount.c"
    out = CACHE / "icount" / "libicount.so"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", f"-I{src.parent}", "-o", str(out), str(src)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise EdgertError(f"cannot compile the qemu-icount plugin:\n{r.stderr[-2000:]}")
    return out


def instructions(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> int:
    """All guest instructions of one QEMU run of cmd (loaded with plugin()): the plugin's
    report on stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        raise EdgertError(f"{' '.join(cmd[:6])} ... failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    m = re.search(r"icount: insns=(\d+)", r.stderr + r.stdout)
    if not m:
        raise EdgertError("no instruction count from QEMU (is the plugin loaded?)\n" + r.stderr[-2000:])
    return int(m.group(1))


def _insns(cmd: list[str], cwd: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "EDGERT_FORCE_REF"}  # the board's own kernels
    return instructions(cmd, env, cwd)


def count(model: str, target_name: str, progress: bool | None = None) -> dict:
    """{"target", "cpu", "instructions_per_inference", "per_node": {node name: count},
    "note"} for `model` on board `target_name`."""
    from . import build, targets
    from ..runtime import reader as fmt
    from .inputs import example_inputs
    from ..runtime.session import Session
    from .subgraph import prefix

    target = targets.load(target_name)
    if not target.qemu:
        raise EdgertError(f"target {target_name} runs natively: instruction counts need an emulated board")
    if not target.available():
        raise EdgertError(f"target {target_name}: {target.tool('gcc')} or {target.qemu} not installed "
                          "(tools/install_system_deps.sh)")
    bdir = build.compile_target(target)
    run = bdir / "bin" / "edgert-run"
    raw = pathlib.Path(model).read_bytes()
    info = fmt.read(raw)
    names = [n["name"] for n in info["nodes"]]
    qemu = target.qemu_command() + ["-plugin", str(plugin()), "-d", "plugin"]
    with tempfile.TemporaryDirectory() as tmp:
        sess = Session(raw)
        args = []
        for k, (name, arr) in enumerate(example_inputs(sess).items()):
            p = os.path.join(tmp, f"in{k}.npy")
            np.save(p, arr)
            args += ["--input", f"{name}={p}"]
        sess.close()
        per_prefix = []
        with Progress(f"counting instructions under QEMU ({target_name})", len(names), progress) as bar:
            for k in range(len(names)):
                path = os.path.join(tmp, f"prefix{k}.edgert")
                with open(path, "wb") as f:
                    f.write(prefix(raw, k))

                def cmd(reps: int) -> list[str]:
                    return qemu + [str(run), path, *args, "--output-dir", tmp, "--repeat", str(reps),
                                   "--threads", "1"]

                per_prefix.append(_insns(cmd(2), tmp) - _insns(cmd(1), tmp))
                bar.step()
    per_node = {}
    prev = 0
    for name, c in zip(names, per_prefix):
        per_node[name] = int(c - prev)
        prev = c
    return {"target": target_name, "cpu": target.qemu_cpu,
            "instructions_per_inference": int(per_prefix[-1]) if per_prefix else 0, "per_node": per_node,
            "note": (f"Instructions on {target_name} ({target.qemu_cpu}, QEMU user mode, qemu-icount plugin, "
                     f"one thread, the board's kernels): node k = one inference of the graph's first k+1 nodes "
                     f"minus that of the first k; whole model "
                     f"{per_prefix[-1] / 1e6 if per_prefix else 0:,.2f} M instructions per inference.")}
