"""Conv+BatchNormalization folding, and more generally folding of a per-channel affine
map into the convolution before it: conv2d (or conv_transpose2d) -> batch_norm |
mul(const) | add(const) becomes one convolution with scaled weights and shifted bias,
when the conv output has no other reader and the conv has no fused activation yet. An
activation already fused into the add or mul (an add(const) + hard_swish, say) moves
onto the conv."""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ._util import Uses, remove_nodes


def _per_channel(c: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray | None:
    """c as a [M] vector when it broadcasts over conv output [N, M, ...] along axis 1 only."""
    rank, m = len(out_shape), out_shape[1]
    if c.ndim > rank:
        return None
    full = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(full) if k != 1):
        return None
    if full[1] not in (1, m):
        return None
    return np.broadcast_to(c.reshape(-1), (m,)).astype(np.float32)


def _affine_of(g: Graph, node, conv_out: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) per channel such that node(x) = x*scale + shift, or None."""
    shape = g.tensors[conv_out].shape
    m = shape[1]
    if node.op == "batch_norm":
        # inputs X, scale, B, mean, var; y = (x - mean) / sqrt(var + eps) * scale + B.
        # Computed in float64 from the parameters (not by probing the op) to keep the
        # folded weights exact when mean * scale is large against scale.
        params = [g.const(i) if i else None for i in node.inputs[1:5]]
        if len(node.inputs) != 5 or len(node.outputs) != 1 or any(p is None for p in params):
            return None
        scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
        if not all(v.size == m for v in (scale, bias, mean, var)):
            return None
        a = scale / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
        return a, bias - mean * a
    if node.op in ("mul", "add") and len(node.inputs) == 2:
        other = node.inputs[1] if node.inputs[0] == conv_out else node.inputs[0]
        c = g.const(other)
        if c is None or c.dtype != np.float32:
            return None
        # The result must keep the conv output's shape (no broadcasting up).
        if np.broadcast_shapes(c.shape, shape) != tuple(shape):
            return None
        v = _per_channel(c, shape)
        if v is None:
            return None
        if node.op == "mul":
            return v, np.zeros(m, np.float32)
        return np.ones(m, np.float32), v
    return None


def run(g: Graph) -> bool:
    u = Uses(g)
    dead = []
    for conv in g.nodes:
        if conv.op not in ("conv2d", "conv_transpose2d") or conv.attrs.get("act", 0):
            continue
        w = g.const(conv.inputs[1])
        b_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
        b = g.const(b_name) if b_name else None
        if w is None or (b_name and b is None):
            continue
        out = conv.outputs[0]
        nxt = u.only_consumer(out)
        if nxt is None or any(d is nxt for d in dead):
            continue
        aff = _affine_of(g, nxt, out)
        if aff is None:
            continue
        scale, shift = aff
        if conv.op == "conv2d":  # W [M, C/group, ...]
            m = w.shape[0]
            s = scale.reshape((m,) + (1,) * (w.ndim - 1))
        else:  # W [C, M/group, ...]: output channel grp * M/group + j is W[grp's rows, j]
            group = int(conv.attrs.get("group", 1))
            m = w.shape[1] * group
            s = np.repeat(scale.reshape(group, 1, -1), w.shape[0] // group, axis=1)
            s = s.reshape(w.shape[:2] + (1,) * (w.ndim - 2))
        new_w = (w.astype(np.float64) * s).astype(np.float32)
        old_b = b.astype(np.float64) if b is not None else np.zeros(m)
        new_b = (old_b * scale + shift).astype(np.float32)
        conv.inputs = [conv.inputs[0], g.add_const(new_w, conv.name + "_w"), g.add_const(new_b, conv.name + "_b")]
        if nxt.attrs.get("act", 0):
            conv.attrs.update({k: nxt.attrs[k] for k in ("act", "act_a", "act_b") if k in nxt.attrs})
        conv.outputs = list(nxt.outputs)
        dead.append(nxt)
        u = Uses(g)
    if dead:
        remove_nodes(g, dead)
        g.remove_unused_tensors()
    return bool(dead)
