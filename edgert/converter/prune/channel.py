"""Structured channel pruning: whole output channels of conv2d (group 1) and gemm
nodes are removed, by L1 norm of their weights, and every reader of those channels is
shrunk to match, so the dense kernels simply do less work.

From a producer's output the channel axis is followed through ops that keep channels
apart: element-wise unary ops, pools, batch_norm, binary ops with a constant operand
(its per-channel values are sliced), depthwise conv2d (its filters are sliced), and a
flatten reshape [N, C, H, W] -> [N, C*H*W] (channel c becomes a block of H*W columns).
It ends at a conv2d (group 1) input, whose input channels are sliced, or at a gemm A
or a matmul A with a constant B, whose rows are sliced. With calibration data, the
mean contribution of the removed channels to a conv2d or gemm end is folded into its
bias (bias compensation), which recovers much of the lost accuracy. Any other reader (a residual
add or a concat of two computed tensors, a graph output, ...) leaves that producer
unpruned, so the graph stays consistent without rewriting its joins.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import ops
from ..._oplist import OPS
from ..ir import Graph, Node

UNARY = {name for name, code in OPS.items() if 40 <= code <= 82}
POOLS = {"max_pool2d", "avg_pool2d", "lp_pool2d", "global_avg_pool", "global_max_pool"}
BINARY_CONST = {"add", "sub", "mul", "div", "min", "max", "prelu"}


@dataclasses.dataclass
class Edit:
    """One change a channel selection makes: `kind` says which input of `node` is
    sliced, along which axis, with channels expanded to blocks of `block` entries."""

    kind: str  # producer_conv | producer_gemm | bn | operand | depthwise | flatten | conv_in | gemm_in | matmul_in
    node: Node
    block: int = 1
    operand: int = 0  # input index of the sliced constant (kind "operand")


@dataclasses.dataclass
class Group:
    producer: Node
    channels: int
    edits: list[Edit]


def _producer_edit(g: Graph, n: Node) -> tuple[Edit, int] | None:
    w = g.const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
    if w is None or w.dtype != np.float32:
        return None
    bias = n.inputs[2] if len(n.inputs) > 2 else ""
    if bias and g.const(bias) is None:
        return None
    if n.op == "conv2d" and int(n.attrs.get("group", 1)) == 1 and w.ndim == 4:
        return Edit("producer_conv", n), w.shape[0]
    if n.op == "gemm" and not n.attrs.get("trans_a") and w.ndim == 2:
        if bias and g.const(bias).ndim == 2 and g.const(bias).shape[0] != 1:
            return None
        return Edit("producer_gemm", n), (w.shape[0] if n.attrs.get("trans_b") else w.shape[1])
    return None


def trace(g: Graph, producer: Node) -> Group | None:
    """The edits that removing output channels of `producer` needs, or None when a
    reader of its channels cannot follow."""
    first = _producer_edit(g, producer)
    if first is None:
        return None
    edit0, channels = first
    edits = [edit0]
    consumers = g.consumers()
    outputs = set(g.outputs)
    work = [(producer.outputs[0], 1)]
    while work:
        t, block = work.pop()
        if t in outputs:
            return None
        shape = g.tensors[t].shape
        for c in consumers.get(t, []):
            if [i for i, x in enumerate(c.inputs) if x == t] != [0]:
                return None
            nxt = _follow(g, c, shape, block, channels, edits)
            if nxt is None:
                return None
            if nxt:
                work.append(nxt)
    return Group(producer, channels, edits)


def _follow(g: Graph, c: Node, shape: tuple[int, ...], block: int, channels: int,
            edits: list[Edit]):
    """Adds the edit consumer c needs; returns (next tensor, block) to keep following,
    () when c ends the path, or None when c cannot follow."""
    rank = len(shape)
    out = c.outputs[0] if c.outputs else ""
    if len(c.outputs) != 1:
        return None
    if c.op in UNARY and len(c.inputs) == 1:
        return out, block
    if c.op in POOLS and rank == 4 and block == 1:
        return out, block
    if c.op == "batch_norm" and rank == 4 and block == 1 and all(g.const(i) is not None for i in c.inputs[1:5]):
        edits.append(Edit("bn", c))
        return out, block
    if c.op in BINARY_CONST and len(c.inputs) == 2:
        k = g.const(c.inputs[1])
        if k is None or k.ndim > rank:
            return None
        full = (1,) * (rank - k.ndim) + k.shape
        if np.broadcast_shapes(full, shape) != tuple(shape):
            return None
        if full[1] == channels * block:
            edits.append(Edit("operand", c, block, 1))
        elif full[1] != 1:
            return None
        return out, block
    if c.op == "conv2d" and rank == 4 and block == 1:
        w = g.const(c.inputs[1])
        bias = c.inputs[2] if len(c.inputs) > 2 else ""
        if w is None or (bias and g.const(bias) is None):
            return None
        group = int(c.attrs.get("group", 1))
        if group == 1:
            edits.append(Edit("conv_in", c))
            return ()
        if group == channels and w.shape[0] == channels and w.shape[1] == 1:
            edits.append(Edit("depthwise", c))
            return out, block
        return None
    if c.op == "reshape" and rank == 4 and block == 1:
        oshape = tuple(c.attrs["shape"])
        if len(oshape) == 2 and oshape[0] == shape[0] and oshape[1] == shape[1] * shape[2] * shape[3]:
            edits.append(Edit("flatten", c, shape[2] * shape[3]))
            return out, shape[2] * shape[3]
        return None
    if c.op == "gemm" and rank == 2 and not c.attrs.get("trans_a") and g.const(c.inputs[1]) is not None:
        edits.append(Edit("gemm_in", c, block))
        return ()
    if c.op == "matmul" and rank >= 2 and len(c.inputs) == 2:
        w = g.const(c.inputs[1])
        if w is not None and w.ndim == 2 and rank == 2:
            edits.append(Edit("matmul_in", c, block))
            return ()
    return None


def groups(g: Graph, exclude: set[str] = frozenset()) -> list[Group]:
    """Every producer whose channels can be pruned consistently."""
    out = []
    for n in g.nodes:
        if n.name in exclude or n.op not in ("conv2d", "gemm"):
            continue
        grp = trace(g, n)
        if grp is not None and grp.channels > 1:
            out.append(grp)
    return out


def importance(g: Graph, producer: Node) -> np.ndarray:
    """L1 norm of each output channel's weights."""
    w = np.abs(g.const(producer.inputs[1]).astype(np.float64))
    if producer.op == "conv2d":
        return w.reshape(w.shape[0], -1).sum(axis=1)
    return w.sum(axis=1) if producer.attrs.get("trans_b") else w.sum(axis=0)


