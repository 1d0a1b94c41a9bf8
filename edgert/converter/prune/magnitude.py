"""Unstructured magnitude pruning: the smallest weights (by |w|) become exact zeros.

`fractions` maps layer names to the fraction of that layer's weights to zero. With
scope "global", `global_fractions` first turns one target into per-layer fractions by a
single magnitude threshold over all the layers' weights, each layer scaled by its
RMS so layers of different scale compete fairly.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from .layers import prunable


def prune_tensor(w: np.ndarray, fraction: float) -> np.ndarray:
    """w with its round(fraction * size) smallest-magnitude entries set to 0 (ties are
    broken by position, so the count is exact)."""
    k = int(round(min(max(fraction, 0.0), 1.0) * w.size))
    if k <= 0:
        return w.copy()
    flat = w.reshape(-1).copy()
    order = np.argsort(np.abs(flat), kind="stable")
    flat[order[:k]] = 0
    return flat.reshape(w.shape)


def global_fractions(g: Graph, names: list[str], target: float) -> dict[str, float]:
    """Per-layer fractions from one threshold over RMS-normalized magnitudes."""
    layers = [n for n in prunable(g) if n.name in names]
    if not layers:
        return {}
    mags = []
    for n in layers:
        w = np.abs(g.const(n.inputs[1]).astype(np.float64)).reshape(-1)
        rms = float(np.sqrt(np.mean(w * w))) or 1.0
        mags.append(w / rms)
    allm = np.concatenate(mags)
    k = int(round(target * allm.size))
    if k <= 0:
        return {n.name: 0.0 for n in layers}
    thr = np.partition(allm, k - 1)[k - 1]
    return {n.name: float(np.mean(m <= thr)) for n, m in zip(layers, mags)}


def apply(g: Graph, fractions: dict[str, float]) -> dict[str, float]:
    """Zeros weights layer by layer; returns the sparsity each named layer ends with."""
    result = {}
    for n in prunable(g):
        f = fractions.get(n.name)
        if f is None:
            continue
        w = g.const(n.inputs[1])
        pruned = prune_tensor(w, f)
        n.inputs[1] = g.add_const(pruned.astype(np.float32), n.name + "_pruned_w")
        result[n.name] = 1.0 - float(np.count_nonzero(pruned)) / max(pruned.size, 1)
    g.remove_unused_tensors()
    return result
