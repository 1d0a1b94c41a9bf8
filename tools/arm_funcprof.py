"""Guest instructions per function of one inference on an emulated board.

    python tools/arm_funcprof.py MODEL.edgert --target rpi4 [--cpu cortex-a76] [--top 30]

Runs the board's edgert-run (one thread, the board's kernels) under QEMU with the
tools/qemu_tbcount.c plugin, once with --repeat 1 and once with --repeat 2, and prints
per function (edgert-run's symbols) the difference: what one more inference executes,
without loading. Inputs: the model's example inputs (edgert.cli.inputs.example_inputs). A
development aid beside `edgert bench --profile --target` (per node)."""
from __future__ import annotations

import argparse
import bisect
import collections
import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from edgert import Session  # noqa: E402
from edgert.cli import build, targets  # noqa: E402
from edgert.cli.inputs import example_inputs  # noqa: E402
from edgert.cli.report_qemu import CACHE  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def plugin() -> pathlib.Path:
    """tools/qemu_tbcount.c compiled into the cache, under a hash of its source."""
    src = HERE / "qemu_tbcount.c"
    cache = pathlib.Path(os.environ.get("EDGERT_CACHE", CACHE))
    out = cache / "icount" / f"libtbcount-{hashlib.sha256(src.read_bytes()).hexdigest()[:16]}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o", str(tmp), str(src)], check=True)
        os.replace(tmp, out)
    return out


def symbols(binary: pathlib.Path, nm: str) -> tuple[list[int], list[str], int]:
    """Function start addresses (sorted), names, and the end of the text."""
    rows = []
    for line in subprocess.run([nm, "--defined-only", str(binary)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        p = line.split()
        if len(p) >= 3 and p[1] in "tTwW":
            rows.append((int(p[0], 16), p[2]))
    rows.sort()
    return [a for a, _ in rows], [n for _, n in rows], rows[-1][0] + 4096


def per_function(counts: pathlib.Path, addrs: list[int], names: list[str], end: int) -> collections.Counter:
    blocks = [(int(a, 16), int(n) * int(c)) for a, n, c in (line.split() for line in counts.read_text().splitlines())]
    # edgert-run is position-independent: its load address is the base under which most
    # executed instructions fall inside its text
    best, best_w = 0, -1
    for base in {va & ~0xFFFFF for va, _ in blocks} | {0}:
        w = sum(c for va, c in blocks if addrs[0] <= va - base < end)
        if w > best_w:
            best, best_w = base, w
    out = collections.Counter()
    for va, c in blocks:
        off = va - best
        i = bisect.bisect_right(addrs, off) - 1
        out[names[i] if 0 <= i and off < end else "(outside edgert-run)"] += c
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--target", default="rpi4")
    ap.add_argument("--cpu", default=None)
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    t = targets.load(a.target)
    bdir = build.compile_target(t)
    run = bdir / "bin" / "edgert-run"
    addrs, names, end = symbols(run, t.tool("nm"))
    so = plugin()
    with tempfile.TemporaryDirectory() as tmp:
        args = []
        for k, (name, arr) in enumerate(example_inputs(Session(pathlib.Path(a.model).read_bytes())).items()):
            np.save(os.path.join(tmp, f"in{k}.npy"), arr)
            args += ["--input", f"{name}={os.path.join(tmp, f'in{k}.npy')}"]
        prof = []
        for reps in (1, 2):
            out = pathlib.Path(tmp) / f"tb{reps}.txt"
            subprocess.run(t.qemu_command(a.cpu) + ["-plugin", f"{so},out={out}", "-d", "plugin", str(run), a.model,
                                                    *args, "--output-dir", tmp, "--repeat", str(reps), "--threads", "1"],
                           check=True, capture_output=True)
            prof.append(per_function(out, addrs, names, end))
    diff = collections.Counter({k: prof[1][k] - prof[0][k] for k in set(prof[0]) | set(prof[1])})
    total = sum(diff.values())
    print(f"{a.model} on {t.name} ({a.cpu or t.qemu_cpu}): {total / 1e6:.2f} M instructions per inference")
    for name, c in diff.most_common(a.top):
        print(f"{c / 1e6:10.2f}  {100 * c / total:5.1f} %  {name}")


if __name__ == "__main__":
    main()
