"""ONNX -> .edgert: import, graph passes, memory plan, verify, serialize."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from . import format as fmt
from . import passes, planner
from .frontend.onnx_import import import_onnx
from .ir import Graph


def build_graph(model, input_shapes: dict[str, Any] | None = None, input_values: dict[str, Any] | None = None,
                optimize: bool = True) -> Graph:
    """The optimized edgert graph of an ONNX model (path, bytes or ModelProto)."""
    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    g = import_onnx(model, shapes, input_values)
    if optimize:
        g.metadata["passes"] = passes.run_pipeline(g)
    else:
        from .passes import dce
        dce.run(g)
        g.toposort()
    return g


def serialize(g: Graph, metadata: dict | None = None) -> bytes:
    p = planner.plan(g)
    planner.verify(g, p)
    meta = {"producer": "edgert", "output_names": g.metadata.get("output_names")}
    meta.update(metadata or {})
    return fmt.write(g, p, meta)


def convert(model, output: str | os.PathLike | None = None, input_shapes: dict[str, Any] | None = None,
            input_values: dict[str, Any] | None = None, optimize: bool = True) -> bytes:
    """Converts an ONNX model to the .edgert format and returns the file's bytes; also
    writes them to `output` when given (atomically: no partial file on failure).

    input_shapes fixes symbolic input dimensions ({"x": [1, 3, 224, 224]});
    input_values freezes inputs to constants ({"sr": 16000}), removing them from the
    converted model's inputs (useful when an input only selects a branch).
    """
    values = {k: np.asarray(v) for k, v in (input_values or {}).items()}
    g = build_graph(model, input_shapes, values, optimize)
    src = os.path.basename(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else None
    data = serialize(g, {"source": src})
    if output is not None:
        write_atomic(output, data)
    return data


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".edgert-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
