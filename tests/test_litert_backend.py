"""edgert-run's LiteRT backend (csrc/tools/litert_backend.c) with the real libLiteRt.so of
the ai-edge-litert wheel, and a real TFLite external delegate built here
(csrc/tests/litert_test_delegate.c: claims float32 ADD nodes and counts them).

- litert_run (csrc/tests/litert_run.c: one .tflite through the backend, as a partition
  node runs it) on the host with the x86-64 libLiteRt.so, against numpy; with the
  delegate (its counters prove it claimed and ran the ADDs); bad libraries, a file that
  is not a delegate, delegate options the delegate rejects, a failing delegate, a
  payload that does not match the boundary: each a clear message, never a crash.
- The same delegate through ai_edge_litert.interpreter.load_delegate (the path a user's
  Edge TPU delegate takes in Python).
- Under qemu-aarch64 -cpu cortex-a72: the rpi4 cross build of litert_run with the aarch64
  wheel's libLiteRt.so and the aarch64 delegate, in the emulated Debian arm64 root of
  tools/arm_python.sh (LiteRT needs its glibc and libstdc++; the root's planted ARM
  /proc/cpuinfo keeps LiteRT's CPU detection off the host's x86 one).
- edgert-run --fallback-lib on an .edgert file with a litert partition node between
  edgert nodes (host and qemu-aarch64), with --delegate, and without a backend.

The .tflite files are built here with ai-edge-litert's flatbuffer schema module
(tools/tflite_tiny.py). The aarch64 wheel comes from the board wheel cache of
tools/fetch_backend_wheels.py (~/.cache/edgert/wheels/aarch64), downloaded when missing.
"""
from __future__ import annotations

import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import zipfile

import numpy as np
import pytest

import ai_edge_litert
from ai_edge_litert.interpreter import Interpreter, load_delegate

from tools import tflite_tiny

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
HOST_BIN = ROOT / "build" / "host" / "bin"
LITERT_VERSION = ai_edge_litert.__version__
HOST_LIB = pathlib.Path(ai_edge_litert.__file__).parent / "libLiteRt.so"
CACHE = pathlib.Path.home() / ".cache" / "edgert"
ARM64_ROOT = pathlib.Path(os.environ.get("EDGERT_ARM64_ROOTFS", CACHE / "arm64-rootfs"))
SHAPE = (1, 3, 4, 5)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "EDGERT_LITERT_COPY")}
    return {**env, **extra}  # tools/sanitize.sh preloads ASan


@pytest.fixture(scope="module")
def host_bins() -> pathlib.Path:
    subprocess.run(["make", "-s", "-C", str(CSRC), "litert-run", "edgert-run"], check=True, env=_env())
    return HOST_BIN


def build_delegate(out: pathlib.Path, cc: str = "cc") -> pathlib.Path:
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    str(CSRC / "tests" / "litert_test_delegate.c"), "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def host_delegate(tmp_path_factory) -> pathlib.Path:
    return build_delegate(tmp_path_factory.mktemp("delegate") / "libedgert_test_delegate.so")


