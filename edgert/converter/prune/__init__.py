"""Post-training pruning (docs/sparse.md): `prune_with_report` is what
`edgert convert --prune` runs on the optimized graph, before sparse encoding.

Modules: layers (what is prunable, MACs), magnitude (unstructured), channel
(structured, propagated to readers), sensitivity (per-layer fractions from
calibration data), evaluate (running a graph, SQNR).
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any, Iterable

import numpy as np

from ...errors import ConversionError
from ..ir import Graph
from . import channel, evaluate, layers, magnitude, sensitivity

METHODS = ("magnitude", "channel")
SCOPES = ("layer", "global")


def _file_bytes(g: Graph, sparse: bool) -> int:
    from .. import sparse as sparse_
    from ..emit import serialize

    h = copy.deepcopy(g)
    if sparse:
        sparse_.apply(h)
    return len(serialize(h))


def prune_graph(g: Graph, target: float, method: str = "magnitude", scope: str = "layer",
                exclude: Iterable[str] = (), calibration: Any = None) -> dict[str, Any]:
    """Prunes g in place; returns {"layers": {name: achieved}, "fractions": chosen}.
    exclude adds node names to the default exclusions (first and last weighted layer)."""
    if method not in METHODS:
        raise ConversionError(f"--prune-method must be one of {', '.join(METHODS)}, not {method!r}")
    if scope not in SCOPES:
        raise ConversionError(f"prune scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    if not 0.0 <= target < 1.0:
        raise ConversionError(f"--prune must be in [0, 1), got {target}")
    skip = layers.default_exclusions(g) | set(exclude or ())
    feeds = evaluate.load_calibration(calibration, g)
    if method == "magnitude":
        names = [n.name for n in layers.prunable(g) if n.name not in skip]
        units = {n.name: g.const(n.inputs[1]).size for n in layers.prunable(g) if n.name in names}
        apply_fn, candidates = magnitude.apply, sensitivity.CANDIDATES
    else:
        grps = channel.groups(g, skip)
        names = [grp.producer.name for grp in grps]
        # A layer's units are the multiply-adds its channels carry (its own and those of
        # the layers reading them), so the target is a share of that work and the
        # sensitivity search prefers channels that cost time over cheap ones.
        units = {grp.producer.name: layers.node_macs(g, grp.producer)
                 + sum(layers.node_macs(g, e.node) for e in grp.edits[1:] if e.kind.endswith("_in"))
                 for grp in grps}
        candidates = sensitivity.CHANNEL_CANDIDATES

        def apply_fn(h: Graph, fr: dict[str, float]) -> dict:
            return channel.apply(h, fr, feeds)
    if feeds is not None and names:
        ref = evaluate.run_graph(g, feeds)

        def err(h: Graph) -> float:
            return evaluate.relative_error(ref, evaluate.run_graph(h, feeds))

        if method == "magnitude":
            table = sensitivity.measure(g, names, candidates, apply_fn, err)
            fractions = sensitivity.choose(table, units, target)
        else:
            # Channel errors compound across layers: choose on the jointly pruned model
            # (bias compensation is left to the final pass, to keep the search fast).
            def step(h: Graph, name: str, old: float, new: float) -> None:
                channel.apply(h, {name: (new - old) / (1.0 - old)})

            fractions = sensitivity.choose_joint(g, names, candidates, units, target, step, err)
    elif method == "magnitude" and scope == "global":
        fractions = magnitude.global_fractions(g, names, target)
    else:
        fractions = {name: target for name in names}
    achieved = apply_fn(g, fractions)
    return {"method": method, "scope": "sensitivity" if feeds is not None else scope,
            "excluded": sorted(skip), "fractions": fractions,
            "layers": {k: (list(v) if isinstance(v, tuple) else v) for k, v in achieved.items()}}


def prune_with_report(g: Graph, target: float, method: str = "magnitude", scope: str = "layer",
                      exclude: Iterable[str] = (), calibration: Any = None,
                      report: str | os.PathLike | None = None) -> dict[str, Any]:
    """prune_graph plus the before/after summary: file bytes (with sparse storage),
    dense and nonzero MACs, weights, and output SQNR on the calibration inputs (random
    inputs when none are given). Written as JSON to `report` when given."""
    before = copy.deepcopy(g) if report is not None else None
    info = prune_graph(g, target, method, scope, exclude, calibration)
    if before is None:
        return info
    feeds = evaluate.load_calibration(calibration, g)
    inputs = "calibration"
    if feeds is None:
        feeds, inputs = evaluate.random_inputs(before), "random"
    ref, got = evaluate.run_graph(before, feeds), evaluate.run_graph(g, feeds)

    def summary(h: Graph) -> dict[str, Any]:
        nz, total = layers.weight_count(h)
        return {"file_bytes": _file_bytes(h, True), "file_bytes_dense": _file_bytes(h, False),
                "macs": layers.graph_macs(h), "macs_nonzero": layers.graph_macs(h, nonzero=True),
                "weights": total, "weights_nonzero": nz}

    info.update(before=summary(before), after=summary(g), sqnr_db=evaluate.sqnr_db(ref, got),
                sqnr_inputs=inputs)
    if ref and ref[0].ndim >= 2 and ref[0].shape[-1] > 1:
        info["top1_agreement"] = float(np.mean(ref[0].argmax(-1) == got[0].argmax(-1)))
    with open(os.fspath(report), "w") as f:
        json.dump(info, f, indent=2, default=float)
    return info


def transplant(src: Graph, attrs_before: list[dict], dst: Graph) -> None:
    """Makes dst, the same model converted at another input size, pruned as src was:
    every constant a node of src reads is copied to the same node of dst, and the
    attributes pruning changed on src (attrs_before: each node's attributes before
    pruning) are set on dst; dst's tensor shapes are then inferred again. The graphs
    must hold the same nodes in the same order (ConversionError otherwise)."""
    if len(src.nodes) != len(dst.nodes) or any(a.op != b.op or a.name != b.name for a, b in zip(src.nodes, dst.nodes)):
        raise ConversionError("the converted graph changes with the input size, so pruning cannot be applied alike "
                              "at every size (bounded dimensions need one graph for every size); convert a static "
                              "file per size instead")
    for s, d, before in zip(src.nodes, dst.nodes, attrs_before):
        inputs = []
        for j, t in enumerate(s.inputs):
            if t and src.tensors[t].is_const:
                dst.tensors[t] = copy.copy(src.tensors[t])
                inputs.append(t)
            else:
                inputs.append(d.inputs[j] if j < len(d.inputs) else t)
        d.inputs = inputs
        d.attrs.update({k: v for k, v in s.attrs.items() if k not in before or _differs(before[k], v)})
    channel.reinfer_shapes(dst)
    dst.remove_unused_tensors()


def _differs(a: Any, b: Any) -> bool:
    try:
        return bool(np.any(np.asarray(a) != np.asarray(b))) or np.shape(a) != np.shape(b)
    except Exception:  # values numpy cannot compare
        return a is not b
