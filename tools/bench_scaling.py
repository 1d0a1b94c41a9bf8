#!/usr/bin/env python3
"""One-thread latency and one- to two-thread scaling, edgert against onnxruntime (host).

    python tools/bench_scaling.py [--models mobilenetv2,ppocr_rec,ppocr_det] [--sets 6]
                                  [--runs 300] [--threads 1,2] [--rt] [--json OUT]

Each configuration (engine x model x thread count) runs in a process of its own, so
onnxruntime's pool threads, which spin for a while after a run, never take a core from
the next configuration; a set runs every configuration once, in turn, and the sets
repeat, so a change of load on a shared machine hits every configuration alike. A
configuration loads its session, warms up, then times --runs inferences of the same
input (model default: MobileNetV2 300, ppocr_rec 30, ppocr_det 15 when --runs is not
given) and reports the median. Per set: edgert / onnxruntime at each thread count and
each engine's scaling (median at the first thread count / median at each other); the
summary gives the median and range of those over the sets.

--rt runs the configurations under `chrt -f 1` (real-time priority, root only), so the
other processes of a shared machine do not take one of the two cores in the middle of a
two-thread run.

Models: mobilenetv2 is tools/mobilenetv2.py's benchmark model (built in --mnv2-dir when
missing, float32); the others are tools/models.py's cached real models, float32,
converted as tools/bench.py does. Inputs: MobileNetV2's first calibration image, the
others' models.example_inputs (onnxruntime gets models.reference_feeds).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

DEFAULT_RUNS = {"mobilenetv2": 300, "ppocr_rec": 30, "ppocr_det": 15}


def prepare(names: list[str], mnv2: pathlib.Path, work: pathlib.Path) -> dict[str, dict[str, str]]:
    """name -> {"onnx", "edgert", "feeds" (.npz for edgert), "ort_feeds" (.npz)}."""
    import edgert
    from tools import mobilenetv2, models

    out = {}
    for name in names:
        if name == "mobilenetv2":
            onnx_path = mnv2 / "mobilenetv2.onnx"
            if not onnx_path.is_file() or not (mnv2 / "calib.npz").is_file():
                mobilenetv2.write(mnv2)
            x = {"input": np.ascontiguousarray(np.load(mnv2 / "calib.npz")["input"][:1])}
            feeds, ort_feeds, kwargs = x, x, {}
        else:
            onnx_path = models.model_path(name)
            feeds, ort_feeds = models.example_inputs(name), models.reference_feeds(name)
            kwargs = models.convert_kwargs(name)
        dst = work / f"{name}.edgert"
        edgert.convert(str(onnx_path), str(dst), **kwargs)
        np.savez(work / f"{name}.feeds.npz", **feeds)
        np.savez(work / f"{name}.ort_feeds.npz", **ort_feeds)
        out[name] = {"onnx": str(onnx_path), "edgert": str(dst), "feeds": str(work / f"{name}.feeds.npz"),
                     "ort_feeds": str(work / f"{name}.ort_feeds.npz")}
    return out


def worker(engine: str, files: dict[str, str], threads: int, runs: int, warmup: int) -> float:
    """The median of `runs` timed inferences, milliseconds."""
    if engine == "edgert":
        import edgert

        s = edgert.Session(files["edgert"], threads=threads)
        names = {i.name for i in s.get_inputs()}
        feeds = {k: v for k, v in np.load(files["feeds"]).items() if k in names}
        run = lambda: s.run(None, feeds)  # noqa: E731
    else:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        s = ort.InferenceSession(files["onnx"], so, providers=["CPUExecutionProvider"])
        feeds = dict(np.load(files["ort_feeds"]))
        run = lambda: s.run(None, feeds)  # noqa: E731
    from tools.bench import _time_runs

    return statistics.median(_time_runs(run, runs, warmup))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenetv2,ppocr_rec,ppocr_det")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--sets", type=int, default=6)
    ap.add_argument("--runs", type=int, default=None, help="timed inferences per configuration")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rt", action="store_true", help="run each configuration under chrt -f 1 (root)")
    ap.add_argument("--mnv2-dir", default="/tmp/mnv2")
    ap.add_argument("--json", default=None)
    ap.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._worker:
        w = json.loads(a._worker)
        print(json.dumps(worker(w["engine"], w["files"], w["threads"], w["runs"], w["warmup"])))
        return 0

    import edgert
    import onnxruntime as ort

    names = [m for m in a.models.split(",") if m]
    counts = [int(t) for t in a.threads.split(",")]
    engines = ("edgert", "onnxruntime")
    with tempfile.TemporaryDirectory() as tmp:
        files = prepare(names, pathlib.Path(a.mnv2_dir), pathlib.Path(tmp))
        load = os.getloadavg()[0]
        print(f"edgert {edgert.__version__} ({edgert.runtime_info().get('kernels')}), onnxruntime "
              f"{ort.__version__}; load average {load:.2f}; {a.sets} sets", file=sys.stderr)
        res: dict = {m: {e: {t: [] for t in counts} for e in engines} for m in names}
        for s in range(a.sets):
            for m in names:
                for t in counts:
                    for e in engines:
                        job = {"engine": e, "files": files[m], "threads": t, "warmup": a.warmup,
                               "runs": a.runs or DEFAULT_RUNS.get(m, 30)}
                        cmd = [sys.executable, __file__, "--_worker", json.dumps(job)]
                        if a.rt:
                            cmd = ["chrt", "-f", "1"] + cmd
                        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                        res[m][e][t].append(float(out.strip().splitlines()[-1]))
            row = "  ".join(f"{m} " + " ".join(f"{t}t {res[m]['edgert'][t][-1]:.2f}/{res[m]['onnxruntime'][t][-1]:.2f}"
                                              for t in counts) for m in names)
            print(f"set {s + 1}: {row}", file=sys.stderr)
        load = os.getloadavg()[0]

    print(f"\nmedians of each set's median, ms (load average at the end {load:.2f})\n")
    print("| model | threads | edgert | onnxruntime | edgert / onnxruntime |")
    print("|---|---|---|---|---|")
    summary: dict = {}
    for m in names:
        summary[m] = {}
        for t in counts:
            e, o = res[m]["edgert"][t], res[m]["onnxruntime"][t]
            ratios = [x / y for x, y in zip(e, o)]
            summary[m][t] = {"edgert": e, "onnxruntime": o, "ratio": ratios}
            print(f"| {m} | {t} | {spread(e)} | {spread(o)} | {spread(ratios)} |")
    if len(counts) > 1:
        t0 = counts[0]
        print(f"\nscaling {t0} -> t threads (per set: time at {t0} / time at t), median (range)\n")
        print("| model | threads | edgert | onnxruntime | sets where edgert >= onnxruntime |")
        print("|---|---|---|---|---|")
        for m in names:
            for t in counts[1:]:
                se = [x / y for x, y in zip(res[m]["edgert"][t0], res[m]["edgert"][t])]
                so = [x / y for x, y in zip(res[m]["onnxruntime"][t0], res[m]["onnxruntime"][t])]
                summary[m][f"scaling_{t}"] = {"edgert": se, "onnxruntime": so}
                wins = sum(x >= y for x, y in zip(se, so))
                print(f"| {m} | {t} | {spread(se)} | {spread(so)} | {wins} of {len(se)} |")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
