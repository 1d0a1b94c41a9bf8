"""partition: a subgraph run by an external backend (docs/partitions.md). Kernel:
csrc/kernels/ref/partition.c (it calls the backend the session was given).

Inputs: the boundary inputs, then LAST the payload, a constant uint8 1-D tensor (an
ONNX model for "onnxruntime", a .tflite flatbuffer for "litert").
Outputs: the boundary outputs, whose tensors the graph already declares.
Attributes: backend ("onnxruntime" | "litert"), index (partition number), delegate,
nodes and ops (the original nodes it holds).
Parameter words: [backend_code (1 onnxruntime, 2 litert), index, n_boundary_inputs].
"""
from __future__ import annotations

import numpy as np

from . import OpUnsupported, register

BACKEND_CODES = {"onnxruntime": 1, "litert": 2}


def _infer(node, graph):
    if node.attrs.get("backend") not in BACKEND_CODES:
        raise OpUnsupported(f"partition: unknown backend {node.attrs.get('backend')!r}")
    payload = graph.tensors[node.inputs[-1]]
    if payload.data is None or payload.dtype != np.uint8 or len(payload.shape) != 1:
        raise OpUnsupported("partition: the last input must be the payload, a constant uint8 1-D tensor")
    return [(graph.tensors[o].shape, graph.tensors[o].dtype) for o in node.outputs]


def _pack(node, graph):
    return [BACKEND_CODES[node.attrs["backend"]], int(node.attrs.get("index", 0)), len(node.inputs) - 1]


def _reference(node, inputs):
    from ..backends import run_payload

    payload = np.asarray(inputs[-1], np.uint8).tobytes()
    return run_payload(node.attrs["backend"], payload, [np.asarray(x) for x in inputs[:-1]])


register("partition", infer=_infer, pack=_pack, reference=_reference)
