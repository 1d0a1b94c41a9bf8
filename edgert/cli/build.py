"""`edgert build --target T -o DIR`: the C runtime for one board, and its Python wheel.

    DIR/lib/libedgert.so      stripped, exports only edgert_* (cross/edgert.map)
    DIR/lib/libedgert.a       one prelinked object (see csrc/Makefile)
    DIR/include/edgert.h
    DIR/bin/edgert-run        statically linked against libedgert.a (and -ldl: it loads
                              libLiteRt.so for litert partitions), stripped
    DIR/lib/pkgconfig/edgert.pc                  pkg-config (`pkg-config --cflags --libs edgert`)
    DIR/lib/cmake/edgert/edgertConfig.cmake      find_package(edgert): imported targets
    DIR/lib/cmake/edgert/edgertConfigVersion.cmake   edgert::edgert (.so), edgert::edgert_static (.a)
    DIR/toolchain.cmake       cross targets: a CMake toolchain file (the board's compiler and
                              CPU flags; finds edgert in DIR)
    DIR/wheel/edgert-<version>-py3-none-<platform>.whl
    DIR/edgert_<version>_<arch>.deb   with --deb (arm64; armhf for rpi2 and rpi0): the library,
                              header, edgert-run, pkg-config and CMake files under /usr

The pkg-config and CMake files name no absolute path: both find the prefix from where they
are (${pcfiledir}/../.., ${CMAKE_CURRENT_LIST_DIR}/../../..), so the same files serve DIR
wherever it is copied and /usr once the .deb is installed.

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


# ---- what C and C++ build systems look for --------------------------------------------------

# Pointer size of each arch (CMake's version file refuses a package of another size).
POINTER_BYTES = {"aarch64": 8, "armv7": 4, "armv6": 4}
# Debian architecture of each arch: Raspberry Pi OS's 32-bit port is armhf for the ARMv6
# boards too (its armhf is built for ARMv6 + VFPv2; Debian's own armhf is ARMv7).
DEB_ARCH = {"aarch64": "arm64", "armv7": "armhf", "armv6": "armhf"}
# What QEMU user mode calls the processor (CMAKE_SYSTEM_PROCESSOR, as `uname -m` on the board).
UNAME_M = {"aarch64": "aarch64", "armv7": "armv7l", "armv6": "armv6l"}


def pointer_bytes(target: Target) -> int:
    if target.arch == "native":
        return 8 if sysconfig.get_config_var("SIZEOF_VOID_P") == 8 else 4
    return POINTER_BYTES[target.arch]


def pkgconfig_text(target: Target) -> str:
    """lib/pkgconfig/edgert.pc. ${pcfiledir} is the directory of the .pc file itself
    (pkg-config and pkgconf both define it), so the prefix moves with the tree."""
    return (f"# pkg-config file of edgert {__version__} for {target.name}, written by `edgert build`.\n"
            "# Paths are relative to this file (PREFIX/lib/pkgconfig), so the tree may be moved.\n"
            "prefix=${pcfiledir}/../..\n"
            "libdir=${prefix}/lib\n"
            "includedir=${prefix}/include\n\n"
            "Name: edgert\n"
            f"Description: edgert runtime for {target.description}\n"
            f"Version: {__version__}\n"
            "Libs: -L${libdir} -ledgert\n"
            "Libs.private: -lm -pthread\n"
            "Cflags: -I${includedir}\n")


def cmake_config_text(target: Target) -> str:
    """lib/cmake/edgert/edgertConfig.cmake: the imported targets."""
    return f"""# CMake package file of edgert {__version__} for {target.name}, written by `edgert build`.
