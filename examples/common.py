"""What the examples share: where their .edgert files come from.

Each example runs a .edgert file. Given one (--model FILE.edgert: converted on a PC and
copied to the board, where the converter is not installed), it runs that. Otherwise it
converts the original ONNX model here, once, into CACHE/examples/ (CACHE is
$EDGERT_MODEL_CACHE or ~/.cache/edgert/models, the cache of edgert's tests; the
converted files go to $EDGERT_EXAMPLES_DIR instead when set), after fetching the ONNX
model into CACHE/models/ with tools/fetch_models.py. Converting needs the converter
(`pip install 'edgert[convert]'`) and this checkout's tools/.
"""
from __future__ import annotations

import os
import pathlib
import sys
from typing import Any, Callable

import edgert

ROOT = pathlib.Path(__file__).resolve().parent.parent   # the checkout
DATA = pathlib.Path(__file__).resolve().parent / "data"  # the examples' inputs


def _tools():
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from tools import fetch_models, models
    return fetch_models, models


def onnx_model(name: str) -> pathlib.Path:
    """The cached ONNX model `name` of tools/models.py, fetched first if missing."""
    fetch_models, models = _tools()
    path = models.model_path(name)
    if not path.is_file() and fetch_models.fetch([name], models.cache_dir()):
        sys.exit(f"could not fetch {name}; see the message above")
    return path


def edgert_model(given: str | None, name: str, variant: str, convert: Callable[[pathlib.Path, pathlib.Path], Any]
                 ) -> pathlib.Path:
    """The .edgert file to run: `given` when set, else CACHE/examples/<name>-<variant>-<edgert
    version>.edgert, made by convert(onnx_path, out_path) when it is not there yet."""
    if given:
        return pathlib.Path(given)
    _, models = _tools()
    folder = os.environ.get("EDGERT_EXAMPLES_DIR")
    out_dir = pathlib.Path(folder) if folder else models.cache_dir() / "examples"
    out = out_dir / f"{name}-{variant}-{edgert.__version__}.edgert"
    if not out.is_file():
        src = onnx_model(name)
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        print(f"converting {src.name} ({variant}) -> {out}", file=sys.stderr)
        convert(src, tmp)
        os.replace(tmp, out)
    return out
