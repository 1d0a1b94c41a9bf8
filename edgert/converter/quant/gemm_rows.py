"""int8 gemm of many rows -> a 1x1 int8 conv2d between two transposes.

The int8 gemm kernel (csrc/kernels/ref/gemm_s8.c) takes A one row at a time: a
matrix-vector product per row, B streamed once per row. That is the right form for
the classifier of a CNN (one row), but a sequence model's output projection has one row
per time step (PP-OCR's recognizer: 40 rows of 120 into 6625 columns). The int8
convolution runs the tiled GEMM (16 pixels by 4 channels per tile, the weights packed
once per run), so for such a gemm

    Y[M, N] = A[M, K] . B[N, K]^T  is computed as
    transpose(conv2d(X = A^T as [1, K, 1, M], W = B as [N, K, 1, 1]) as [N, M])

with the same bias, multiplier and shift per output column n (the convolution's per
output channel): the same integers, byte for byte.

ROWS: from guest instruction counts of a [M, 120] x [120, 6625] gemm (tools/arm_icount.py,
docs/arm.md "int8 PP-OCR below 0.7x float32"): at 8 rows the two forms cost the same on
the Cortex-A72, at 16 the convolution takes half.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node

ROWS = 16
S8 = np.dtype(np.int8)


def run(g: Graph) -> int:
    """Rewrites every eligible int8 gemm; returns how many."""
    out: list[Node] = []
    done = 0
    for n in g.nodes:
        new = _as_conv(g, n)
        if new is None:
            out.append(n)
            continue
        out.extend(new)
        done += 1
    g.nodes = out
    return done


def _as_conv(g: Graph, n: Node) -> list[Node] | None:
    if n.op != "gemm" or len(n.inputs) != 3 or "a_zp" not in n.attrs or not n.attrs.get("trans_b"):
        return None
    a, b = g.tensors[n.inputs[0]], g.tensors[n.inputs[1]]
    y = n.outputs[0]
    if a.dtype != S8 or b.dtype != S8 or not b.is_const or len(a.shape) != 2 or a.shape[0] < ROWS:
        return None
    m, k = a.shape
    nc = b.shape[0]
    quant, aq = g.tensors[y].quant, a.quant

    def tensor(hint: str, shape, q) -> str:
        name = g.unique_name(f"{n.name}_{hint}")
        g.add_tensor(name, shape, S8)
        g.tensors[name].quant = q
        return name

    at = tensor("a_t", (k, m), aq)
    x4 = tensor("x", (1, k, 1, m), aq)
    y4 = tensor("y_t4", (1, nc, 1, m), quant)
    yt = tensor("y_t", (nc, m), quant)
    w = g.add_derived_const(np.ascontiguousarray(b.data.reshape(nc, k, 1, 1)), n.inputs[1], f"{n.inputs[1]}_1x1")
    p = n.attrs
    attrs = {"group": 1, "kernel": [1, 1], "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0],
             "x_zp": p["a_zp"], "y_zp": p["y_zp"], "out_min": p["out_min"], "out_max": p["out_max"],
             "shift": p["shift"]}
    return [Node("transpose", [n.inputs[0]], [at], {"perm": [1, 0]}, f"{n.name}_a_t"),
            Node("reshape", [at], [x4], {"shape": [1, k, 1, m]}, f"{n.name}_x"),
            Node("conv2d", [x4, w, n.inputs[2]], [y4], attrs, n.name),
            Node("reshape", [y4], [yt], {"shape": [nc, m]}, f"{n.name}_y_t"),
            Node("transpose", [yt], [y], {"perm": [1, 0]}, f"{n.name}_y")]
