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


def serialize(g: Graph, metadata: dict | None = None, state=None) -> bytes:
    """state: (pairs ((output, input), ...), {input: initial value}) to bind
    (edgert/converter/state.py): the pairs leave the inputs and outputs and are written
    as state tensors."""
    share_constants.run(g)  # quantization and sparse kernels may have copied shared weights
    bound = []
    if state and state[0]:
        from .state import bind
        g, bound = bind(g, state[0], state[1])
    pairs = [(i, o) for i, o, _ in bound]
    p = planner.plan(g, pairs)
    planner.verify(g, p, pairs)
    meta = {"producer": "edgert", "output_names": g.metadata.get("output_names")}
    sources = {k: v for k, v in (g.metadata.get("const_sources") or {}).items() if k in g.tensors and k != v}
    if sources:
        meta["constant_sources"] = dict(sorted(sources.items()))
    parts = partition_metadata(g)
    if parts:
        meta["partitions"] = parts
    meta.update(metadata or {})
    if bound:
        meta["state"] = [{"input": i, "output": o, "initial": "zeros" if v is None or not v.any() else "constant"}
                         for i, o, v in bound]
    return fmt.write(g, p, meta, bound)
