"""The .edgert file's layout (docs/format.md): magic, version, section kinds, record
sizes and their struct layouts, and the checksums. The one module both sides use: the
converter's writer (edgert.converter.writer) and the board's reader
(edgert.runtime.reader). Standard library only."""
from __future__ import annotations

import struct
import zlib
from typing import Any

MAGIC = b"\x89ERT\r\n\x1a\n"
VERSION = (1, 3)  # the newest this code reads and writes
# Files that use nothing of minor 3 (a STATE section, expression programs in BOUNDS) are
# written as 1.2, so that a 1.2 runtime still runs them.
MINOR_BASE = 2
HEADER_SIZE = 64
ENTRY_SIZE = 32
TENSOR_SIZE = 64
NODE_SIZE = 56
GRAPH_SIZE = 64
QUANT_SIZE = 32
ABSENT = 0xFFFFFFFF
CONST_ALIGN = 64

STRINGS, TENSORS, NODES, INDICES, PARAMS, CONSTANTS, GRAPH, QUANT, METADATA = range(1, 10)
SPARSE = 11  # optional, but flagged required when present (docs/sparse.md)
BOUNDS = 12  # optional: bounded dimensions (docs/format.md); older runtimes run the upper bounds
STATE = 13  # optional, but flagged required when present: state tensors carried from run to run (minor 3)
SECTION_NAMES = {1: "strings", 2: "tensors", 3: "nodes", 4: "indices", 5: "params", 6: "constants",
                 7: "graph", 8: "quant", 9: "metadata", 11: "sparse", 12: "bounds", 13: "state"}
REQUIRED = {STRINGS, TENSORS, NODES, INDICES, PARAMS, CONSTANTS, GRAPH}
STORAGE_SPARSE = 2

_HEADER = struct.Struct("<8sHHIQIIQIII12s")  # ..., file CRC, entry size, header CRC, reserved
_ENTRY = struct.Struct("<IIQQII")
_TENSOR = struct.Struct("<IIBBBBI8iQQ")
_NODE = struct.Struct("<IIIIIIIIIIQQ")
_GRAPH = struct.Struct("<QQIIII32s")
_QUANT = struct.Struct("<iIQQ8s")
assert _HEADER.size == HEADER_SIZE and _ENTRY.size == ENTRY_SIZE and _TENSOR.size == TENSOR_SIZE
assert _NODE.size == NODE_SIZE and _GRAPH.size == GRAPH_SIZE and _QUANT.size == QUANT_SIZE

# ---- the SPARSE section: one record per sparse-stored constant (docs/sparse.md)
RECORD_SIZE = 32
ENC_BITMAP = 0
_RECORD = struct.Struct("<IIQQQ")
assert _RECORD.size == RECORD_SIZE

# ---- the BOUNDS section: symbols, their input dims, and the rules evaluated at run
# time (docs/runtime.md, "Bounded dimensions")
(RULE_PARAM, RULE_OUTDIM, RULE_INFER, RULE_PARAM_SYM, RULE_RESIZE_NEAREST, RULE_SAME, RULE_STEP, RULE_RESIZE,
 RULE_SLICE, RULE_PARAM_EXPR, RULE_OUTDIM_EXPR) = range(11)
RULE_NO_NODE = 0xFFFFFFFF  # the node of a STEP rule (a constraint on a symbol, after every node's rules)

# ---- the STATE section (docs/format.md, "State"): a 16-byte head (u32 count, u32 reserved,
# u64 the state region's offset in the arena) and one 32-byte record per state: u32 input
# tensor, u32 output tensor, u32 flags (STATE_INITIAL: an initial value in CONSTANTS, else
# zeros), u32 reserved, u64 the initial value's offset in CONSTANTS, u64 reserved.
STATE_HEAD = struct.Struct("<IIQ")
STATE_RECORD = struct.Struct("<IIIIQQ")
STATE_INITIAL = 1
assert STATE_HEAD.size == 16 and STATE_RECORD.size == 32


def unpack_state(data: bytes) -> tuple[int, list[tuple[int, int, int, int]]]:
    """(region offset, [(input tensor, output tensor, flags, initial offset)]) of a STATE section."""
    count, _, region = STATE_HEAD.unpack_from(data, 0)
    recs = [STATE_RECORD.unpack_from(data, STATE_HEAD.size + k * STATE_RECORD.size)[:5] for k in range(count)]
    return region, [(i, o, f, off) for i, o, f, _, off in recs]


_HEAD = struct.Struct("<IIII")
_SYM = struct.Struct("<IIqq")
_BIND = struct.Struct("<III")
_RULE = struct.Struct("<IIIIIi")


def unpack_bounds(data: bytes, strings: bytes, inputs: list[str]) -> dict[str, Any]:
    """The BOUNDS section as plain values (for inspect): symbols, bindings, the rule
    count and the expression rules ({"node", "kind", "code": program words})."""
    ns, nb, nr, nc = _HEAD.unpack_from(data, 0)
    pos = _HEAD.size
    syms = []
    for _ in range(ns):
        off, n, lo, hi = _SYM.unpack_from(data, pos)
        pos += _SYM.size
        syms.append({"name": strings[off:off + n].decode("utf-8", "replace"), "lo": lo, "hi": hi})
    binds = []
    for _ in range(nb):
        i, d, s = _BIND.unpack_from(data, pos)
        pos += _BIND.size
        binds.append({"input": inputs[i] if i < len(inputs) else i, "dim": d, "symbol": syms[s]["name"]})
    rules = []
    for _ in range(nr):
        rules.append(_RULE.unpack_from(data, pos))
        pos += _RULE.size
    code = list(struct.unpack_from(f"<{nc}I", data, pos)) if nc else []
    exprs = []
    for node, kind, sym, lo, step, hi in rules:
        if kind == RULE_STEP and node == RULE_NO_NODE and sym < len(syms):
            mask = lo | (hi & 0xFFFFFFFF) << 32
            syms[sym]["step"] = [step, [r for r in range(64) if mask >> r & 1]]
        if kind in (RULE_PARAM_EXPR, RULE_OUTDIM_EXPR):
            exprs.append({"node": node, "kind": kind, "target": step, "code": code[sym:sym + lo]})
    return {"symbols": syms, "binds": binds, "rules": nr, "exprs": exprs}


def seal(buf: bytearray) -> None:
    """Sets, in place, the checksums of a whole file: the file CRC over every byte after
    the header, then the header CRC over the header bytes before it (0..47). Also what
    an edit of a valid file (edgert.cli.subgraph) calls last."""
    fields = list(_HEADER.unpack_from(buf, 0))
    fields[8] = zlib.crc32(bytes(buf[HEADER_SIZE:])) & 0xFFFFFFFF
    _HEADER.pack_into(buf, 0, *fields)
    fields[10] = zlib.crc32(bytes(buf[:48])) & 0xFFFFFFFF
    _HEADER.pack_into(buf, 0, *fields)


