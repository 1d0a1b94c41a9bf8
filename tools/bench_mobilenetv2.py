#!/usr/bin/env python3
"""Host benchmark of the MobileNetV2 benchmark model (tools/mobilenetv2.py): edgert
float32 and int8 against onnxruntime, and edgert's per-node profile summed by layer kind;
optionally float32 real models of tools/models.py (e.g. the OCR models) in the same runs.

    python tools/bench_mobilenetv2.py [--dir DIR] [--threads 1,2] [--runs 30] [--warmup 3]
                                      [--models ppocr_rec,ppocr_det]
                                      [--profile] [--profile-target rpi4] [--json OUT]

DIR (default ~/.cache/edgert/mobilenetv2) holds mobilenetv2.onnx and calib.npz; they are
built there when missing. The model is converted twice: float32, and int8 calibrated on
calib.npz (edgert.convert(..., quantize="int8")). onnxruntime runs the ONNX model, and
its own int8 model from quantize_static (QDQ, per-channel, tools/eval_quant.py's recipe)
on the same calibration samples.

Timing: for each thread count, one process loads the four sessions (edgert's threads=N,
onnxruntime's intra_op_num_threads=N, default graph optimizations), warms each up, then
runs them in turn, --block inferences of each at a time (plus one untimed, as onnxruntime's
pool threads spin for a while after a run and would take the next engine's cores), until
each has --runs timed inferences on the same input; so a change of load on the machine
hits all of them alike. Medians are reported,
with ratios edgert / onnxruntime at the same precision, then the fastest run of each (min),
and with two or more thread counts the scaling of each engine (its time at the first count
/ at each other) of the medians and of the mins: on a shared machine other jobs move the
medians, most of all at two threads, while the mins show what each engine reaches.

--models adds cached models of tools/models.py (python tools/fetch_models.py), float32:
each converted as tools/bench.py does (models.convert_kwargs) and timed in the same
processes and interleaved blocks as the four MobileNetV2 sessions, edgert on
models.example_inputs and onnxruntime on the ONNX file with models.reference_feeds.

--profile runs `edgert bench --profile --json` on both .edgert files (one thread) and sums
the per-node medians by layer kind (the stem convolution, depthwise 3x3 stride 1 and 2,
the 1x1 expansions, projections and the last 1x1 convolution, the adds, pooling, the
classifier, int8 quantize/dequantize); --profile-target also counts the instructions per
node on that board under QEMU (`edgert bench --target`). --profile-ort prints
onnxruntime's own per-node profile (fp32 and its int8 model) summed the same way.
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
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

DEFAULT_DIR = pathlib.Path.home() / ".cache" / "edgert" / "mobilenetv2"
ENGINES = ("edgert fp32", "onnxruntime fp32", "edgert int8", "onnxruntime int8")


def prepare(d: pathlib.Path, work: pathlib.Path) -> dict[str, pathlib.Path]:
    """The four model files: ONNX, its onnxruntime int8 copy, and the two .edgert files."""
    import edgert
    from tools import eval_quant, mobilenetv2

    onnx_path, calib_path = d / "mobilenetv2.onnx", d / "calib.npz"
    if not onnx_path.is_file() or not calib_path.is_file():
        mobilenetv2.write(d)
    calib = dict(np.load(calib_path))
    fp32, int8 = work / "mobilenetv2.edgert", work / "mobilenetv2.int8.edgert"
    edgert.convert(str(onnx_path), str(fp32))
    edgert.convert(str(onnx_path), str(int8), quantize="int8", calibration=calib)
    q = work / "ortq"
    q.mkdir(exist_ok=True)
    static = eval_quant.static_copy(onnx_path, q / "static.onnx", {"input": [1, 3, 224, 224]})
    ort_int8 = eval_quant.ort_quantize(static, q / "int8.onnx", calib, q, lambda m: print(m, file=sys.stderr))
    return {"onnx": onnx_path, "calib": calib_path, "ort int8": pathlib.Path(ort_int8), "edgert fp32": fp32,
            "edgert int8": int8}


def prepare_models(names: list[str], work: pathlib.Path) -> dict[str, dict[str, str]]:
    """name -> {"onnx": the cached ONNX file, "edgert": its float32 conversion}."""
    import edgert
    from tools import models

    out = {}
    for name in names:
        onnx_path = models.model_path(name)
        dst = work / f"{name}.edgert"
        edgert.convert(str(onnx_path), str(dst), **models.convert_kwargs(name))
        out[name] = {"onnx": str(onnx_path), "edgert": str(dst)}
    return out


def worker(paths: dict[str, str], threads: int, runs: int, warmup: int, block: int,
           extra: dict[str, dict[str, str]] | None = None) -> dict:
    import edgert
    import onnxruntime as ort

    from tools import models

    x = {"input": np.ascontiguousarray(np.load(paths["calib"])["input"][:1])}

    def ort_session(p: str, feeds=x):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        s = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
        return lambda: s.run(None, feeds)

    def edgert_session(p: str, feeds=x):
        s = edgert.Session(p, threads=threads)
        names = {i.name for i in s.get_inputs()}
        feeds = {k: v for k, v in feeds.items() if k in names}
        return lambda: s.run(None, feeds)

    fns = {"edgert fp32": edgert_session(paths["edgert fp32"]), "onnxruntime fp32": ort_session(paths["onnx"]),
           "edgert int8": edgert_session(paths["edgert int8"]), "onnxruntime int8": ort_session(paths["ort int8"])}
    for name, p in (extra or {}).items():
        fns[f"edgert {name}"] = edgert_session(p["edgert"], models.example_inputs(name))
        fns[f"onnxruntime {name}"] = ort_session(p["onnx"], models.reference_feeds(name))
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    done = 0
    while done < runs:
        n = min(block, runs - done)
        for k, fn in fns.items():
            fn()  # the first run of a block is not timed: the previous engine's threads may still spin
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0) * 1e3)
        done += n
    return {k: {"median_ms": statistics.median(v), "min_ms": min(v)} for k, v in times.items()}


def layer_kinds(onnx_path: pathlib.Path) -> dict[str, str]:
    """ONNX node name -> layer kind."""
    import onnx

    m = onnx.load(str(onnx_path))
    shapes = {t.name: list(t.dims) for t in m.graph.initializer}
    kinds = {}
    for n in m.graph.node:
        kind = n.op_type.lower()
        if n.op_type == "Conv":
            at = {a.name: a for a in n.attribute}
            k = at["kernel_shape"].ints[0]
            s = at["strides"].ints[0]
            group = at["group"].i
            cout, cin_g = shapes[n.input[1]][:2]
            if group > 1:
                kind = f"depthwise {k}x{k} s{s}"
            elif k == 3:
                kind = "stem 3x3 s2"
            elif cout == 1280:
                kind = "1x1 last (320->1280)"
            elif cout > cin_g:
                kind = "1x1 expand"
            else:
                kind = "1x1 project"
        elif n.op_type in ("GlobalAveragePool", "Flatten"):
            kind = "global pool"
        elif n.op_type == "Gemm":
            kind = "classifier gemm"
        kinds[n.name] = kind
    return kinds


def profile(model: pathlib.Path, kinds: dict[str, str], runs: int, target: str | None) -> dict:
    cmd = [sys.executable, "-m", "edgert.cli", "bench", str(model), "--profile", "--json", "--runs", str(runs)]
    if target:
        cmd += ["--target", target]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr[-2000:]}")
    data = json.loads(r.stdout)
    by: dict[str, dict] = {}
    for node in data["nodes"]:
        kind = kinds.get(node["name"])
        if kind is None:
            kind = node["op"]  # converter-made nodes: quantize_linear, dequantize_linear
        row = by.setdefault(kind, {"nodes": 0, "ms": 0.0, "macs": 0, "instructions": 0})
        row["nodes"] += 1
        row["ms"] += node["median_ms"]
        row["macs"] += node.get("macs") or 0
        for key in ("instructions", "insns", "guest_instructions"):
            if node.get(key):
                row["instructions"] += node[key]
    total = sum(r["ms"] for r in by.values())
    for r in by.values():
        r["percent"] = 100.0 * r["ms"] / total if total else 0.0
    return {"total_ms": total, "kinds": dict(sorted(by.items(), key=lambda kv: -kv[1]["ms"])), "raw": data}


def ort_profile(model: pathlib.Path, onnx_path: pathlib.Path, calib: pathlib.Path, kinds: dict[str, str],
                runs: int, work: pathlib.Path) -> dict:
    """onnxruntime's own per-node profile (SessionOptions.enable_profiling), one thread,
    the per-node medians summed by layer kind. onnxruntime renames and fuses nodes; a node
    is attributed to the kind of the model's Conv it derives from (its name starts with
    that Conv's name, or with the Clip or Add fused into it), otherwise to its op type
    (QuantizeLinear, DequantizeLinear, Transpose, ...)."""
    import re

    import onnx
    import onnxruntime as ort

    g = onnx.load(str(onnx_path)).graph
    producer = {o: n for n in g.node for o in n.output}
    by_name = {n.name: n for n in g.node}

    def kind_of(node) -> str:
        if node.op_type == "Conv":
            return kinds[node.name]
        if node.op_type == "Clip":
            return kind_of(producer[node.input[0]])
        if node.op_type == "Add":  # a projection with its residual add fused
            convs = [producer[i] for i in node.input if i in producer and producer[i].op_type == "Conv"]
            return kinds[convs[-1].name] if convs else "add"
        return kinds.get(node.name, node.op_type.lower())

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.enable_profiling = True
    so.profile_file_prefix = str(work / "ort_profile")
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    x = {"input": np.ascontiguousarray(np.load(calib)["input"][:1])}
    warmup = 3
    for _ in range(warmup + runs):
        sess.run(None, x)
    events = [e for e in json.loads(pathlib.Path(sess.end_profiling()).read_text())
              if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per_node: dict[tuple[str, str], list[float]] = {}
    for e in events:
        per_node.setdefault((e["name"], e["args"].get("op_name", "?")), []).append(e["dur"] / 1e3)
    per_node = {k: v[warmup:] for k, v in per_node.items() if len(v) > warmup}
    by: dict[str, dict] = {}
    for (name, op), durs in per_node.items():
        m = re.match(r"((?:Conv|Clip|Add)_\d+)(?![\d.])", name)
        kind = kind_of(by_name[m.group(1)]) if m and op not in ("DequantizeLinear", "QuantizeLinear") else op
        row = by.setdefault(kind, {"nodes": 0, "ms": 0.0, "ops": {}})
        row["nodes"] += 1
        row["ms"] += statistics.median(durs)
        row["ops"][op] = row["ops"].get(op, 0) + 1
    total = sum(r["ms"] for r in by.values())
    for r in by.values():
        r["percent"] = 100.0 * r["ms"] / total if total else 0.0
    return {"total_ms": total, "kinds": dict(sorted(by.items(), key=lambda kv: -kv[1]["ms"]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--block", type=int, default=10, help="consecutive runs of one engine before the next")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-target", default=None)
    ap.add_argument("--profile-ort", action="store_true", help="also onnxruntime's per-node profile by layer kind")
    ap.add_argument("--models", default="", help="also these float32 models of tools/models.py, e.g. "
                    "ppocr_rec,ppocr_det")
    ap.add_argument("--json", default=None)
    ap.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._worker:
        spec = json.loads(a._worker)
        print(json.dumps(worker(spec["paths"], spec["threads"], a.runs, a.warmup, a.block, spec.get("extra"))))
        return 0
    names = [n.strip() for n in a.models.split(",") if n.strip()]
    if names:
        from tools import models

        unknown = [n for n in names if n not in models.MODELS]
        missing = [n for n in names if n in models.MODELS and not models.is_cached(n)]
        if unknown or missing:
            ap.error(f"unknown {unknown} or not cached {missing} (python tools/fetch_models.py)")
    out: dict = {"runs": a.runs, "warmup": a.warmup, "timing": {}, "profile": {}}
    with tempfile.TemporaryDirectory(prefix="edgert-mnv2-") as tmp:
        paths = prepare(pathlib.Path(a.dir), pathlib.Path(tmp))
        spaths = {k: str(v) for k, v in paths.items()}
        extra = prepare_models(names, pathlib.Path(tmp))
        load = os.getloadavg()
        out["loadavg_before"] = load
        print(f"load average before timing: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
        print(f"median ms of {a.runs} runs (blocks of {a.block}) after {a.warmup} warm-up; "
              "ratio = edgert / onnxruntime, same precision")
        print(f"{'threads':>7}  " + "  ".join(f"{e:>16}" for e in ENGINES) + "  fp32 ratio  int8 ratio  "
              "edgert int8/fp32")
        for t in (int(v) for v in a.threads.split(",")):
            spec = json.dumps({"paths": spaths, "threads": t, "extra": extra})
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", spec, "--runs", str(a.runs),
                                "--warmup", str(a.warmup), "--block", str(a.block)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr[-3000:], file=sys.stderr)
                return 1
            res = json.loads(r.stdout.strip().splitlines()[-1])
            out["timing"][t] = res
            med = {e: res[e]["median_ms"] for e in ENGINES}
            print(f"{t:>7}  " + "  ".join(f"{med[e]:>16.2f}" for e in ENGINES)
                  + f"  {med['edgert fp32'] / med['onnxruntime fp32']:>10.2f}"
                  + f"  {med['edgert int8'] / med['onnxruntime int8']:>10.2f}"
                  + f"  {med['edgert int8'] / med['edgert fp32']:>16.2f}", flush=True)
        # the fastest run of each engine: what the machine allows when nothing else runs
        # (medians move with other jobs on a shared machine, most of all at 2 threads)
        print(f"\nmin ms of the same {a.runs} runs")
        print(f"{'threads':>7}  " + "  ".join(f"{e:>16}" for e in ENGINES) + "  fp32 ratio  int8 ratio")
        for t, res in out["timing"].items():
            lo = {e: res[e]["min_ms"] for e in ENGINES}
            print(f"{t:>7}  " + "  ".join(f"{lo[e]:>16.2f}" for e in ENGINES)
                  + f"  {lo['edgert fp32'] / lo['onnxruntime fp32']:>10.2f}"
                  + f"  {lo['edgert int8'] / lo['onnxruntime int8']:>10.2f}")
        if names:
            print("\nfloat32 models, same runs: median and min ms, ratio = edgert / onnxruntime")
            print(f"{'model':>12}  {'threads':>7}  {'edgert':>8}  {'onnxruntime':>11}  {'ratio':>5}"
                  f"  {'min edgert':>10}  {'min ort':>8}  {'ratio':>5}")
            for name in ["mobilenetv2", *names]:
                e, o = ("edgert fp32", "onnxruntime fp32") if name == "mobilenetv2" else (f"edgert {name}",
                                                                                            f"onnxruntime {name}")
                for t, res in out["timing"].items():
                    em, om = res[e]["median_ms"], res[o]["median_ms"]
                    el, ol = res[e]["min_ms"], res[o]["min_ms"]
                    print(f"{name:>12}  {t:>7}  {em:>8.2f}  {om:>11.2f}  {em / om:>5.2f}"
                          f"  {el:>10.2f}  {ol:>8.2f}  {el / ol:>5.2f}")
        counts = list(out["timing"])
        if len(counts) > 1:
            t0 = counts[0]
            print(f"\nthread scaling: at {t0} thread(s) / at N, of the medians and (in brackets) of the mins")
            for eng in out["timing"][t0]:
                r0 = out["timing"][t0][eng]
                cells = "  ".join(f"{t}: {r0['median_ms'] / out['timing'][t][eng]['median_ms']:.2f}x"
                                  f" ({r0['min_ms'] / out['timing'][t][eng]['min_ms']:.2f}x)" for t in counts[1:])
                print(f"{eng:>24}  {cells}")
        load = os.getloadavg()
        out["loadavg_after"] = load
        print(f"load average after timing: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        if a.profile:
            kinds = layer_kinds(paths["onnx"])
            for prec in ("fp32", "int8"):
                p = profile(paths[f"edgert {prec}"], kinds, a.runs, a.profile_target)
                out["profile"][prec] = {k: v for k, v in p.items() if k != "raw"}
                out["profile"][prec]["nodes"] = p["raw"]["nodes"]
                print(f"\nedgert {prec}, 1 thread, per-node medians summed by kind (total {p['total_ms']:.2f} ms)")
                print(f"{'kind':24s} {'nodes':>5} {'ms':>8} {'%':>6} {'MMACs':>8} {'GMAC/s':>7}"
                      + (f" {'M instr':>8}" if a.profile_target else ""))
                for kind, row in p["kinds"].items():
                    rate = f"{row['macs'] / row['ms'] / 1e6:7.2f}" if row["macs"] and row["ms"] else f"{'-':>7}"
                    line = (f"{kind:24s} {row['nodes']:>5} {row['ms']:>8.3f} {row['percent']:>6.1f} "
                            f"{row['macs'] / 1e6:>8.1f} {rate}")
                    if a.profile_target:
                        line += f" {row['instructions'] / 1e6:>8.2f}"
                    print(line)
        if a.profile_ort:
            kinds = layer_kinds(paths["onnx"])
            for prec, model in (("fp32", paths["onnx"]), ("int8", paths["ort int8"])):
                p = ort_profile(model, paths["onnx"], paths["calib"], kinds, a.runs, pathlib.Path(tmp))
                out.setdefault("ort_profile", {})[prec] = p
                print(f"\nonnxruntime {prec}, 1 thread, per-node medians summed by kind (total {p['total_ms']:.2f} ms)")
                print(f"{'kind':24s} {'nodes':>5} {'ms':>8} {'%':>6}  onnxruntime ops")
                for kind, row in p["kinds"].items():
                    ops = ", ".join(f"{o} x{c}" for o, c in row["ops"].items())
                    print(f"{kind:24s} {row['nodes']:>5} {row['ms']:>8.3f} {row['percent']:>6.1f}  {ops}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
