"""Sparse weights (docs/sparse.md): the SPARSE section (writer, reader, C loader
validation against corrupt records) and the spmm op (against onnxruntime, and its
prepare against corrupt CSR constants)."""
from __future__ import annotations

import os
import struct
import sys

import numpy as np
import pytest
from onnx import helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.append(ROOT)  # an installed edgert comes first

import edgert  # noqa: E402
from edgert import fileformat as fmt  # noqa: E402
from edgert.converter import writer  # noqa: E402
from edgert.runtime import reader  # noqa: E402
from edgert.converter import sparse  # noqa: E402
from edgert.errors import EdgertError  # noqa: E402
from tests.helpers import make_model, run_ort  # noqa: E402

SPARSE_MODEL = os.path.join(ROOT, "tests", "data", "digits_sparse90.onnx")  # a test model, not shipped
FORMAT_ERR, ALIGNMENT_ERR = 101, 104


def _sparse(rng, shape, zeros):
    w = rng.standard_normal(shape).astype(np.float32)
    w[rng.random(shape) < zeros] = 0
    return w


def toy_model(seed: int = 0):
    """3x3 conv (50 % zeros), 1x1 conv (90 %), flatten, gemm (95 %), matmul (95 %)."""
    rng = np.random.default_rng(seed)
    inits = {"w1": _sparse(rng, (32, 8, 3, 3), 0.5), "w2": _sparse(rng, (64, 32, 1, 1), 0.9),
             "b2": rng.standard_normal(64).astype(np.float32), "w3": _sparse(rng, (64 * 16, 24), 0.95),
             "b3": rng.standard_normal(24).astype(np.float32), "w4": _sparse(rng, (24, 7), 0.95)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]), helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Flatten", ["r2"], ["f"]), helper.make_node("Gemm", ["f", "w3", "b3"], ["g"]),
             helper.make_node("MatMul", ["g", "w4"], ["y"])]
    x = rng.standard_normal((1, 8, 4, 4)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x}


def _run(data: bytes, feeds):
    return edgert.Session(data).run(None, feeds)[0]


def test_storage_is_smaller_and_exact():
    m, feeds = toy_model()
    dense = edgert.convert(m, sparse=False)
    stored = edgert.convert(m, sparse="storage")
    assert len(dense) >= 2 * len(stored)
    info = reader.read(stored)
    assert "sparse" in info["sections"]
    assert sum(t["storage"] == "sparse" for t in info["tensors"]) == 4
    np.testing.assert_array_equal(_run(stored, feeds), _run(dense, feeds))


def test_encode_decode_roundtrip():
    rng = np.random.default_rng(1)
    for dtype, n in ((np.float32, 1001), (np.int8, 64), (np.float32, 8)):
        a = (rng.standard_normal(n) * (rng.random(n) < 0.3) * 10).astype(dtype)
        if dtype == np.float32:
            a[0] = -0.0
        pool = writer.ConstantPool(bytearray(b"x" * 3))
        rec = sparse.encode_record(pool, 5, a)
        back = sparse.decode_record(bytes(pool.buf), rec, a.shape, np.dtype(dtype))
        np.testing.assert_array_equal(back, a)
        assert not np.signbit(back[a == 0]).any()  # -0.0 is not stored: it decodes as +0.0


def test_spmm_kernels_match_onnxruntime():
    m, feeds = toy_model()
    data = edgert.convert(m)
    ops = [n["op"] for n in reader.read(data)["nodes"]]
    assert ops.count("spmm") == 3 and ops.count("conv2d") == 1  # the 50 % 3x3 conv stays dense
    want = run_ort(m, feeds)[0]
    np.testing.assert_allclose(_run(data, feeds), want, rtol=1e-4, atol=1e-4)
    assert len(data) * 2 <= len(edgert.convert(m, sparse=False))


