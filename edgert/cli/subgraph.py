"""Prefixes of a converted model: the file of its first k+1 nodes whose only graph
output is node k's first output. A prefix is itself a valid .edgert file (same
tensors, constants and arena plan; the later nodes are left out), so the runtime and
edgert-run can run it unchanged: `edgert report` uses prefixes to read a layer's
values from the file itself and to count instructions per node under QEMU."""
from __future__ import annotations

from .. import fileformat as fmt
from ..errors import ModelFormatError


def prefix(data: bytes, k: int) -> bytes:
    """The model made of nodes 0..k of `data` (an .edgert file), with node k's first
    output as its only output."""
    buf = bytearray(data)
    fields = list(fmt._HEADER.unpack_from(buf, 0))
    nsec, toff = fields[6], fields[7]
    where = {}
    for s in range(nsec):
        kind, _, off, size, _, count = fmt._ENTRY.unpack_from(buf, toff + s * fmt.ENTRY_SIZE)
        where[kind] = (toff + s * fmt.ENTRY_SIZE, off, count)
    if fmt.NODES not in where or fmt.GRAPH not in where:
        raise ModelFormatError("not a complete .edgert file (nodes or graph section missing)")
    entry, noff, count = where[fmt.NODES]
    if not 0 <= k < count:
        raise ModelFormatError(f"node {k} out of range (the model has {count} nodes)")
    rec = fmt._NODE.unpack_from(buf, noff + k * fmt.NODE_SIZE)
    out_start, n_out = rec[6], rec[7]
    if n_out < 1:
        raise ModelFormatError(f"node {k} has no output")
    kind, flags, off, _, align, _ = fmt._ENTRY.unpack_from(buf, entry)
    fmt._ENTRY.pack_into(buf, entry, kind, flags, off, (k + 1) * fmt.NODE_SIZE, align, k + 1)
    _, goff, _ = where[fmt.GRAPH]
    arena, lower, gin, ngin, _, _, pad = fmt._GRAPH.unpack_from(buf, goff)
    fmt._GRAPH.pack_into(buf, goff, arena, lower, gin, ngin, out_start, 1, pad)
    fmt.seal(buf)
    return bytes(buf)
