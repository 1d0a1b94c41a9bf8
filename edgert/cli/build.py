"""`edgert build --target T -o DIR`: the C runtime for one board, and its Python wheel.

    DIR/lib/libedgert.so      stripped, exports only edgert_* (cross/edgert.map)
    DIR/lib/libedgert.a       one prelinked object (see csrc/Makefile)
    DIR/include/edgert.h
    DIR/bin/edgert-run        statically linked against libedgert.a (and -ldl: it loads
                              libLiteRt.so for litert partitions), stripped
    DIR/wheel/edgert-<version>-cp311-none-<platform>.whl

The sources are the ones shipped in the installed package (edgert/cli/sources.py). The
objects are built by csrc/Makefile in a build directory kept between runs: build/target-<name>/
in a checkout, ~/.cache/edgert/build/<version>/target-<name>/ for an installed package
($EDGERT_BUILD_CACHE overrides the root); a change of flags or sources starts it afresh.

The board wheel (tag py3-none-<platform>: the library is loaded in cffi ABI mode, so it
does not depend on the Python version) holds the pure-Python package without the host
extension and build tooling, plus the cross-built libedgert.so and edgert.h. Installing it
needs numpy, cffi and click on the board, no compiler; `pip install` checks the platform
tag (linux_armv6l, manylinux_2_X_armv7l, manylinux_2_X_aarch64).
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sysconfig
import zipfile

from .._version import __version__
from . import sources
from ..errors import EdgertError
from .targets import Target, load

PACKAGE = pathlib.Path(__file__).resolve().parent.parent  # the package folder

# -O2 for the hot kernels (the NEON ones replace what -O3 would vectorize), everything
# else -Os (OPT_COLD); with link-time optimization, section GC and an export list the
# stripped aarch64 library stays under 200 KB. libedgert.a is prelinked to machine code
# (PRELINK_FLAGS), so using it needs no LTO-capable compiler.
BASE_CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-pthread",
               "-ffunction-sections", "-fdata-sections", "-fno-asynchronous-unwind-tables",
               "-fno-unwind-tables", "-flto=auto", "-fno-math-errno", "-fno-trapping-math",
               "-fno-semantic-interposition", "-fmerge-all-constants"]
PRELINK_FLAGS = "-flinker-output=nolto-rel"
# (-fno-inline-small-functions: the cold code keeps its small functions out of line,
# ~180 bytes less on aarch64 and no change in the benchmark models' instruction counts)
OPT_COLD = "-Os -fno-inline-small-functions"
# The hot kernels without code alignment padding (functions, branch targets, loops):
# up to 1.4 KB less, and no more instructions executed (the padding is nops).
OPT_HOT = "-falign-functions=1 -falign-jumps=1 -falign-labels=1 -falign-loops=1"
# Pages up to 16 KB (Raspberry Pi 5 kernels use 16 KB pages). No RELRO segment: its page
# alignment costs ~6 KB of the 200 KB budget (the tables it would protect are the op and
# kernel tables, read-only after load; a deliberate size-over-hardening trade, docs/arm.md).
# common-page-size=64: the data segment follows the code in the file without padding to a
# page (it still sits at the same offset modulo 16 KB in memory), which saves up to 4 KB.
BASE_LDFLAGS = ["-Wl,--gc-sections", "-Wl,-z,max-page-size=16384", "-Wl,-z,common-page-size=64", "-Wl,-z,norelro",
                "-Wl,--hash-style=gnu", "-Wl,--build-id=none"]

# Files of the installed package that the board wheel leaves out: the host extension and
# the build tooling (a board runs, inspects and benchmarks; it does not cross-build).
WHEEL_EXCLUDE = {"_ffi_build.py", "build.py", "sources.py"}


def make_flags(target: Target) -> dict[str, str]:
    """The csrc/Makefile variables for this target."""
    # The build is named in the library (edgert_build_info); single quotes keep the
    # double quotes through the shell that make runs the compiler with.
    info = f"{target.name} {target.arch} {' '.join(target.cflags)}".strip()
    cflags = BASE_CFLAGS + list(target.cflags) + [f"'-DEDGERT_BUILD_INFO=\"{info}\"'"]
    if target.arch == "native":
        # Debian's GCC 12 crashes in its LTO partitioner on the x86-64 prelink (internal
        # compiler error in add_symbol_to_partition_1); one partition avoids it.
        cflags.append("-flto-partition=one")
    so_cflags = ""
    ldlibs = ["-lm", "-pthread"] + BASE_LDFLAGS + [f"-Wl,--version-script={sources.linker_map()}"]
    if target.arch == "aarch64":
        # Debian's aarch64 GCC links every CPU with the workaround for Cortex-A53 erratum
        # 843419, whose veneers may go into a 4 KB-aligned stub section (up to 4 KB of
        # padding); rewriting the ADRP into ADR fixes the same sequences in place, and a
        # library this small is always in ADR range.
        ldlibs.append("-Wl,--fix-cortex-a53-843419=adr")
        # One link-time optimization partition: ~1.7 KB less than several (no padding
        # between partitions' code, inlining and identical-code folding across all of it).
        cflags.append("-flto-partition=one")
        # Atomics inline (LSE when -mcpu has it, as on rpi5; else load/store-exclusive
        # loops, which every aarch64 CPU runs), not through libgcc's run-time choice.
        cflags.append("-mno-outline-atomics")
        # The tiny code model reaches every symbol of the library with one ADR (+-1 MB)
        # instead of ADRP+ADD: ~5 KB less code. For the shared library only: libedgert.a
        # keeps the small model, since it may be linked into programs larger than 1 MB.
        # -nostartfiles: the library needs none of the C start files' code (.init/.fini,
        # C++ transactional-memory and destructor registration; its constructor runs from
        # .init_array, which the dynamic loader calls itself): ~1.2 KB and 4 imports less.
        so_cflags = "-mcmodel=tiny -nostartfiles"
    return {
        "CC": target.tool("gcc"),
        "AR": target.tool("ar"),
        "CFLAGS": " ".join(cflags),
        "LDLIBS": " ".join(ldlibs),
        "NEON": "1" if target.neon else "0",
        # The AVX2 kernels on an x86-64 host only; never in the boards' libraries.
        "X86": "1" if target.arch == "native" and platform.machine().lower() in ("x86_64", "amd64") else "0",
        "OPT_COLD": OPT_COLD,
        "OPT_HOT": OPT_HOT,
        "PRELINK_FLAGS": PRELINK_FLAGS,
        "SO_CFLAGS": so_cflags,
    }


def build_dir(target: Target) -> pathlib.Path:
    if sources.is_checkout():
        return sources.CHECKOUT / "build" / f"target-{target.name}"
    env = os.environ.get("EDGERT_BUILD_CACHE")
    base = pathlib.Path(env).expanduser() if env else pathlib.Path.home() / ".cache" / "edgert" / "build"
    return base / __version__ / f"target-{target.name}"


def compile_target(target: Target, goals: tuple[str, ...] = ("lib", "edgert-run"),
                   jobs: int | None = None, quiet: bool = True) -> pathlib.Path:
    """Runs csrc/Makefile for the target; returns its build directory."""
    if not target.available():
        raise EdgertError(f"target {target.name}: {target.tool('gcc')} (or {target.qemu}) not installed; "
                          f"{target.install_hint()}")
    out = build_dir(target)
    flags = make_flags(target)
    stamp = out / "flags.json"
    # An installed package's objects also depend on which sources built them (a reinstall
    # may bring other sources with older times); a checkout relies on make's timestamps.
    key = dict(flags, sources=str(sources.root()))
    if not sources.is_checkout():
        key["digest"] = sources.digest()
    wanted = json.dumps(key, sort_keys=True)
    if stamp.exists() and stamp.read_text() != wanted:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    stamp.write_text(wanted)
    cmd = ["make", "-C", str(sources.csrc()), f"-j{jobs or os.cpu_count() or 1}", f"BUILD={out}"]
    cmd += [f"{k}={v}" for k, v in flags.items()] + list(goals)
    r = subprocess.run(cmd, capture_output=quiet, text=True)
    if r.returncode != 0:
        raise EdgertError(f"build for {target.name} failed:\n{(r.stdout or '')[-4000:]}{(r.stderr or '')[-4000:]}")
    return out


def glibc_version(target: Target, lib: pathlib.Path) -> str:
    """Highest GLIBC_x.y symbol version the library needs, as "x_y"."""
    text = subprocess.run([target.tool("objdump"), "-T", str(lib)], capture_output=True, text=True,
                          check=True).stdout
    found = [tuple(int(p) for p in v.split(".")) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", text)]
    best = max(found, default=(2, 17))
    return f"{best[0]}_{best[1]}"


def wheel_platform(target: Target, lib: pathlib.Path) -> str:
    plat = target.wheel_platform
    if plat == "native":
        return sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return plat.replace("{glibc}", glibc_version(target, lib))


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def board_modules() -> list[pathlib.Path]:
    """The package's Python files that go into a board wheel, relative to the package."""
    return sorted(p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py")
                  if p.name not in WHEEL_EXCLUDE and "__pycache__" not in p.parts and "_src" not in p.parts)


