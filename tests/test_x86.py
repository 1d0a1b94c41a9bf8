"""The x86-64 AVX2 + FMA kernels (csrc/kernels/x86) against the portable ones.

- The start-up choice: the installed package reports "avx2" on a CPU with AVX2 and FMA (with
  "+avx512f" and "+vnni" where it has those),
  and "ref" when EDGERT_FORCE_REF=1 is set before it loads (a fresh process).
- csrc/tests/kernel_test.c in the host target's build (`edgert build`'s make flags,
  link-time optimization included): every AVX2 kernel against its contract (cpu.h) and
  the SGEMM driver against the reference kernels, on tile-boundary shapes.
- Whole models run in two processes through the installed package, one with the AVX2
  kernels and one with EDGERT_FORCE_REF=1: float32 outputs within FP32_TOL relative to
  the reference's largest magnitude, int8 outputs bit for bit.

Runs on x86-64 hosts only; the AVX2 checks need a CPU with AVX2 and FMA.
"""
from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np
import pytest

import edgert
from tools import mobilenetv2, models

FP32_TOL = 1e-4  # max |avx2 - ref| <= FP32_TOL * max |ref|, as tests/test_arm.py for NEON

if platform.machine().lower() not in ("x86_64", "amd64"):
    pytest.skip("x86-64 hosts only", allow_module_level=True)


def _cpu_flags() -> set[str]:
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))


def _cpu_has_avx2_fma() -> bool:
    return {"avx2", "fma"} <= _cpu_flags()


def _isa() -> str:
    """What the library reports on this CPU: the AVX2 kernels, and the AVX-512 and VNNI
    ones where the CPU (and the kernel, which clears the flags the OS does not save) has them."""
    flags = _cpu_flags()
    isa = "avx2+avx512f" if "avx512f" in flags else "avx2"
    return isa + "+vnni" if {"avx512f", "avx512vl", "avx512_vnni"} <= flags else isa


needs_avx2 = pytest.mark.skipif(not _cpu_has_avx2_fma(), reason="the CPU lacks AVX2 or FMA")

# Runs models in a fresh process (the kernels are chosen when the library loads):
# argv = spec.json; writes each case's outputs to <out>.npz and prints the kernels.
_RUNNER = r"""
import json, sys
import numpy as np
import edgert
spec = json.load(open(sys.argv[1]))
for case in spec["cases"]:
    feeds = dict(np.load(case["feeds"]))
    for threads in spec["threads"]:
        s = edgert.Session(case["model"], threads=threads)
        outs = s.run(None, feeds)
        np.savez(case["out"] + f"-t{threads}.npz", *outs)
print(edgert.runtime_info()["kernels"])
"""


def _run(tmp: pathlib.Path, cases: list[dict], force_ref: bool, tag: str, threads=(1, 2)) -> str:
    spec = {"threads": list(threads),
            "cases": [dict(c, out=str(tmp / f"{c['name']}-{tag}")) for c in cases]}
    (tmp / f"spec-{tag}.json").write_text(json.dumps(spec))
    (tmp / "runner.py").write_text(_RUNNER)
    env = dict(os.environ)
    env.pop("EDGERT_FORCE_REF", None)
    if force_ref:
        env["EDGERT_FORCE_REF"] = "1"
    # cwd is the temporary folder: the child imports the installed edgert, not the checkout
    r = subprocess.run([sys.executable, str(tmp / "runner.py"), str(tmp / f"spec-{tag}.json")],
                       capture_output=True, text=True, cwd=tmp, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def _outputs(path: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"arr_{i}"] for i in range(len(z.files))]


def _case(tmp: pathlib.Path, name: str, data: bytes, feeds: dict[str, np.ndarray], int8: bool) -> dict:
    model = tmp / f"{name}.edgert"
    model.write_bytes(data)
    names = {i.name for i in edgert.Session(data).get_inputs()}
    np.savez(tmp / f"{name}-feeds.npz", **{k: v for k, v in feeds.items() if k in names})
    return {"name": name, "model": str(model), "feeds": str(tmp / f"{name}-feeds.npz"), "int8": int8}


def _compare(tmp: pathlib.Path, cases: list[dict], threads=(1, 2)) -> None:
    assert _run(tmp, cases, False, "avx2", threads) == _isa()
    assert _run(tmp, cases, True, "ref", threads) == "ref"
    for c in cases:
        for t in threads:
            got = _outputs(str(tmp / f"{c['name']}-avx2-t{t}.npz"))
            want = _outputs(str(tmp / f"{c['name']}-ref-t{t}.npz"))
            assert len(got) == len(want) > 0
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype, c["name"]
                if c["int8"] or not np.issubdtype(w.dtype, np.floating):
                    np.testing.assert_array_equal(g, w, err_msg=f"{c['name']} threads={t}")
                else:
                    scale = float(np.abs(w).max())
                    assert scale > 0, c["name"]
                    err = float(np.abs(g.astype(np.float64) - w).max())
                    assert err <= FP32_TOL * scale, f"{c['name']} threads={t}: max |diff| {err:.3g}, max |ref| {scale:.3g}"


