"""Session safety: one Session shared by threads, the C guard against overlapping calls,
the header's checks, and memory limits at session creation."""
from __future__ import annotations

import os
import struct
import threading
import zlib

import numpy as np
import pytest

import edgert
from edgert import fileformat as fmt
from edgert.runtime import reader
from edgert.runtime.session import _load

THREADS, RUNS = 8, 300


@pytest.fixture(scope="module")
def digits(real_model) -> bytes:
    return edgert.convert(str(real_model("digits")), None)


def _inputs(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 1, 8, 8)).astype(np.float32) * 4 for _ in range(count)]


@pytest.mark.parametrize("max_contexts", [None, 1, 2])
def test_one_session_many_threads(digits, max_contexts):
    """8 threads x 300 runs with distinct inputs on one Session: every result equals the
    single-thread result (bit for bit: the same kernels run on the same input)."""
    feeds = [_inputs(t, RUNS) for t in range(THREADS)]
    with edgert.Session(digits) as ref_sess:
        want = [[ref_sess.run(None, {"input": x})[0] for x in xs] for xs in feeds]
    sess = edgert.Session(digits, max_contexts=max_contexts)
    got: list[list] = [[None] * RUNS for _ in range(THREADS)]
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(t: int) -> None:
        try:
            start.wait()
            for k, x in enumerate(feeds[t]):
                got[t][k] = sess.run(None, {"input": x})[0]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    wrong = sum(not np.array_equal(got[t][k], want[t][k]) for t in range(THREADS) for k in range(RUNS))
    assert wrong == 0, f"{wrong} of {THREADS * RUNS} results wrong"
    assert len(sess._contexts) <= (max_contexts or 10**9)
    sess.close()


def test_waiting_runs_are_served_in_order(digits):
    """Three threads run back to back on a Session with one context; a fourth thread's
    one run must not wait behind an unbounded number of theirs (each releases and asks
    again at once, so an unfair hand-out can starve the fourth for minutes)."""
    sess = edgert.Session(digits, max_contexts=1)
    x = _inputs(1, 1)[0]
    stop = threading.Event()
    done = [0]
    lock = threading.Lock()

    def work() -> None:
        while not stop.is_set():
            sess.run(None, {"input": x})
            with lock:
                done[0] += 1

    ths = [threading.Thread(target=work) for _ in range(3)]
    for th in ths:
        th.start()
    others: list[int] = []

    def fourth() -> None:
        with lock:
            before = done[0]
        sess.run(None, {"input": x})
        with lock:
            others.append(done[0] - before)

    late = threading.Thread(target=fourth)
    try:
        while True:  # all three running
            with lock:
                if done[0] >= 30:
                    break
        late.start()
        late.join(timeout=60)
        starved = late.is_alive()
    finally:
        stop.set()  # lets a starved fourth run through too
        for th in [*ths, late]:
            if th.ident is not None:
                th.join()
        sess.close()
    assert not starved, "the fourth run still waited after 60 s"
    # first come, first served: the holder and at most one queued run per other thread
    # go first (a few more may finish before the counts are read)
    assert others[0] <= 12, f"{others[0]} runs of other threads went first"


def test_close_while_other_threads_run(digits):
    sess = edgert.Session(digits, max_contexts=2)
    x = _inputs(0, 1)[0]
    stop = threading.Event()
    outcomes: list[str] = []

    def work() -> None:
        while not stop.is_set():
            try:
                sess.run(None, {"input": x})
            except edgert.EdgertError as e:
                outcomes.append(str(e))
                return

    ths = [threading.Thread(target=work) for _ in range(3)]
    for th in ths:
        th.start()
    sess.run(None, {"input": x})
    sess.close()
    stop.set()
    for th in ths:
        th.join()
    assert all("closed" in o for o in outcomes)
    assert not sess._contexts and not sess._model