def add_case(tmp: pathlib.Path, n_adds: int = 2, seed: int = 0):
    """model.tflite (y = a + n*b), a.npy, b.npy, y.npy (zeros: the output template), want."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(SHAPE).astype(np.float32)
    b = rng.standard_normal(SHAPE).astype(np.float32)
    want = a.copy()
    for _ in range(n_adds):
        want = want + b
    (tmp / "model.tflite").write_bytes(tflite_tiny.add_chain(SHAPE, n_adds))
    np.save(tmp / "a.npy", a)
    np.save(tmp / "b.npy", b)
    np.save(tmp / "y.npy", np.zeros(SHAPE, np.float32))
    return want


def litert_run_args(tmp: pathlib.Path, lib, delegate=None, options=(), repeat: int = 1) -> list[str]:
    args = ["--lib", str(lib)]
    if delegate is not None:
        args += ["--delegate", str(delegate)]
    for kv in options:
        args += ["--delegate-option", kv]
    return args + [str(tmp / "model.tflite"), "--input", str(tmp / "a.npy"), "--input", str(tmp / "b.npy"),
                   "--output", str(tmp / "y.npy"), "--repeat", str(repeat)]


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env or _env(), timeout=600)


def mean_us(stderr: str) -> float:
    m = re.search(r"mean ([0-9.]+) us", stderr)
    assert m, stderr[-2000:]
    return float(m.group(1))


# ---- host ------------------------------------------------------------------------------

def test_tflite_builder_matches_numpy(tmp_path):
    """The test's own .tflite files, checked with LiteRT's Python interpreter first."""
    want = add_case(tmp_path, 3)
    it = Interpreter(model_content=(tmp_path / "model.tflite").read_bytes())
    got = it.get_signature_runner()(a=np.load(tmp_path / "a.npy"), b=np.load(tmp_path / "b.npy"))["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n_adds", [1, 3])
def test_host_litert_run(tmp_path, host_bins, n_adds):
    want = add_case(tmp_path, n_adds)
    r = run([host_bins / "litert_run", *litert_run_args(tmp_path, HOST_LIB, repeat=3)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-6, atol=1e-6)
    assert "XNNPACK" in r.stderr  # LiteRT's CPU path ran the partition


def test_host_litert_run_int8(tmp_path, host_bins):
    """int8 boundaries (scale 0.05, zero point 0): bytes in and out, the same as LiteRT's
    own interpreter on the same file."""
    rng = np.random.default_rng(7)
    a = rng.integers(-60, 60, SHAPE, dtype=np.int8)
    b = rng.integers(-60, 60, SHAPE, dtype=np.int8)
    model = tflite_tiny.chain(SHAPE, ["add", "add"], int8_scale=0.05)
    (tmp_path / "model.tflite").write_bytes(model)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "y.npy", np.zeros(SHAPE, np.int8))
    r = run([host_bins / "litert_run", *litert_run_args(tmp_path, HOST_LIB)])
    assert r.returncode == 0, r.stderr[-3000:]
    want = Interpreter(model_content=model).get_signature_runner()(a=a, b=b)["y"]
    got = np.load(tmp_path / "y.npy")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.clip(a.astype(int) + 2 * b, -128, 127))


def read_counts(path: pathlib.Path) -> tuple[int, int]:
    m = re.fullmatch(r"claimed (\d+) ran (\d+)\n", path.read_text())
    assert m, path.read_text()
    return int(m.group(1)), int(m.group(2))


def test_host_delegate(tmp_path, host_bins, host_delegate):
    want = add_case(tmp_path, 2)
    counter = tmp_path / "counts.txt"
    r = run([host_bins / "litert_run", *litert_run_args(tmp_path, HOST_LIB, host_delegate,
                                                         [f"counter_file={counter}"], repeat=4)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-6, atol=1e-6)
    # both ADDs claimed; 1 warm-up + 4 timed runs of 2 ADDs each
    assert read_counts(counter) == (2, 10)


def test_host_delegate_leaves_the_rest_to_the_cpu(tmp_path, host_bins, host_delegate):
    """y = ((a + b) * b) + b: the delegate takes the two ADDs, LiteRT's CPU path (XNNPACK,
    registered after the delegate) the MUL between them."""
    add_case(tmp_path, 1)
    a, b = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
    (tmp_path / "model.tflite").write_bytes(tflite_tiny.chain(SHAPE, ["add", "mul", "add"]))
    counter = tmp_path / "counts.txt"
    r = run([host_bins / "litert_run", *litert_run_args(tmp_path, HOST_LIB, host_delegate,
                                                         [f"counter_file={counter}"], repeat=2)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), (a + b) * b + b, rtol=1e-6, atol=1e-6)
    assert read_counts(counter) == (2, 6)
    assert "edgert-external-delegate" in r.stderr and "XNNPACK" in r.stderr, r.stderr[-3000:]
    assert r.stderr.index("name=edgert-external-delegate") < r.stderr.index("name=CpuAccelerator")


def test_python_load_delegate(tmp_path, host_delegate):
    """The same .so through ai_edge_litert's load_delegate, as a user's Edge TPU delegate."""
    want = add_case(tmp_path, 2, seed=1)
    counts = ctypes.CDLL(str(host_delegate))
    claimed0, ran0 = counts.edgert_test_delegate_claimed(), counts.edgert_test_delegate_ran()
    d = load_delegate(str(host_delegate), {"counter_file": str(tmp_path / "c.txt")})
    it = Interpreter(model_content=(tmp_path / "model.tflite").read_bytes(), experimental_delegates=[d])
    got = it.get_signature_runner()(a=np.load(tmp_path / "a.npy"), b=np.load(tmp_path / "b.npy"))["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert counts.edgert_test_delegate_claimed() - claimed0 == 2
    assert counts.edgert_test_delegate_ran() - ran0 == 2
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        load_delegate(str(host_delegate), {"bogus": "1"})


def test_python_session_with_the_delegate(tmp_path, host_delegate):
    """edgert.Session(delegate=PATH) hands the same .so to LiteRT for the partition."""
    import edgert
    want = partition_case(tmp_path, 2, seed=2)
    counts = ctypes.CDLL(str(host_delegate))
    claimed0, ran0 = counts.edgert_test_delegate_claimed(), counts.edgert_test_delegate_ran()
    sess = edgert.Session(str(tmp_path / "model.edgert"), delegate=str(host_delegate))
    (part,) = sess.partitions()
    assert part["delegate_loaded"] and part["backend"] == "litert", part
    for _ in range(3):
        (got,) = sess.run(None, {"a": np.load(tmp_path / "a.npy"), "b": np.load(tmp_path / "b.npy")})
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert counts.edgert_test_delegate_claimed() - claimed0 >= 2  # each context's interpreter claims both
    assert counts.edgert_test_delegate_ran() - ran0 == 6


def test_errors(tmp_path, host_bins, host_delegate):
    add_case(tmp_path, 1)
    exe = host_bins / "litert_run"

    def fails(args, pattern):
        r = run([exe, *args])
        assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
        assert re.search(pattern, r.stderr), r.stderr[-2000:]

    fails(litert_run_args(tmp_path, tmp_path / "nope" / "libLiteRt.so"),
          r"cannot load the LiteRT library '.*nope/libLiteRt.so': .*No such file")
    not_elf = tmp_path / "libLiteRt.so"
    not_elf.write_bytes(b"not a shared library")
    fails(litert_run_args(tmp_path, not_elf), r"cannot load the LiteRT library .*libLiteRt.so'")
    # a real shared library without the LiteRT C API
    fails(litert_run_args(tmp_path, host_delegate), r"is not a usable LiteRT library: it does not export "
                                                    r"LiteRtCreateEnvironment")
    fails(litert_run_args(tmp_path, HOST_LIB, tmp_path / "missing_delegate.so"),
          r"cannot load delegate '.*missing_delegate.so'")
    fails(litert_run_args(tmp_path, HOST_LIB, HOST_LIB),
          r"is not a TFLite external delegate: it does not export tflite_plugin_create_delegate")
    fails(litert_run_args(tmp_path, HOST_LIB, host_delegate, ["bogus=1"]),
          r"delegate '.*' could not be created: edgert test delegate: unknown option 'bogus'")
    fails(litert_run_args(tmp_path, HOST_LIB, host_delegate, ["fail_prepare=1"]),
          r"LiteRT cannot compile the .tflite payload with delegate .*status 3")
    # a payload that is not a .tflite, and boundaries that do not match the payload
    (tmp_path / "model.tflite").write_bytes(b"\0" * 64)
    fails(litert_run_args(tmp_path, HOST_LIB), r"LiteRT cannot read the .tflite payload \(64 bytes\)")
    add_case(tmp_path, 1)
    np.save(tmp_path / "y.npy", np.zeros((1, 3, 4, 6), np.float32))
    fails(litert_run_args(tmp_path, HOST_LIB), r"output 0 of the .tflite payload holds 240 bytes, "
                                               r"the partition's boundary tensor 288")


# ---- edgert-run on .edgert files with a litert partition -----------------------------------

def partition_case(tmp: pathlib.Path, n_adds: int = 2, seed: int = 0):
    """model.edgert: y = sigmoid(partition_0(-a, b)), partition_0 = n_adds LiteRT ADDs."""
    want = add_case(tmp, n_adds, seed)  # a.npy, b.npy; want = a + n*b
    a = np.load(tmp / "a.npy")
    u = want - 2 * a  # -a + n*b
    (tmp / "model.edgert").write_bytes(tflite_tiny.partition_model(SHAPE, n_adds))
    (tmp / "out").mkdir(exist_ok=True)
    return (1.0 / (1.0 + np.exp(-u.astype(np.float64)))).astype(np.float32)


def edgert_run_args(tmp: pathlib.Path, lib=None, delegate=None, options=(), repeat: int = 1) -> list[str]:
    args = [str(tmp / "model.edgert"), "--input", f"a={tmp / 'a.npy'}", "--input", f"b={tmp / 'b.npy'}",
            "--output-dir", str(tmp / "out"), "--repeat", str(repeat)]
    if lib is not None:
        args += ["--fallback-lib", str(lib)]
    if delegate is not None:
        args += ["--delegate", str(delegate)]
    for kv in options:
        args += ["--delegate-option", kv]
    return args


@pytest.mark.parametrize("copy", ["0", "1"])
def test_host_edgert_run_partition(tmp_path, host_bins, host_delegate, copy):
    """LiteRT reads and writes the arena's boundary tensors in place (64-byte aligned), or
    copies them through its own buffers with EDGERT_LITERT_COPY=1: same results."""
    want = partition_case(tmp_path, 2)
    env = _env(EDGERT_LITERT_COPY=copy)
    r = run([host_bins / "edgert-run", *edgert_run_args(tmp_path, HOST_LIB, repeat=3)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), want, rtol=1e-6, atol=1e-6)
    # with the delegate: it claims both ADDs of the partition and runs them every run
    (tmp_path / "out" / "y.npy").unlink()
    counter = tmp_path / "counts.txt"
    r = run([host_bins / "edgert-run", *edgert_run_args(tmp_path, HOST_LIB, host_delegate,
                                                        [f"counter_file={counter}"], repeat=3)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), want, rtol=1e-6, atol=1e-6)
    assert read_counts(counter) == (2, 6)


def test_host_edgert_run_two_partitions_numbered_out_of_order(tmp_path, host_bins):
    """partition_1 runs before partition_0, on tensors of other sizes: each gets its own
    boundaries (the runtime's partition positions are in execution order)."""
    from edgert.converter.pipeline import serialize
    from edgert.converter.ir import Graph
    s2 = (2, 7)
    g = Graph()
    for name, shape in (("a", SHAPE), ("b", SHAPE), ("u", SHAPE), ("c", s2), ("d", s2), ("v", s2)):
        g.add_tensor(name, shape, np.float32)
    g.inputs, g.outputs = ["a", "b", "c", "d"], ["u", "v"]
    meta = []
    for k, (x, y, out, shape, n) in enumerate([("a", "b", "u", SHAPE, 1), ("c", "d", "v", s2, 3)]):
        index = 1 - k
        payload = tflite_tiny.add_chain(shape, n)
        pl = g.add_const(np.frombuffer(payload, np.uint8).copy(), f"partition_{index}_payload")
        attrs = {"backend": "litert", "index": index, "delegate": None, "nodes": [f"add_{k}"], "ops": ["Add"]}
        g.add_node("partition", [x, y, pl], [out], attrs, name=f"partition_{index}")
        meta.append({"index": index, "backend": "litert", "delegate": None, "node": f"partition_{index}",
                     "nodes": [f"add_{k}"], "ops": ["Add"], "inputs": [x, y], "outputs": [out],
                     "bytes": len(payload)})
    (tmp_path / "model.edgert").write_bytes(serialize(g, {"partitions": meta}))
    rng = np.random.default_rng(5)
    vals = {k: rng.standard_normal(SHAPE if k in "ab" else s2).astype(np.float32) for k in "abcd"}
    args = []
    for k, v in vals.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / (k + '.npy')}"]
    r = run([host_bins / "edgert-run", tmp_path / "model.edgert", *args, "--output-dir", tmp_path,
             "--fallback-lib", HOST_LIB])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "u.npy"), vals["a"] + vals["b"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), vals["c"] + 3 * vals["d"], rtol=1e-6, atol=1e-6)


