"""Bounded dimensions against static files: the host time of one file converted with
bounds (`--input-shape x=1,3,48,32..960`) at each size, against a file converted
statically for that size, in the same run, plus onnxruntime's time for scale.

    python tools/bench_dynamic.py [--runs 20] [--threads 1] [--json out.json]
                                  [--models ppocr_rec minilm ppocr_det] [--icount]

Models from tools/models.py: ppocr_rec at widths 96, 320, 960 (bounds 32..960) and
MiniLM at sequence lengths 8, 32, 128 (bounds 8..128) and ppocr_det at 32x32, 320x320,
640x480, 960x960 (bounds 32..960 on both sides). Each engine runs in blocks, the
median of `runs` timed runs after warm-up is reported; ratio = bounded / static.
"shape change" is the host time of the run-time shape pass, which a run whose input
shape differs from the previous run's adds (profiled runs: wall time outside the nodes,
alternating sizes minus one size).

--icount also counts guest instructions per inference under qemu-aarch64 -cpu
cortex-a72 (tools/arm_icount.py's method: edgert-run --repeat N+k minus --repeat N),
NEON kernels, for the bounded and static files at each size.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import edgert  # noqa: E402
from edgert.runtime import session as runtime  # noqa: E402
from tools import models  # noqa: E402

CASES = {
    "ppocr_rec": {"bounded": {"x": [1, 3, 48, (32, 960)]},
                  "sizes": [96, 320, 960],
                  "static": lambda w: {"x": [1, 3, 48, w]},
                  "feeds": lambda w, rng: {"x": rng.standard_normal((1, 3, 48, w)).astype(np.float32)}},
    "ppocr_det": {"bounded": {"x": [1, 3, (32, 960), (32, 960)]},
                  "sizes": [(32, 32), (320, 320), (640, 480), (960, 960)],
                  "static": lambda hw: {"x": [1, 3, *hw]},
                  "feeds": lambda hw, rng: {"x": rng.standard_normal((1, 3, *hw)).astype(np.float32)}},
    "minilm": {"bounded": {"input_ids": [1, (8, 128)]},
               "sizes": [8, 32, 128],
               "static": lambda s: {"input_ids": [1, s], "attention_mask": [1, s]},
               "feeds": lambda s, rng: {"input_ids": rng.integers(0, 30000, (1, s)).astype(np.int64),
                                        "attention_mask": np.ones((1, s), np.int64)}},
}


def median_ms(fn, runs: int) -> float:
    for _ in range(3):
        fn()
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(t))


def shape_pass_ms(sess, feeds: dict, other: dict, runs: int) -> float:
    """The host time of the run-time shape pass: a profiled run's wall time outside its
    nodes (the pass runs before the first node is timed), when the input shape changed
    since the previous run minus when it did not (medians)."""
    ffi, lib = runtime._load()
    n = len(sess.nodes())
    buf = ffi.new("uint64_t[]", max(n, 1))
    ctx = sess._acquire()
    try:
        out = {}
        for mode in ("same", "change"):
            t = []
            for r in range(2 * runs):
                f = other if mode == "change" and r % 2 else feeds
                for k, info in enumerate(sess.get_inputs()):
                    arr = np.ascontiguousarray(f[info.name])
                    dims = ffi.new("int64_t[]", [int(d) for d in arr.shape])
                    assert lib.edgert_session_set_input_shape(ctx, k, arr.ndim, dims) == 0
                    assert lib.edgert_session_set_input(ctx, k, ffi.from_buffer(arr), arr.nbytes) == 0
                t0 = time.perf_counter_ns()
                assert lib.edgert_session_run_profiled(ctx, buf, n) == 0
                t.append(time.perf_counter_ns() - t0 - sum(buf[i] for i in range(n)))
            out[mode] = float(np.median(t))
    finally:
        sess._release(ctx)
    return max(0.0, out["change"] - out["same"]) / 1e6


def icount(bounded: str, static: str, feeds: dict, work: str, n: int = 1, k: int = 1) -> tuple[float, float]:
    """Guest instructions per inference on qemu-aarch64 -cpu cortex-a72 (NEON) of both
    files on the same input."""
    from edgert.cli import build as ebuild
    from edgert.cli import targets
    from tools import arm_icount
    target = targets.load("rpi4")
    run = ebuild.compile_target(target) / "bin" / "edgert-run"
    args = []
    for key, v in feeds.items():
        p = os.path.join(work, f"icount.{key}.npy")
        np.save(p, v)
        args += ["--input", f"{key}={p}"]
    env = dict(os.environ)
    env.pop("EDGERT_FORCE_REF", None)
    out = []
    for model in (bounded, static):
        def cmd(reps: int, model=model) -> list[str]:
            return arm_icount.qemu_prefix(target, "cortex-a72") + [str(run), model, *args, "--output-dir", work,
                                                                     "--repeat", str(reps), "--threads", "1"]
        out.append(arm_icount.per_inference(cmd, n, k, env))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", nargs="*", default=list(CASES))
    ap.add_argument("--json")
    ap.add_argument("--icount", action="store_true")
    args = ap.parse_args()
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in args.models:
            case = CASES[name]
            src = str(models.model_path(name))
            bpath = os.path.join(d, f"{name}.bounded.edgert")
            edgert.convert(src, bpath, input_shapes=case["bounded"])
            bounded = runtime.Session(bpath, threads=args.threads, max_contexts=1)
            ref = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
            for size in case["sizes"]:
                spath = os.path.join(d, f"{name}.{size}.edgert")
                edgert.convert(src, spath, input_shapes=case["static"](size))
                static = runtime.Session(spath, threads=args.threads, max_contexts=1)
                feeds = case["feeds"](size, np.random.default_rng(0))
                before = runtime.alloc_count()
                tb = median_ms(lambda: bounded.run(None, feeds), args.runs)
                allocs = runtime.alloc_count() - before
                ts = median_ms(lambda: static.run(None, feeds), args.runs)
                tb2 = median_ms(lambda: bounded.run(None, feeds), args.runs)  # again: drift between blocks
                to = median_ms(lambda: ref.run(None, feeds), args.runs)
                tb = min(tb, tb2)
                other = case["feeds"](case["sizes"][0] if size != case["sizes"][0] else case["sizes"][1],
                                      np.random.default_rng(1))
                change = shape_pass_ms(bounded, feeds, other, args.runs)
                err = max(float(np.abs(a.astype(np.float64) - b).max())
                          for a, b in zip(bounded.run(None, feeds), ref.run(None, feeds)))
                row = {"model": name, "size": size, "bounded_ms": tb, "static_ms": ts, "ratio": tb / ts,
                       "shape_change_ms": change,
                       "onnxruntime_ms": to, "max_abs_diff_vs_ort": err, "allocs_in_run": allocs,
                       "arena_bounded": bounded.arena_bytes, "arena_static": static.arena_bytes}
                rows.append(row)
                if args.icount:
                    row["a72_bounded"], row["a72_static"] = icount(bpath, spath, feeds, d)
                    row["a72_ratio"] = row["a72_bounded"] / row["a72_static"]
                print(f"{name:10s} {str(size):10s}  bounded {tb:8.2f} ms  static {ts:8.2f} ms  ratio {tb / ts:5.3f}  "
                      f"shape change +{1e3 * change:.0f} us  "
                      f"ort {to:8.2f} ms  |diff| {err:.1e}  allocs {allocs}  arena {bounded.arena_bytes:,} / "
                      f"{static.arena_bytes:,}" + (f"  A72 {row['a72_bounded']:,.0f} / {row['a72_static']:,.0f} "
                                                   f"instr ({row['a72_ratio']:.3f})" if "a72_ratio" in row else ""),
                      flush=True)
                static.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
