"""A finished graph to the bytes of its file: shared constants merged, the arena planned
and verified, partition metadata gathered, then written. The one step that the
converter's pipeline and the stages that run a graph before the end (calibration,
pruning's evaluation) share."""
from __future__ import annotations

from . import planner
from . import writer as fmt
from .ir import Graph
from .partitioner import metadata as partition_metadata
from .passes import share_constants


def serialize(g: Graph, metadata: dict | None = None) -> bytes:
    share_constants.run(g)  # quantization and sparse kernels may have copied shared weights
    p = planner.plan(g)
    planner.verify(g, p)
    meta = {"producer": "edgert", "output_names": g.metadata.get("output_names")}
    sources = {k: v for k, v in (g.metadata.get("const_sources") or {}).items() if k in g.tensors and k != v}
    if sources:
        meta["constant_sources"] = dict(sorted(sources.items()))
    parts = partition_metadata(g)
    if parts:
        meta["partitions"] = parts
    meta.update(metadata or {})
    return fmt.write(g, p, meta)