def test_below_break_even_stays_dense():
    rng = np.random.default_rng(2)
    w = _sparse(rng, (16, 16, 1, 1), 0.5)
    x = rng.standard_normal((1, 16, 3, 3)).astype(np.float32)
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": w})
    data = edgert.convert(m)
    assert [n["op"] for n in reader.read(data)["nodes"]] == ["conv2d"]
    np.testing.assert_allclose(_run(data, {"x": x}), run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_spmm_batched_matmul_and_gemm_alpha_beta():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    a = rng.standard_normal((3, 40)).astype(np.float32)
    inits = {"w": _sparse(rng, (40, 9), 0.95), "b": _sparse(rng, (40, 9), 0.95),
             "c": rng.standard_normal(9).astype(np.float32)}
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"]),
                    helper.make_node("Gemm", ["a", "b", "c"], ["z"], alpha=0.5, beta=2.0)],
                   {"x": x, "a": a}, ["y", "z"], inits)
    data = edgert.convert(m)
    assert [n["op"] for n in reader.read(data)["nodes"]] == ["spmm", "spmm"]
    got = edgert.Session(data).run(None, {"x": x, "a": a})
    for g_, w_ in zip(got, run_ort(m, {"x": x, "a": a})):
        np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-5)


# ---- corrupt files -----------------------------------------------------------------

def _sections(data: bytes) -> dict[int, tuple[int, int, int]]:
    """{kind: (entry position, offset, size)}."""
    n, table = struct.unpack_from("<IQ", data, 28)
    out = {}
    for k in range(n):
        pos = table + 32 * k
        kind, _, off, size = struct.unpack_from("<IIQQ", data, pos)
        out[kind] = (pos, off, size)
    return out


def _fix_crc(buf: bytearray) -> bytes:
    fmt.seal(buf)
    return bytes(buf)


@pytest.fixture(scope="module")
def stored_file() -> bytes:
    return edgert.convert(toy_model()[0], sparse="storage")


def _patch_record(data: bytes, field: int, fmt_: str, value, record: int = 0) -> bytes:
    _, off, _ = _sections(data)[fmt.SPARSE]
    buf = bytearray(data)
    struct.pack_into(fmt_, buf, off + 32 * record + field, value)
    return _fix_crc(buf)


def _rejected(data: bytes, code: int = FORMAT_ERR) -> str:
    with pytest.raises(EdgertError) as e:
        edgert.Session(data)
    assert e.value.code == code, str(e.value)
    return str(e.value)


def _record(data: bytes, k: int = 0):
    _, off, _ = _sections(data)[fmt.SPARSE]
    return struct.unpack_from("<IIQQQ", data, off + 32 * k)


def test_corrupt_counts_and_ranges(stored_file):
    ti, _, bm, val, nnz = _record(stored_file)
    assert "bits set" in _rejected(_patch_record(stored_file, 24, "<Q", nnz + 1))
    assert "bits set" in _rejected(_patch_record(stored_file, 24, "<Q", nnz - 1))
    assert "values for" in _rejected(_patch_record(stored_file, 24, "<Q", 2**62))
    _rejected(_patch_record(stored_file, 0, "<I", 0xFFFFFFF0))
    _rejected(_patch_record(stored_file, 0, "<I", (ti + 1) % 5))  # names another tensor
    assert "encoding" in _rejected(_patch_record(stored_file, 4, "<I", 7))
    assert "outside CONSTANTS" in _rejected(_patch_record(stored_file, 8, "<Q", 2**63))
    assert "outside CONSTANTS" in _rejected(_patch_record(stored_file, 16, "<Q", 2**40))
    _rejected(_patch_record(stored_file, 16, "<Q", val + 1), ALIGNMENT_ERR)