def test_host_edgert_run_partition_errors(tmp_path, host_bins, host_delegate):
    partition_case(tmp_path, 1)
    exe = host_bins / "edgert-run"
    r = run([exe, *edgert_run_args(tmp_path)])
    assert r.returncode == 1
    assert "partition_0" in r.stderr and "litert" in r.stderr and "--fallback-lib" in r.stderr, r.stderr
    r = run([exe, *edgert_run_args(tmp_path, tmp_path / "libLiteRt.so")])
    assert r.returncode == 1 and "LiteRT backend: cannot load the LiteRT library" in r.stderr, r.stderr
    r = run([exe, *edgert_run_args(tmp_path, None, host_delegate)])
    assert r.returncode == 1 and "needs --fallback-lib" in r.stderr, r.stderr
    r = run([exe, *edgert_run_args(tmp_path, HOST_LIB, host_delegate, ["novalue"])])
    assert r.returncode == 2 and "--delegate-option needs KEY=VALUE" in r.stderr, r.stderr
    # a delegate whose Prepare fails: session creation fails naming the partition
    r = run([exe, *edgert_run_args(tmp_path, HOST_LIB, host_delegate, ["fail_prepare=1"])])
    assert r.returncode == 1 and "partition_0" in r.stderr and "cannot compile" in r.stderr, r.stderr


