"""Throughput of Session.run from Python threads: one thread, two sessions in two
threads, and one Session shared by two threads (with its default pool of execution
contexts, and serialized with max_contexts=1).

    python tools/bench_threads.py model.onnx [--shape x=1,3,224,224] [--seconds 10]

Each configuration runs for about --seconds and reports runs per second; the ratios
to the one-thread figure show whether the C runs leave the GIL (two sessions in two
threads should approach the number of free cores). Configurations alternate over
--rounds rounds and the best round of each counts, which damps the noise of a shared
machine.
"""
from __future__ import annotations

import argparse
import threading
import time

import numpy as np

import edgert


def _throughput(sessions: list, feeds: dict, seconds: float) -> tuple[float, float]:
    """(runs per second, CPU seconds per wall second) of len(sessions) threads, thread
    k calling sessions[k]. The second figure shows the cores the process really got:
    above 1 only when the runs leave the GIL (and the machine has idle cores)."""
    counts = [0] * len(sessions)
    stop = time.perf_counter() + seconds
    start = threading.Barrier(len(sessions) + 1)

    def work(k: int) -> None:
        start.wait()
        n = 0
        while time.perf_counter() < stop:
            sessions[k].run(None, feeds)
            n += 1
        counts[k] = n

    ths = [threading.Thread(target=work, args=(k,)) for k in range(len(sessions))]
    for th in ths:
        th.start()
    t0, c0 = time.perf_counter(), time.process_time()
    start.wait()
    for th in ths:
        th.join()
    wall = time.perf_counter() - t0
    return sum(counts) / wall, (time.process_time() - c0) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--shape", action="append", default=[], help="name=d0,d1,... for inputs with free dims")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    shapes = {k: [int(d) for d in v.split(",")] for k, v in (s.split("=", 1) for s in args.shape)}
    data = edgert.convert(args.model, None, input_shapes=shapes or None)
    rng = np.random.default_rng(0)
    probe = edgert.Session(data)
    feeds = {i.name: rng.standard_normal(i.shape).astype(i.dtype) if i.dtype.kind == "f"
             else np.zeros(i.shape, i.dtype) for i in probe.get_inputs()}
    a, b = edgert.Session(data), edgert.Session(data)
    shared, serial = edgert.Session(data), edgert.Session(data, max_contexts=1)
    configs = {
        "1 thread, 1 session": [a],
        "2 threads, 2 sessions": [a, b],
        "2 threads, 1 shared session (pool)": [shared, shared],
        "2 threads, 1 shared session (max_contexts=1)": [serial, serial],
    }
    for s in (a, b, shared, serial):
        s.run(None, feeds)  # warm up
    best = {k: (0.0, 0.0) for k in configs}
    for _ in range(args.rounds):
        for name, sessions in configs.items():
            best[name] = max(best[name], _throughput(sessions, feeds, args.seconds))
    base = best["1 thread, 1 session"][0]
    for name, (rate, cores) in best.items():
        print(f"{name:48s} {rate:9.1f} runs/s  {rate / base:5.2f}x  {cores:4.2f} cores busy")


if __name__ == "__main__":
    main()
