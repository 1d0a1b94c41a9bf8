"""edgert as users install it: the installed package the suite runs against, every command
of the `edgert` program, a runtime-only install (numpy and cffi, no onnx, no click), and the
sdist, which must build a working wheel by itself.

The suite itself runs against the wheel that tools/test.sh installed into a fresh venv
(tests/conftest.py refuses the checkout when EDGERT_TEST_INSTALLED=1); EDGERT_WHEEL names
that wheel, otherwise the tests that need a wheel file build one from the checkout.
"""
from __future__ import annotations

import ast
import json
import os
import pathlib
import re
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
    host = tmp_path / "host"
    assert (host / "bin" / "edgert-run").is_file()
    assert (host / "lib" / "cmake" / "edgert" / "edgertConfig.cmake").is_file()
    # examples/c/classify.c built on this machine through the written pkg-config file
    # (tests/test_c_example.py builds it for the boards, with CMake too)
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config missing (tools/install_system_deps.sh installs pkgconf)")
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(host / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "edgert"], capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    subprocess.run(["cc", str(CHECKOUT / "examples" / "c" / "classify.c"), *flags, f"-Wl,-rpath,{host / 'lib'}",
                    "-o", str(tmp_path / "classify")], check=True, capture_output=True)
    x.astype(np.float32).tofile(tmp_path / "x.bin")
    out = subprocess.run([str(tmp_path / "classify"), str(tmp_path / "fp32.edgert"), str(tmp_path / "x.bin")],
                         capture_output=True, text=True, check=True).stdout
    scores = np.array([float(v) for v in out.splitlines()[0].split()[1:]])
    assert np.abs(scores - ref[0]).max() <= 1e-5 * max(1.0, float(np.abs(ref).max())), (out, ref)
    assert f"top: {int(ref.argmax())} " in out


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
                "edgert/data/digits_cnn.onnx", "edgert/data/qemu_icount.c", "edgert/data/qemu_icount_threads.c"):
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
                   "edgert/data/digits_test.npz", "edgert/data/qemu_icount.c",
                   "edgert/data/qemu_icount_threads.c"):
        assert member in names, member
    assert any(n.startswith("edgert/_edgert_c") and n.endswith(".so") for n in names)


# ---- the installed wheel on its own: QEMU instruction counts, no path out of the package ----

@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """(python, package folder) of the wheel installed with its dependencies into a fresh
    venv outside the checkout."""
    tmp = tmp_path_factory.mktemp("wheel_alone")
    py = _fresh_venv(tmp / "venv")
    _pip(py, str(_wheel_file(tmp)))
    r = subprocess.run([str(py), "-c", "import edgert, os; print(os.path.dirname(os.path.realpath(edgert.__file__)))"],
                       capture_output=True, text=True, cwd=tmp, env=_alone_env(tmp), timeout=120)
    assert r.returncode == 0, r.stderr
    return py, pathlib.Path(r.stdout.strip())


