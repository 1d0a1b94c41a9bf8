"""cffi out-of-line API-mode build of the C runtime as edgert._edgert_c.

Used by setuptools through `cffi_modules` in pyproject.toml/setup.py, and by
tools/build_dev.py for quick in-place builds while developing.
"""
from __future__ import annotations

import glob
import os
import platform
import re
import sys

from cffi import FFI

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")
INCLUDE = os.path.join(CSRC, "include")


def cdef_text() -> str:
    """edgert.h without preprocessor lines, extern "C" braces and attributes: what cdef reads."""
    text = open(os.path.join(INCLUDE, "edgert.h"), encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#") or s in ('extern "C" {', "}") and s != "};":
            continue
        lines.append(line)
    return "\n".join(lines)


def x86_kernels() -> bool:
    """Whether this build adds csrc/kernels/x86 (AVX2 + FMA, compiled per function and
    chosen at start-up, so the extension still runs on any x86-64 CPU)."""
    return platform.machine().lower() in ("x86_64", "amd64") and sys.platform != "win32"


def sources() -> list[str]:
    files = sorted(glob.glob(os.path.join(CSRC, "src", "*.c")))
    files += sorted(glob.glob(os.path.join(CSRC, "kernels", "ref", "*.c")))
    if x86_kernels():
        files += sorted(glob.glob(os.path.join(CSRC, "kernels", "x86", "*.c")))
    return [os.path.relpath(f, ROOT) for f in files]


COMPILE_ARGS = ["-std=c11", "-O3", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Wextra", "-D_GNU_SOURCE"]
if sys.platform != "win32":
    COMPILE_ARGS.append("-pthread")
if x86_kernels():
    COMPILE_ARGS.append("-DERT_X86_KERNELS=1")

ffibuilder = FFI()
ffibuilder.cdef(cdef_text())
ffibuilder.set_source(
    "edgert._edgert_c",
    '#include "edgert.h"',
    sources=sources(),
    include_dirs=[os.path.relpath(INCLUDE, ROOT), os.path.relpath(os.path.join(CSRC, "src"), ROOT)],
    extra_compile_args=COMPILE_ARGS,
    libraries=["m", "pthread"],
    # No symbol or debug tables in the installed extension (about a third of the wheel).
    extra_link_args=["-s"] if sys.platform.startswith("linux") else [],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
