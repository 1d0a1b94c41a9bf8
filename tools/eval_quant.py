#!/usr/bin/env python3
"""Side-by-side int8 accuracy, size and latency on the labelled sets of tools/evaldata.py.

For each set (digits, orientation, ocr_rec) and its model, measures on the same test
samples:

    ort fp32          onnxruntime on the original ONNX model
    ort int8          onnxruntime's quantize_static (QDQ, per-channel weights, int8
                      activations and weights, MinMax calibration on the set's calibration
                      samples) run by onnxruntime
    edgert fp32       edgert.convert + edgert.Session
    edgert int8       edgert.convert(..., quantize="int8", calibration=...), when this build's
                      convert has that keyword (else "n/a")
    edgert ort-qdq    the onnxruntime-quantized QDQ model imported by edgert, when it converts

with top-1 accuracy (exact match for ocr_rec), the drop versus ort fp32 in points, file
size (and its ratio to the fp32 ONNX file) and host latency (1 thread, median of runs on
one sample). Then checks the targets of the int8 work: drop limits per set, edgert int8 at
least as accurate as ort int8, int8 file at most 0.27x the ONNX file.

Models come from the cache (tools/fetch_models.py); intermediate files go to
CACHE/eval/work/<set>/ (or --workdir).

    python tools/eval_quant.py [--sets digits,orientation,ocr_rec] [--n-test N] [--n-calib N]
                               [--json OUT.json] [--edgert-opt KEY=VALUE ...]
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import pathlib
import statistics
import sys
import time
import traceback
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout

import edgert  # noqa: E402
from tools import evaldata, models  # noqa: E402

# Allowed top-1 / exact-match drop of int8 versus fp32, in points (the int8 issue's targets).
DROP_LIMIT = {"digits": 0.3, "orientation": 1.0, "ocr_rec": 3.0}
SIZE_LIMIT = 0.27


class _NotAvailable(Exception):
    """A variant this build cannot measure (reported as n/a, not as an error)."""


def ort_session(path: str | os.PathLike, threads: int = 1, optimize: bool = True):
    """An onnxruntime CPU session. optimize=False disables graph optimizations: a QDQ model
    then runs exactly as written (dequantize, float op, quantize) instead of through the
    fused integer kernels that the optimizer substitutes."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def static_copy(src: pathlib.Path, dst: pathlib.Path, shapes: dict[str, list[int]]) -> pathlib.Path:
    """A copy of the model with every input dimension fixed to `shapes` (others kept) and
    stale value_info dropped, so that shape inference sees concrete sizes; models below
    opset 13 are upgraded to 13, which per-channel QuantizeLinear/DequantizeLinear need."""
    import onnx
    from onnx import version_converter

    m = onnx.load(str(src))
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        m = version_converter.convert_version(m, 13)
    for inp in m.graph.input:
        if inp.name in shapes:
            dims = inp.type.tensor_type.shape.dim
            want = shapes[inp.name]
            if len(dims) != len(want):
                raise ValueError(f"{src.name}: input {inp.name} has rank {len(dims)}, shape {want} given")
            for d, v in zip(dims, want):
                d.Clear()
                d.dim_value = int(v)
    del m.graph.value_info[:]
    for out in m.graph.output:           # let inference recompute symbolic output shapes
        out.type.tensor_type.ClearField("shape")
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(dst))
    return dst


def input_shapes_of(s: evaldata.EvalSet) -> dict[str, list[int]]:
    return {k: [1, *v.shape[1:]] for k, v in s.test_inputs.items()}


class _Reader:
    """onnxruntime CalibrationDataReader over the set's calibration samples, batch 1."""

    def __init__(self, calib: dict[str, np.ndarray]):
        self.calib = calib
        self.n = len(next(iter(calib.values())))
        self.k = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        if self.k >= self.n:
            return None
        feeds = {name: np.ascontiguousarray(a[self.k:self.k + 1]) for name, a in self.calib.items()}
        self.k += 1
        return feeds

    def rewind(self) -> None:
        self.k = 0


