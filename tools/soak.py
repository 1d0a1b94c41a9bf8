#!/usr/bin/env python3
"""Soak test of the runtime: many inferences on one session, then many session
lifecycles, with the process's resident memory (VmRSS) recorded throughout.

Phase 1 runs --inferences inferences of the shipped digits CNN (converted to .edgert
in memory) on one session. Phase 2 runs --cycles cycles of load model from bytes ->
create session -> run -> destroy. Every output is compared with the first output
(bit for bit: the same input on the same build must give the same result).

RSS is read from /proc/self/status at the start, after a warm-up (the first 2% of each
phase, at least 1,000 iterations), at regular intervals and at the end. The script
exits 1 when a result differs, or when RSS at any later point exceeds the warm-up RSS
by more than --tolerance-mb (default 8 MB, 2 MB with --short: allocator noise, not
per-iteration growth; a leak of 100 bytes per inference or cycle exceeds it).

    python tools/soak.py            # 1,000,000 inferences, 100,000 cycles
    python tools/soak.py --short    # 20,000 inferences, 2,000 cycles (CI)
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

import edgert
from edgert.runtime import session as runtime


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def phase(name: str, n: int, step, samples: list, tolerance_kb: int) -> tuple[float, int, int]:
    """Runs step(i) n times; returns (seconds, RSS after warm-up, peak RSS after it)."""
    warm = min(n, max(1000, n // 50))
    every = max(n // 20, 1)
    t0 = time.perf_counter()
    base = peak = None
    for i in range(n):
        step(i)
        done = i + 1
        if done == warm:
            base = peak = rss_kb()
            samples.append((name, done, base))
        elif done % every == 0 or done == n:
            r = rss_kb()
            samples.append((name, done, r))
            if base is not None:
                peak = max(peak, r)
    return time.perf_counter() - t0, base, peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inferences", type=int, default=1_000_000)
    ap.add_argument("--cycles", type=int, default=100_000)
    ap.add_argument("--short", action="store_true", help="20,000 inferences and 2,000 cycles")
    ap.add_argument("--tolerance-mb", type=float, default=None,
                    help="allowed RSS growth after warm-up (default 8 MB, 2 MB with --short)")
    ap.add_argument("--model", default=str(pathlib.Path(edgert.__file__).parent / "data/digits_cnn.onnx"),
                    help="ONNX model with fixed shapes (default: the shipped digits CNN)")
    ap.add_argument("--json", help="write the RSS samples and timings to this file")
    args = ap.parse_args(argv)
    if args.short:
        args.inferences, args.cycles = 20_000, 2_000
    if args.tolerance_mb is None:
        args.tolerance_mb = 2.0 if args.short else 8.0
    tol_kb = int(args.tolerance_mb * 1024)

    data = edgert.convert(args.model)
    rss_start = rss_kb()
    samples: list[tuple[str, int, int]] = [("start", 0, rss_start)]
    rng = np.random.default_rng(0)
    with edgert.Session(data) as s:
        feeds = {t.name: rng.standard_normal(t.shape).astype(t.dtype) if t.dtype.kind == "f"
                 else np.zeros(t.shape, t.dtype) for t in s.get_inputs()}
        reference = s.run(None, feeds)
        mismatches = [0]

        def infer(i):
            out = s.run(None, feeds)
            if any(not np.array_equal(a, b) for a, b in zip(out, reference)):
                mismatches[0] += 1

        allocs0 = runtime.alloc_count()
        t_inf, base_inf, peak_inf = phase("inference", args.inferences, infer, samples, tol_kb)
        allocs_inf = runtime.alloc_count() - allocs0

    def cycle(i):
        with edgert.Session(data) as c:
            out = c.run(None, feeds)
        if any(not np.array_equal(a, b) for a, b in zip(out, reference)):
            mismatches[0] += 1

    t_cyc, base_cyc, peak_cyc = phase("cycle", args.cycles, cycle, samples, tol_kb)
    rss_end = rss_kb()
    samples.append(("end", 0, rss_end))

    growth_inf = (peak_inf - base_inf) if args.inferences else 0
    growth_cyc = (peak_cyc - base_cyc) if args.cycles else 0
    print(f"model: {args.model} ({len(data)} bytes as .edgert)")
    print(f"inferences: {args.inferences} in {t_inf:.1f} s ({args.inferences / max(t_inf, 1e-9):.0f}/s), "
          f"C allocations during them: {allocs_inf}")
    print(f"session cycles: {args.cycles} in {t_cyc:.1f} s ({args.cycles / max(t_cyc, 1e-9):.0f}/s)")
    print(f"RSS: start {rss_start} kB, after inference warm-up {base_inf} kB, inference peak {peak_inf} kB, "
          f"after cycle warm-up {base_cyc} kB, cycle peak {peak_cyc} kB, end {rss_end} kB")
    for name in ("inference", "cycle"):
        print(f"RSS samples, {name} (iteration: kB): " +
              ", ".join(f"{i}: {r}" for n, i, r in samples if n == name))
    print(f"RSS growth after warm-up: inference {growth_inf} kB, cycles {growth_cyc} kB "
          f"(tolerance {tol_kb} kB); results differing from the first: {mismatches[0]}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({
            "inferences": args.inferences, "cycles": args.cycles, "seconds_inference": t_inf,
            "seconds_cycles": t_cyc, "rss_kb": samples, "mismatches": mismatches[0],
            "alloc_count_inference": allocs_inf}, indent=1))
    failed = []
    if mismatches[0]:
        failed.append(f"{mismatches[0]} results differ from the first")
    if growth_inf > tol_kb:
        failed.append(f"RSS grew by {growth_inf} kB during inference")
    if growth_cyc > tol_kb:
        failed.append(f"RSS grew by {growth_cyc} kB during session cycles")
    if failed:
        print("FAIL: " + "; ".join(failed))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
