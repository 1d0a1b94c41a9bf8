"""edgert as users install it: the installed package the suite runs against, every command
of the `edgert` program, a runtime-only install (numpy and cffi, no onnx, no click), and the
sdist, which must build a working wheel by itself.

The suite itself runs against the wheel that tools/test.sh installed into a fresh venv
(tests/conftest.py refuses the checkout when EDGERT_TEST_INSTALLED=1); EDGERT_WHEEL names
that wheel, otherwise the tests that need a wheel file build one from the checkout.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import venv
import zipfile

import numpy as np
import pytest

import edgert
import edgert.fileformat
from edgert.cli import sources

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = pathlib.Path(edgert.__file__).resolve().parent
DATA = PACKAGE / "data"
BIN = pathlib.Path(sys.executable).parent
INSTALLED = os.environ.get("EDGERT_TEST_INSTALLED") == "1"


def edgert_cmd(*args: str, cwd: pathlib.Path, check: bool = True, env: dict | None = None,
               exe: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    """Runs the installed `edgert` program (the console script next to this Python)."""
    r = subprocess.run([str(exe or BIN / "edgert"), *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                       env=env)
    if check:
        assert r.returncode == 0, f"edgert {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r


@pytest.mark.skipif(not INSTALLED, reason="an editable install is a checkout by design (EDGERT_TEST_INSTALLED unset)")
def test_suite_runs_against_the_installed_package():
    assert PACKAGE != CHECKOUT / "edgert", PACKAGE
    assert "site-packages" in PACKAGE.parts
    # The C sources, board descriptions and linker map come from the package itself.
    assert sources.root() == PACKAGE / "_src"
    for rel in ("csrc/Makefile", "csrc/include/edgert.h", "targets/rpi4.toml", "cross/edgert.map"):
        assert (sources.root() / rel).is_file(), rel
    assert not (sources.root() / "csrc" / "fuzz").exists()


def test_runtime_info_and_version(tmp_path):
    info = edgert.runtime_info()
    assert info["version"] == edgert.__version__ == info["library_version"]
    fmt_version = ".".join(map(str, edgert.fileformat.VERSION))
    assert info["format_version"] == fmt_version
    assert info["kernels"] in ("ref", "neon", "neon+dotprod", "avx2", "avx2+avx512f", "avx2+avx512f+vnni")
    assert "kernels=ref" in info["build"]
    assert pathlib.Path(info["library"]).is_file()
    out = edgert_cmd("--version", cwd=tmp_path).stdout
    assert f"edgert {edgert.__version__} (file format {fmt_version})" in out
    assert f"kernels: {info['kernels']}" in out and f"build: {info['build']}" in out


def test_every_command(tmp_path):
    """convert (fp32, int8, pruned), inspect, run, verify, bench, demo, build: each through
    the installed program, each checked on its result."""
    model, calib = DATA / "digits_cnn.onnx", DATA / "digits_calib.npz"
    x = np.load(DATA / "digits_test.npz")["input"][:1]
    np.save(tmp_path / "x.npy", x)
    edgert_cmd("convert", str(model), "-o", "fp32.edgert", cwd=tmp_path)
    edgert_cmd("convert", str(model), "-o", "int8.edgert", "--quantize", "int8", "--calibration", str(calib),
               cwd=tmp_path)
    edgert_cmd("convert", str(model), "-o", "pruned.edgert", "--prune", "0.5", cwd=tmp_path)
    sizes = {k: (tmp_path / f"{k}.edgert").stat().st_size for k in ("fp32", "int8", "pruned")}
    assert sizes["int8"] < sizes["fp32"] / 2 and sizes["pruned"] < sizes["fp32"], sizes

    d = json.loads(edgert_cmd("inspect", "int8.edgert", "--json", cwd=tmp_path).stdout)
    assert d["file_bytes"] == sizes["int8"]
    for name in ("fp32", "int8", "pruned"):
        edgert_cmd("run", f"{name}.edgert", "--input", "input=x.npy", "--output-dir", name, cwd=tmp_path)
    ref = edgert.Session(str(tmp_path / "fp32.edgert")).run(None, {"input": x})[0]
    assert np.array_equal(np.load(tmp_path / "fp32" / "logits.npy"), ref)
    assert np.load(tmp_path / "int8" / "logits.npy").argmax() == ref.argmax()

    v = edgert_cmd("verify", str(model), "fp32.edgert", cwd=tmp_path).stdout
    assert v.startswith("ok ") and "logits" in v
    b = json.loads(edgert_cmd("bench", "int8.edgert", "--runs", "5", "--json", cwd=tmp_path).stdout)
    assert b["runs"] == 5 and b["median_ms"] > 0
    demo = edgert_cmd("demo", "-o", "demo.edgert", cwd=tmp_path).stdout
    assert "held-out digits: edgert accuracy 0.98" in demo
    built = edgert_cmd("build", "--target", "host", "-o", "host", cwd=tmp_path).stdout
    assert "wheel:" in built
    assert (tmp_path / "host" / "bin" / "edgert-run").is_file()


def _wheel_file(tmp_path: pathlib.Path) -> pathlib.Path:
    """The wheel under test: tools/test.sh's (EDGERT_WHEEL), or one built from the checkout."""
    given = os.environ.get("EDGERT_WHEEL")
    if given:
        return pathlib.Path(given)
    out = tmp_path / "dist"
    # setuptools stages the wheel in build/lib: start it afresh so nothing stale gets in.
    for staged in (CHECKOUT / "build").glob("lib*"):
        shutil.rmtree(staged, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(CHECKOUT)],
                   check=True, capture_output=True, timeout=600)
    return next(out.glob("edgert-*.whl"))