#
#   find_package(edgert REQUIRED)
#   target_link_libraries(app PRIVATE edgert::edgert)          # libedgert.so
#   target_link_libraries(app PRIVATE edgert::edgert_static)   # libedgert.a, nothing to install
#
# The prefix is found from this file's place (PREFIX/lib/cmake/edgert), so the same file
# serves an `edgert build` output directory wherever it is and /usr once the .deb is
# installed.
get_filename_component(_edgert_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
if(NOT EXISTS "${{_edgert_prefix}}/lib/libedgert.so" OR NOT EXISTS "${{_edgert_prefix}}/include/edgert.h")
  set(edgert_FOUND FALSE)
  set(edgert_NOT_FOUND_MESSAGE "libedgert.so or edgert.h missing under ${{_edgert_prefix}}")
  unset(_edgert_prefix)
  return()
endif()
if(NOT TARGET edgert::edgert)
  add_library(edgert::edgert SHARED IMPORTED)
  set_target_properties(edgert::edgert PROPERTIES
    IMPORTED_LOCATION "${{_edgert_prefix}}/lib/libedgert.so"
    IMPORTED_SONAME "libedgert.so"
    INTERFACE_INCLUDE_DIRECTORIES "${{_edgert_prefix}}/include")
endif()
# libedgert.a starts worker threads and uses libm: a program linking it needs both.
find_package(Threads QUIET)
if(NOT TARGET edgert::edgert_static AND Threads_FOUND AND EXISTS "${{_edgert_prefix}}/lib/libedgert.a")
  add_library(edgert::edgert_static STATIC IMPORTED)
  set_target_properties(edgert::edgert_static PROPERTIES
    IMPORTED_LOCATION "${{_edgert_prefix}}/lib/libedgert.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES C
    INTERFACE_INCLUDE_DIRECTORIES "${{_edgert_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;m")
endif()
set(edgert_INCLUDE_DIRS "${{_edgert_prefix}}/include")
set(edgert_LIBRARIES edgert::edgert)
unset(_edgert_prefix)
"""


def cmake_version_text(target: Target) -> str:
    """lib/cmake/edgert/edgertConfigVersion.cmake: compatible with a request for the same
    major version no newer than this one (before 1.0: the same minor version too, since the
    C API may change between 0.x releases), and unsuitable for a build of another pointer
    size (an armhf package seen by an arm64 or x86-64 build)."""
    major, minor = __version__.split(".")[:2]
    return f"""# Version file of edgert's CMake package, written by `edgert build`.
set(PACKAGE_VERSION "{__version__}")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "" AND NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "{major}")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif("{major}" STREQUAL "0" AND NOT PACKAGE_FIND_VERSION_MINOR STREQUAL "" AND NOT PACKAGE_FIND_VERSION_MINOR STREQUAL "{minor}")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
if(NOT "${{CMAKE_SIZEOF_VOID_P}}" STREQUAL "" AND NOT "${{CMAKE_SIZEOF_VOID_P}}" STREQUAL "{pointer_bytes(target)}")
  set(PACKAGE_VERSION "${{PACKAGE_VERSION}} ({pointer_bytes(target) * 8}-bit {target.name})")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
"""


def toolchain_text(target: Target) -> str:
    """DIR/toolchain.cmake of a cross target: Debian's cross compiler with the board's CPU
    flags, the board's libraries and headers from the toolchain's directory and from DIR
    (find_package(edgert) finds DIR/lib/cmake/edgert), programs from the build machine, and
    QEMU user mode as the emulator that ctest and custom commands run the board's programs
    with."""
    flags = " ".join(target.cflags)
    emulator = ";".join(target.qemu_command())
    return f"""# CMake toolchain file for {target.description}, written by `edgert build --target {target.name}`.
#
#   cmake -S examples/c -B build-{target.name} -DCMAKE_TOOLCHAIN_FILE=THIS_FILE && cmake --build build-{target.name}
#
# Compiles with {target.tool("gcc")} (Debian: gcc-{target.triple}) for the board's CPU and
# finds edgert in the directory of this file. Against another edgert tree (the .deb
# installed under a root, say), add -Dedgert_DIR=ROOT/usr/lib/cmake/edgert.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR {UNAME_M[target.arch]})
set(CMAKE_C_COMPILER {target.tool("gcc")})
set(CMAKE_CXX_COMPILER {target.tool("g++")})
set(CMAKE_C_FLAGS_INIT "{flags}")
set(CMAKE_CXX_FLAGS_INIT "{flags}")
if(NOT "${{CMAKE_CURRENT_LIST_DIR}}" IN_LIST CMAKE_FIND_ROOT_PATH)
  list(APPEND CMAKE_FIND_ROOT_PATH "${{CMAKE_CURRENT_LIST_DIR}}" "{target.sysroot}")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR "{emulator}")
"""


def write_dev_files(target: Target, out: pathlib.Path) -> dict[str, str]:
    """The pkg-config and CMake files under out/lib, and out/toolchain.cmake for a cross
    target; returns their paths."""
    pc = out / "lib" / "pkgconfig" / "edgert.pc"
    cmake_dir = out / "lib" / "cmake" / "edgert"
    pc.parent.mkdir(parents=True, exist_ok=True)
    cmake_dir.mkdir(parents=True, exist_ok=True)
    pc.write_text(pkgconfig_text(target))
    (cmake_dir / "edgertConfig.cmake").write_text(cmake_config_text(target))
    (cmake_dir / "edgertConfigVersion.cmake").write_text(cmake_version_text(target))
    paths = {"pkgconfig": str(pc), "cmake": str(cmake_dir / "edgertConfig.cmake")}
    if target.is_cross:
        tc = out / "toolchain.cmake"
        tc.write_text(toolchain_text(target))
        paths["toolchain"] = str(tc)
    return paths


# ---- the Debian package ----------------------------------------------------------------------

def deb_arch(target: Target) -> str:
    if target.arch != "native":
        return DEB_ARCH[target.arch]
    if shutil.which("dpkg"):
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "armv7l": "armhf"}.get(machine, machine)


def deb_version() -> str:
    """The package version as Debian orders it: a pre-release sorts before its release
    with "~" (0.2.0.dev1 -> 0.2.0~dev1)."""
    return re.sub(r"\.?(dev|a|b|rc)(\d*)", r"~\1\2", __version__)


DEB_COPYRIGHT = """edgert: convert ONNX models into compact files and run them with a small C runtime.

