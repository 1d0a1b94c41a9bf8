#!/usr/bin/env python3
"""Micro benchmark of the hot kernels (conv2d, gemm, matmul, pooling): one-node models
timed in edgert and in onnxruntime, both on one thread (best of several runs).

Usage: python tools/bench_kernels.py [--threads N] [--runs R] [--filter SUBSTR]
Prints, per case, milliseconds, GFLOP/s (for the arithmetic ops) and the ratio
edgert / onnxruntime (lower is better; the project target is <= 2.0).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _model(node, x, consts):
    from onnx import helper, numpy_helper

    g = helper.make_graph([node], "bench", [helper.make_tensor_value_info("x", 1, list(x.shape))],
                          [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def conv(c, m, hw, k, stride=1, group=1):
    from onnx import helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32) * 0.1
    b = rng.standard_normal(m).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[stride, stride],
                            pads=[k // 2] * 4, group=group)
    out = (hw + 2 * (k // 2) - k) // stride + 1
    flops = 2.0 * m * (c // group) * k * k * out * out
    name = f"conv{k}x{k} {c}->{m} {hw}x{hw}" + (f" s{stride}" if stride > 1 else "") + (
        " dw" if group == c and group > 1 else (f" g{group}" if group > 1 else ""))
    return name, _model(node, x, {"w": w, "b": b}), x, flops


def matmul(m, k, n):
    from onnx import helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    return f"matmul {m}x{k}x{n}", _model(helper.make_node("MatMul", ["x", "w"], ["y"]), x, {"w": w}), x, 2.0 * m * n * k


def gemm_fc(m, k, n):
    from onnx import helper

    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    return f"gemm fc {m}x{k}->{n}", _model(node, x, {"w": w, "b": b}), x, 2.0 * m * n * k


def pool(op, c, hw, k, s, p):
    from onnx import helper

    x = np.random.default_rng(0).standard_normal((1, c, hw, hw)).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
    return f"{op} {k}x{k}/{s} {c}x{hw}x{hw}", _model(node, x, {}), x, 0.0


CASES = [
    lambda: conv(128, 128, 56, 1),
    lambda: conv(64, 64, 56, 3),
    lambda: conv(256, 256, 14, 3),
    lambda: conv(512, 512, 7, 3),
    lambda: conv(3, 32, 224, 3, stride=2),
    lambda: conv(32, 32, 112, 3, group=32),
    lambda: conv(144, 144, 56, 3, stride=2, group=144),
    lambda: conv(240, 240, 14, 5, group=240),
    lambda: conv(960, 160, 7, 1),
    lambda: matmul(128, 768, 768),
    lambda: matmul(1, 768, 3072),
    lambda: gemm_fc(1, 2048, 1000),
    lambda: pool("MaxPool", 64, 112, 3, 2, 1),
]


def best_time(fn, runs: int, clock=time.perf_counter) -> float:
    fn()
    best = float("inf")
    for _ in range(runs):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--filter", default="")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the calling thread's CPU clock (steadier on a busy machine; 1 thread only)")
    args = ap.parse_args()
    import onnxruntime as ort

    import edgert

    print(f"{'case':34s} {'edgert ms':>10s} {'GFLOP/s':>8s} {'ort ms':>9s} {'GFLOP/s':>8s} {'ratio':>6s}")
    for make in CASES:
        name, model, x, flops = make()
        if args.filter not in name:
            continue
        sess = edgert.Session(edgert.convert(model), threads=args.threads)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        osess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        clock = time.thread_time if args.cpu_time and args.threads == 1 else time.perf_counter
        te = best_time(lambda: sess.run(None, {"x": x}), args.runs, clock)
        to = best_time(lambda: osess.run(None, {"x": x}), args.runs, clock)
        ge = f"{flops / te * 1e-9:8.1f}" if flops else f"{'':8s}"
        go = f"{flops / to * 1e-9:8.1f}" if flops else f"{'':8s}"
        print(f"{name:34s} {te * 1e3:10.3f} {ge} {to * 1e3:9.3f} {go} {te / to:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