def test_corrupt_bitmap_and_tensor_records(stored_file):
    data = stored_file
    _, _, bm, _, _ = _record(data)
    const_off = _sections(data)[fmt.CONSTANTS][1]
    buf = bytearray(data)
    buf[const_off + bm] ^= 0x01  # one more or one fewer stored element than nnz says
    assert "bits set" in _rejected(_fix_crc(buf))
    # A tensor record claiming sparse storage with a record index that does not exist.
    info = reader.read(data)
    _, toff, _ = _sections(data)[fmt.TENSORS]
    k = next(i for i, t in enumerate(info["tensors"]) if t["storage"] == "sparse")
    buf = bytearray(data)
    struct.pack_into("<Q", buf, toff + 64 * k + 48, 99)
    _rejected(_fix_crc(buf))
    # Sparse storage without a SPARSE section (its kind renamed to an unknown optional one).
    pos = _sections(data)[fmt.SPARSE][0]
    buf = bytearray(data)
    struct.pack_into("<II", buf, pos, 60, 0)
    assert "without a SPARSE section" in _rejected(_fix_crc(buf))


def test_bits_past_the_end_rejected():
    rng = np.random.default_rng(4)
    w = _sparse(rng, (13, 11), 0.8)  # 143 elements: the last bitmap byte is partial
    x = rng.standard_normal((2, 13)).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": w})
    sparse_min = sparse.STORAGE_MIN_BYTES
    try:
        sparse.STORAGE_MIN_BYTES = 0
        data = edgert.convert(m, sparse="storage")
    finally:
        sparse.STORAGE_MIN_BYTES = sparse_min
    _, _, bm, _, _ = _record(data)
    const_off = _sections(data)[fmt.CONSTANTS][1]
    buf = bytearray(data)
    buf[const_off + bm + 143 // 8] |= 0x80
    assert "past the tensor" in _rejected(_fix_crc(buf))
    np.testing.assert_allclose(_run(data, {"x": x}), x @ w, rtol=1e-5, atol=1e-5)


def test_truncation_and_bit_flips_never_crash(stored_file):
    data = stored_file
    _, off, size = _sections(data)[fmt.SPARSE]
    for cut in (off + 3, off + size - 1, len(data) - 1):
        buf = bytearray(data[:cut])
        struct.pack_into("<Q", buf, 16, len(buf))
        with pytest.raises(EdgertError):
            edgert.Session(_fix_crc(buf))
    rng = np.random.default_rng(5)
    const_off = _sections(data)[fmt.CONSTANTS][1]
    recs = [_record(data, k) for k in range(4)]
    spots = list(range(off, off + size)) + [const_off + r[2] + j for r in recs for j in range(4)]
    for pos in rng.choice(spots, 120, replace=False):
        buf = bytearray(data)
        buf[pos] ^= 1 << int(rng.integers(8))
        try:
            edgert.Session(_fix_crc(buf)).run(None, toy_model()[1])
        except EdgertError:
            pass


def test_corrupt_csr_rejected_by_prepare():
    m, _ = toy_model()
    data = edgert.convert(m, sparse=True)
    info = reader.read(data)
    rows = next(t for t in info["tensors"] if t["name"].endswith("_sprows"))
    cols = next(t for t in info["tensors"] if t["name"].endswith("_spcols"))
    for t, idx, value in ((rows, 0, 1), (rows, 1, -5), (cols, 0, 10**6), (cols, 2, -1)):
        buf = bytearray(data)
        struct.pack_into("<i", buf, t["file_offset"] + 4 * idx, value)
        with pytest.raises(EdgertError):
            edgert.Session(_fix_crc(buf))


# ---- the model pruned during training ---------------------------------------------

def test_digits_sparse90_smaller_same_outputs():
    d = np.load(os.path.join(os.path.dirname(edgert.__file__), "data", "digits_test.npz"))
    x = d["input"][:40]
    dense = edgert.convert(SPARSE_MODEL, sparse=False)
    stored = edgert.convert(SPARSE_MODEL, sparse="storage")
    full = edgert.convert(SPARSE_MODEL)
    assert len(dense) >= 2 * len(stored) and len(dense) >= 2 * len(full)
    assert any(n["op"] == "spmm" for n in reader.read(full)["nodes"])
    sd, ss, sf = (edgert.Session(b) for b in (dense, stored, full))
    for k in range(len(x)):
        a, b, c = (s.run(None, {"input": x[k:k + 1]})[0] for s in (sd, ss, sf))
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-4)
        assert c.argmax() == a.argmax()