def ort_quantize(static: pathlib.Path, out: pathlib.Path, calib: dict[str, np.ndarray], work: pathlib.Path,
                 log: Callable[[str], None], reduce_range: bool = False) -> pathlib.Path:
    """onnxruntime's standard static int8 recipe: shape-inference preprocessing, then QDQ
    quantize_static with per-channel int8 weights and int8 activations, MinMax calibration."""
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, \
        quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = work / "model_pre.onnx"
    try:
        quant_pre_process(str(static), str(pre))
    except Exception as e:  # noqa: BLE001 - fall back to the static copy, as users would
        log(f"  quant_pre_process failed ({type(e).__name__}: {e}); quantizing the static copy as is")
        pre = static

    class Reader(_Reader, CalibrationDataReader):
        pass

    quantize_static(str(pre), str(out), Reader(calib), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax, reduce_range=reduce_range)
    return out


def output_step(qdq_model: pathlib.Path, output: str) -> float | None:
    """The quantization step of a QDQ model's output: the scale of the DequantizeLinear
    that produces it (None when another node does, or the scale is not per tensor)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(qdq_model))
    inits = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and output in n.output and n.input[1] in inits:
            scale = numpy_helper.to_array(inits[n.input[1]])
            return float(scale) if scale.size == 1 else None
    return None


def qdq_agreement(qdq_model: pathlib.Path, run: Callable[[dict[str, np.ndarray]], np.ndarray],
                  s: evaldata.EvalSet, output: str, count: int = 20) -> str:
    """How far edgert's outputs on an imported QDQ model are from onnxruntime's on the first
    `count` test samples, in output quantization steps (as written, and optimized)."""
    step = output_step(qdq_model, output)
    parts = []
    for label, optimize in (("as-written", False), ("optimized", True)):
        sess = ort_session(qdq_model, optimize=optimize)
        worst = 0.0
        for k, (feeds, _) in enumerate(s.samples()):
            if k >= count:
                break
            want = sess.run([output], feeds)[0].astype(np.float64)
            worst = max(worst, float(np.max(np.abs(run(feeds).astype(np.float64) - want))))
        parts.append(f"{worst / step:.2f} steps vs ort {label}" if step else f"max|diff| {worst:.3g} vs ort {label}")
    return "outputs: " + ", ".join(parts)


def latency_ms(run: Callable[[], Any], min_runs: int = 10, budget_s: float = 3.0) -> float:
    """Median wall time of one run, after two warm-up runs; at least min_runs runs, more
    while within budget_s (up to 200)."""
    run()
    run()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < budget_s and len(times) < 200):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(times)


def evaluate(s: evaldata.EvalSet, run: Callable[[dict[str, np.ndarray]], np.ndarray]) -> float:
    outs = [run(feeds) for feeds, _ in s.samples()]
    return s.score(outs)


def has_int8_convert() -> bool:
    """Whether edgert.convert takes quantize= and calibration= (directly, or passed through
    **options to edgert.converter.convert)."""
    def names(fn: Any) -> tuple[set[str], bool]:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return set(), False
        return {p.name for p in params}, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)

    want = {"quantize", "calibration"}
    found, passes_on = names(edgert.convert)
    if want <= found:
        return True
    if passes_on:
        try:
            from edgert.converter import pipeline as converter
        except ImportError:
            return False
        return want <= names(converter.convert)[0]
    return False


def _parse_opts(items: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise SystemExit(f"--edgert-opt wants KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        try:
            opts[k] = json.loads(v)
        except json.JSONDecodeError:
            opts[k] = v
    return opts


def run_set(name: str, args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    s = evaldata.load(name, n_calib=args.n_calib, n_test=args.n_test)
    model = models.find_model(s.model)
    work = pathlib.Path(args.workdir) / name if args.workdir else evaldata.cache_root() / "work" / name
    work.mkdir(parents=True, exist_ok=True)
    shapes = input_shapes_of(s)
    first = next(s.samples())[0]
    n_calib = len(next(iter(s.calibration.values())))
    log(f"{name}: model {s.model} ({model.stat().st_size} bytes), {len(s)} test / {n_calib} calibration samples")
    fp32_size = model.stat().st_size
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"set": name, "model": s.model, "metric": s.metric, "n_test": len(s),
                              "n_calib": n_calib, "onnx_bytes": fp32_size, "rows": rows}

    def add(variant: str, fn: Callable[[], tuple[Callable[[dict[str, np.ndarray]], np.ndarray], str | None]]) -> None:
        row: dict[str, Any] = {"variant": variant, "accuracy": None, "bytes": None, "latency_ms": None, "note": ""}
        t0 = time.perf_counter()
        try:
            run, path = fn()
            if run is not None:
                row["accuracy"] = evaluate(s, run)
                row["latency_ms"] = latency_ms(lambda: run(first))
            if path is not None:
                row["bytes"] = os.path.getsize(path)
        except _NotAvailable as e:
            row["note"] = f"n/a: {e}"
        except Exception as e:  # noqa: BLE001 - one failing variant must not hide the others
            first_line = str(e).splitlines()[0] if str(e) else ""
            row["note"] = f"error: {type(e).__name__}: {first_line}"[:200]
            if args.verbose:
                traceback.print_exc()
        rows.append(row)
        acc = "n/a" if row["accuracy"] is None else f"{100 * row['accuracy']:.2f}%"
        log(f"  {variant:20s} {acc:>8s}  ({time.perf_counter() - t0:.1f} s) {row['note']}")

    def ort_fp32():
        sess = ort_session(model)
        return (lambda f: sess.run(None, f)[0]), model

    static = static_copy(model, work / "model_static.onnx", shapes)
    ort_int8_path = work / "model_ort_int8.onnx"

    def ort_int8():
        ort_int8_path.unlink(missing_ok=True)            # never measure a stale file
        ort_quantize(static, ort_int8_path, s.calibration, work, log, args.ort_reduce_range)
        sess = ort_session(ort_int8_path)
        return (lambda f: sess.run(None, f)[0]), ort_int8_path

    def ort_int8_ref():
        if not ort_int8_path.is_file():
            raise _NotAvailable("no onnxruntime int8 model")
        sess = ort_session(ort_int8_path, optimize=False)
        return (lambda f: sess.run(None, f)[0]), ort_int8_path

    kw = models.convert_kwargs(s.model)
    kw["input_shapes"] = kw.get("input_shapes") or shapes

    want_output = ort_session(model).get_outputs()[0].name

    def edgert_run(path: pathlib.Path):
        sess = edgert.Session(str(path), threads=1)
        names = [o.name for o in sess.get_outputs()]
        out_name = want_output if want_output in names else names[0]
        return lambda f: sess.run([out_name], f)[0]

    def edgert_fp32():
        path = work / "model_fp32.edgert"
        edgert.convert(str(model), str(path), **kw)
        return edgert_run(path), path

    def edgert_int8():
        if not has_int8_convert():
            raise _NotAvailable("edgert.convert has no quantize/calibration keywords in this build")
        path = work / "model_int8.edgert"
        s.calibration_npz(work / "calibration.npz")      # the same samples, for trying the CLI
        edgert.convert(str(model), str(path), quantize="int8", calibration=s.calibration,
                       **kw, **_parse_opts(args.edgert_opt))
        return edgert_run(path), path

    def edgert_qdq():
        if not ort_int8_path.is_file():
            raise _NotAvailable("no onnxruntime int8 model")
        path = work / "model_ort_qdq.edgert"
        edgert.convert(str(ort_int8_path), str(path), **kw)
        run = edgert_run(path)
        qdq_notes.append(qdq_agreement(ort_int8_path, run, s, want_output))
        return run, path

    qdq_notes: list[str] = []

    add("ort fp32", ort_fp32)
    add("ort int8", ort_int8)
    add("ort int8 as-written", ort_int8_ref)
    add("edgert fp32", edgert_fp32)
    add("edgert int8", edgert_int8)
    if not args.skip_qdq_import:
        add("edgert ort-qdq", edgert_qdq)
        if qdq_notes:
            rows[-1]["note"] = qdq_notes[0]
    base = rows[0]["accuracy"]
    for row in rows:
        row["drop_points"] = None if base is None or row["accuracy"] is None else 100 * (base - row["accuracy"])
        row["size_ratio"] = None if row["bytes"] is None else row["bytes"] / fp32_size
    result["checks"] = checks(name, rows)
    return result


def checks(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by = {r["variant"]: r for r in rows}
    out = []
    e8 = by.get("edgert int8")
    o8s = [r for r in (by.get("ort int8"), by.get("ort int8 as-written"))
           if r is not None and r["accuracy"] is not None]
    o8 = max(o8s, key=lambda r: r["accuracy"]) if o8s else None
    if e8 is None or e8["accuracy"] is None:
        note = e8["note"] if e8 else ""
        out.append({"check": "edgert int8 measured", "ok": False if note.startswith("error") else None,
                    "detail": note})
        return out
    out.append({"check": f"int8 drop <= {DROP_LIMIT[name]} points", "ok": e8["drop_points"] <= DROP_LIMIT[name] + 1e-9,
                "detail": f"{e8['drop_points']:.2f}"})
    if o8 is not None and o8["accuracy"] is not None:
        out.append({"check": f"edgert int8 >= {o8['variant']}", "ok": e8["accuracy"] >= o8["accuracy"],
                    "detail": f"{100 * e8['accuracy']:.2f}% vs {100 * o8['accuracy']:.2f}%"})
    if e8["size_ratio"] is not None:
        out.append({"check": f"int8 file <= {SIZE_LIMIT}x ONNX", "ok": e8["size_ratio"] <= SIZE_LIMIT,
                    "detail": f"{e8['size_ratio']:.3f}x"})
    return out


def _fmt(v: Any, spec: str, na: str = "n/a") -> str:
    return na if v is None else format(v, spec)


def print_table(results: list[dict[str, Any]]) -> None:
    head = (f"{'set':12s} {'variant':20s} {'accuracy':>9s} {'drop':>7s} {'bytes':>10s} {'x onnx':>7s} "
            f"{'ms/run':>8s}  note")
    print(head)
    print("-" * len(head))
    for res in results:
        for r in res["rows"]:
            acc = _fmt(None if r["accuracy"] is None else 100 * r["accuracy"], ".2f")
            print(f"{res['set']:12s} {r['variant']:20s} {acc:>8s}{'%' if r['accuracy'] is not None else ' '} "
                  f"{_fmt(r['drop_points'], '+.2f'):>7s} {_fmt(r['bytes'], 'd'):>10s} "
                  f"{_fmt(r['size_ratio'], '.3f'):>7s} {_fmt(r['latency_ms'], '.2f'):>8s}  {r['note']}")
    print()
    for res in results:
        for c in res.get("checks", []):
            state = "n/a " if c["ok"] is None else "PASS" if c["ok"] else "FAIL"
            print(f"{state}  {res['set']}: {c['check']} ({c['detail']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(evaldata.SETS), help="comma-separated (default: all)")
    ap.add_argument("--n-test", type=int, default=None, help="test samples per set (default: the set's own)")
    ap.add_argument("--n-calib", type=int, default=None, help="calibration samples (default: the set's own)")
    ap.add_argument("--workdir", default=None, help="intermediate files (default: CACHE/eval/work)")
    ap.add_argument("--json", default=None, help="also write the results as JSON to this file")
    ap.add_argument("--edgert-opt", action="append", default=[], metavar="KEY=VALUE",
                    help="extra keyword for edgert.convert of the int8 model (value parsed as JSON if it can be)")
    ap.add_argument("--ort-reduce-range", action="store_true",
                    help="quantize with onnxruntime's reduce_range (7-bit weights), its advice for x86 without VNNI")
    ap.add_argument("--skip-qdq-import", action="store_true", help="skip converting onnxruntime's QDQ model")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failing variants")
    args = ap.parse_args(argv)
    if (args.n_test is not None and args.n_test < 1) or (args.n_calib is not None and args.n_calib < 1):
        ap.error("--n-test and --n-calib must be at least 1")
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    bad = [n for n in names if n not in evaldata.SETS]
    if bad:
        print(f"error: unknown set(s) {bad}; known: {', '.join(evaldata.SETS)}", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results = []
    for n in names:
        try:
            results.append(run_set(n, args, log))
        except edgert.EdgertError as e:
            log(f"{n}: skipped: {e}")
    print_table(results)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"edgert": edgert.__version__, "results": results}, indent=1))
    failed = any(c["ok"] is False for r in results for c in r.get("checks", []))
    return 1 if failed or len(results) < len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