# ---- aarch64 under QEMU ------------------------------------------------------------------

def aarch64_litert_lib(tmp: pathlib.Path) -> pathlib.Path:
    """libLiteRt.so of the aarch64 wheel of the host's ai-edge-litert version."""
    wheel = tflite_tiny.aarch64_wheel(LITERT_VERSION)
    out = tmp / "aarch64"
    with zipfile.ZipFile(wheel) as z:
        z.extract("ai_edge_litert/libLiteRt.so", out)
    return out / "ai_edge_litert" / "libLiteRt.so"


@pytest.fixture(scope="module")
def arm64(tmp_path_factory):
    """(qemu prefix, rpi4 build dir, aarch64 libLiteRt.so, aarch64 delegate)."""
    from edgert.cli import build as ebuild
    from edgert.cli import targets
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if shutil.which(t) is None]
    if missing:
        if os.environ.get("EDGERT_REQUIRE_ARM"):
            raise RuntimeError(f"ARM suite required but missing: {missing}")
        pytest.skip(f"cross tools missing: {missing} (tools/install_system_deps.sh)")
    if not (ARM64_ROOT / ".complete").exists():
        subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), str(ARM64_ROOT)], check=True)
    assert "aarch64" in (ARM64_ROOT / "proc" / "cpuinfo").read_text() or \
        "CPU implementer" in (ARM64_ROOT / "proc" / "cpuinfo").read_text()
    t = targets.load("rpi4")
    bdir = ebuild.compile_target(t, goals=("lib", "edgert-run", "litert-run"))
    tmp = tmp_path_factory.mktemp("arm64")
    lib = aarch64_litert_lib(tmp)
    delegate = build_delegate(tmp / "libedgert_test_delegate.so", cc=t.tool("gcc"))
    prefix = [t.qemu, "-cpu", "cortex-a72", "-L", str(ARM64_ROOT)]
    return prefix, bdir, lib, delegate