def extras_metadata() -> str:
    """The METADATA lines of the package's extras (all but `test`), copied from the
    installed edgert distribution so that a board wheel offers what pyproject.toml
    declares, environment markers included (`edgert[litert]` on aarch64, `edgert[tflite]`
    on armv7l). Without distribution metadata: the `convert` extra alone."""
    import importlib.metadata as im

    try:
        md = im.metadata("edgert")
    except im.PackageNotFoundError:
        md = None
    extras = [e for e in (md.get_all("Provides-Extra") or []) if e != "test"] if md is not None else []
    if not extras:
        return 'Provides-Extra: convert\nRequires-Dist: onnx>=1.14; extra == "convert"\n'
    lines = [f"Provides-Extra: {e}" for e in extras]
    # requires(), not the Requires-Dist headers: an egg-info (a development checkout's
    # metadata) keeps them in requires.txt
    for req in im.requires("edgert") or []:
        if any(re.search(rf"extra\s*==\s*['\"]{re.escape(e)}['\"]", req) for e in extras):
            lines.append(f"Requires-Dist: {req}")
    return "\n".join(lines) + "\n"


def write_wheel(target: Target, lib: pathlib.Path, header: pathlib.Path, out_dir: pathlib.Path) -> pathlib.Path:
    """The board wheel: the pure-Python package + libedgert.so + edgert.h."""
    plat = wheel_platform(target, lib)
    tag = f"py3-none-{plat}"
    dist = f"edgert-{__version__}.dist-info"
    files: list[tuple[str, bytes, int]] = []
    for rel in board_modules():
        files.append((f"edgert/{rel.as_posix()}", (PACKAGE / rel).read_bytes(), 0o644))
    files.append(("edgert/lib/libedgert.so", lib.read_bytes(), 0o755))
    files.append(("edgert/include/edgert.h", header.read_bytes(), 0o644))
    metadata = (f"Metadata-Version: 2.1\nName: edgert\nVersion: {__version__}\n"
                f"Summary: edgert runtime for {target.description}\nRequires-Python: >=3.9\n"
                "Requires-Dist: numpy\nRequires-Dist: cffi>=1.15\nRequires-Dist: click>=8\n"
                + extras_metadata()).encode()
    entry_points = b"[console_scripts]\nedgert = edgert.cli.main:main\n"
    wheel = f"Wheel-Version: 1.0\nGenerator: edgert.cli.build\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    files.append((f"{dist}/METADATA", metadata, 0o644))
    files.append((f"{dist}/WHEEL", wheel, 0o644))
    files.append((f"{dist}/entry_points.txt", entry_points, 0o644))
    record = [_record_line(n, d) for n, d, _ in files] + [f"{dist}/RECORD,,"]
    files.append((f"{dist}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("edgert-*.whl"):
        old.unlink()
    path = out_dir / f"edgert-{__version__}-{tag}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    path.write_bytes(buf.getvalue())
    return path


def build(target_name: str, out: str | os.PathLike, wheel: bool = True, jobs: int | None = None) -> dict:
    """Builds everything for the target into `out`; returns the paths and the stripped
    library size."""
    target = load(target_name)
    bdir = compile_target(target, jobs=jobs)
    out = pathlib.Path(out)
    for sub in ("lib", "include", "bin"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    strip = target.tool("strip")
    so, ar, run = out / "lib" / "libedgert.so", out / "lib" / "libedgert.a", out / "bin" / "edgert-run"
    # --strip-unneeded and the compiler's version note (.comment), as distributions strip
    # their shared libraries
    subprocess.run([strip, "--strip-unneeded", "--remove-section=.comment", "-o", str(so),
                    str(bdir / "libedgert.so")], check=True)
    shutil.copyfile(bdir / "libedgert.a", ar)
    subprocess.run([strip, "-o", str(run), str(bdir / "bin" / "edgert-run")], check=True)
    header = out / "include" / "edgert.h"
    shutil.copyfile(sources.csrc() / "include" / "edgert.h", header)
    result = {"target": target.name, "lib": str(so), "static": str(ar), "header": str(header),
              "edgert_run": str(run), "lib_bytes": so.stat().st_size}
    if wheel:
        result["wheel"] = str(write_wheel(target, so, header, out / "wheel"))
    return result
