"""Accuracy of an int8 graph against its float original: per-tensor SQNR on sample
inputs, and the mixed-precision search that keeps the most damaging layers float.

SQNR of a tensor (dB) = 10 log10(sum x^2 / sum (x - x')^2), x the float graph's values,
x' the int8 graph's values dequantized, summed over all samples.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Graph
from .calibrate import exposed_session
from .rewrite import Result


def sqnr(sig: float, noise: float) -> float:
    """10 log10(signal power / noise power) in dB; inf for no noise, -inf for no signal."""
    if noise <= 0:
        return math.inf
    if sig <= 0:
        return -math.inf
    return 10.0 * math.log10(sig / noise)


def measure(g: Graph, res: Result, feeds: list[dict[str, np.ndarray]]) -> dict:
    """{"tensors": {float name: sqnr dB}, "outputs": {output name: sqnr dB}} on feeds."""
    q = res.graph
    pairs = {t: q8 for t, q8 in res.int8_of.items()
             if not q.tensors[q8].is_const and t in g.tensors and not g.tensors[t].is_const}
    fsess, fnames = exposed_session(g, [t for t in pairs if t not in g.inputs])
    qsess, qnames = exposed_session(q, list(pairs.values()))
    sig: dict[str, float] = {}
    noise: dict[str, float] = {}

    def add(name: str, ref: np.ndarray, got: np.ndarray) -> None:
        r = ref.astype(np.float64)
        sig[name] = sig.get(name, 0.0) + float(np.sum(r * r))
        noise[name] = noise.get(name, 0.0) + float(np.sum((r - got.astype(np.float64)) ** 2))

    for feed in feeds:
        fv = dict(zip(fnames, fsess.run(None, feed)))
        fv.update(feed)
        qv = dict(zip(qnames, qsess.run(None, feed)))
        for t, q8 in pairs.items():
            quant = q.tensors[q8].quant
            s, z = float(quant.scale[0]), int(quant.zero_point[0])
            add(t, fv[t], (qv[q8].astype(np.float64) - z) * s)
        for o in g.outputs:
            add("output:" + o, fv[o], qv[o])
    fsess.close()
    qsess.close()
    tensors = {t: sqnr(sig[t], noise[t]) for t in pairs}
    outputs = {o: sqnr(sig["output:" + o], noise["output:" + o]) for o in g.outputs}
    return {"tensors": tensors, "outputs": outputs}


def worst_node(g: Graph, res: Result, sqnr: dict[str, float], candidates: set[str]) -> str | None:
    """The int8 node whose output loses the most SQNR relative to its inputs."""
    best, best_drop = None, -math.inf
    for node in g.nodes:
        if node.name not in candidates or not node.outputs or node.outputs[0] not in sqnr:
            continue
        ins = [sqnr[i] for i in node.inputs if i in sqnr]
        base = min(ins) if ins else 60.0
        drop = min(base, 80.0) - sqnr[node.outputs[0]]
        if drop > best_drop:
            best, best_drop = node.name, drop
    return best
