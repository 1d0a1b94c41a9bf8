"""shape: the dims start..end of a tensor as int64 data (ONNX Shape). Kernel:
csrc/kernels/ref/shape.c.

Only bounded conversions emit it: where a value computed from the input size (an anchor
grid, a position table) is data for a compute op, the importer keeps the computation as
run-time nodes, and this op is where it reads a size (docs/runtime.md, "Shape
programs"). The input's data is never read.

attrs  start, end: int, 0 <= start <= end <= rank of the input
words  0 start, 1 end
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register
from .shape_ops import data_dtype

I64 = np.dtype(np.int64)


def _infer(node, graph):
    data_dtype(node, graph)
    rank = len(graph.tensors[node.inputs[0]].shape)
    start, end = int(node.attrs["start"]), int(node.attrs["end"])
    if not 0 <= start <= end <= rank:
        raise OpUnsupported(f"shape: dims {start}..{end} of a rank-{rank} input")
    return [((end - start,), I64)]


def _reference(node, ins):
    return [np.array(ins[0].shape[node.attrs["start"]:node.attrs["end"]], I64)]


register("shape", infer=_infer, pack=lambda node, graph: [int(node.attrs["start"]), int(node.attrs["end"])],
         reference=_reference)
