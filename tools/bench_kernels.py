#!/usr/bin/env python3
"""Micro benchmark of the hot kernels (conv2d, gemm, matmul, pooling): small models timed
in edgert and in onnxruntime, both on one thread, best of several interleaved rounds.

A case whose op keeps its input's shape is timed as a chain of --chain copies (distinct
weights) and reported per op, so that copying the model's input and output (a cost of
the session, paid once per model) does not hide the kernel's own time.

Usage: python tools/bench_kernels.py [--threads N] [--runs R] [--rounds K] [--chain C]
                                     [--filter SUBSTR] [--cpu-time]
Prints, per case, milliseconds per op, GFLOP/s (for the arithmetic ops) and the ratio
edgert / onnxruntime (lower is better; the project target is <= 2.0).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout


def _model(nodes, x, consts, out):
    from onnx import helper, numpy_helper

    g = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info("x", 1, list(x.shape))],
                          [helper.make_empty_tensor_value_info(out)],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _chain(make_node, x, n, keeps_shape: bool, chain: int):
    """n copies of an op in a row when it keeps the shape, else one; returns (model, ops)."""
    reps = chain if keeps_shape else 1
    nodes, consts, cur = [], {}, "x"
    for r in range(reps):
        node, c = make_node(cur, f"t{r}", r)
        nodes.append(node)
        consts.update(c)
        cur = f"t{r}"
    return _model(nodes, x, consts, cur), reps


def conv(c, m, hw, k, stride=1, group=1, chain=1):
    from onnx import helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)

    def make(src, dst, r):
        w = (rng.standard_normal((m, c // group, k, k)) / np.sqrt(c // group * k * k)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32) * 0.1
        node = helper.make_node("Conv", [src, f"w{r}", f"b{r}"], [dst], kernel_shape=[k, k], strides=[stride, stride],
                                pads=[k // 2] * 4, group=group)
        return node, {f"w{r}": w, f"b{r}": b}

    out = (hw + 2 * (k // 2) - k) // stride + 1
    flops = 2.0 * m * (c // group) * k * k * out * out
    name = f"conv{k}x{k} {c}->{m} {hw}x{hw}" + (f" s{stride}" if stride > 1 else "") + (
        " dw" if group == c and group > 1 else (f" g{group}" if group > 1 else ""))
    model, reps = _chain(make, x, 0, c == m and stride == 1, chain)
    return name, model, x, flops, reps


def matmul(m, k, n, chain=1):
    from onnx import helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)

    def make(src, dst, r):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        return helper.make_node("MatMul", [src, f"w{r}"], [dst]), {f"w{r}": w}

    model, reps = _chain(make, x, 0, k == n, chain)
    return f"matmul {m}x{k}x{n}", model, x, 2.0 * m * n * k, reps


def gemm_fc(m, k, n, chain=1):
    from onnx import helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)

    def make(src, dst, r):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        return helper.make_node("Gemm", [src, f"w{r}", f"b{r}"], [dst], transB=1), {f"w{r}": w, f"b{r}": b}

    model, reps = _chain(make, x, 0, k == n, chain)
    return f"gemm fc {m}x{k}->{n}", model, x, 2.0 * m * n * k, reps


def pool(op, c, hw, k, s, p, chain=1):
    from onnx import helper

    x = np.random.default_rng(0).standard_normal((1, c, hw, hw)).astype(np.float32)

    def make(src, dst, r):
        return helper.make_node(op, [src], [dst], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4), {}

    model, reps = _chain(make, x, 0, s == 1 and 2 * p == k - 1, chain)
    return f"{op} {k}x{k}/{s} {c}x{hw}x{hw}", model, x, 0.0, reps


CASES = [
    lambda ch: conv(128, 128, 56, 1, chain=ch),
    lambda ch: conv(64, 64, 56, 3, chain=ch),
    lambda ch: conv(256, 256, 14, 3, chain=ch),
    lambda ch: conv(512, 512, 7, 3, chain=ch),
    lambda ch: conv(3, 32, 224, 3, stride=2, chain=ch),
    lambda ch: conv(32, 32, 112, 3, group=32, chain=ch),
    lambda ch: conv(144, 144, 56, 3, stride=2, group=144, chain=ch),
    lambda ch: conv(240, 240, 14, 5, group=240, chain=ch),
    lambda ch: conv(960, 160, 7, 1, chain=ch),
    lambda ch: matmul(128, 768, 768, chain=ch),
    lambda ch: matmul(1, 768, 3072, chain=ch),
    lambda ch: gemm_fc(1, 2048, 1000, chain=ch),
    lambda ch: pool("MaxPool", 64, 112, 3, 2, 1, chain=ch),
    lambda ch: pool("MaxPool", 64, 56, 3, 1, 1, chain=ch),
]


def best_time(fn, runs: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(runs):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chain", type=int, default=4)
    ap.add_argument("--filter", default="")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the calling thread's CPU clock (steadier on a busy machine; 1 thread only)")
    args = ap.parse_args()
    import onnxruntime as ort

    import edgert

    clock = time.thread_time if args.cpu_time and args.threads == 1 else time.perf_counter
    print(f"{'case':34s} {'ops':>3s} {'edgert ms':>10s} {'GFLOP/s':>8s} {'ort ms':>9s} {'GFLOP/s':>8s} {'ratio':>6s}")
    for make in CASES:
        name, model, x, flops, reps = make(args.chain)
        if args.filter not in name:
            continue
        sess = edgert.Session(edgert.convert(model), threads=args.threads)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        osess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        want = osess.run(None, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]
        err = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
        te = to = float("inf")
        for _ in range(args.rounds):  # interleaved, so both see the same machine load
            te = min(te, best_time(lambda: sess.run(None, {"x": x}), args.runs, clock) / reps)
            to = min(to, best_time(lambda: osess.run(None, {"x": x}), args.runs, clock) / reps)
        ge = f"{flops / te * 1e-9:8.1f}" if flops else f"{'':8s}"
        go = f"{flops / to * 1e-9:8.1f}" if flops else f"{'':8s}"
        flag = "" if err < 1e-3 else f"  (relative error {err:.1e})"
        print(f"{name:34s} {reps:3d} {te * 1e3:10.3f} {ge} {to * 1e3:9.3f} {go} {te / to:6.2f}{flag}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
