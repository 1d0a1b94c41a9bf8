#!/usr/bin/env python3
"""The busiest thread's guest instructions per inference, edgert vs LiteRT, at 1, 2 and 4
threads under QEMU: the threads table of docs/arm.md.

    python tools/bench_threads_icount.py [--models mobilenetv2,ppocr_det] [--precisions fp32,int8]
                                         [--cpus cortex-a72,cortex-a76] [--threads 1,2,4]
                                         [--engines edgert,litert] [--json docs/threads_icount.json]

Every cell runs a program with N and N+k inferences under `qemu-aarch64 -cpu CPU` with
edgert's per-thread instruction-count plugin (edgert/data/qemu_icount_threads.c) and takes,
per guest thread (matched by start order), (count(N+k) - count(N)) / k; the cell is the
largest of these, the busiest thread. On a board whose cores run at the same rate it is a
proxy for the wall time of one inference (it ignores memory bandwidth shared by the cores).

    edgert  edgert-run --threads T of the target built for the CPU (cortex-a72: rpi4,
            cortex-a76: rpi5), the board's kernels; int8: edgert.convert(quantize="int8")
    litert  ai-edge-litert 2.3 (XNNPACK) in the emulated Python, Interpreter(num_threads=T),
            on the .tflite of edgert's own graph and quantization (tools/litert_icount.py's
            --converter edgert files), as tools/compare_icount.py counts it at one thread

Models, inputs and calibration samples are tools/compare_icount.py's (MobileNetV2 from
tools/mobilenetv2.py's --mnv2-dir). Waiting threads of both engines poll before they sleep
and those polls count, so a multi-threaded cell varies by a few percent with the host's
scheduling (one-thread cells repeat exactly); --repeat R keeps the smallest of R
measurements of each cell. Results merge into --json cell by cell; the markdown table is
printed (--render: from --json only).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import sys
import tempfile
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

from tools import arm_icount, compare_icount, models  # noqa: E402

# (n, k) per engine kind and model: as tools/compare_icount.py; Python start-up varies by
# a few M instructions, which k divides.
NK = {"c": (1, 2), "py": (1, 6)}
NK_OF = {"ppocr_det": {"c": (1, 1), "py": (1, 1)}}

LITERT_THREADS_RUNNER = r"""
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=int(sys.argv[4]))
it.allocate_tensors()
d = it.get_input_details()[0]
it.set_tensor(d["index"], np.load(sys.argv[2]))
for _ in range(int(sys.argv[3])):
    it.invoke()
