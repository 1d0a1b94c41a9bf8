"""Per-layer sparsities from measured sensitivity.

Each candidate layer is pruned alone at each candidate fraction and the model's output
error on calibration inputs is measured. Starting from nothing pruned, the step (one
layer to its next fraction) that adds the least error per removed unit is taken until
the removed units reach the target share of all units. Units are weights (magnitude)
or channels (channel pruning), so the target means the same as without calibration.
"""
from __future__ import annotations

import copy
from typing import Callable

from ..ir import Graph
from ..progress import Progress

CANDIDATES = (0.0, 0.25, 0.5, 0.625, 0.75, 0.875, 0.95)
CHANNEL_CANDIDATES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625)


def measure(g: Graph, layers: list[str], candidates: tuple[float, ...],
            prune: Callable[[Graph, dict[str, float]], object],
            error: Callable[[Graph], float], progress: bool | None = None) -> dict[str, dict[float, float]]:
    """{layer: {fraction: output error with only that layer pruned}}. progress: a bar on
    stderr (default: when it is a terminal)."""
    table: dict[str, dict[float, float]] = {}
    fractions = [f for f in candidates if f > 0]
    with Progress("pruning sensitivity", len(layers) * len(fractions), progress) as bar:
        for name in layers:
            table[name] = {0.0: 0.0}
            for f in fractions:
                trial = copy.deepcopy(g)
                prune(trial, {name: f})
                table[name][f] = error(trial)
                bar.step()
    return table


def choose(table: dict[str, dict[float, float]], units: dict[str, int], target: float) -> dict[str, float]:
    """Greedy per-layer fractions whose removed units reach target * total units."""
    level = {name: 0.0 for name in table}
    total = sum(units[n] for n in table)
    need = target * total
    removed = 0.0
    while removed < need - 1e-9:
        best = None
        for name, errs in table.items():
            higher = sorted(f for f in errs if f > level[name])
            if not higher:
                continue
            f = higher[0]
            gain = (f - level[name]) * units[name]
            cost = max(errs[f] - errs[level[name]], 0.0) / gain
            if best is None or cost < best[0]:
                best = (cost, name, f, gain)
        if best is None:
            break
        _, name, f, gain = best
        level[name] = f
        removed += gain
    return {n: f for n, f in level.items() if f > 0}


def choose_joint(g: Graph, layers: list[str], candidates: tuple[float, ...], units: dict[str, int], target: float,
                 step: Callable[[Graph, str, float, float], object],
                 error: Callable[[Graph], float], progress: bool | None = None) -> dict[str, float]:
    """Greedy on the jointly pruned model: at each step every layer's next fraction is
    tried on top of the fractions already chosen, and the one adding the least measured
    error per removed unit is kept, until the removed units reach target * total.
    step(graph, layer, old fraction, new fraction) prunes one layer further in place.
    Slower than `choose` (one model run per layer per step) but sees how errors of
    different layers add up, which independent measurements miss."""
    level = {name: 0.0 for name in layers}
    need = target * sum(units[n] for n in layers)
    removed, current, base_err = 0.0, copy.deepcopy(g), 0.0
    bar = Progress("pruning (joint search, % of target)", 100, progress)
    while removed < need - 1e-9:
        best = None
        for name in layers:
            higher = sorted(f for f in candidates if f > level[name])
            if not higher:
                continue
            trial = copy.deepcopy(current)
            step(trial, name, level[name], higher[0])
            gain = (higher[0] - level[name]) * units[name]
            e = error(trial)
            cost = max(e - base_err, 0.0) / gain
            if best is None or cost < best[0]:
                best = (cost, name, higher[0], gain, trial, e)
        if best is None:
            break
        _, name, f, gain, current, base_err = best
        level[name] = f
        removed += gain
        bar.update(int(100 * min(removed / need, 1.0)) if need > 0 else 100)
    bar.close()
    return {n: f for n, f in level.items() if f > 0}