def _alone_env(tmp: pathlib.Path) -> dict[str, str]:
    """The environment of a user with only the wheel: no override of the plugin, nothing
    on the Python path, fresh caches (the plugin and the board build come from the wheel)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("EDGERT_ICOUNT_DIR", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")}
    env["EDGERT_CACHE"] = str(tmp / "cache")
    env["EDGERT_BUILD_CACHE"] = str(tmp / "build-cache")
    return env


def test_instruction_counts_from_the_wheel(wheel_venv, tmp_path):
    """`edgert report --target rpi4` and `edgert bench --profile --target rpi4` as a wheel user
    runs them: cwd outside the checkout, neither the checkout nor anything beside it on the
    path, EDGERT_ICOUNT_DIR unset, an empty cache, so the QEMU plugin is compiled from the
    source the wheel ships. Both give a count for every node."""
    missing = [t for t in ("gcc", "make", "qemu-aarch64", "aarch64-linux-gnu-gcc") if shutil.which(t) is None]
    if missing:
        msg = f"{', '.join(missing)} missing (apt-get install gcc make qemu-user gcc-aarch64-linux-gnu)"
        if os.environ.get("EDGERT_REQUIRE_ARM"):
            pytest.fail(msg)
        pytest.skip(msg)
    py, pkg = wheel_venv
    exe = py.parent / "edgert"
    env = _alone_env(tmp_path)
    probe = subprocess.run([str(py), "-c", "import sys, json, edgert.cli.report_qemu as q; "
                            "print(json.dumps([sys.path, str(q.plugin_source())]))"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert probe.returncode == 0, probe.stderr
    path, source = json.loads(probe.stdout)
    outside = [CHECKOUT, CHECKOUT.parent / "shared"]
    for entry in path:
        resolved = pathlib.Path(entry or tmp_path).resolve()
        assert not any(resolved == o or o in resolved.parents for o in outside), f"{entry} on sys.path"
    assert pathlib.Path(source) == pkg / "data" / "qemu_icount.c"

    model = tmp_path / "m.edgert"
    edgert.convert(str(DATA / "digits_cnn.onnx"), str(model), quantize="int8", calibration=str(DATA / "digits_calib.npz"))
    nodes = [n["name"] for n in edgert.runtime.reader.read(model.read_bytes())["nodes"]]

    edgert_cmd("report", "m.edgert", "-o", "r.html", "--target", "rpi4", cwd=tmp_path, env=env, exe=exe)
    built = list((tmp_path / "cache" / "icount").glob("libicount-*.so"))
    assert len(built) == 1, built  # compiled from the wheel's source into EDGERT_CACHE
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "instructions (rpi4)" in page and "edgert&#x27;s icount plugin" in page
    section = page[page.index('<section id="time">'):]
    section = section[:section.index("</section>")]
    rows = re.findall(r"<tr><td class=\"n\">\d+</td><td>([^<]*)</td>.*?<td class=\"n\">([^<]*)</td></tr>", section)
    per_node = {name: int(v.replace(",", "")) for name, v in rows}
    assert list(per_node) == nodes
    conv = sum(v for k, v in per_node.items() if k.endswith("Conv"))
    assert conv > 0.8 * sum(per_node.values()) > 0

    out = edgert_cmd("bench", "m.edgert", "--profile", "--target", "rpi4", "--runs", "3", cwd=tmp_path, env=env,
                     exe=exe).stdout
    lines = out.splitlines()
    assert lines[0].split()[-1] == "instructions"
    table = {ln.split()[0]: int(ln.split()[-1].replace(",", "")) for ln in lines[1:1 + len(nodes)]}
    assert list(table) == nodes
    whole = re.search(r"^([\d,]+) instructions per inference on rpi4 \(cortex-a72, QEMU\)$", out, re.M)
    assert whole, out
    assert sum(table.values()) == int(whole.group(1).replace(",", ""))
    # The same count as the report's, to within the runs' noise (a few thousand instructions).
    assert abs(sum(table.values()) - sum(per_node.values())) <= 0.01 * sum(per_node.values())
    # The cached plugin is reused, not rebuilt.
    assert list((tmp_path / "cache" / "icount").glob("libicount-*.so")) == built


# A path of the checkout beside the package: tools/..., docs/..., tests/..., ../shared/...
_OUT_PATH = re.compile(r"(?<![\w.$/-])((?:\.\./)*(?:tools|shared)/[\w./-]*)")
# Text anywhere (comments too) that can only mean a lookup beside the checkout.
_NEVER = re.compile(r"\.\./shared|shared/tools|qemu-icount/")
_BINARY = {".so", ".npz", ".onnx", ".pyc", ".whl", ".a", ".o"}


def _resolves_inside(path: str, where: pathlib.Path, package: pathlib.Path) -> bool:
    """True when `path`, read from file `where`, names a file of the package: relative to
    the file's folder or to one of its folders up to the package."""
    for base in [where.parent, *where.parent.parents]:
        target = (base / path).resolve()
        if package in target.parents and target.exists():
            return True
        if base == package:
            break
    return False


