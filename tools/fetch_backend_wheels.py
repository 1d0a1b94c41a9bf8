#!/usr/bin/env python3
"""Caches the fallback backends' wheels for the boards, for the ARM tests.

The emulated Debian Pythons of tests/test_arm.py install edgert's board wheel with pip
from a local folder (`pip install --no-index --find-links DIR 'edgert[litert]'`), so the
backends' wheels for the guest's platform must be there first:

    CACHE/aarch64/  ai-edge-litert and every dependency, CPython 3.11, manylinux aarch64
    CACHE/armv7l/   tflite-runtime 2.14.0, CPython 3.11, manylinux_2_34 armv7l (its numpy<2
                    comes from the guest's Debian python3-numpy)

CACHE is $EDGERT_WHEEL_CACHE or ~/.cache/edgert/wheels. Nothing is installed on the host.
A folder whose `.complete` marker names the same requirement set is left as it is.

    python tools/fetch_backend_wheels.py [--machines aarch64,armv7l]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys

LITERT = "ai-edge-litert==2.3.0"
TFLITE = "tflite-runtime==2.14.0"

# machine -> (requirements, pip download options)
SETS: dict[str, tuple[list[str], list[str]]] = {
    "aarch64": ([LITERT], ["--platform", "manylinux_2_28_aarch64", "--platform", "manylinux_2_27_aarch64",
                           "--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_17_aarch64"]),
    "armv7l": ([TFLITE], ["--no-deps", "--platform", "manylinux_2_34_armv7l"]),
}


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("EDGERT_WHEEL_CACHE", pathlib.Path.home() / ".cache" / "edgert" / "wheels"))


def wheel_dir(machine: str) -> pathlib.Path:
    """The folder holding `machine`'s backend wheels (filled by fetch())."""
    return cache_dir() / machine


def fetch(machine: str) -> pathlib.Path:
    reqs, opts = SETS[machine]
    d = wheel_dir(machine)
    stamp = " ".join(reqs + opts)
    marker = d / ".complete"
    if marker.is_file() and marker.read_text() == stamp:
        return d
    tmp = d.with_name(d.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
           "--python-version", "3.11", "--implementation", "cp", "-d", str(tmp), *opts, *reqs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"fetch_backend_wheels: {machine}: pip download failed:\n{r.stdout}{r.stderr}")
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    marker.write_text(stamp)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    args = ap.parse_args()
    for m in filter(None, args.machines.split(",")):
        if m not in SETS:
            ap.error(f"unknown machine {m!r}; known: {', '.join(SETS)}")
        d = fetch(m)
        names = sorted(p.name for p in d.glob("*.whl"))
        print(f"{m}: {d} ({len(names)} wheels: {', '.join(names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