def _take(g: Graph, node: Node, i: int, idx: np.ndarray, axis: int, hint: str) -> None:
    a = g.const(node.inputs[i])
    node.inputs[i] = g.add_const(np.ascontiguousarray(np.take(a, idx, axis=axis)), node.name + hint)


def _compensate(g: Graph, n: Node, e: Edit, removed: np.ndarray, mean: np.ndarray) -> None:
    """Adds the removed inputs' mean contribution to the bias of end node n (before
    its weight is sliced). mean: per-element mean of n's input over the samples."""
    w = g.const(n.inputs[1]).astype(np.float64)
    if e.kind == "conv_in":
        mu = mean.reshape(mean.shape[0], -1).mean(axis=1)[removed]
        delta = (w[:, removed].reshape(w.shape[0], removed.size, -1).sum(axis=2) * mu).sum(axis=1)
        out_ch = w.shape[0]
    else:  # gemm_in
        idx = (removed[:, None] * e.block + np.arange(e.block)[None, :]).reshape(-1)
        b = w.T if n.attrs.get("trans_b") else w
        delta = mean.reshape(-1)[idx] @ b[idx]
        alpha, beta = float(n.attrs.get("alpha", 1.0)), float(n.attrs.get("beta", 1.0))
        if beta == 0.0:
            return
        delta = delta * alpha / beta
        out_ch = b.shape[1]
    bias = n.inputs[2] if len(n.inputs) > 2 else ""
    old = g.const(bias).astype(np.float64) if bias else np.zeros(out_ch)
    if old.size not in (1, out_ch) or (old.ndim == 2 and old.shape[0] != 1):
        return
    new = (np.broadcast_to(old.reshape(-1), (out_ch,)) + delta).astype(np.float32)
    name = g.add_const(new.reshape(old.shape) if old.size == out_ch else new, n.name + "_chcomp")
    if bias:
        n.inputs[2] = name
    else:
        n.inputs = n.inputs[:2] + [name]


