#!/usr/bin/env python3
"""File size, host latency and accuracy of models whose weights are read by many
nodes (tools/shared_models.py; docs/format.md "Shared constants", docs/design.md
"Shared weights and unrolled recurrences").

Per model: ONNX bytes; edgert fp32 and int8 bytes and their ratio to the ONNX file;
edgert and onnxruntime latency (1 thread, lowest of 5 medians, measured in this run
with the calls interleaved; CPU time of the calling thread unless --clock wall) and
their ratio; max |edgert - onnxruntime| of the fp32 and int8 outputs.

    python tools/bench_shared.py [--models lstm,tied,tied_transpose,siamese,crnn] [--runs 100]
                                 [--clock thread|wall] [--json OUT]

The edgert package is the one Python imports (PYTHONPATH selects another checkout, to
measure a "before").
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import edgert  # noqa: E402
import shared_models as sm  # noqa: E402

MODELS = {
    "lstm": lambda: sm.unrolled_lstm(steps=20, input_size=64, hidden=256),
    "tied": lambda: sm.tied_embedding(head="gemm"),
    "tied_transpose": lambda: sm.tied_embedding(head="transpose"),
    "siamese": lambda: sm.siamese(),
    "crnn": lambda: sm.crnn(),
}


CLOCK = time.thread_time  # CPU time of this thread: both runtimes compute on it with 1 thread


def _timed(fns: dict, runs: int, blocks: int = 5, clock=None) -> dict:
    """ms per call of each function: the lowest of `blocks` medians of runs/blocks calls,
    the functions interleaved call by call so that a busy host slows them alike (clock:
    CLOCK unless given)."""
    clock = clock or CLOCK
    for fn in fns.values():
        for _ in range(3):
            fn()
    best = {k: float("inf") for k in fns}
    for _ in range(blocks):
        times: dict = {k: [] for k in fns}
        for _ in range(max(runs // blocks, 3)):
            for k, fn in fns.items():
                t0 = clock()
                fn()
                times[k].append(clock() - t0)
        for k in fns:
            best[k] = min(best[k], float(np.median(times[k])))
    return {k: v * 1e3 for k, v in best.items()}


def _err(got, want) -> float:
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))) for g, w in zip(got, want))


def bench(name: str, runs: int) -> dict:
    import onnxruntime as ort

    model, feeds = MODELS[name]()
    raw = model.SerializeToString()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    ref = ort.InferenceSession(raw, so, providers=["CPUExecutionProvider"])
    want = ref.run(None, feeds)
    t0 = time.perf_counter()
    fp32 = edgert.convert(model)
    convert_s = time.perf_counter() - t0
    int8 = edgert.convert(model, quantize="int8", calibration=sm.calibration(feeds))
    s32, s8 = edgert.Session(fp32, threads=1), edgert.Session(int8, threads=1)
    row = {"model": name, "onnx_bytes": len(raw), "fp32_bytes": len(fp32), "int8_bytes": len(int8),
           "convert_s": convert_s, "err_fp32": _err(s32.run(None, feeds), want),
           "err_int8": _err(s8.run(None, feeds), want), "out_max": float(np.max(np.abs(want[0])))}
    row["fp32_ratio"] = row["fp32_bytes"] / row["onnx_bytes"]
    row["int8_ratio"] = row["int8_bytes"] / row["onnx_bytes"]
    t = _timed({"ort": lambda: ref.run(None, feeds), "fp32": lambda: s32.run(None, feeds),
                "int8": lambda: s8.run(None, feeds)}, runs)
    row.update(ort_ms=t["ort"], fp32_ms=t["fp32"], int8_ms=t["int8"])
    row["fp32_vs_ort"] = row["fp32_ms"] / row["ort_ms"]
    row["int8_vs_ort"] = row["int8_ms"] / row["ort_ms"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="lstm,tied,tied_transpose,siamese,crnn")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--json", default=None)
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread",
                    help="thread: CPU time of the calling thread (steadier on a shared host); wall: elapsed time")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if a.clock == "thread" else time.perf_counter
    rows = []
    print(f"edgert from {os.path.dirname(edgert.__file__)}")
    head = (f"{'model':15s} {'onnx B':>11s} {'fp32 B':>12s} {'x':>6s} {'int8 B':>12s} {'x':>6s} "
            f"{'ort ms':>8s} {'fp32 ms':>8s} {'x':>5s} {'int8 ms':>8s} {'x':>5s} {'err fp32':>9s} {'err int8':>9s}")
    print(head)
    for name in a.models.split(","):
        r = bench(name, a.runs)
        rows.append(r)
        print(f"{name:15s} {r['onnx_bytes']:11,d} {r['fp32_bytes']:12,d} {r['fp32_ratio']:6.2f} {r['int8_bytes']:12,d} "
              f"{r['int8_ratio']:6.3f} {r['ort_ms']:8.2f} {r['fp32_ms']:8.2f} {r['fp32_vs_ort']:5.2f} "
              f"{r['int8_ms']:8.2f} {r['int8_vs_ort']:5.2f} {r['err_fp32']:9.1e} {r['err_int8']:9.1e}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