def _code_strings(path: pathlib.Path, text: str) -> list[tuple[int, str]]:
    """(line, text) of what a file runs or says: a Python file's string constants (not its
    docstrings; f-strings included), a C file's lines without comments, a Makefile's and a
    TOML file's lines without # comments. Other text is prose and is not read here."""
    if path.suffix == ".py":
        tree = ast.parse(text, str(path))
        docstrings = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docstrings.add(id(first.value))
        return [(node.lineno, node.value) for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    if path.suffix in (".c", ".h", ".def"):
        # comments blanked, line breaks kept so that line numbers stay right
        text = re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    elif path.name == "Makefile" or path.suffix in (".toml", ".sh", ".map"):
        text = re.sub(r"#[^\n]*", "", text)
    else:
        return []
    return list(enumerate(text.splitlines(), 1))


def package_paths_leaving(package: pathlib.Path) -> list[str]:
    """file:line: text for every path in the package's code and messages that names a file
    outside it (../shared, tools/ of the checkout, ...), and every mention of a lookup
    beside the checkout anywhere in its text."""
    found = []
    for f in sorted(p for p in package.rglob("*") if p.is_file()):
        if f.suffix in _BINARY or "__pycache__" in f.parts:
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = f.relative_to(package)
        for n, line in enumerate(text.splitlines(), 1):
            if _NEVER.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
        for n, s in _code_strings(f, text):
            for m in _OUT_PATH.finditer(s):
                if not _resolves_inside(m.group(1), f, package):
                    found.append(f"{rel}:{n}: {m.group(1)!r} in {s.strip()[:120]!r}")
        if f.suffix == ".py":  # path / "shared" / "tools" ... built from parts
            for node in ast.walk(ast.parse(text, str(f))):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                    for side in (node.left, node.right):
                        if isinstance(side, ast.Constant) and side.value in ("shared", "tools", "qemu-icount"):
                            found.append(f"{rel}:{node.lineno}: path part {side.value!r}")
    return found


def test_installed_package_names_no_path_outside_itself(wheel_venv):
    """The installed package's code and messages name no file outside it: no plugin looked
    up beside the checkout, no script of the checkout (tools/...) to run."""
    _, pkg = wheel_venv
    assert (pkg / "data" / "qemu_icount.c").is_file() and (pkg / "_src" / "csrc" / "Makefile").is_file()
    found = package_paths_leaving(pkg)
    assert not found, "paths that leave the installed package:\n" + "\n".join(found)


def test_path_scan_catches_what_it_is_for(tmp_path):
    """The scan above flags a plugin looked up beside the checkout and a message sending a
    user to a checkout script, and passes paths that stay inside the package."""
    pkg = tmp_path / "edgert"
    (pkg / "data").mkdir(parents=True)
    (pkg / "_src" / "csrc" / "tools").mkdir(parents=True)
    (pkg / "_src" / "csrc" / "tools" / "run.c").write_text("int main(void) { return 0; }\n")
    (pkg / "_src" / "csrc" / "Makefile").write_text("# tools/gen.py writes this\nSRCS := tools/run.c\n")
    (pkg / "a.py").write_text('"""Made by tools/gen.py."""\n'
                              'import pathlib\n'
                              'HERE = pathlib.Path(__file__).parent\n'
                              'd = HERE.parent / "shared" / "tools" / "qemu-icount"\n'
                              'def f(t):\n'
                              '    raise RuntimeError(f"{t} missing; see tools/install_system_deps.sh")\n')
    (pkg / "data" / "p.c").write_text('/* see ../shared for the old one */\nconst char *s = "tools/x.sh";\n')
    found = package_paths_leaving(pkg)
    text = "\n".join(found)
    assert "a.py:4: path part 'shared'" in text and "a.py:6: 'tools/install_system_deps.sh'" in text
    assert "data/p.c:1:" in text and "data/p.c:2: 'tools/x.sh'" in text
    assert "Makefile" not in text and "a.py:1:" not in text, text
