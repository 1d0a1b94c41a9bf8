"""The writer of the .edgert file format (docs/format.md; the layout is edgert.fileformat)."""
from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from .. import dtypes
from . import ops as edgert_ops
from ..errors import ConversionError
from .ir import Graph
from .planner import Plan
from ..fileformat import (_ENTRY, RECORD_SIZE, _GRAPH, _HEADER, _NODE, _QUANT, _TENSOR, ABSENT, BOUNDS, CONSTANTS,
                          CONST_ALIGN, ENTRY_SIZE, GRAPH, HEADER_SIZE, INDICES, MAGIC, METADATA, NODES, PARAMS,
                          QUANT, QUANT_SIZE, REQUIRED, SPARSE, STATE, STATE_HEAD, STATE_INITIAL, STATE_RECORD,
                          STORAGE_SPARSE, STRINGS, TENSORS, VERSION, MINOR_BASE, seal)



def pack_params(values: list[Any], what: str) -> np.ndarray:
    """Python ints become int32 words, floats binary32 words."""
    words = np.zeros(len(values), np.uint32)
    for k, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)):
            v = int(v)
        if isinstance(v, (int, np.integer)):
            v = int(v)
            if not -(2**31) <= v < 2**31:
                raise ConversionError(f"{what}: parameter {k} = {v} does not fit in int32")
            words[k] = v & 0xFFFFFFFF
        elif isinstance(v, (float, np.floating)):
            words[k] = np.array([v], np.float32).view(np.uint32)[0]
        else:
            raise ConversionError(f"{what}: parameter {k} has type {type(v).__name__}")
    return words


class _Strings:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.index: dict[str, tuple[int, int]] = {}

    def add(self, s: str) -> tuple[int, int]:
        if s not in self.index:
            try:
                b = s.encode("utf-8")
            except UnicodeEncodeError:
                raise ConversionError(f"name {s!r} is not valid Unicode text") from None
            if b"\0" in b:
                raise ConversionError(f"name {s!r} contains a NUL character, which .edgert names cannot hold")
            self.index[s] = (len(self.buf), len(b))
            self.buf += b + b"\0"
        return self.index[s]


