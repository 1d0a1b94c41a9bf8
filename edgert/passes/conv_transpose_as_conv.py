"""A conv_transpose2d whose windows do not overlap (kernel = strides, square, no
dilation, padding, output padding or groups) is a 1x1 conv2d to M*k*k channels followed
by depth_to_space (CRD, blocksize k): output pixel (iy*k + ky, ix*k + kx) of channel m
is input pixel (iy, ix) times W[:, m, ky, kx]. The 1x1 convolution runs the GEMM tiles
with their fused bias and activation in place, and the shuffle is one strided copy,
instead of the column buffer and its scatter-add. It waits for fold_batchnorm and
fuse_activation to fold what follows into the conv_transpose2d."""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ._util import Uses
from .fuse_activation import act_of

FOLDABLE = {"add", "mul", "batch_norm"}  # fold_batchnorm's, into the conv_transpose2d first


def run(g: Graph) -> bool:
    changed = False
    u = Uses(g)
    for node in list(g.nodes):
        if node.op != "conv_transpose2d" or len(node.outputs) != 1:
            continue
        nxt = u.only_consumer(node.outputs[0])
        if nxt is not None and (nxt.op in FOLDABLE or act_of(nxt) is not None):
            continue
        a = node.attrs
        k = [int(v) for v in a.get("kernel", (0, 0))]
        if (a.get("rank1d", False) or int(a.get("group", 1)) != 1 or k[0] != k[1] or k[0] < 2
                or [int(v) for v in a.get("strides", (1, 1))] != k
                or any(int(v) != 1 for v in a.get("dilations", (1, 1)))
                or any(int(v) != 0 for v in a.get("pads", (0, 0, 0, 0)))
                or any(int(v) != 0 for v in a.get("output_padding", (0, 0)))):
            continue
        w = g.const(node.inputs[1])
        b_name = node.inputs[2] if len(node.inputs) > 2 else ""
        b = g.const(b_name) if b_name else None
        if w is None or w.ndim != 4 or (b_name and b is None):
            continue
        c, m = w.shape[0], w.shape[1]
        kk = k[0] * k[0]
        # W'[m*k*k + ky*k + kx, c] = W[c, m, ky, kx]
        w2 = np.ascontiguousarray(w.transpose(1, 2, 3, 0).reshape(m * kk, c, 1, 1))
        b2 = np.repeat(b.astype(np.float32), kk) if b is not None else np.zeros(m * kk, np.float32)
        x = g.tensors[node.inputs[0]]
        mid = g.unique_name(node.outputs[0] + "_cols")
        g.add_tensor(mid, [x.shape[0], m * kk, x.shape[2], x.shape[3]], np.float32)
        attrs = {"group": 1, "kernel": [1, 1], "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
        attrs.update({key: a[key] for key in ("act", "act_a", "act_b") if key in a})
        conv = g.add_node("conv2d", [node.inputs[0], g.add_derived_const(w2, node.inputs[1], node.name + "_w"),
                                     g.add_const(b2, node.name + "_b")], [mid], attrs, name=node.name)
        g.add_node("depth_to_space", [mid], list(node.outputs), {"blocksize": k[0], "mode": "CRD"},
                   name=node.name + "_shuffle")
        g.nodes.remove(node)
        del conv
        changed = True
    if changed:
        g.toposort()
        g.remove_unused_tensors()
    return changed