def test_c_overlapping_calls_get_busy(digits):
    """At the C level, run / set_input / run_io on a session that another thread is
    running return EDGERT_ERR_BUSY (502) and change nothing; the guarded calls in
    between give correct results."""
    ffi, lib = _load()
    buf = np.frombuffer(digits, np.uint8).copy()
    mp = ffi.new("edgert_model **")
    assert lib.edgert_model_load_memory(ffi.from_buffer(buf), buf.size, mp, ffi.NULL, 0) == 0
    sp = ffi.new("edgert_session **")
    assert lib.edgert_session_create(mp[0], ffi.NULL, sp) == 0
    s = sp[0]
    xs = _inputs(5, 64)
    with edgert.Session(digits) as ref:
        want = [ref.run(None, {"input": x})[0] for x in xs]
    counts = {"ok": 0, "busy": 0, "wrong": 0, "other": 0}
    lock = threading.Lock()

    def work(t: int) -> None:
        out = np.empty((1, 10), np.float32)
        outs = ffi.new("void *[]", [ffi.cast("void *", ffi.from_buffer(out))])
        for k in range(400):
            j = (k * 7 + t) % len(xs)
            ins = ffi.new("void *[]", [ffi.cast("void *", ffi.from_buffer(xs[j]))])
            st = lib.edgert_session_run_io(s, ins, 1, outs, 1)
            other = lib.edgert_session_run(s) if k % 3 == 0 else lib.edgert_session_set_input(
                s, 0, ffi.from_buffer(xs[j]), xs[j].nbytes)
            with lock:
                if st == 0:
                    counts["ok" if np.array_equal(out, want[j]) else "wrong"] += 1
                elif st == 502:
                    counts["busy"] += 1
                else:
                    counts["other"] += 1
                if other not in (0, 502):
                    counts["other"] += 1

    ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert counts["wrong"] == 0 and counts["other"] == 0, counts
    assert counts["ok"] > 0
    assert ffi.string(lib.edgert_status_str(502)).startswith(b"session busy")
    lib.edgert_session_destroy(s)
    lib.edgert_model_free(mp[0])


# ---- header --------------------------------------------------------------------------

def test_writer_header_fields(digits):
    (_, major, minor, flags, *_rest, hcrc, reserved) = fmt._HEADER.unpack_from(digits, 0)
    assert (major, minor, flags, reserved) == (1, 2, 0, b"\0" * 12)  # nothing of minor 3 in it
    assert hcrc == zlib.crc32(digits[:48])
    assert reader.read(digits)["version"] == "1.2"


def test_every_header_bit_flip_is_rejected(digits):
    """Each of the 512 single-bit flips of the 64-byte header is refused, by the C loader
    and by the Python reader."""
    accepted = []
    for pos in range(64):
        for bit in range(8):
            bad = bytearray(digits)
            bad[pos] ^= 1 << bit
            try:
                edgert.Session(bytes(bad)).close()
                accepted.append((pos, bit))
            except edgert.ModelFormatError:
                pass
            with pytest.raises(edgert.ModelFormatError):
                reader.read(bytes(bad))
    assert accepted == []


def test_reserved_bytes_rejected_with_valid_checksums(digits):
    """Nonzero flags or reserved bytes are refused even when both CRCs are recomputed."""
    for pos in (12, 15, 52, 63):
        bad = bytearray(digits)
        bad[pos] = 1
        bad[48:52] = struct.pack("<I", zlib.crc32(bytes(bad[:48])))
        with pytest.raises(edgert.ModelFormatError) as ei:
            edgert.Session(bytes(bad))
        assert ei.value.code == 101 and ("flags" in str(ei.value) or "reserved" in str(ei.value))


# ---- memory limits -------------------------------------------------------------------

def _with_arena(data: bytes, arena: int) -> bytes:
    """The file with the GRAPH record's arena size replaced (both CRCs fixed)."""
    d = bytearray(data)
    toff, nsec = struct.unpack_from("<Q", d, 32)[0], struct.unpack_from("<I", d, 28)[0]
    goff = None
    for k in range(nsec):
        kind, _, off, _size = struct.unpack_from("<IIQQ", d, toff + 32 * k)
        if kind == fmt.GRAPH:
            goff = off
    struct.pack_into("<Q", d, goff, arena)
    fmt.seal(d)
    return bytes(d)


