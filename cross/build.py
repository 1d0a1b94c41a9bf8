#!/usr/bin/env python3
"""Cross-builds the runtime for one board without the click CLI installed:

    python cross/build.py --target rpi4 -o out/rpi4 [--no-wheel] [--deb]

Same as `edgert build --target rpi4 -o out/rpi4` (both call edgert.cli.build.build).
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from edgert.cli import build, targets  # noqa: E402
from edgert.errors import EdgertError  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description="Cross-build the edgert runtime for one board.")
    ap.add_argument("--target", required=True, choices=targets.names())
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--no-wheel", action="store_true")
    ap.add_argument("--deb", action="store_true", help="also write edgert_<version>_<arch>.deb")
    a = ap.parse_args()
    try:
        r = build.build(a.target, a.output, wheel=not a.no_wheel, deb=a.deb)
    except EdgertError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for key, value in r.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
