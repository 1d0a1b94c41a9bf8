"""cffi ABI-mode loading of a prebuilt libedgert.so (boards without a compiler).

The declarations come from edgert.h: the copy installed in the package
(edgert/include/edgert.h in board wheels, edgert/_src/csrc/include/edgert.h in host
wheels) or the source tree's csrc/include/edgert.h.
"""
from __future__ import annotations

import os
import re

HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the package folder


def _header() -> str:
    for p in (os.path.join(HERE, "include", "edgert.h"),
              os.path.join(HERE, "_src", "csrc", "include", "edgert.h"),
              os.path.join(os.path.dirname(HERE), "csrc", "include", "edgert.h")):
        if os.path.exists(p):
            return open(p, encoding="utf-8").read()
    raise ImportError("edgert.h not found: cannot declare the C API")


def cdef_from_header(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#") or s == 'extern "C" {' or s == "}":
            continue
        keep.append(line)
    return "\n".join(keep)


def find_library() -> str | None:
    p = os.path.join(HERE, "lib", "libedgert.so")
    return p if os.path.exists(p) else None


def load_abi(path: str):
    from cffi import FFI

    ffi = FFI()
    ffi.cdef(cdef_from_header(_header()))
    return ffi, ffi.dlopen(path)