Copyright: the edgert developers
License: Apache-2.0
 On Debian systems the full text of the Apache License, Version 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
"""


def write_deb(target: Target, out: pathlib.Path) -> pathlib.Path:
    """out/edgert_<version>_<arch>.deb from the files already in out/ (see build()), made
    with dpkg-deb. The package installs under /usr: lib/libedgert.so and .a, lib/pkgconfig,
    lib/cmake/edgert, include/edgert.h, bin/edgert-run. Depends on the libc6 that the
    library and edgert-run need (their highest GLIBC_ symbol version)."""
    if shutil.which("dpkg-deb") is None:
        raise EdgertError("--deb needs dpkg-deb; on Debian or Ubuntu it comes with dpkg (sudo apt-get install dpkg)")
    arch = deb_arch(target)
    version = deb_version()
    files = {  # path in the package -> (source, mode)
        "usr/lib/libedgert.so": (out / "lib" / "libedgert.so", 0o644),
        "usr/lib/libedgert.a": (out / "lib" / "libedgert.a", 0o644),
        "usr/lib/pkgconfig/edgert.pc": (out / "lib" / "pkgconfig" / "edgert.pc", 0o644),
        "usr/lib/cmake/edgert/edgertConfig.cmake": (out / "lib" / "cmake" / "edgert" / "edgertConfig.cmake", 0o644),
        "usr/lib/cmake/edgert/edgertConfigVersion.cmake":
            (out / "lib" / "cmake" / "edgert" / "edgertConfigVersion.cmake", 0o644),
        "usr/include/edgert.h": (out / "include" / "edgert.h", 0o644),
        "usr/bin/edgert-run": (out / "bin" / "edgert-run", 0o755),
    }
    glibc = max(tuple(int(p) for p in glibc_version(target, out / rel).split("_"))
                for rel in ("lib/libedgert.so", "bin/edgert-run"))
    stage = out / "deb-root"
    if stage.exists():
        shutil.rmtree(stage)
    doc = stage / "usr" / "share" / "doc" / "edgert"
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(DEB_COPYRIGHT)
    for rel, (src, mode) in files.items():
        dst = stage / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        dst.chmod(mode)
    payload = sorted(p for p in stage.rglob("*") if p.is_file())
    installed_kib = sum((p.stat().st_size + 1023) // 1024 for p in payload) + 4 * len({p.parent for p in payload})
    control = stage / "DEBIAN"
    control.mkdir()
    (control / "control").write_text(
        "Package: edgert\n"
        f"Version: {version}\n"
        f"Architecture: {arch}\n"
        "Maintainer: edgert developers <edgert@localhost.invalid>\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: libc6 (>= {glibc[0]}.{glibc[1]})\n"
        "Section: libs\n"
        "Priority: optional\n"
        f"Description: edgert runtime for {target.description}\n"
        " A small C runtime that runs .edgert model files (converted from ONNX by the\n"
        " edgert converter) in a memory budget fixed before deployment. This package\n"
        " holds the shared and static library, edgert.h, the edgert-run program, and\n"
        " the pkg-config and CMake files (find_package(edgert), edgert::edgert).\n")
    md5 = "".join(f"{hashlib.md5(p.read_bytes()).hexdigest()}  {p.relative_to(stage).as_posix()}\n" for p in payload)
    (control / "md5sums").write_text(md5)
    # the dynamic loader's cache learns of the new library (libc-bin's ldconfig trigger)
    (control / "triggers").write_text("activate-noawait ldconfig\n")
    for p in [*stage.rglob("*"), stage]:
        os.utime(p, (1577836800, 1577836800), follow_symlinks=False)  # 2020-01-01: reproducible
        if p.is_dir():
            p.chmod(0o755)
    for p in control.iterdir():
        p.chmod(0o644)
    for old in out.glob("edgert_*.deb"):
        old.unlink()
    deb = out / f"edgert_{version}_{arch}.deb"
    env = dict(os.environ, SOURCE_DATE_EPOCH="1577836800")
    r = subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(stage), str(deb)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise EdgertError(f"dpkg-deb failed:\n{r.stdout}{r.stderr}")
    shutil.rmtree(stage)
    return deb


def build(target_name: str, out: str | os.PathLike, wheel: bool = True, jobs: int | None = None,
          deb: bool = False) -> dict:
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
    result.update(write_dev_files(target, out))
    if wheel:
        result["wheel"] = str(write_wheel(target, so, header, out / "wheel"))
    if deb:
        result["deb"] = str(write_deb(target, out))
    return result
