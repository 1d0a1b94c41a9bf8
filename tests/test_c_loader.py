"""Robustness of the C loader and session against malformed .edgert files.

A small hand-built model (built here byte by byte, independently of edgert/fileformat.py,
so each field can be set to a bad value) is truncated, bit-flipped and patched field by
field; every load must either succeed or fail with an EdgertError carrying the expected
status, never crash. The mass mutation loops run in a subprocess so that a crash fails
the test instead of killing pytest.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.append(ROOT)  # an installed edgert comes first

import edgert  # noqa: E402
from edgert.errors import EdgertError  # noqa: E402

MAGIC = b"\x89ERT\r\n\x1a\n"
ABSENT = 0xFFFFFFFF
F32, U8, I8, I32 = 1, 2, 3, 6
OP_RELU = 40
STRINGS, TENSORS, NODES, INDICES, PARAMS, CONSTANTS, GRAPH, QUANT, METADATA = range(1, 10)

# Status codes (csrc/include/edgert.h).
IO, FORMAT, CHECKSUM, VERSION, ALIGNMENT = 100, 101, 102, 103, 104
UNSUPPORTED_OP, INVALID_ARGUMENT, ARENA_TOO_SMALL = 200, 500, 401


# ---- a byte-level writer ---------------------------------------------------------

def tensor(name, dtype, shape, storage=0, offset=0, nbytes=None, quant=ABSENT, rank=None, shape8=None):
    size = {1: 4, 2: 1, 3: 1, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2}.get(dtype, 4)
    return dict(name=name, dtype=dtype, shape=list(shape), storage=storage, offset=offset,
                nbytes=int(np.prod(shape, dtype=np.int64)) * size if nbytes is None else nbytes,
                quant=quant, rank=len(shape) if rank is None else rank, shape8=shape8)


def node(op, inputs, outputs, name="", params=(), scratch=(0, 0)):
    return dict(op=op, inputs=list(inputs), outputs=list(outputs), name=name, params=list(params), scratch=scratch)


def build(tensors, nodes, inputs, outputs, arena_bytes, consts=b"", quants=(), extra_sections=(),
          section_hook=None) -> bytes:
    """Writes the file layout of docs/format.md. `quants` are (axis, count, scale_off,
    zp_off); `extra_sections` are (kind, flags, data, align, count); `section_hook`
    may edit the list of (kind, flags, data, align, count) before layout."""
    strings = bytearray()

    def s(text):
        off = len(strings)
        b = text.encode()
        strings.extend(b + b"\0")
        return off, len(b)

    trecs = bytearray()
    for t in tensors:
        so, sl = s(t["name"])
        shape8 = t["shape8"] or (t["shape"] + [0] * (8 - len(t["shape"])))[:8]
        trecs += struct.pack("<IIBBBBI8iQQ", so, sl, t["dtype"], t["rank"], t["storage"], 0, t["quant"],
                             *shape8, t["offset"], t["nbytes"])
    indices, params, nrecs = [], [], bytearray()
    for n in nodes:
        so, sl = s(n["name"])
        i0 = len(indices)
        indices += n["inputs"]
        o0 = len(indices)
        indices += n["outputs"]
        p0 = len(params)
        params += n["params"]
        nrecs += struct.pack("<IIIIIIIIIIQQ", n["op"], 0, so, sl, i0, len(n["inputs"]), o0, len(n["outputs"]),
                             p0, len(n["params"]), n["scratch"][0], n["scratch"][1])
    gi = len(indices)
    indices += inputs
    go = len(indices)
    indices += outputs
    grec = struct.pack("<QQIIII32s", arena_bytes, arena_bytes, gi, len(inputs), go, len(outputs), b"\0" * 32)
    qrecs = b"".join(struct.pack("<iIQQ8s", *q, b"\0" * 8) for q in quants)
    secs = [
        [STRINGS, 1, bytes(strings), 8, 0],
        [TENSORS, 1, bytes(trecs), 8, len(tensors)],
        [NODES, 1, bytes(nrecs), 8, len(nodes)],
        [INDICES, 1, struct.pack(f"<{len(indices)}I", *indices), 4, len(indices)],
        [PARAMS, 1, struct.pack(f"<{len(params)}I", *params), 4, len(params)],
        [GRAPH, 1, grec, 8, 1],
    ]
    if quants:
        secs.append([QUANT, 0, qrecs, 8, len(quants)])
    secs.append([METADATA, 0, json.dumps({"producer": "test"}).encode(), 1, 0])
    secs += [list(e) for e in extra_sections]
    secs.append([CONSTANTS, 1, bytes(consts), 64, 0])
    if section_hook:
        section_hook(secs)
    pos = 64 + 32 * len(secs)
    entries, body = bytearray(), bytearray()
    for kind, flags, data, align, count in secs:
        start = (pos + align - 1) // align * align
        body += b"\0" * (start - pos)
        entries += struct.pack("<IIQQII", kind, flags, start, len(data), align, count)
        body += data
        pos = start + len(data)
    rest = bytes(entries) + bytes(body)
    header = struct.pack("<8sHHIQIIQII16s", MAGIC, 1, 0, 0, 64 + len(rest), 64, len(secs), 64,
                         zlib.crc32(rest), 32, b"\0" * 16)
    return header + rest


def fix_crc(data: bytes | bytearray) -> bytes:
    """Recomputes the file CRC and, in files of minor >= 1, the header CRC."""
    data = bytearray(data)
    data[40:44] = struct.pack("<I", zlib.crc32(bytes(data[64:])))
    if len(data) >= 64 and data[10:12] != b"\0\0":
        data[48:52] = struct.pack("<I", zlib.crc32(bytes(data[:48])))
    return bytes(data)


def fix_size(data: bytes | bytearray) -> bytes:
    data = bytearray(data)
    data[16:24] = struct.pack("<Q", len(data))
    return bytes(data)


def section_offsets(data: bytes) -> dict[int, tuple[int, int]]:
    n, toff = struct.unpack_from("<I", data, 28)[0], struct.unpack_from("<Q", data, 32)[0]
    out = {}
    for k in range(n):
        kind, _, off, size, _, _ = struct.unpack_from("<IIQQII", data, toff + 32 * k)
        out[kind] = (off, size)
    return out


CONST_VALUES = np.array([1.5, -2.0, 3.25, 0.0], np.float32)


def base_parts():
    """x [2,3] -> relu -> t -> relu (with scratch) -> y; outputs y, the constant c (with
    a per-tensor QUANT record) and the graph input x."""
    consts = bytearray(CONST_VALUES.tobytes())
    consts += b"\0" * (64 - len(consts))
    scale_off = len(consts)
    consts += struct.pack("<f", 0.5) + struct.pack("<i", 3)
    tensors = [
        tensor("x", F32, [2, 3], offset=0),
        tensor("t", F32, [2, 3], offset=64),
        tensor("y", F32, [2, 3], offset=128),
        tensor("c", F32, [4], storage=1, offset=0, quant=0),
    ]
    nodes = [node(OP_RELU, [0], [1], name="relu_1"), node(OP_RELU, [1], [2], name="relu_2", scratch=(192, 64))]
    return dict(tensors=tensors, nodes=nodes, inputs=[0], outputs=[2, 3, 0], arena_bytes=256,
                consts=bytes(consts), quants=[(-1, 1, scale_off, scale_off + 4)])


def base_model(**changes) -> bytes:
    parts = base_parts()
    parts.update(changes)
    return build(**parts)


def relu_kernel_present() -> bool:
    try:
        edgert.Session(base_model())
        return True
    except EdgertError as e:
        if "no kernel in this build" in str(e):
            return False
        raise


def load_status(data: bytes) -> int:
    """0 when the model loads (and a session runs it on zeroed inputs), else the C
    status. Uses the C API directly so only the C library is under test."""
    from edgert.runtime.session import _load
    ffi, lib = _load()
    raw = np.zeros(len(data) + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    buf = raw[start:start + len(data)]
    buf[:] = np.frombuffer(data, np.uint8)
    out = ffi.new("edgert_model **")
    err = ffi.new("char[]", 512)
    st = lib.edgert_model_load_memory(ffi.cast("void *", buf.ctypes.data), len(data), out, err, 512)
    if st != 0:
        assert out[0] == ffi.NULL and ffi.string(err), st
        return st
    m = out[0]
    sp = ffi.new("edgert_session **")
    st = lib.edgert_session_create(m, ffi.NULL, sp) if lib.edgert_model_arena_bytes(m) < 2**26 else 0
    if st == 0 and sp[0] != ffi.NULL:
        info = ffi.new("edgert_tensor_info *")
        for k in range(lib.edgert_model_num_inputs(m)):
            lib.edgert_model_input_info(m, k, info)
            ffi.memmove(lib.edgert_session_input_data(sp[0], k), bytes(info.nbytes), info.nbytes)
        lib.edgert_session_run(sp[0])
        lib.edgert_session_destroy(sp[0])
    lib.edgert_model_free(m)
    return st


# ---- mass mutations, run in a subprocess ------------------------------------------

def _mutants(kind: str):
    data = base_model()
    n = len(data)
    if kind == "truncate":
        for k in range(n):
            yield data[:k]
            yield fix_crc(fix_size(data[:k])) if k >= 64 else data[:k]
        yield data + b"\0" * 8  # padded, header size not updated
    elif kind == "flip":
        for pos in range(n):
            for bit in (0, 3, 7):
                b = bytearray(data)
                b[pos] ^= 1 << bit
                yield bytes(b)
    elif kind == "flip_crc":
        for pos in range(n):
            if 40 <= pos < 44:
                continue
            for val in (0x00, 0xFF, 0x80, 0x7F, 0x01, 0x40):
                b = bytearray(data)
                if b[pos] == val:
                    continue
                b[pos] = val
                yield fix_crc(b)
            b = bytearray(data)
            b[pos] = (b[pos] + 1) & 0xFF
            yield fix_crc(b)


def _run_batch(kind: str) -> None:
    """Loads every mutant; prints a summary of statuses. Any crash kills the process."""
    counts: dict[int, int] = {}
    for m in _mutants(kind):
        st = load_status(m)
        counts[st] = counts.get(st, 0) + 1
    print(json.dumps({str(k): v for k, v in sorted(counts.items())}))


def _batch(kind: str) -> dict[int, int]:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), kind], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, f"mutation batch {kind} crashed (rc {r.returncode}):\n{r.stderr[-3000:]}"
    return {int(k): v for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}


@pytest.fixture(scope="module")
def kernel():
    assert relu_kernel_present(), "relu kernel not compiled into this build"


def test_valid_model_loads_and_runs(kernel):
    s = edgert.Session(base_model())
    assert [i.name for i in s.get_inputs()] == ["x"]
    assert [o.name for o in s.get_outputs()] == ["y", "c", "x"]
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    y, c, x2 = s.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    np.testing.assert_array_equal(c, CONST_VALUES)
    np.testing.assert_array_equal(x2, x)


def test_truncations_fail_cleanly(kernel):
    counts = _batch("truncate")
    assert set(counts) <= {FORMAT, CHECKSUM}, counts


def test_bit_flips_caught_by_checksum(kernel):
    counts = _batch("flip")
    # A flipped bit anywhere is caught: by the header checks or by the CRC.
    assert 0 not in counts, counts
    assert counts.get(CHECKSUM, 0) > sum(counts.values()) // 2, counts


def test_byte_changes_with_valid_crc_never_crash(kernel):
    counts = _batch("flip_crc")
    assert CHECKSUM not in counts, counts
    assert counts.get(FORMAT, 0) > 100, counts


# ---- targeted bad fields -----------------------------------------------------------

def code_of(data: bytes) -> int:
    with pytest.raises(EdgertError) as ei:
        edgert.Session(data)
    return ei.value.code


def test_unknown_op_code():
    p = base_parts()
    p["nodes"][0]["op"] = 9999
    assert code_of(build(**p)) == UNSUPPORTED_OP
    p["nodes"][0]["op"] = 5  # a gap in the op list
    assert code_of(build(**p)) == UNSUPPORTED_OP


def test_tensor_index_out_of_range():
    p = base_parts()
    p["nodes"][1]["inputs"] = [7]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["outputs"] = [2, 4]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["nodes"][0]["outputs"] = [ABSENT]
    assert code_of(build(**p)) == FORMAT


def test_misaligned_constant():
    p = base_parts()
    p["tensors"][3]["offset"] = 4
    p["consts"] = p["consts"] + b"\0" * 64
    assert code_of(build(**p)) == ALIGNMENT


def test_constant_outside_constants():
    p = base_parts()
    p["tensors"][3]["offset"] = 128
    assert code_of(build(**p)) == FORMAT


def test_arena_offset_past_arena():
    p = base_parts()
    p["tensors"][2]["offset"] = 256
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["tensors"][2]["offset"] = 2**64 - 8  # offset + size overflows
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["arena_bytes"] = 128
    assert code_of(build(**p)) == FORMAT


def test_bad_dtype_rank_and_sizes():
    for dtype in (0, 4, 8, 11, 16, 255):
        p = base_parts()
        p["tensors"][1]["dtype"] = dtype
        assert code_of(build(**p)) == FORMAT, dtype
    p = base_parts()
    p["tensors"][1]["rank"] = 9
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["tensors"][1]["nbytes"] = 20
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["tensors"][1]["shape8"] = [2, -3, 0, 0, 0, 0, 0, 0]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["tensors"][1]["shape8"] = [2, 3, 5, 0, 0, 0, 0, 0]  # entry past the rank
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # element count overflows 64 bits
    p["tensors"][1].update(shape8=[2**31 - 1] * 8, rank=8, nbytes=0)
    assert code_of(build(**p)) == FORMAT


def test_graph_structure_rules():
    p = base_parts()  # use before definition
    p["nodes"].reverse()
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # written twice
    p["nodes"][1]["outputs"] = [1]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # writes a graph input
    p["nodes"][1]["outputs"] = [0]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # writes a constant
    p["nodes"][1]["outputs"] = [3]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # graph input that is a constant
    p["inputs"] = [0, 3]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # scratch past the arena, misaligned scratch
    p["nodes"][1]["scratch"] = (224, 64)
    assert code_of(build(**p)) == FORMAT
    p["nodes"][1]["scratch"] = (200, 8)
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # output overlapping the input at another offset, or the scratch
    p["tensors"][2]["offset"] = 80
    assert code_of(build(**p)) == FORMAT
    p["tensors"][2]["offset"] = 192
    assert code_of(build(**p)) == FORMAT
    p = base_parts()  # exact alias of output 0 over input 0 (views, in-place ops) is allowed
    p["tensors"][2]["offset"] = 64
    if relu_kernel_present():
        assert load_status(build(**p)) == 0
    p = base_parts()  # parameter range outside PARAMS
    p["nodes"][0]["params"] = [1]
    data = bytearray(build(**p))
    off, _ = section_offsets(bytes(data))[NODES]
    struct.pack_into("<I", data, off + 32, 5)
    assert code_of(fix_crc(data)) == FORMAT


def test_strings_must_be_terminated():
    data = bytearray(base_model())
    off, size = section_offsets(bytes(data))[TENSORS]
    struct.pack_into("<I", data, off + 4, 2)  # "x" claimed 2 bytes long: runs into "t"?
    assert code_of(fix_crc(data)) == FORMAT
    struct.pack_into("<II", data, off, 10**6, 1)
    assert code_of(fix_crc(data)) == FORMAT
    # Names must be UTF-8 (bindings decode them strictly).
    for bad in (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"):
        p = base_parts()
        p["tensors"][1]["name"] = "t"
        data = bytearray(build(**p))
        soff, ssize = section_offsets(bytes(data))[STRINGS]
        i = bytes(data).index(b"\0t\0", soff) + 1
        data[i:i + 1 + len(bad)] = bad + b"\0"  # "t" and the next bytes become the bad name
        struct.pack_into("<I", data, section_offsets(bytes(data))[TENSORS][0] + 64 + 4, len(bad))
        assert code_of(fix_crc(data)) == FORMAT, bad
    p = base_parts()
    p["tensors"][1]["name"] = "température→"
    if relu_kernel_present():
        assert load_status(build(**p)) == 0


def test_quant_records():
    p = base_parts()
    p["quants"] = [(0, 3, 64, 68)]  # axis 0 of c has 4 entries
    assert code_of(build(**p)) == FORMAT
    p["quants"] = [(-1, 1, 66, 68)]  # misaligned scales
    assert code_of(build(**p)) == ALIGNMENT
    p["quants"] = [(-1, 1, 64, 4096)]  # zero points outside CONSTANTS
    assert code_of(build(**p)) == FORMAT
    p["quants"] = [(-2, 1, 64, 68)]
    assert code_of(build(**p)) == FORMAT
    p = base_parts()
    p["tensors"][3]["quant"] = 1
    assert code_of(build(**p)) == FORMAT


def test_header_and_sections():
    data = base_model()
    assert code_of(b"") == FORMAT
    assert code_of(data[:63]) == FORMAT
    bad = bytearray(data)
    bad[8:10] = struct.pack("<H", 2)
    assert code_of(bytes(bad)) == VERSION
    bad = bytearray(data)
    bad[10:12] = struct.pack("<H", 7)  # newer minor of the same major: still read (with its header CRC)
    bad = fix_crc(bad)
    if relu_kernel_present():
        assert load_status(bytes(bad)) == 0
    if relu_kernel_present():  # trailing bytes outside every section are allowed
        assert load_status(fix_crc(fix_size(data + b"\0" * 8))) == 0
    for pos in (12, 50, 63):  # header flags and reserved bytes must be zero
        bad = bytearray(data)
        bad[pos] = 0xA5
        assert code_of(bytes(bad)) == FORMAT, pos
    bad = bytearray(data)
    bad[section_offsets(data)[STRINGS][0]] ^= 1  # a name changed: only the CRC sees it
    assert code_of(bytes(bad)) == CHECKSUM
    bad = bytearray(data)
    bad[28:32] = struct.pack("<I", 65)
    assert code_of(bytes(bad)) == FORMAT

    def drop(kind):
        return lambda secs: secs.__delitem__([s[0] for s in secs].index(kind))

    assert code_of(base_model(section_hook=drop(GRAPH))) == FORMAT
    assert code_of(base_model(section_hook=drop(CONSTANTS))) == FORMAT
    # Unknown sections: optional ones are skipped, required ones rejected.
    if relu_kernel_present():
        assert load_status(base_model(extra_sections=[(77, 0, b"hello", 1, 0)])) == 0
    assert code_of(base_model(extra_sections=[(77, 1, b"hello", 1, 0)])) == VERSION
    assert code_of(base_model(extra_sections=[(METADATA, 0, b"{}", 1, 0)])) == FORMAT  # twice
    # Bad record count, bad alignment field.

    def set_count(secs):
        secs[1][4] = 3

    assert code_of(base_model(section_hook=set_count)) == FORMAT

    def set_align(secs):
        secs[1][3] = 12

    assert code_of(base_model(section_hook=set_align)) == FORMAT
    # Overlapping sections.
    bad = bytearray(data)
    off = section_offsets(data)
    toff = 64
    for k in range(struct.unpack_from("<I", data, 28)[0]):
        if struct.unpack_from("<I", data, toff + 32 * k)[0] == NODES:
            struct.pack_into("<Q", bad, toff + 32 * k + 8, off[TENSORS][0])
    assert code_of(fix_crc(bad)) == FORMAT


# ---- through the C API directly: buffers, files, sessions ---------------------------

def _lib():
    from edgert.runtime.session import _load
    return _load()


def _load_at(data: bytes, misalign: int):
    ffi, lib = _lib()
    raw = np.zeros(len(data) + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + misalign
    buf = raw[start:start + len(data)]
    buf[:] = np.frombuffer(data, np.uint8)
    out = ffi.new("edgert_model **")
    err = ffi.new("char[]", 256)
    st = lib.edgert_model_load_memory(ffi.cast("void *", buf.ctypes.data), len(data), out, err, 256)
    if st == 0:
        lib.edgert_model_free(out[0])
    else:
        assert out[0] == ffi.NULL
        assert ffi.string(err)
    return st


def test_buffer_alignment(kernel):
    data = base_model()
    assert _load_at(data, 0) == 0
    assert _load_at(data, 16) == 0  # constants only 16-aligned: accepted
    assert _load_at(data, 8) == ALIGNMENT
    assert _load_at(data, 1) == ALIGNMENT


def test_load_file_errors(tmp_path, kernel):
    ffi, lib = _lib()
    out = ffi.new("edgert_model **")
    err = ffi.new("char[]", 256)
    missing = str(tmp_path / "missing.edgert").encode()
    assert lib.edgert_model_load_file(missing, out, err, 256) == IO
    assert missing.decode() in ffi.string(err).decode()
    assert lib.edgert_model_load_file(str(tmp_path).encode(), out, err, 256) == IO
    path = tmp_path / "m.edgert"
    path.write_bytes(base_model()[:100])
    assert lib.edgert_model_load_file(str(path).encode(), out, err, 256) == FORMAT
    assert str(path) in ffi.string(err).decode()
    path.write_bytes(base_model())
    assert lib.edgert_model_load_file(str(path).encode(), out, err, 256) == 0
    lib.edgert_model_free(out[0])
    # A tiny error buffer is respected and NUL-terminated; a NULL one is fine.
    small = ffi.new("char[]", 4)
    assert lib.edgert_model_load_file(missing, out, small, 4) == IO
    assert len(ffi.string(small)) == 3
    assert lib.edgert_model_load_file(missing, out, ffi.NULL, 0) == IO


def test_session_api(kernel):
    ffi, lib = _lib()
    data = base_model()
    raw = np.zeros(len(data) + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    buf = raw[start:start + len(data)]
    buf[:] = np.frombuffer(data, np.uint8)
    out = ffi.new("edgert_model **")
    assert lib.edgert_model_load_memory(ffi.cast("void *", buf.ctypes.data), len(data), out, ffi.NULL, 0) == 0
    m = out[0]
    assert lib.edgert_model_num_nodes(m) == 2 and lib.edgert_model_arena_bytes(m) == 256
    info = ffi.new("edgert_tensor_info *")
    assert lib.edgert_model_output_info(m, 1, info) == 0
    assert ffi.string(info.name) == b"c" and info.scale == 0.5 and info.zero_point == 3
    assert lib.edgert_model_output_info(m, 3, info) == INVALID_ARGUMENT
    assert lib.edgert_model_input_info(m, 0, info) == 0 and list(info.shape[0:2]) == [2, 3]

    opts = ffi.new("edgert_session_options *")
    lib.edgert_session_options_init(opts)
    assert opts.threads == 1
    sout = ffi.new("edgert_session **")
    arena = np.zeros(256 + 128, np.uint8)
    a0 = (-arena.ctypes.data) % 64
    opts.arena, opts.arena_bytes = ffi.cast("void *", arena.ctypes.data + a0), 255
    assert lib.edgert_session_create(m, opts, sout) == ARENA_TOO_SMALL
    opts.arena, opts.arena_bytes = ffi.cast("void *", arena.ctypes.data + a0 + 16), 256
    assert lib.edgert_session_create(m, opts, sout) == ALIGNMENT
    opts.arena = ffi.cast("void *", arena.ctypes.data + a0)
    opts.threads = 0
    assert lib.edgert_session_create(m, opts, sout) == INVALID_ARGUMENT
    opts.threads = 2
    assert lib.edgert_session_create(m, opts, sout) == 0
    s = sout[0]
    x = np.arange(-3, 3, dtype=np.float32)
    assert lib.edgert_session_set_input(s, 0, ffi.from_buffer(x), 20) == INVALID_ARGUMENT
    assert b"24" in ffi.string(lib.edgert_session_last_error(s))
    assert lib.edgert_session_set_input(s, 1, ffi.from_buffer(x), 24) == INVALID_ARGUMENT
    assert lib.edgert_session_input_data(s, 1) == ffi.NULL
    assert lib.edgert_session_set_input(s, 0, ffi.from_buffer(x), 24) == 0
    before = lib.edgert_alloc_count()
    assert lib.edgert_session_run(s) == 0
    assert lib.edgert_alloc_count() == before
    y = np.frombuffer(ffi.buffer(lib.edgert_session_output_data(s, 0), 24), np.float32)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert int(ffi.cast("uintptr_t", lib.edgert_session_output_data(s, 0))) == arena.ctypes.data + a0 + 128
    assert lib.edgert_session_output_data(s, 3) == ffi.NULL
    # A second session on the same model has its own arena.
    s2p = ffi.new("edgert_session **")
    assert lib.edgert_session_create(m, ffi.NULL, s2p) == 0
    assert lib.edgert_session_output_data(s2p[0], 0) != lib.edgert_session_output_data(s, 0)
    lib.edgert_session_destroy(s2p[0])
    lib.edgert_session_destroy(s)
    lib.edgert_model_free(m)
    lib.edgert_session_destroy(ffi.NULL)
    lib.edgert_model_free(ffi.NULL)
    assert ffi.string(lib.edgert_status_str(9999)) == b"unknown status"
    assert lib.edgert_format_version() == 0x00010003


def test_writer_output_loads():
    """A file from the Python writer (edgert.convert) passes the C loader."""
    import onnx
    from onnx import helper

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    data = edgert.convert(m, None)
    xs = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(edgert.Session(data).run(None, {"x": xs})[0], np.maximum(xs, 0))


# ---- edgert-run (the standalone C runner) -------------------------------------------

RUNNER = os.path.join(ROOT, "build", "host", "bin", "edgert-run")
OP_COPY = 82
NP_CODES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.int16): 5,
            np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9, np.dtype(np.float16): 10}


def copy_model(dtype, shape, in_name="in/put:0", out_name="out/put:0") -> bytes:
    code = NP_CODES[np.dtype(dtype)]
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    second = (nbytes + 63) // 64 * 64
    tensors = [tensor(in_name, code, list(shape), offset=0), tensor(out_name, code, list(shape), offset=second)]
    return build(tensors, [node(OP_COPY, [0], [1], name="copy")], [0], [1], max(second * 2, 64))


@pytest.fixture(scope="module")
def runner():
    if not os.path.exists(RUNNER):
        # Built here so the suite never silently skips the standalone runner.
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # tools/sanitize.sh preloads ASan
        subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "csrc"), "edgert-run"], check=True, env=env)
    return RUNNER


@pytest.mark.parametrize("dtype,shape", [(np.float32, (2, 3)), (np.float16, (5,)), (np.int8, (2, 1, 3)),
                                         (np.uint8, ()), (np.int16, (4, 0)), (np.int32, (3,)),
                                         (np.int64, (2, 2)), (np.bool_, (7,))])
def test_edgert_run_roundtrip(tmp_path, runner, dtype, shape):
    (tmp_path / "m.edgert").write_bytes(copy_model(dtype, shape))
    x = (np.arange(int(np.prod(shape)), dtype=np.int64) % 3 - 1).astype(dtype).reshape(shape)
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([runner, str(tmp_path / "m.edgert"), "--input", f"in/put:0={tmp_path / 'x.npy'}",
                        "--output-dir", str(tmp_path), "--repeat", "3", "--threads", "2"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "mean latency" in r.stderr
    y = np.load(tmp_path / "out_put_0.npy")
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_edgert_run_errors(tmp_path, runner):
    (tmp_path / "m.edgert").write_bytes(copy_model(np.float32, (2, 3), in_name="x", out_name="y"))
    model = str(tmp_path / "m.edgert")

    def run(*args):
        return subprocess.run([runner, *args], capture_output=True, text=True, timeout=30)

    np.save(tmp_path / "ok.npy", np.ones((2, 3), np.float32))
    np.save(tmp_path / "int.npy", np.ones((2, 3), np.int32))
    np.save(tmp_path / "shape.npy", np.ones((3, 2), np.float32))
    np.save(tmp_path / "big.npy", np.ones((2, 3), ">f4"))
    np.lib.format.write_array(open(tmp_path / "v2.npy", "wb"), np.ones((2, 3), np.float32), version=(2, 0))
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4',")
    cases = [
        ((model, "--input", f"x={tmp_path / 'int.npy'}"), "int32"),
        ((model, "--input", f"x={tmp_path / 'shape.npy'}"), "[3, 2]"),
        ((model, "--input", f"x={tmp_path / 'big.npy'}"), "little-endian"),
        ((model, "--input", f"x={tmp_path / 'junk.npy'}"), "header"),
        ((model, "--input", f"z={tmp_path / 'ok.npy'}"), "names no model input"),
        ((model,), "is not given"),
        ((str(tmp_path / "ok.npy"), "--input", "x=a.npy"), "bad magic"),
        ((str(tmp_path / "nope.edgert"),), "nope.edgert"),
        ((model, "--repeat", "0"), "--repeat"),
        ((model, "--bogus"), "unknown option"),
    ]
    for args, needle in cases:
        r = run(*args)
        assert r.returncode != 0 and r.returncode < 128, (args, r.returncode, r.stderr)
        assert needle in r.stderr, (args, r.stderr)
    r = run(model, "--input", str(tmp_path / "v2.npy"), "--output-dir", str(tmp_path))  # lone input: NAME= optional
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.ones((2, 3), np.float32))


if __name__ == "__main__":
    _run_batch(sys.argv[1])