def _apply_group(g: Graph, grp: Group, keep: np.ndarray, means=None) -> None:
    if means is not None:
        removed = np.setdiff1d(np.arange(grp.channels), keep)
        for e in grp.edits:
            if e.kind in ("conv_in", "gemm_in") and removed.size:
                _compensate(g, e.node, e, removed, means(e.node.inputs[0]))
    for e in grp.edits:
        n = e.node
        idx = (keep[:, None] * e.block + np.arange(e.block)[None, :]).reshape(-1)
        has_bias = len(n.inputs) > 2 and bool(n.inputs[2])
        if e.kind == "producer_conv":
            _take(g, n, 1, keep, 0, "_chw")
            if has_bias:
                _take(g, n, 2, keep, 0, "_chb")
        elif e.kind == "producer_gemm":
            _take(g, n, 1, keep, 0 if n.attrs.get("trans_b") else 1, "_chw")
            if has_bias and g.const(n.inputs[2]).size > 1:
                c = g.const(n.inputs[2])
                _take(g, n, 2, keep, c.ndim - 1, "_chb")
        elif e.kind == "bn":
            for i in range(1, 5):
                _take(g, n, i, keep, 0, f"_ch{i}")
        elif e.kind == "operand":
            k = g.const(n.inputs[1])
            rank = len(g.tensors[n.inputs[0]].shape)
            _take(g, n, 1, idx, 1 - (rank - k.ndim), "_chk")
        elif e.kind == "depthwise":
            _take(g, n, 1, keep, 0, "_chw")
            if has_bias:
                _take(g, n, 2, keep, 0, "_chb")
            n.attrs["group"] = int(keep.size)
        elif e.kind == "flatten":
            shp = list(n.attrs["shape"])
            shp[1] = int(keep.size) * e.block
            n.attrs["shape"] = shp
        elif e.kind == "conv_in":
            _take(g, n, 1, keep, 1, "_chi")
        elif e.kind == "gemm_in":
            _take(g, n, 1, idx, 1 if n.attrs.get("trans_b") else 0, "_chi")
        elif e.kind == "matmul_in":
            _take(g, n, 1, idx, 0, "_chi")


def reinfer_shapes(g: Graph) -> None:
    """Recomputes every node output's shape from its inputs (after channels changed)."""
    for n in g.nodes:
        for o, (shape, _) in zip(n.outputs, ops.get(n.op).infer(n, g)):
            g.tensors[o].shape = tuple(int(d) for d in shape)


def apply(g: Graph, fractions: dict[str, float], feeds: dict[str, np.ndarray] | None = None
          ) -> dict[str, tuple[int, int]]:
    """Removes round(fraction * channels) channels of each named producer (keeping at
    least one); returns {name: (channels kept, channels before)}. Producers are traced
    again one at a time, so groups that meet at a conv see each other's edits. With
    calibration `feeds`, biases of the ends are compensated."""
    result = {}
    for name, f in fractions.items():
        if f <= 0:
            continue
        prod = next((n for n in g.nodes if n.name == name), None)
        grp = trace(g, prod) if prod is not None else None
        if grp is None:
            continue
        remove = min(int(round(f * grp.channels)), grp.channels - 1)
        if remove <= 0:
            continue
        score = importance(g, prod)
        keep = np.sort(np.argsort(-score, kind="stable")[:grp.channels - remove])
        means = None
        if feeds is not None:
            from .evaluate import tensor_mean
            means = lambda t: tensor_mean(g, t, feeds)  # noqa: E731
        _apply_group(g, grp, keep, means)
        reinfer_shapes(g)
        result[name] = (int(keep.size), grp.channels)
    g.remove_unused_tensors()
    return result