def write(g: Graph, p: Plan, metadata: dict | None = None, state=()) -> bytes:
    """Serializes a planned graph. Tensors are written in a stable order: graph inputs,
    state tensors, node outputs in execution order, then constants. `state`: the state
    pairs [(input, output, initial value or None for zeros)], planned in p's state region."""
    strings = _Strings()
    order: list[str] = []
    seen: set[str] = set()

    def visit(t: str) -> None:
        if t and t not in seen:
            seen.add(t)
            order.append(t)

    for t in g.inputs:
        visit(t)
    for pair in state:
        visit(pair[0])
        visit(pair[1])
    for n in g.nodes:
        for o in n.outputs:
            visit(o)
    for n in g.nodes:
        for i in n.inputs:
            visit(i)
    for t in g.outputs:
        visit(t)
    tindex = {t: k for k, t in enumerate(order)}

    consts = ConstantPool()
    quant_records = bytearray()
    sparse_names = g.metadata.get("sparse_tensors") or ()
    sparse_records = bytearray()
    trecs = bytearray()
    for t in order:
        ten = g.tensors[t]
        try:
            code = dtypes.code_of(ten.dtype)
        except KeyError:
            raise ConversionError(f"tensor {t!r} has dtype {ten.dtype}, which edgert files cannot hold") from None
        if len(ten.shape) > 8:
            raise ConversionError(f"tensor {t!r} has rank {len(ten.shape)} > 8")
        shape = list(ten.shape) + [0] * (8 - len(ten.shape))
        if any(d >= 2**31 for d in ten.shape):
            raise ConversionError(f"tensor {t!r} has a dimension too large")
        qidx = ABSENT
        if ten.quant is not None:
            qidx = len(quant_records) // QUANT_SIZE
            q = ten.quant
            sc = np.ascontiguousarray(q.scale, np.float32).reshape(-1)
            zp = np.ascontiguousarray(q.zero_point, np.int32).reshape(-1)
            so = consts.add(sc.tobytes(), 4)
            zo = consts.add(zp.tobytes(), 4)
            axis = -1 if q.axis is None else q.axis % max(len(ten.shape), 1)
            quant_records += _QUANT.pack(axis, sc.size, so, zo, b"\0" * 8)
        if ten.is_const and t in sparse_names:
            from .sparse import encode_record
            off = len(sparse_records) // RECORD_SIZE
            sparse_records += encode_record(consts, tindex[t], ten.data.astype(ten.dtype, copy=False))
            storage = STORAGE_SPARSE
        elif ten.is_const:
            data = np.ascontiguousarray(ten.data.astype(ten.dtype, copy=False)).tobytes()
            off = consts.add(data, CONST_ALIGN)
            storage = 1
        else:
            if t not in p.offsets:
                raise ConversionError(f"tensor {t!r} has no arena offset")
            off = p.offsets[t]
            storage = 0
        so, sl = strings.add(t)
        trecs += _TENSOR.pack(so, sl, code, len(ten.shape), storage, 0, qidx, *shape, off, ten.nbytes)

    indices: list[int] = []
    params = [np.zeros(0, np.uint32)]
    n_params = 0
    nrecs = bytearray()
    for k, n in enumerate(g.nodes):
        opdef = edgert_ops.get(n.op)
        words = pack_params(opdef.pack(n, g), f"node {n.name} ({n.op})")
        in_start = len(indices)
        indices += [tindex[i] if i else ABSENT for i in n.inputs]
        out_start = len(indices)
        indices += [tindex[o] for o in n.outputs]
        so, sl = strings.add(n.name)
        soff, sbytes = p.scratch.get(k, (0, 0))
        nrecs += _NODE.pack(opdef.code, 0, so, sl, in_start, len(n.inputs), out_start, len(n.outputs),
                            n_params, len(words), soff, sbytes)
        params.append(words)
        n_params += len(words)
    gin = len(indices)
    indices += [tindex[t] for t in g.inputs]
    gout = len(indices)
    indices += [tindex[t] for t in g.outputs]
    grec = _GRAPH.pack(p.arena_bytes, p.lower_bound, gin, len(g.inputs), gout, len(g.outputs), b"\0" * 32)

    sections = [
        (STRINGS, bytes(strings.buf), 8, 0),
        (TENSORS, bytes(trecs), 8, len(order)),
        (NODES, bytes(nrecs), 8, len(g.nodes)),
        (INDICES, np.array(indices, np.uint32).tobytes(), 4, len(indices)),
        (PARAMS, np.concatenate(params).astype("<u4").tobytes(), 4, n_params),
        (GRAPH, grec, 8, 1),
    ]
    if quant_records:
        sections.append((QUANT, bytes(quant_records), 8, len(quant_records) // QUANT_SIZE))
    if sparse_records:
        sections.append((SPARSE, bytes(sparse_records), 8, len(sparse_records) // RECORD_SIZE))
    bounds = g.metadata.get("bounds")
    if bounds is not None:
        sections.append((BOUNDS, bounds.pack({t: k for k, t in enumerate(g.inputs)}, strings.add), 8, 0))
        sections[0] = (STRINGS, bytes(strings.buf), 8, 0)  # symbol names were added
    newest = bool(state) or bool(bounds is not None and bounds.code)  # uses minor 3
    if state:
        srecs = bytearray(STATE_HEAD.pack(len(state), 0, p.state_offset))
        for t_in, t_out, init in state:
            flags, ioff = 0, 0
            if init is not None and np.any(init):
                ten = g.tensors[t_in]
                data = np.ascontiguousarray(np.asarray(init).astype(ten.dtype, copy=False).reshape(ten.shape)).tobytes()
                flags, ioff = STATE_INITIAL, consts.add(data, CONST_ALIGN)
            srecs += STATE_RECORD.pack(tindex[t_in], tindex[t_out], flags, 0, ioff, 0)
        sections.append((STATE, bytes(srecs), 8, len(state)))
    if metadata:
        sections.append((METADATA, json.dumps(metadata, sort_keys=True).encode("utf-8"), 1, 0))
    sections.append((CONSTANTS, bytes(consts.buf), CONST_ALIGN, 0))

    table_off = HEADER_SIZE
    pos = table_off + ENTRY_SIZE * len(sections)
    entries = bytearray()
    body = bytearray()
    for kind, data, align, count in sections:
        start = (pos + align - 1) // align * align
        body += b"\0" * (start - pos)
        flags = 1 if kind in REQUIRED or kind in (SPARSE, STATE) else 0
        entries += _ENTRY.pack(kind, flags, start, len(data), align, count)
        body += data
        pos = start + len(data)
    rest = bytes(entries) + bytes(body)
    fields = [MAGIC, VERSION[0], VERSION[1] if newest else MINOR_BASE, 0, HEADER_SIZE + len(rest), HEADER_SIZE,
              len(sections), table_off, 0, ENTRY_SIZE, 0, b"\0" * 12]
    out = bytearray(_HEADER.pack(*fields) + rest)
    seal(out)
    return bytes(out)


class ConstantPool:
    """The CONSTANTS section being written. Every blob is stored once: adding bytes equal
    to a blob already stored (same length and SHA-256, then compared byte for byte) at
    a suitable alignment returns that blob's offset, so tensors with the same packed
    bytes share one range (docs/format.md, "Shared constants")."""

    def __init__(self, buf: bytearray | None = None) -> None:
        self.buf = buf if buf is not None else bytearray()
        self.blobs: dict[tuple[int, bytes], list[int]] = {}

    def add(self, data: bytes, align: int) -> int:
        key = (len(data), hashlib.sha256(data).digest())
        for off in self.blobs.get(key, ()):
            if off % align == 0 and self.buf[off:off + len(data)] == data:
                return off
        self.buf += b"\0" * ((-len(self.buf)) % align)
        off = len(self.buf)
        self.buf += data
        self.blobs.setdefault(key, []).append(off)
        return off
