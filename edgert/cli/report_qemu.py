"""Guest instructions per node of a converted model on a board, under QEMU user mode
with edgert's instruction-count plugin (`edgert report --target BOARD`, `edgert bench
--profile --target BOARD`).

The plugin counts every instruction a program executes. For each node k the prefix
model of nodes 0..k (edgert.cli.subgraph) is run by the board's edgert-run with --repeat 1
and --repeat 2, one thread: the difference is one inference of the prefix, with
loading, start-up and output writing cancelled out. Node k's count is prefix k minus
prefix k-1 (node 0's includes copying the inputs in), and the last prefix is the whole
model. Counts repeat to within a fraction of a percent for a given binary, CPU model
and input.

The plugin is edgert's own (edgert/data/qemu_icount.c, Apache-2.0, shipped as source):
compiled with the host's gcc into ~/.cache/edgert/icount/ (EDGERT_CACHE moves the cache)
on first use, and again whenever its source changes (the library's name carries a hash
of the source and the compiler command). EDGERT_ICOUNT_DIR overrides it with another
plugin's folder (icount.c, with its headers beside it) that prints the same
"icount: insns=N" line.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import numpy as np

from ..errors import EdgertError
from ..converter.progress import Progress

CACHE = pathlib.Path(os.environ.get("EDGERT_CACHE", pathlib.Path.home() / ".cache" / "edgert"))
PLUGIN_SOURCE = pathlib.Path(__file__).resolve().parent.parent / "data" / "qemu_icount.c"  # edgert/data
# The per-thread counter (`edgert bench --threads N --target BOARD`); never overridden.
THREADS_PLUGIN_SOURCE = PLUGIN_SOURCE.with_name("qemu_icount_threads.c")
CFLAGS = ("-O2", "-shared", "-fPIC", "-fvisibility=hidden")


def icount_dir() -> pathlib.Path | None:
    """The folder EDGERT_ICOUNT_DIR names (an override holding icount.c), or None for
    edgert's own plugin."""
    env = os.environ.get("EDGERT_ICOUNT_DIR")
    if not env:
        return None
    d = pathlib.Path(env).expanduser()
    if not (d / "icount.c").is_file():
        raise EdgertError(f"EDGERT_ICOUNT_DIR={env}: no icount.c there; unset EDGERT_ICOUNT_DIR to use "
                          "edgert's own instruction-count plugin")
    return d


def plugin_source() -> pathlib.Path:
    """The C source of the plugin plugin() builds."""
    d = icount_dir()
    if d is not None:
        return d / "icount.c"
    if not PLUGIN_SOURCE.is_file():
        raise EdgertError(f"edgert's QEMU plugin source is missing ({PLUGIN_SOURCE}); reinstall edgert")
    return PLUGIN_SOURCE


