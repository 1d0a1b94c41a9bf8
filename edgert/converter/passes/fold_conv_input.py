"""Folding of a per-channel affine map into the convolution after it: mul(const) or
add(const) whose only reader is a conv2d without padding becomes part of that conv's
weights (mul: W[m, c] * s[c]) or bias (add: b[m] + sum over c and taps of W[m, c] t[c]).
Without padding every tap reads a real input, so the result is the same map; with
padding the border taps would read the zeros unscaled and unshifted, so those convs
are left alone. Chains (mul then add, as PP-LCNetV3's scale-and-shift after each
activation) fold one node per round."""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ._util import Uses, remove_nodes
from .fold_batchnorm import _per_channel


def _fold(g: Graph, node, conv) -> bool:
    """Folds node (mul/add of a constant) into conv, which reads its output; False when
    the pattern does not hold."""
    if len(node.inputs) != 2 or len(node.outputs) != 1 or node.attrs.get("act", 0):
        return False
    x = next((i for i in node.inputs if g.const(i) is None), None)
    c_name = next((i for i in node.inputs if i != x), None)
    if x is None or c_name is None or node.inputs.count(x) != 1:
        return False
    c = g.const(c_name)
    shape = tuple(g.tensors[node.outputs[0]].shape)
    if c is None or c.dtype != np.float32 or tuple(g.tensors[x].shape) != shape or len(shape) < 3:
        return False
    if np.broadcast_shapes(c.shape, shape) != shape:
        return False
    v = _per_channel(c, shape)
    if conv.inputs[0] != node.outputs[0] or any(int(p) for p in conv.attrs.get("pads", (0, 0, 0, 0))):
        return False
    if conv.attrs.get("same_pad"):  # its pads follow the input size (bounded dims)
        return False
    w = g.const(conv.inputs[1])
    b_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
    b = g.const(b_name) if b_name else None
    if v is None or w is None or (b_name and b is None):
        return False
    m, cg = w.shape[0], w.shape[1]
    group = int(conv.attrs.get("group", 1))
    if m % group or cg * group != shape[1]:
        return False
    # per output channel m, the input channels of its group
    chans = (np.arange(m)[:, None] // (m // group)) * cg + np.arange(cg)[None, :]
    vm = v.astype(np.float64)[chans].reshape((m, cg) + (1,) * (w.ndim - 2))
    w64 = w.astype(np.float64)
    b64 = b.astype(np.float64) if b is not None else np.zeros(m)
    if node.op == "mul":
        new_w, new_b = (w64 * vm).astype(np.float32), b64.astype(np.float32)
    else:
        new_w = w
        new_b = (b64 + (w64 * vm).reshape(m, -1).sum(axis=1)).astype(np.float32)
    conv.inputs = [x, g.add_const(new_w, conv.name + "_w"), g.add_const(new_b, conv.name + "_b")]
    return True


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for node in g.nodes:
        if node.op not in ("mul", "add") or len(node.outputs) != 1:
            continue
        conv = u.only_consumer(node.outputs[0])
        if conv is None or conv.op != "conv2d" or any(d is node for d in dead):
            continue
        if _fold(g, node, conv):
            dead.append(node)
            u = Uses(g)
    if dead:
        remove_nodes(g, dead)
        g.remove_unused_tensors()
    return bool(dead)