"""


def log(msg: str) -> None:
    print(msg, flush=True)


def per_thread(make_cmd, n: int, k: int, env=None, cwd=None) -> list[float]:
    from edgert.cli import report_qemu

    lo = report_qemu.thread_instructions(make_cmd(n), env, cwd)
    hi = report_qemu.thread_instructions(make_cmd(n + k), env, cwd)
    lo += [0] * (len(hi) - len(lo))
    return [(b - a) / k for a, b in zip(lo, hi)]


def edgert_cell(name: str, cpu: str, threads: int, calib, work: pathlib.Path, n: int, k: int) -> list[float]:
    import edgert
    from edgert.cli import build as ebuild
    from edgert.cli import report_qemu, targets

    target = targets.load(compare_icount.TARGET_OF[cpu])
    bdir = ebuild.compile_target(target)
    kwargs = models.convert_kwargs(name) if name in models.MODELS else {}
    if calib is not None:
        kwargs.update(quantize="int8", calibration=calib)
    model = work / "m.edgert"
    if not model.is_file():
        model.write_bytes(edgert.convert(arm_icount.source(name), None, **kwargs))
    args = []
    for key, v in arm_icount.inputs(name).items():
        p = work / f"in.{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.npy"
        np.save(p, v)
        args += ["--input", f"{key}={p}"]
    qemu = [target.qemu, "-cpu", cpu, "-L", target.sysroot, "-plugin", str(report_qemu.plugin(per_thread=True)),
            "-d", "plugin"]

    def cmd(reps: int) -> list[str]:
        return qemu + [str(bdir / "bin" / "edgert-run"), str(model), *args, "--output-dir", str(work),
                       "--repeat", str(reps), "--threads", str(threads)]

    env = {key: v for key, v in os.environ.items() if key != "EDGERT_FORCE_REF"}
    return per_thread(cmd, n, k, env)


def litert_cell(name: str, prec: str, cpu: str, threads: int, calib, work: pathlib.Path, n: int, k: int
                ) -> list[float]:
    from edgert.cli import report_qemu, targets
    from tools import litert_icount

    f = work / f"{pathlib.Path(name).stem}.edgert-{prec}.tflite"
    if not f.is_file():
        f = litert_icount.edgert_files(name, calib if calib is not None else {}, [prec], work)[prec][0]
    (_, x), = arm_icount.inputs(name).items()
    inp = work / "litert_in.npy"
    np.save(inp, np.ascontiguousarray(x[:1], np.float32))
    script = work / "litert_threads.py"
    script.write_text(LITERT_THREADS_RUNNER)
    aarch64 = targets.load("rpi4")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "PYTHONPATH": str(litert_icount.LITERT_ARM),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    qemu = [aarch64.qemu, "-cpu", cpu, "-L", str(arm_icount.guest_root(cpu, work)), "-plugin",
            str(report_qemu.plugin(per_thread=True)), "-d", "plugin"]

    def cmd(reps: int) -> list[str]:
        return qemu + [str(arm_icount.ROOTFS / "usr/bin/python3.11"), str(script), str(f), str(inp), str(reps),
                       str(threads)]

    return per_thread(cmd, n, k, env, str(work))


def markdown(results: dict[str, Any]) -> str:
    lines = ["| model | precision | cpu | threads | edgert busiest | LiteRT busiest | edgert / LiteRT | "
             "edgert speed-up over 1 thread |", "|---|---|---|---|---|---|---|---|"]
    for model, by_prec in results.items():
        for prec, by_cpu in by_prec.items():
            for cpu, by_t in by_cpu.items():
                one = by_t.get("1", {}).get("edgert")
                for t in sorted(by_t, key=int):
                    e, lt = by_t[t].get("edgert"), by_t[t].get("litert")
                    ev = e and e["busiest"]
                    lv = lt and lt["busiest"]
                    up = f"{one['busiest'] / ev:.2f}x" if one and ev else "-"
                    lines.append(f"| {model} | {prec} | {cpu} | {t} | {f'{ev / 1e6:.1f}' if ev else '-'} | "
                                 f"{f'{lv / 1e6:.1f}' if lv else '-'} | {f'{ev / lv:.2f}' if ev and lv else '-'} | "
                                 f"{up} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mobilenetv2,ppocr_det")
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--cpus", default="cortex-a72,cortex-a76")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--engines", default="edgert,litert")
    ap.add_argument("--repeat", type=int, default=1, help="measurements per multi-threaded cell; the smallest counts")
    ap.add_argument("--mnv2-dir", default=str(compare_icount.MNV2_DIR))
    ap.add_argument("--json", default=str(ROOT / "docs" / "threads_icount.json"))
    ap.add_argument("--render", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.json)
    results: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    mnv2 = pathlib.Path(a.mnv2_dir)
    if not a.render:
        if "mobilenetv2" in a.models.split(","):
            arm_icount.CALIB_NPZ.update({k: np.asarray(v) for k, v in np.load(mnv2 / "calib.npz").items()})
        for model in a.models.split(","):
            name = compare_icount.source(model, mnv2)
            for prec in a.precisions.split(","):
                calib = compare_icount.calibration(model, mnv2) if prec == "int8" else None
                for engine in a.engines.split(","):
                    with tempfile.TemporaryDirectory() as tmp:  # one conversion per engine and precision
                        work = pathlib.Path(tmp)
                        if engine == "litert":
                            from tools import litert_icount

                            litert_icount.ensure_arm()
                        for cpu in a.cpus.split(","):
                            for t in (int(x) for x in a.threads.split(",")):
                                n, k = NK_OF.get(model, NK)["c" if engine == "edgert" else "py"]
                                best = None
                                for _ in range(a.repeat if t > 1 else 1):
                                    per = (edgert_cell(name, cpu, t, calib, work, n, k) if engine == "edgert"
                                           else litert_cell(name, prec, cpu, t, calib, work, n, k))
                                    if best is None or max(per) < max(best):
                                        best = per
                                cell = {"busiest": max(best), "per_thread": best, "n": n, "k": k,
                                        "date": datetime.date.today().isoformat(), "edgert": compare_icount.git_rev()}
                                log(f"{model:12s} {prec:5s} {cpu:11s} {t} thread(s) {engine:7s} busiest "
                                    f"{max(best) / 1e6:8.2f} M  per thread "
                                    + ", ".join(f"{c / 1e6:.2f}" for c in best))
                                results.setdefault(model, {}).setdefault(prec, {}).setdefault(cpu, {}) \
                                    .setdefault(str(t), {})[engine] = cell
                                out.write_text(json.dumps(results, indent=1) + "\n")
    log("\nM guest instructions per inference of the busiest thread, qemu-aarch64, edgert's per-thread plugin:\n")
    log(markdown(results))


if __name__ == "__main__":
    main()