def plugin(per_thread: bool = False) -> pathlib.Path:
    """The compiled plugin, built on first use into the cache (EDGERT_CACHE, else
    ~/.cache/edgert) under a name holding a hash of its source: a changed source (a new
    edgert, another EDGERT_ICOUNT_DIR) builds a new library, whatever the files' times.
    per_thread: edgert's per-thread counter (edgert/data/qemu_icount_threads.c) instead."""
    if per_thread:
        src = THREADS_PLUGIN_SOURCE
        if not src.is_file():
            raise EdgertError(f"edgert's QEMU plugin source is missing ({src}); reinstall edgert")
    else:
        src = plugin_source()
    cache = pathlib.Path(os.environ.get("EDGERT_CACHE", CACHE)).expanduser()
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise EdgertError("building edgert's QEMU instruction-count plugin needs a C compiler for this machine "
                          "(gcc); on Debian or Ubuntu: sudo apt-get install gcc")
    include = [f"-I{src.parent}"] if src not in (PLUGIN_SOURCE, THREADS_PLUGIN_SOURCE) else []
    cmd = [*CFLAGS, *include]
    h = hashlib.sha256(src.read_bytes())
    if include:  # an override folder's headers are part of its source
        for header in sorted(src.parent.glob("*.h")):
            h.update(header.name.encode() + b"\0" + header.read_bytes())
    h.update("\0".join([os.path.basename(cc), *cmd]).encode())
    stem = "libicount_threads" if per_thread else "libicount"
    out = cache / "icount" / f"{stem}-{h.hexdigest()[:16]}.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Built under a temporary name and renamed: concurrent first uses never load half a file.
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        r = subprocess.run([cc, *cmd, "-o", tmp, str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise EdgertError(f"cannot compile the QEMU instruction-count plugin {src}:\n{r.stderr[-2000:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def instructions(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> int:
    """All guest instructions of one QEMU run of cmd (loaded with plugin()): the plugin's
    report on stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        hint = ""
        if "Could not load plugin" in r.stderr and "version" in r.stderr:
            hint = ("\nedgert's instruction-count plugin speaks QEMU's plugin API version 1 (QEMU 4.2 to 8.2, "
                    "e.g. Debian 12's qemu-user 7.2); this QEMU refuses it.")
        raise EdgertError(f"{' '.join(cmd[:6])} ... failed (exit {r.returncode}):\n{r.stderr[-2000:]}{hint}")
    m = re.search(r"icount: insns=(\d+)", r.stderr + r.stdout)
    if not m:
        raise EdgertError("no instruction count from QEMU (is the plugin loaded?)\n" + r.stderr[-2000:])
    return int(m.group(1))


def _insns(cmd: list[str], cwd: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "EDGERT_FORCE_REF"}  # the board's own kernels
    return instructions(cmd, env, cwd)


def _board(target_name: str):
    """(target, its edgert-run built for it) of an emulated board; EdgertError when the
    board runs natively or its toolchain or QEMU is missing."""
    from . import build, targets

    target = targets.load(target_name)
    if not target.qemu:
        raise EdgertError(f"target {target_name} runs natively: instruction counts need an emulated board")
    if not target.available():
        raise EdgertError(f"target {target_name}: {target.tool('gcc')} or {target.qemu} not installed; "
                          f"{target.install_hint()}")
    return target, build.compile_target(target) / "bin" / "edgert-run"


def _input_args(raw: bytes, tmp: str) -> list[str]:
    """edgert-run's --input arguments for the example inputs of the model `raw`, saved in tmp."""
    from .inputs import example_inputs
    from ..runtime.session import Session

    sess = Session(raw)
    args = []
    try:
        for k, (name, arr) in enumerate(example_inputs(sess).items()):
            p = os.path.join(tmp, f"in{k}.npy")
            np.save(p, arr)
            args += ["--input", f"{name}={p}"]
    finally:
        sess.close()
    return args


def count(model: str, target_name: str, progress: bool | None = None) -> dict:
    """{"target", "cpu", "instructions_per_inference", "per_node": {node name: count},
    "note"} for `model` on board `target_name`."""
    from ..runtime import reader as fmt
    from .subgraph import prefix

    target, run = _board(target_name)
    raw = pathlib.Path(model).read_bytes()
    info = fmt.read(raw)
    names = [n["name"] for n in info["nodes"]]
    qemu = target.qemu_command() + ["-plugin", str(plugin()), "-d", "plugin"]
    with tempfile.TemporaryDirectory() as tmp:
        args = _input_args(raw, tmp)
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
            "note": (f"Instructions on {target_name} ({target.qemu_cpu}, QEMU user mode, edgert's icount plugin, "
                     f"one thread, the board's kernels): node k = one inference of the graph's first k+1 nodes "
                     f"minus that of the first k; whole model "
                     f"{per_prefix[-1] / 1e6 if per_prefix else 0:,.2f} M instructions per inference.")}


def thread_instructions(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> list[int]:
    """Guest instructions of each guest thread of one QEMU run of cmd (loaded with
    plugin(per_thread=True)), in the order the threads started: the main thread first."""
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        raise EdgertError(f"{' '.join(cmd[:6])} ... failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    m = re.search(r"icount_threads: .*?beyond=(\d+) per=([\d,]*)", r.stderr + r.stdout)
    if not m:
        raise EdgertError("no per-thread instruction count from QEMU (is the plugin loaded?)\n" + r.stderr[-2000:])
    if int(m.group(1)):
        raise EdgertError("more guest threads than edgert's per-thread plugin counts (256)")
    return [int(c) for c in m.group(2).split(",") if c]


def busiest_thread(model: str, target_name: str, threads: int, n: int = 1, k: int = 2) -> dict:
    """{"target", "cpu", "threads", "busiest", "per_thread", "total", "note"}: guest
    instructions per inference of `model` run by the board's edgert-run with `threads`
    threads, per thread: (count at --repeat n+k - count at --repeat n) / k, threads
    matched by start order (the session's workers start once, at load). "busiest" is the
    largest, a proxy for the wall time of one inference on a board whose cores run at the
    same rate (it ignores memory bandwidth shared between the cores). Waiting threads
    poll for a while before they sleep, and those polls count: the counts of a run with
    several threads vary by a few percent from run to run with the host's scheduling."""
    target, run = _board(target_name)
    qemu = target.qemu_command() + ["-plugin", str(plugin(per_thread=True)), "-d", "plugin"]
    env = {key: v for key, v in os.environ.items() if key != "EDGERT_FORCE_REF"}  # the board's own kernels
    with tempfile.TemporaryDirectory() as tmp:
        args = _input_args(pathlib.Path(model).read_bytes(), tmp)

        def cmd(reps: int) -> list[str]:
            return qemu + [str(run), str(pathlib.Path(model).resolve()), *args, "--output-dir", tmp,
                           "--repeat", str(reps), "--threads", str(threads)]

        lo = thread_instructions(cmd(n), env, tmp)
        hi = thread_instructions(cmd(n + k), env, tmp)
    lo += [0] * (len(hi) - len(lo))
    per = [(b - a) / k for a, b in zip(lo, hi)]
    busiest = max(per) if per else 0.0
    return {"target": target_name, "cpu": target.qemu_cpu, "threads": threads, "busiest": busiest,
            "per_thread": per, "total": sum(per),
            "note": (f"Instructions per inference on {target_name} ({target.qemu_cpu}, QEMU user mode, edgert's "
                     f"per-thread icount plugin, {threads} thread(s), the board's kernels): busiest thread "
                     f"{busiest / 1e6:,.2f} M, all threads {sum(per) / 1e6:,.2f} M.")}
