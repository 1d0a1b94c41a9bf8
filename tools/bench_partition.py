#!/usr/bin/env python3
"""The cost of a litert partition boundary in edgert-run (csrc/tools/litert_backend.c).

    python tools/bench_partition.py [--shapes 1x3x4x5,1x64x56x56] [--repeat 20000] [--trials 5]
                                    [--no-arm] [--json OUT]

Two .edgert files per shape (tools/tflite_tiny.py): "edgert" is u = a + b with edgert's
own add; "partition" is u = partition_0(a, b) where partition_0 is a .tflite of one ADD
run by LiteRT through --fallback-lib (LiteRT's CPU path, XNNPACK). The difference per run
is what handing one node to LiteRT costs: the boundary copies in and out, LiteRT's
invocation and its ADD, minus edgert's add.

- host: edgert-run --repeat N with the x86-64 libLiteRt.so of the installed ai-edge-litert;
  per-run time = the mean latency edgert-run reports, best of --trials runs (the machine
  is shared; the minimum is the least disturbed).
- A72: guest instructions per run under qemu-aarch64 -cpu cortex-a72 with the qemu-icount
  plugin (tools/arm_icount.py), the rpi4 build of edgert-run and the aarch64 wheel's
  libLiteRt.so in the emulated Debian arm64 root (tools/arm_python.sh): (count(n + k) -
  count(n)) / k, so loading and compiling are left out.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

from tools import tflite_tiny  # noqa: E402


def host_lib() -> pathlib.Path:
    import ai_edge_litert
    return pathlib.Path(ai_edge_litert.__file__).parent / "libLiteRt.so"


def write_case(work: pathlib.Path, shape: tuple[int, ...]) -> dict[str, pathlib.Path]:
    rng = np.random.default_rng(0)
    np.save(work / "a.npy", rng.standard_normal(shape).astype(np.float32))
    np.save(work / "b.npy", rng.standard_normal(shape).astype(np.float32))
    files = {"edgert": work / "edgert.edgert", "partition": work / "partition.edgert"}
    files["edgert"].write_bytes(tflite_tiny.plain_model(shape))
    files["partition"].write_bytes(tflite_tiny.partition_model(shape, 1, around=False))
    return files


def args_for(model: pathlib.Path, work: pathlib.Path, lib: pathlib.Path | None, repeat: int) -> list[str]:
    a = [str(model), "--input", f"a={work / 'a.npy'}", "--input", f"b={work / 'b.npy'}",
         "--output-dir", str(work), "--repeat", str(repeat)]
    return a + (["--fallback-lib", str(lib)] if lib is not None else [])


def host_us(run: pathlib.Path, model: pathlib.Path, work: pathlib.Path, lib, repeat: int, trials: int) -> float:
    best = float("inf")
    for _ in range(trials):
        r = subprocess.run([str(run), *args_for(model, work, lib, repeat)], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"edgert-run failed:\n{r.stderr[-2000:]}")
        best = min(best, float(re.search(r"mean latency ([0-9.]+) ms", r.stderr).group(1)) * 1e3)
    return best


def arm_counts(files: dict[str, pathlib.Path], work: pathlib.Path, n: int, k: int) -> dict[str, float]:
    import zipfile

    from edgert.cli import build as ebuild
    from edgert.cli import targets
    from tools import arm_icount

    if not (arm_icount.ROOTFS / ".complete").exists():
        subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), str(arm_icount.ROOTFS)], check=True)
    target = targets.load("rpi4")
    run = ebuild.compile_target(target, goals=("lib", "edgert-run")) / "bin" / "edgert-run"
    import ai_edge_litert
    wheel = tflite_tiny.aarch64_wheel(ai_edge_litert.__version__)
    with zipfile.ZipFile(wheel) as z:
        z.extract("ai_edge_litert/libLiteRt.so", work / "aarch64")
    lib = work / "aarch64" / "ai_edge_litert" / "libLiteRt.so"
    prefix = arm_icount.qemu_prefix(target, "cortex-a72", str(arm_icount.ROOTFS))
    out = {}
    for name, model in files.items():
        use = lib if name == "partition" else None
        out[name] = arm_icount.per_inference(lambda reps: prefix + [str(run), *args_for(model, work, use, reps)], n, k)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x3x4x5,1x64x56x56")
    ap.add_argument("--repeat", type=int, default=20000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--no-arm", action="store_true")
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("-k", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run(["make", "-s", "-C", str(ROOT / "csrc"), "edgert-run"], check=True, env=env)
    run = ROOT / "build" / "host" / "bin" / "edgert-run"
    results = []
    for text in a.shapes.split(","):
        shape = tuple(int(d) for d in text.split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            work = pathlib.Path(tmp)
            files = write_case(work, shape)
            reps = max(50, a.repeat * 60 // max(60, int(np.prod(shape))))
            row = {"shape": list(shape), "bytes_per_tensor": int(np.prod(shape)) * 4, "host_repeat": reps}
            row["host_us"] = {"edgert": host_us(run, files["edgert"], work, None, reps, a.trials),
                              "partition": host_us(run, files["partition"], work, host_lib(), reps, a.trials)}
            row["host_boundary_us"] = row["host_us"]["partition"] - row["host_us"]["edgert"]
            print(f"{text}: host per run: edgert add {row['host_us']['edgert']:.2f} us, litert partition "
                  f"{row['host_us']['partition']:.2f} us -> boundary {row['host_boundary_us']:.2f} us", flush=True)
            if not a.no_arm:
                c = arm_counts(files, work, a.n, a.k)
                row["a72_instructions"] = c
                row["a72_boundary_instructions"] = c["partition"] - c["edgert"]
                print(f"{text}: A72 instructions per run: edgert add {c['edgert']:.0f}, litert partition "
                      f"{c['partition']:.0f} -> boundary {row['a72_boundary_instructions']:.0f}", flush=True)
            results.append(row)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
