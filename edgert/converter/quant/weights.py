"""Weight-only conversions: fp16 (weights stored as float16, cast to float32 at run
time) and dynamic (weights stored int8 with per-channel scales, dequantized at run
time; activations stay float32).

In both, the cast/dequantize node that rebuilds a float weight sits right before the
weight's first reader, so the planner keeps only the weights in use alive in the arena.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Tensor
from . import fixedpoint as fp

MIN_ELEMENTS = 64
F16_MAX = 65504.0


def _first_readers(g: Graph) -> dict[str, int]:
    first: dict[str, int] = {}
    for k, n in enumerate(g.nodes):
        for i in n.inputs:
            if i and i not in first:
                first[i] = k
    return first


def _rebuild(g: Graph, replacements: dict[str, Node]) -> None:
    """Inserts each node of `replacements` (keyed by the float tensor it produces)
    before the first reader of that tensor."""
    first = _first_readers(g)
    before: dict[int, list[Node]] = {}
    for t, node in replacements.items():
        before.setdefault(first[t], []).append(node)
    out: list[Node] = []
    for k, n in enumerate(g.nodes):
        out.extend(before.get(k, []))
        out.append(n)
    g.nodes = out


def _to_arena(g: Graph, name: str) -> None:
    t = g.tensors[name]
    g.tensors[name] = Tensor(name, t.shape, np.dtype(np.float32))


def to_fp16(g: Graph) -> list[str]:
    """Stores float32 constants of at least MIN_ELEMENTS values (within float16 range)
    as float16; returns their names."""
    first = _first_readers(g)
    repl: dict[str, Node] = {}
    for name, t in list(g.tensors.items()):
        if not t.is_const or t.dtype != np.float32 or t.numel < MIN_ELEMENTS or name not in first:
            continue
        if not np.all(np.abs(t.data) <= F16_MAX):
            continue
        c16 = g.add_const(t.data.astype(np.float16), f"{name}_f16")
        _to_arena(g, name)
        repl[name] = Node("cast", [c16], [name], {"to": "float32"}, f"{name}_cast")
    _rebuild(g, repl)
    return sorted(repl)


# op -> (input index, channel axis (negative: from the end) or None for "by trans_b");
# the recurrent ops' WP and RP [D, P*G, K, 16] by panel: one scale per gate's 16 units
# (a gate's rows have their own range; the 16 column positions are shared by every gate)
_DYNAMIC = {"gemm": ((1, None),), "matmul": ((1, -1),), "lstm": ((1, 1), (2, 1)), "gru": ((1, 1), (2, 1)),
            "rnn": ((1, 1), (2, 1))}


def to_dynamic(g: Graph) -> list[str]:
    """Stores the float32 constant weights of gemm, matmul and the recurrent ops as int8
    (symmetric, per output channel) with a dequantize_linear before their first use."""
    repl: dict[str, Node] = {}
    for node in g.nodes:
        for idx, axis in _DYNAMIC.get(node.op, ()):
            if idx >= len(node.inputs) or not node.inputs[idx]:
                continue
            name = node.inputs[idx]
            t = g.tensors[name]
            if name in repl or not t.is_const or t.dtype != np.float32 or t.numel < MIN_ELEMENTS or t.data.ndim < 2:
                continue
            if axis is None:
                axis = 0 if node.attrs.get("trans_b", False) else 1
            axis %= t.data.ndim
            q, scale = fp.weight_qparams(t.data, axis)
            c8 = g.add_const(q, f"{name}_q8")
            _to_arena(g, name)
            repl[name] = Node("dequantize_linear", [c8], [name],
                              {"scale": [float(s) for s in scale], "zero_point": [0] * len(scale), "axis": axis},
                              f"{name}_dequantize")
    _rebuild(g, repl)
    return sorted(repl)