def test_build_names_the_avx2_kernels():
    assert edgert.runtime_info()["build"].endswith("kernels=ref,avx2")


@needs_avx2
def test_kernels_chosen_at_start_up(tmp_path):
    assert edgert.runtime_info()["kernels"] == _isa()
    env = dict(os.environ, EDGERT_FORCE_REF="1")
    r = subprocess.run([sys.executable, "-c", "import edgert; print(edgert.runtime_info()['kernels'])"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ref"


@needs_avx2
def test_kernel_test_host_target():
    """kernel_test built as `edgert build --target host` builds the library: every AVX2
    kernel against its contract; with EDGERT_FORCE_REF=1 it sees the reference table."""
    from edgert.cli import build as ebuild
    from edgert.cli import targets

    out = ebuild.compile_target(targets.load("host"), goals=("lib", "kernel-test"))
    exe = out / "bin" / "kernel_test"
    r = subprocess.run([str(exe), "--expect", _isa()], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert " 0 failures" in r.stdout
    env = dict(os.environ, EDGERT_FORCE_REF="1")
    r = subprocess.run([str(exe), "--expect", "ref"], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


@needs_avx2
def test_mobilenetv2_matches_reference_kernels(tmp_path):
    """The benchmark model: 1x1 GEMMs (4- and 6-row tiles, partial panels), depthwise 3x3
    stride 1 and 2 on planes 7 to 112 wide, the stem's im2col GEMM, the classifier."""
    onnx_path, calib_path = mobilenetv2.write(tmp_path / "m", seed=0, n_calib=4)
    calib = dict(np.load(calib_path))
    x = {"input": mobilenetv2.images(1, seed=3)}
    cases = [_case(tmp_path, "mnv2", edgert.convert(str(onnx_path), None), x, False),
             _case(tmp_path, "mnv2-int8", edgert.convert(str(onnx_path), None, quantize="int8", calibration=calib),
                   x, True)]
    _compare(tmp_path, cases)


@needs_avx2
@pytest.mark.parametrize("name", ["ppocr_rec", "ppocr_det"])
def test_ocr_matches_reference_kernels(name, real_model, tmp_path):
    path = real_model(name)
    data = edgert.convert(str(path), None, **models.convert_kwargs(name))
    _compare(tmp_path, [_case(tmp_path, name, data, models.example_inputs(name), False)], threads=(1,))


@needs_avx2
def test_digits_int8_bit_exact(tmp_path):
    """The shipped digits CNN, float32 and int8 (calibrated on its test images)."""
    src = pathlib.Path(edgert.__file__).parent / "data" / "digits_cnn.onnx"
    x = models.example_inputs("digits")
    calib = {"input": np.concatenate([models.example_inputs("digits", seed=s)["input"] for s in range(8)])}
    cases = [_case(tmp_path, "digits", edgert.convert(str(src), None), x, False),
             _case(tmp_path, "digits-int8", edgert.convert(str(src), None, quantize="int8", calibration=calib),
                   x, True)]
    _compare(tmp_path, cases)


# Depthwise 3x3 layers that the dw3 kernels take (AVX-512 for w <= 16, AVX2 wider), run by
# the worker pool's shares (src/exec.c) at one to four threads. (channels, h, w,
# stride, pads t/l/b/r, activation): padding rows above and below the image or none, fewer
# planes than pieces, and the activations fused (Clip) or run after (HardSwish).
_DW_CASES = [
    (5, 13, 11, 1, (1, 1, 1, 1), "Clip"),
    (3, 12, 12, 2, (1, 1, 1, 1), "Relu"),
    (4, 40, 20, 1, (1, 1, 1, 1), "HardSwish"),
    (6, 41, 33, 2, (1, 1, 1, 1), None),
    (2, 30, 9, 1, (0, 1, 0, 1), "Clip"),
    (3, 22, 14, 1, (2, 1, 0, 1), None),
    (2, 4, 60, 1, (0, 1, 0, 1), "Clip"),
]


@needs_avx2
@pytest.mark.parametrize("case", _DW_CASES, ids=lambda c: "c%d_%dx%d_s%d_p%s_%s" % (c[:4] + ("".join(map(str, c[4])), c[5])))
def test_depthwise_across_threads(case):
    """Every thread count gives the one-thread result bit for bit (each plane is one piece
    of work, whichever thread runs it), and that result is onnxruntime's."""
    from onnx import helper

    from tests.helpers import make_model

    c, h, w, stride, pads, act = case
    rng = np.random.default_rng(c * 1000 + h * 10 + w)
    x = rng.standard_normal((1, c, h, w), dtype=np.float32)
    inits = {"W": rng.standard_normal((c, 1, 3, 3), dtype=np.float32),
             "B": rng.standard_normal(c).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["y" if act is None else "c"], group=c,
                              kernel_shape=[3, 3], strides=[stride, stride], pads=list(pads))]
    if act == "Clip":
        inits.update(lo=np.float32(0), hi=np.float32(6))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    elif act is not None:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    model = make_model(nodes, {"x": x}, ["y"], inits)
    _across_threads(model, x, atol=1e-5, rtol=1e-5, runs=1)


def _across_threads(model, x, atol: float, rtol: float, runs: int) -> None:
    """model's output for input "x" at one thread is onnxruntime's (within atol, rtol), and
    at two to four threads the one-thread result bit for bit, `runs` times each."""
    from tests.helpers import run_ort

    want = run_ort(model, {"x": x})[0]
    data = edgert.convert(model, None)
    # all sessions open at once: no arena is a freed one still holding another's output
    sessions = {t: edgert.Session(data, threads=t) for t in (1, 2, 3, 4)}
    one = sessions[1].run(None, {"x": x})[0]
    np.testing.assert_allclose(one, want, rtol=rtol, atol=atol)
    for threads in (2, 3, 4):
        for _ in range(runs):
            got = sessions[threads].run(None, {"x": x})[0]
            np.testing.assert_array_equal(got, one, err_msg=f"threads={threads}")


# Inverted residual blocks (1x1 expansion, depthwise 3x3, 1x1 projection, residual Add)
# over small images, where at two threads or more the SGEMM cuts by rows first (images of
# up to 256 pixels, ERT_ROWS_SPLIT_MAX_N in src/internal.h) and the Add runs on every
# thread by channels (at least 4096 elements): (channels, expansion, height, width).
# 16x16 is the last size cut by rows, 17x17 the first cut by columns; 11x11 has a single
# column block; 8x8 x 20 channels stays below the parallel Add.
_BLOCK_CASES = [(64, 384, 14, 14), (24, 100, 16, 16), (24, 72, 17, 17), (96, 576, 7, 7),
                (36, 216, 11, 11), (20, 60, 8, 8), (40, 132, 12, 20)]


@needs_avx2
@pytest.mark.parametrize("case", _BLOCK_CASES, ids=lambda c: "c%d_e%d_%dx%d" % c)
def test_small_image_blocks_across_threads(case):
    """Every thread count gives the one-thread result bit for bit, whichever way the
    work is cut, and that result is onnxruntime's."""
    from onnx import helper

    from tests.helpers import make_model, run_ort

    c, e, h, w = case
    rng = np.random.default_rng(c * 100 + e + h)
    x = rng.standard_normal((1, c, h, w), dtype=np.float32)
    inits = {"W1": rng.standard_normal((e, c, 1, 1), dtype=np.float32) * 0.2,
             "B1": rng.standard_normal(e).astype(np.float32),
             "W2": rng.standard_normal((e, 1, 3, 3), dtype=np.float32),
             "W3": rng.standard_normal((c, e, 1, 1), dtype=np.float32) * 0.1,
             "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["a"], kernel_shape=[1, 1]),
             helper.make_node("Clip", ["a", "lo", "hi"], ["b"]),
             helper.make_node("Conv", ["b", "W2"], ["d"], group=e, kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d", "W3"], ["p"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["p", "x"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], inits)
    scale = float(np.abs(run_ort(model, {"x": x})[0]).max())
    # twice: the second run over arenas the first one wrote
    _across_threads(model, x, atol=1e-4 * scale, rtol=1e-4, runs=2)


@needs_avx2
@pytest.mark.parametrize("concat", [False, True], ids=["region", "concat_keeps_nchw"])
def test_nhwc_layers_across_threads(concat, monkeypatch):
    """A chain of pointwise and depthwise layers over 28x28, 14x14 and 7x7 maps, which a
    session on a CPU with AVX-512 stores NHWC (src/layout.c): entered from an NCHW graph
    input, a residual Add inside (done in the stores of the pointwise layer before it), a
    Sigmoid and a Mul, stride-2 depthwise layers, channel counts that are not multiples of
    16, left by a pointwise layer to a graph output and by a GlobalAveragePool after a
    last residual Add (the last NHWC node). With `concat`, a Concat also reads a tensor
    in the middle, so that tensor and the ones tied to it stay NCHW. Every thread count
    gives the one-thread result bit for bit, that result is onnxruntime's and the
    all-NCHW session's (EDGERT_LAYOUT=nchw)."""
    from onnx import helper

    from tests.helpers import make_model, run_ort

    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 24, 28, 28), dtype=np.float32)

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    inits = {"W1": w(48, 24, 1, 1), "B1": w(48), "D1": w(48, 1, 3, 3), "W2": w(24, 48, 1, 1),
             "WQ": w(24, 24, 1, 1), "D2": w(24, 1, 3, 3), "B2": w(24), "W3": w(40, 24, 1, 1),
             "D3": w(40, 1, 3, 3), "W4": w(8, 40, 1, 1), "B4": w(8), "W5": w(40, 40, 1, 1),
             "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], kernel_shape=[1, 1]),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["c1r"]),
             helper.make_node("Conv", ["c1r", "D1"], ["d1"], group=48, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d1"], ["d1r"]),
             helper.make_node("Conv", ["d1r", "W2"], ["p1"], kernel_shape=[1, 1]),
             helper.make_node("Conv", ["x", "WQ"], ["q"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["p1", "q"], ["a1"]),
             helper.make_node("Sigmoid", ["a1"], ["s"]),
             helper.make_node("Mul", ["s", "a1"], ["m"]),
             helper.make_node("Conv", ["m", "D2", "B2"], ["d2"], group=24, kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d2", "W3"], ["e2"], kernel_shape=[1, 1]),
             helper.make_node("Conv", ["e2", "D3"], ["d3"], group=40, kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d3", "W5"], ["e3"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["e3", "d3"], ["a3"]),
             helper.make_node("GlobalAveragePool", ["a3"], ["g"]),
             helper.make_node("Conv", ["e2", "W4", "B4"], ["out"], kernel_shape=[1, 1])]
    outputs = ["g", "out"]
    if concat:
        nodes.append(helper.make_node("Concat", ["d2", "d2"], ["cat"], axis=1))
        outputs.append("cat")
    model = make_model(nodes, {"x": x}, outputs, inits)
    want = run_ort(model, {"x": x})
    data = edgert.convert(model, None)
    monkeypatch.setenv("EDGERT_LAYOUT", "nchw")  # read when a session is created
    nchw = edgert.Session(data, threads=2).run(None, {"x": x})
    monkeypatch.delenv("EDGERT_LAYOUT")
    sessions = {t: edgert.Session(data, threads=t) for t in (1, 2, 3, 4)}
    one = sessions[1].run(None, {"x": x})
    for got, ref, flat in zip(one, want, nchw):
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * scale)
        np.testing.assert_allclose(got, flat, rtol=1e-5, atol=1e-6 * scale)
    for threads in (2, 3, 4):
        for _ in range(2):  # the second run over arenas the first one wrote
            for got, base in zip(sessions[threads].run(None, {"x": x}), one):
                np.testing.assert_array_equal(got, base, err_msg=f"threads={threads}")


@needs_avx2
def test_planes_for_depthwise_across_threads():
    """An NCHW pointwise layer (56x56 maps stay NCHW) read only by a depthwise layer: on a
    CPU with AVX-512 the session cuts its output planes among the threads as the
    depthwise layer does (src/layout.c, ERT_LAYOUT_PLANES); a second pointwise layer whose
    output two nodes read keeps the pixel cut. 36 and 40 output planes, not multiples of
    the 8-row parts. Every thread count gives the one-thread result bit for bit, and that
    is onnxruntime's."""
    from onnx import helper

    from tests.helpers import make_model, run_ort

    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 12, 56, 56), dtype=np.float32)

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    inits = {"W1": w(36, 12, 1, 1), "B1": w(36), "D1": w(36, 1, 3, 3), "W2": w(40, 36, 1, 1), "D2": w(40, 1, 3, 3)}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["e1"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["e1"], ["e1r"]),
             helper.make_node("Conv", ["e1r", "D1"], ["d1"], group=36, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d1", "W2"], ["e2"], kernel_shape=[1, 1]),
             helper.make_node("Conv", ["e2", "D2"], ["d2"], group=40, kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["e2"], ["s2"])]
    model = make_model(nodes, {"x": x}, ["d2", "s2"], inits)
    want = run_ort(model, {"x": x})
    data = edgert.convert(model, None)
    sessions = {t: edgert.Session(data, threads=t) for t in (1, 2, 3, 4)}
    one = sessions[1].run(None, {"x": x})
    for got, ref in zip(one, want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * float(np.abs(ref).max()))
    for threads in (2, 3, 4):
        for _ in range(2):
            for got, base in zip(sessions[threads].run(None, {"x": x}), one):
                np.testing.assert_array_equal(got, base, err_msg=f"threads={threads}")
