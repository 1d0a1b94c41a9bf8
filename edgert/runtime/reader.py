"""The board's reader of .edgert files: the whole file as plain Python values, for
`edgert inspect`, the report and tests. The C loader is the validator that a session
relies on; this reader checks structure enough to report corrupt files clearly."""
from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np

from .. import dtypes
from .._oplist import NAMES
from ..errors import ModelFormatError
from ..fileformat import (_ENTRY, _GRAPH, _HEADER, _NODE, _RECORD, _TENSOR, ABSENT, BOUNDS, CONSTANTS, ENTRY_SIZE,
                          GRAPH, HEADER_SIZE, INDICES, MAGIC, METADATA, NODE_SIZE, NODES, PARAMS, RECORD_SIZE, REQUIRED,
                          SECTION_NAMES, SPARSE, STATE, STATE_INITIAL, STORAGE_SPARSE, STRINGS, TENSOR_SIZE, TENSORS, VERSION,
                          unpack_bounds, unpack_state)


def read(data: bytes) -> dict[str, Any]:
    """Parses a file into plain Python values (for inspect and tests). Checks structure
    enough to report corrupt files clearly; the C loader is the full validator."""
    data = bytes(data)
    if len(data) < HEADER_SIZE or data[:8] != MAGIC:
        raise ModelFormatError("not an .edgert file (bad magic)")
    (_, major, minor, flags, size, hsize, nsec, toff, crc, esize, hcrc, reserved) = _HEADER.unpack_from(data, 0)
    if major != VERSION[0]:
        raise ModelFormatError(f"format version {major}.{minor} is not supported (this reader: {VERSION[0]}.x)")
    if flags != 0 or any(reserved) or (minor == 0 and hcrc != 0):
        raise ModelFormatError("header flags or reserved bytes are not zero: the file is corrupt")
    if minor >= 1 and zlib.crc32(data[:48]) & 0xFFFFFFFF != hcrc:
        raise ModelFormatError("header checksum mismatch: the file is corrupt")
    if size != len(data):
        raise ModelFormatError(f"file is {len(data)} bytes, header says {size} (truncated or padded)")
    if zlib.crc32(data[HEADER_SIZE:]) & 0xFFFFFFFF != crc:
        raise ModelFormatError("checksum mismatch: the file is corrupt")
    secs: dict[int, tuple[int, int, int]] = {}
    for k in range(nsec):
        kind, sflags, off, ssize, align, count = _ENTRY.unpack_from(data, toff + k * ENTRY_SIZE)
        if off + ssize > len(data):
            raise ModelFormatError(f"section {kind} is out of bounds")
        secs[kind] = (off, ssize, count)
    for kind in REQUIRED:
        if kind not in secs:
            raise ModelFormatError(f"required section {SECTION_NAMES[kind]} missing")

    def sec(kind: int) -> bytes:
        off, ssize, _ = secs[kind]
        return data[off:off + ssize]

    strings = sec(STRINGS)

    def string(off: int, n: int) -> str:
        return strings[off:off + n].decode("utf-8", "replace")

    tensors = []
    tb = sec(TENSORS)
    const_off = secs[CONSTANTS][0]
    for k in range(secs[TENSORS][2]):
        so, sl, code, ndim, storage, _, q, *rest = _TENSOR.unpack_from(tb, k * TENSOR_SIZE)
        shape, off, nbytes = rest[:8][:ndim], rest[8], rest[9]
        tensors.append({"name": string(so, sl), "dtype": dtypes.NAMES.get(code, f"?{code}"), "dtype_code": code,
                        "shape": list(shape),
                        "storage": {1: "constant", STORAGE_SPARSE: "sparse"}.get(storage, "arena"),
                        "offset": off, "nbytes": nbytes, "quant": None if q == ABSENT else q,
                        "file_offset": const_off + off if storage == 1 else None})
    if SPARSE in secs:
        sb = sec(SPARSE)
        for k in range(min(secs[SPARSE][2], len(sb) // RECORD_SIZE)):
            ti, _, bm_off, val_off, nnz = _RECORD.unpack_from(sb, k * RECORD_SIZE)
            if ti < len(tensors):
                tensors[ti]["sparse"] = {"bitmap_offset": bm_off, "values_offset": val_off, "nnz": nnz}
    idx = np.frombuffer(sec(INDICES), "<u4")
    params = np.frombuffer(sec(PARAMS), "<u4")
    nodes = []
    nb = sec(NODES)
    for k in range(secs[NODES][2]):
        op, _, so, sl, i0, ni, o0, no, p0, npar, soff, sbytes = _NODE.unpack_from(nb, k * NODE_SIZE)
        nodes.append({"op": NAMES.get(op, f"?{op}"), "name": string(so, sl),
                      "inputs": [int(x) if x != ABSENT else None for x in idx[i0:i0 + ni]],
                      "outputs": [int(x) for x in idx[o0:o0 + no]],
                      "params": params[p0:p0 + npar].copy(), "scratch": (soff, sbytes)})
    arena, lower, gi, ngi, go, ngo, _ = _GRAPH.unpack_from(sec(GRAPH), 0)
    bounds = None
    if BOUNDS in secs:
        bounds = unpack_bounds(sec(BOUNDS), strings, [tensors[int(x)]["name"] for x in idx[gi:gi + ngi]])
    state = None
    if STATE in secs:
        region, recs = unpack_state(sec(STATE))
        state = {"region_offset": region,
                 "pairs": [{"input": tensors[i]["name"] if i < len(tensors) else i,
                            "output": tensors[o]["name"] if o < len(tensors) else o,
                            "initial": "constant" if f & STATE_INITIAL else "zeros"} for i, o, f, _ in recs]}
    meta = {}
    if METADATA in secs:
        try:
            meta = json.loads(sec(METADATA).decode("utf-8"))
        except ValueError:
            meta = {}
    return {
        "version": f"{major}.{minor}",
        "file_bytes": len(data),
        "sections": {SECTION_NAMES.get(k, str(k)): {"offset": v[0], "bytes": v[1]} for k, v in secs.items()},
        "tensors": tensors,
        "nodes": nodes,
        "inputs": [int(x) for x in idx[gi:gi + ngi]],
        "outputs": [int(x) for x in idx[go:go + ngo]],
        "arena_bytes": arena,
        "arena_lower_bound_bytes": lower,
        "metadata": meta,
        "constants_bytes": secs[CONSTANTS][1],
        "bounds": bounds,
        "state": state,
    }
