"""Graph passes: each module holds one small pass `run(graph) -> bool` (True when it
changed the graph). PIPELINE is the one ordered list the converter runs, repeated
until nothing changes."""
from __future__ import annotations

from ..ir import Graph
from . import (batch_gemms, dce, fold_batchnorm, fold_constants, fold_conv_input, fuse_activation, fuse_gelu,
               fuse_hard_swish, fuse_layernorm, fuse_silu, remove_identity, share_constants)

PIPELINE = [
    fold_constants,
    dce,
    remove_identity,
    fuse_hard_swish,
    fuse_silu,
    fuse_gelu,
    fuse_layernorm,
    fold_batchnorm,
    fold_conv_input,
    fuse_activation,
    share_constants,
    batch_gemms,
]


def run_pipeline(g: Graph, max_rounds: int = 8) -> list[str]:
    """Runs every pass in order until a round changes nothing; returns the names of the
    passes that changed something (for the conversion report)."""
    applied: list[str] = []
    for _ in range(max_rounds):
        changed = False
        for p in PIPELINE:
            if p.run(g):
                changed = True
                applied.append(p.__name__.rsplit(".", 1)[-1])
        if not changed:
            break
    g.toposort()
    return applied
