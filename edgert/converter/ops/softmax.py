"""softmax, log_softmax, hardmax along one axis (or over all trailing axes).

softmax log_softmax hardmax
    inputs:  X (float32)
    outputs: Y (float32, the shape of X)
    attrs:   axis (int, in [-rank, rank), default -1)
             flatten (bool, default False): the op covers every dimension from `axis`
             to the last as one, as ONNX opsets before 13 define it (input coerced to
             2-D at `axis`). Otherwise the op covers dimension `axis` alone (ONNX
             opset 13 and later).
    params:  [axis (normalized), flatten]
    softmax:     y = exp(x - max) / sum(exp(x - max))
    log_softmax: y = x - max - log(sum(exp(x - max)))
    hardmax:     y = 1 at the first maximum, 0 elsewhere
    The kernel views X as [outer, n, inner] (inner = 1 when flatten or when axis is
    the last); softmax and log_softmax may run in place (output = input buffer).
"""
from __future__ import annotations

import numpy as np

from . import softmax_s8
from .registry import OpUnsupported, register

F32 = np.dtype(np.float32)


def _axis(node, rank: int) -> int:
    a = int(node.attrs.get("axis", -1))
    if not -rank <= a < rank:
        raise OpUnsupported(f"{node.op}: axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def _make(op: str, inplace: bool):
    def infer(node, graph):
        if softmax_s8.applies(node, graph):
            return softmax_s8.infer(node, graph, _axis)
        if len(node.inputs) != 1 or not node.inputs[0]:
            raise OpUnsupported(f"{op} takes one input")
        x = graph.tensors[node.inputs[0]]
        if x.dtype != F32:
            raise OpUnsupported(f"{op}: dtype {x.dtype} is not supported (float32)")
        if len(x.shape) == 0:
            raise OpUnsupported(f"{op}: input must have rank >= 1")
        _axis(node, len(x.shape))
        return [(x.shape, F32)]

    def pack(node, graph):
        x = graph.tensors[node.inputs[0]]
        return [_axis(node, len(x.shape)), int(bool(node.attrs.get("flatten", False)))]

    def reference(node, inputs):
        if np.asarray(inputs[0]).dtype == np.int8:
            return softmax_s8.reference(node, inputs, _axis(node, inputs[0].ndim),
                                        bool(node.attrs.get("flatten", False)))
        return [softmax_reference(op, inputs[0], _axis(node, inputs[0].ndim),
                                  bool(node.attrs.get("flatten", False)))]

    register(op, infer=infer, pack=pack, reference=reference, inplace=inplace)


def softmax_reference(op: str, x: np.ndarray, axis: int, flatten: bool) -> np.ndarray:
    shape = x.shape
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    if flatten:
        n, inner = int(np.prod(shape[axis:], dtype=np.int64)), 1
    else:
        n, inner = shape[axis], int(np.prod(shape[axis + 1:], dtype=np.int64))
    v = x.astype(np.float64).reshape(outer, n, inner)
    if v.size == 0:
        return np.zeros(shape, F32)
    if op == "hardmax":
        idx = np.argmax(v, axis=1)
        y = np.zeros_like(v)
        np.put_along_axis(y, idx[:, None, :], 1.0, axis=1)
    else:
        m = np.max(v, axis=1, keepdims=True)
        e = np.exp(v - m)
        s = np.sum(e, axis=1, keepdims=True)
        y = e / s if op == "softmax" else v - m - np.log(s)
    return y.reshape(shape).astype(F32)


_make("softmax", True)
_make("log_softmax", True)
_make("hardmax", False)