def test_arena_larger_than_memory(digits):
    huge = 1 << 50  # 1 PiB: more than any machine has
    with pytest.raises(edgert.RuntimeFailure) as ei:
        edgert.Session(_with_arena(digits, huge))
    assert ei.value.code == 400 and f"{huge:,}" in str(ei.value), str(ei.value)
    # The C library alone: malloc fails and the message gives the bytes.
    ffi, lib = _load()
    buf = np.frombuffer(_with_arena(digits, huge), np.uint8).copy()
    mp = ffi.new("edgert_model **")
    assert lib.edgert_model_load_memory(ffi.from_buffer(buf), buf.size, mp, ffi.NULL, 0) == 0
    sp = ffi.new("edgert_session **")
    assert lib.edgert_session_create(mp[0], ffi.NULL, sp) == 400
    assert sp[0] == ffi.NULL
    msg = ffi.string(lib.edgert_session_last_error(ffi.NULL)).decode()
    assert "arena" in msg and str(huge) in msg, msg
    lib.edgert_model_free(mp[0])


def test_caller_arena_too_small(digits):
    ffi, lib = _load()
    buf = np.frombuffer(digits, np.uint8).copy()
    mp = ffi.new("edgert_model **")
    assert lib.edgert_model_load_memory(ffi.from_buffer(buf), buf.size, mp, ffi.NULL, 0) == 0
    need = lib.edgert_model_arena_bytes(mp[0])
    raw = np.zeros(need + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    opts = ffi.new("edgert_session_options *")
    lib.edgert_session_options_init(opts)
    opts.arena = ffi.cast("void *", raw.ctypes.data + start)
    opts.arena_bytes = need - 64
    sp = ffi.new("edgert_session **")
    assert lib.edgert_session_create(mp[0], opts, sp) == 401
    msg = ffi.string(lib.edgert_session_last_error(ffi.NULL)).decode()
    assert f"{need - 64} bytes given" in msg and f"needs {need}" in msg, msg
    opts.arena_bytes = need  # exactly enough: runs
    assert lib.edgert_session_create(mp[0], opts, sp) == 0
    x = _inputs(1, 1)[0]
    assert lib.edgert_session_set_input(sp[0], 0, ffi.from_buffer(x), x.nbytes) == 0
    assert lib.edgert_session_run(sp[0]) == 0
    lib.edgert_session_destroy(sp[0])
    lib.edgert_model_free(mp[0])


def test_c_session_test_program(digits, tmp_path):
    """csrc/tests/session_test.c: 4 C threads on one session, run_io mixed with bare run
    and set_input calls: every status is OK or BUSY, every OK result exact."""
    import pathlib
    import subprocess

    root = pathlib.Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # tools/sanitize.sh preloads ASan
    subprocess.run(["make", "-s", "-C", str(root / "csrc"), "session-test"], check=True, env=env)
    model = tmp_path / "digits.edgert"
    model.write_bytes(digits)
    r = subprocess.run([str(root / "build" / "host" / "bin" / "session_test"), str(model), "4", "64"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 wrong, 0 other" in r.stdout, r.stdout


def _neg_model(shape: tuple[int, ...]) -> bytes:
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"], name="neg")], "neg",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return edgert.convert(m.SerializeToString(), None)


@pytest.mark.parametrize("shape", [(2, 5, 41, 43), (1, 3, 224, 224), (1, 70001), (3, 7, 1, 1001)],
                         ids=lambda s: "x".join(map(str, s)))
def test_inputs_arrive_whole_at_every_thread_count(shape):
    """Large inputs are copied into the arena by the session's threads on x86-64 (each
    plane cut in bands, docs/runtime.md); every byte must arrive, at any thread count,
    from a fresh array each run and from the arena itself (input_data passed back to
    set_input: the copy must then leave it as it is)."""
    model = _neg_model(shape)
    rng = np.random.default_rng(7)
    ffi, lib = _load()
    for threads in (1, 2, 3, 4):
        sess = edgert.Session(model, threads=threads)
        for _ in range(2):
            x = rng.standard_normal(shape).astype(np.float32)
            np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -x)
        ctx = sess._acquire()
        try:
            x = rng.standard_normal(shape).astype(np.float32)
            ffi.memmove(lib.edgert_session_input_data(ctx, 0), ffi.from_buffer(x), x.nbytes)
            assert lib.edgert_session_set_input(ctx, 0, lib.edgert_session_input_data(ctx, 0), x.nbytes) == 0
            assert lib.edgert_session_run(ctx) == 0
            y = np.frombuffer(ffi.buffer(lib.edgert_session_output_data(ctx, 0), x.nbytes), np.float32)
            np.testing.assert_array_equal(y.reshape(shape), -x)
        finally:
            sess._release(ctx)
        sess.close()
