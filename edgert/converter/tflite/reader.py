"""A bounds-checked reader of .tflite flatbuffers (schema version 3, identifier "TFL3").

The file is untrusted: every offset, vtable, vector and string is checked against the
file's bytes before it is read, so that a truncated or hostile file gives a
ConversionError naming what is wrong, never an IndexError or a read past the end.
Only the tables the importer uses are decoded; field ids are the schema's (a union
field takes two ids: its type, then its value), as in schema.py.

read_model(data) -> Model: operator codes, subgraphs (tensors, operators, inputs,
outputs) and buffers as plain Python values; no flatbuffers package needed.
"""
from __future__ import annotations

import dataclasses
import struct

import numpy as np

from ...errors import ConversionError
from .schema import FILE_IDENTIFIER

# enum TensorType -> numpy dtype (None: a type the importer never reads as data)
TENSOR_DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 5: None, 6: np.bool_,
                 7: np.int16, 8: None, 9: np.int8, 10: np.float64, 11: None, 12: np.uint64, 13: None,
                 14: None, 15: np.uint32, 16: np.uint16, 17: None}
TENSOR_TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
                     7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128", 12: "UINT64",
                     13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4"}

# Limits on counts, so that a hostile file cannot make the reader loop or allocate
# far beyond its own size (every element of a vector takes at least one byte anyway).
MAX_RANK = 8


def is_tflite(data: bytes) -> bool:
    """True when `data` carries the TFLite file identifier at bytes 4..8."""
    return len(data) >= 8 and bytes(data[4:8]) == FILE_IDENTIFIER


