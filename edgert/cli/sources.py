"""Where the C runtime's sources, the board descriptions and the linker map are.

An installed edgert (wheel or sdist) carries them inside the package, in edgert/_src/
(csrc/, targets/, cross/edgert.map), copied there by setup.py's build step; a checkout
(editable install) uses the top-level folders beside the package. `edgert build` reads
them only through this module. setup.py loads this file on its own (no package import),
so it imports nothing but the standard library at module level.
"""
from __future__ import annotations

import hashlib
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent  # the package folder
SHIPPED = PACKAGE / "_src"
CHECKOUT = PACKAGE.parent

# What the package ships of the source tree, relative to the checkout root. csrc/fuzz
# (libFuzzer harness) is development-only and stays out.
SHIPPED_TREES = ("csrc/include", "csrc/src", "csrc/kernels", "csrc/tools", "csrc/tests", "targets")
SHIPPED_FILES = ("csrc/Makefile", "cross/edgert.map")


def root() -> pathlib.Path:
    """The folder holding csrc/, targets/ and cross/edgert.map."""
    if (SHIPPED / "csrc" / "Makefile").is_file():
        return SHIPPED
    if (CHECKOUT / "csrc" / "Makefile").is_file() and (CHECKOUT / "targets").is_dir():
        return CHECKOUT
    from ..errors import EdgertError

    raise EdgertError(f"the C sources are not installed ({SHIPPED} is missing); reinstall edgert from its "
                      "wheel or sdist")


def is_checkout() -> bool:
    """True when the sources are a development checkout rather than the installed copy."""
    return root() == CHECKOUT


def csrc() -> pathlib.Path:
    return root() / "csrc"


def targets_dir() -> pathlib.Path:
    return root() / "targets"


def linker_map() -> pathlib.Path:
    return root() / "cross" / "edgert.map"


def digest() -> str:
    """SHA-256 over the shipped sources (names and contents): what a cached build was made from."""
    h = hashlib.sha256()
    base = root()
    files = [base / f for f in SHIPPED_FILES]
    for tree in SHIPPED_TREES:
        files += sorted(p for p in (base / tree).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(base)).encode() + b"\0")
            h.update(f.read_bytes())
    return h.hexdigest()