def _fresh_venv(path: pathlib.Path) -> pathlib.Path:
    venv.create(path, with_pip=True, system_site_packages=False)
    return path / "bin" / "python"


def _pip(py: pathlib.Path, *args: str) -> None:
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr


def test_wheel_contents(tmp_path):
    names = zipfile.ZipFile(_wheel_file(tmp_path)).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"edgert", f"edgert-{edgert.__version__}.dist-info"}, top
    for pkg in ("edgert/converter/quant/__init__.py", "edgert/converter/prune/__init__.py",
                "edgert/converter/frontend/onnx_ops/__init__.py",
                "edgert/_src/csrc/Makefile", "edgert/_src/targets/rpi0.toml", "edgert/_src/cross/edgert.map",
                "edgert/data/digits_cnn.onnx"):
        assert pkg in names, pkg
    # Development-only code stays out.
    for gone in ("edgert/models.py", "edgert/evaldata.py", "edgert/data/digits_sparse90.onnx"):
        assert gone not in names
    assert not any("/_src/csrc/fuzz/" in n or n.endswith(".pyc") for n in names)


def test_runtime_only_install(tmp_path):
    """The wheel with numpy and cffi only: Session runs; the CLI says what to install."""
    wheel = _wheel_file(tmp_path)
    py = _fresh_venv(tmp_path / "venv")
    _pip(py, "--no-deps", str(wheel))
    _pip(py, "numpy", "cffi")
    model = tmp_path / "digits.edgert"
    edgert.convert(str(DATA / "digits_cnn.onnx"), str(model))
    x = np.load(DATA / "digits_test.npz")["input"][:3]
    np.save(tmp_path / "x.npy", x)
    want = np.concatenate([edgert.Session(str(model)).run(None, {"input": x[k:k + 1]})[0] for k in range(3)])
    script = ("import sys, numpy as np, edgert\n"
              "for mod in ('onnx', 'click'):\n"
              "    try:\n"
              "        __import__(mod)\n"
              "        sys.exit(mod + ' should not be installed')\n"
              "    except ImportError:\n"
              "        pass\n"
              "s = edgert.Session(sys.argv[1])\n"
              "x = np.load(sys.argv[2])\n"
              "np.save(sys.argv[3], np.concatenate([s.run(None, {'input': x[k:k + 1]})[0] for k in range(3)]))\n"
              "print(edgert.runtime_info()['kernels'])\n")
    r = subprocess.run([str(py), "-c", script, str(model), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), want)

    exe = py.parent / "edgert"
    r = edgert_cmd("run", str(model), "--input", "input=x.npy", cwd=tmp_path, check=False, exe=exe)
    assert r.returncode != 0 and "needs click: pip install click" in r.stdout + r.stderr
    _pip(py, "click")
    edgert_cmd("inspect", str(model), cwd=tmp_path, exe=exe)
    edgert_cmd("bench", str(model), "--runs", "3", cwd=tmp_path, exe=exe)
    r = edgert_cmd("convert", str(DATA / "digits_cnn.onnx"), "-o", "again.edgert", cwd=tmp_path, check=False, exe=exe)
    assert r.returncode == 2
    assert "`edgert convert` needs the onnx package: pip install 'edgert[convert]'" in r.stderr
    assert not (tmp_path / "again.edgert").exists()


def test_sdist_builds_a_working_wheel(tmp_path):
    """The sdist holds everything the wheel build needs (C runtime, targets, linker map)."""
    r = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "sdist")], cwd=CHECKOUT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    sdist = next((tmp_path / "sdist").glob("edgert-*.tar.gz"))
    w = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "w"), str(sdist)],
                       capture_output=True, text=True, timeout=600)
    assert w.returncode == 0, w.stdout + w.stderr
    names = zipfile.ZipFile(next((tmp_path / "w").glob("edgert-*.whl"))).namelist()
    for member in ("edgert/_src/csrc/src/loader.c", "edgert/_src/targets/rpi5.toml", "edgert/_src/cross/edgert.map",
                   "edgert/data/digits_test.npz"):
        assert member in names, member
    assert any(n.startswith("edgert/_edgert_c") and n.endswith(".so") for n in names)