class _Buf:
    def __init__(self, data: bytes):
        self.data = memoryview(data)
        self.n = len(data)

    def fail(self, what: str):
        raise ConversionError(f"invalid .tflite file: {what}")

    def need(self, pos: int, size: int, what: str) -> None:
        if pos < 0 or size < 0 or pos + size > self.n:
            self.fail(f"{what} at byte {pos} (+{size}) lies outside the file ({self.n} bytes)")

    def u8(self, pos, what):
        self.need(pos, 1, what)
        return self.data[pos]

    def unpack(self, fmt: str, pos: int, what: str):
        size = struct.calcsize(fmt)
        self.need(pos, size, what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def table(self, pos: int, what: str) -> "_Table":
        self.need(pos, 4, what)
        vt = pos - self.unpack("<i", pos, what)
        self.need(vt, 4, f"{what} vtable")
        vt_size = self.unpack("<H", vt, f"{what} vtable")
        tbl_size = self.unpack("<H", vt + 2, f"{what} vtable")
        if vt_size < 4 or vt_size % 2:
            self.fail(f"{what}: vtable size {vt_size}")
        self.need(vt, vt_size, f"{what} vtable")
        self.need(pos, tbl_size, what)
        return _Table(self, pos, vt, vt_size, tbl_size, what)


class _Table:
    def __init__(self, buf: _Buf, pos: int, vt: int, vt_size: int, tbl_size: int, what: str):
        self.b, self.pos, self.vt, self.vt_size, self.tbl_size, self.what = buf, pos, vt, vt_size, tbl_size, what

    def _field(self, fid: int, size: int) -> int | None:
        """Absolute position of field `fid` (checked to lie within the table), None if absent."""
        slot = 4 + 2 * fid
        if slot + 2 > self.vt_size:
            return None
        off = self.b.unpack("<H", self.vt + slot, self.what)
        if off == 0:
            return None
        if off + size > self.tbl_size:
            self.b.fail(f"{self.what}: field {fid} lies outside its table")
        return self.pos + off

    def scalar(self, fid: int, fmt: str, default):
        p = self._field(fid, struct.calcsize(fmt))
        return default if p is None else self.b.unpack("<" + fmt, p, f"{self.what} field {fid}")

    def _target(self, fid: int) -> int | None:
        p = self._field(fid, 4)
        if p is None:
            return None
        return p + self.b.unpack("<I", p, f"{self.what} field {fid}")

    def sub(self, fid: int, what: str) -> "_Table | None":
        t = self._target(fid)
        return None if t is None else self.b.table(t, what)

    def _vector(self, fid: int, elem: int, what: str) -> tuple[int, int] | None:
        t = self._target(fid)
        if t is None:
            return None
        n = self.b.unpack("<I", t, what)
        self.b.need(t + 4, n * elem, f"{what} ({n} elements)")
        return t + 4, n

    def vec(self, fid: int, dtype, what: str) -> np.ndarray | None:
        dt = np.dtype(dtype).newbyteorder("<")
        v = self._vector(fid, dt.itemsize, what)
        if v is None:
            return None
        start, n = v
        return np.frombuffer(self.b.data, dt, n, start).astype(dt.newbyteorder("="))

    def bytes_(self, fid: int, what: str) -> memoryview | None:
        v = self._vector(fid, 1, what)
        return None if v is None else self.b.data[v[0]:v[0] + v[1]]

    def string(self, fid: int, what: str) -> str | None:
        raw = self.bytes_(fid, what)
        return None if raw is None else bytes(raw).decode("utf-8", "replace")

    def tables(self, fid: int, what: str) -> list["_Table"]:
        v = self._vector(fid, 4, what)
        if v is None:
            return []
        start, n = v
        out = []
        for i in range(n):
            p = start + 4 * i
            out.append(self.b.table(p + self.b.unpack("<I", p, what), f"{what}[{i}]"))
        return out


@dataclasses.dataclass
class Quantization:
    scale: np.ndarray | None
    zero_point: np.ndarray | None
    axis: int


@dataclasses.dataclass
class TensorInfo:
    index: int
    name: str
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None
    type: int
    buffer: int
    quant: Quantization | None
    is_variable: bool
    sparse: bool

    @property
    def type_name(self) -> str:
        return TENSOR_TYPE_NAMES.get(self.type, f"type {self.type}")


@dataclasses.dataclass
class OperatorInfo:
    index: int
    opcode: int
    inputs: list[int]  # -1: an absent optional input
    outputs: list[int]
    options_type: int
    options: _Table | None
    custom_options: bytes | None


@dataclasses.dataclass
class SubGraphInfo:
    name: str
    tensors: list[TensorInfo]
    operators: list[OperatorInfo]
    inputs: list[int]
    outputs: list[int]


@dataclasses.dataclass
class OpCode:
    builtin: int
    custom: str | None
    version: int


@dataclasses.dataclass
class Model:
    version: int
    opcodes: list[OpCode]
    subgraphs: list[SubGraphInfo]
    buffers: list[memoryview | None]
    description: str
    nbytes: int


def _int_list(v: np.ndarray | None) -> list[int]:
    return [] if v is None else [int(x) for x in v]


def read_model(data: bytes) -> Model:
    """The Model of .tflite bytes; ConversionError when any part is malformed."""
    data = bytes(data)
    if not is_tflite(data):
        raise ConversionError("not a .tflite file (no 'TFL3' identifier at byte 4)")
    b = _Buf(data)
    root = b.table(b.unpack("<I", 0, "root offset"), "model")
    version = root.scalar(0, "I", 0)
    if version != 3:
        raise ConversionError(f"invalid .tflite file: schema version {version}, edgert reads version 3")
    opcodes = []
    for i, t in enumerate(root.tables(1, "operator_codes")):
        dep = t.scalar(0, "b", 0)
        code = t.scalar(3, "i", 0)
        opcodes.append(OpCode(max(int(dep), int(code)), t.string(1, f"operator_codes[{i}].custom_code"),
                              t.scalar(2, "i", 1)))
    buffers: list[memoryview | None] = []
    for i, t in enumerate(root.tables(4, "buffers")):
        raw = t.bytes_(0, f"buffers[{i}].data")
        off, size = t.scalar(1, "Q", 0), t.scalar(2, "Q", 0)
        if off > 1:  # large models: data outside the flatbuffer, offset from the file's start
            if off + size > len(data):
                b.fail(f"buffers[{i}] at byte {off} (+{size}) lies outside the file ({len(data)} bytes)")
            raw = b.data[off:off + size]
        buffers.append(raw if raw is not None and len(raw) else None)
    subgraphs = [_subgraph(t, i, len(opcodes), len(buffers)) for i, t in enumerate(root.tables(2, "subgraphs"))]
    if not subgraphs:
        b.fail("the model has no subgraph")
    return Model(version, opcodes, subgraphs, buffers, root.string(3, "description") or "", len(data))


def _subgraph(t: _Table, si: int, n_opcodes: int, n_buffers: int) -> SubGraphInfo:
    where = f"subgraphs[{si}]"
    tensors = []
    for i, tt in enumerate(t.tables(0, f"{where}.tensors")):
        w = f"{where}.tensors[{i}]"
        shape = tuple(_int_list(tt.vec(0, np.int32, f"{w}.shape")))
        sig = tt.vec(7, np.int32, f"{w}.shape_signature")
        name = tt.string(3, f"{w}.name") or f"tensor_{i}"
        if len(shape) > MAX_RANK or any(d < 0 for d in shape):
            raise ConversionError(f"invalid .tflite file: tensor {name!r} has shape {list(shape)}")
        buf = tt.scalar(2, "I", 0)
        if buf >= max(n_buffers, 1):
            raise ConversionError(f"invalid .tflite file: tensor {name!r} refers to buffer {buf}, the model has "
                                  f"{n_buffers}")
        q = None
        qt = tt.sub(4, f"{w}.quantization")
        if qt is not None:
            scale = qt.vec(2, np.float32, f"{w}.quantization.scale")
            zp = qt.vec(3, np.int64, f"{w}.quantization.zero_point")
            if scale is not None and len(scale):
                q = Quantization(scale, zp, int(qt.scalar(6, "i", 0)))
        tensors.append(TensorInfo(i, name, shape, None if sig is None else tuple(int(x) for x in sig),
                                  int(tt.scalar(1, "b", 0)), int(buf), q, bool(tt.scalar(5, "B", 0)),
                                  tt.sub(6, f"{w}.sparsity") is not None))
    n = len(tensors)

    def indices(v, what, allow_absent):
        out = _int_list(v)
        for k in out:
            if not (0 <= k < n or (allow_absent and k == -1)):
                raise ConversionError(f"invalid .tflite file: {what} refers to tensor {k}, the subgraph has {n}")
        return out

    ops = []
    for i, ot in enumerate(t.tables(3, f"{where}.operators")):
        w = f"{where}.operators[{i}]"
        code = ot.scalar(0, "I", 0)
        if code >= n_opcodes:
            raise ConversionError(f"invalid .tflite file: {w} uses operator code {code}, the model has {n_opcodes}")
        opt_type = int(ot.scalar(3, "B", 0))
        opts = ot.sub(4, f"{w}.builtin_options") if opt_type else None
        custom = ot.bytes_(5, f"{w}.custom_options")
        ops.append(OperatorInfo(i, int(code), indices(ot.vec(1, np.int32, f"{w}.inputs"), f"{w}.inputs", True),
                                indices(ot.vec(2, np.int32, f"{w}.outputs"), f"{w}.outputs", False),
                                opt_type, opts, None if custom is None else bytes(custom)))
    return SubGraphInfo(t.string(4, f"{where}.name") or "", tensors, ops,
                        indices(t.vec(1, np.int32, f"{where}.inputs"), f"{where}.inputs", False),
                        indices(t.vec(2, np.int32, f"{where}.outputs"), f"{where}.outputs", False))