def test_arm64_litert_run(tmp_path, arm64):
    prefix, bdir, lib, delegate = arm64
    want = add_case(tmp_path, 2, seed=3)
    r = run(prefix + [bdir / "bin" / "litert_run", *litert_run_args(tmp_path, lib)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-6, atol=1e-6)
    # the delegate, cross-built, claims and runs both ADDs on the emulated board
    np.save(tmp_path / "y.npy", np.zeros(SHAPE, np.float32))
    counter = tmp_path / "counts.txt"
    r = run(prefix + [bdir / "bin" / "litert_run",
                      *litert_run_args(tmp_path, lib, delegate, [f"counter_file={counter}"], repeat=2)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-6, atol=1e-6)
    assert read_counts(counter) == (2, 6)
    # edgert-run (the rpi4 cross build) with a partition between edgert nodes
    want = partition_case(tmp_path, 2, seed=3)
    r = run(prefix + [bdir / "bin" / "edgert-run", *edgert_run_args(tmp_path, lib, delegate,
                                                                      [f"counter_file={counter}"], repeat=2)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), want, rtol=1e-6, atol=1e-6)
    assert read_counts(counter) == (2, 4)
    r = run(prefix + [bdir / "bin" / "edgert-run", *edgert_run_args(tmp_path, lib)])
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), want, rtol=1e-6, atol=1e-6)
    # the host's x86-64 library is refused with the loader's reason, no crash
    r = run(prefix + [bdir / "bin" / "litert_run", *litert_run_args(tmp_path, HOST_LIB)])
    assert r.returncode == 1 and "cannot load the LiteRT library" in r.stderr, r.stderr[-2000:]
