"""State in the session (docs/runtime.md, "State"): `--state OUT=IN` pairs of streaming
models. Checked against onnxruntime fed the copied states, frame by frame: an ONNX LSTM
with explicit initial_h / initial_c -> Y_h / Y_c built here, silero-vad and DTLN's two
stages from the model cache; reset_state replays; get_state / set_state; streams; one
stateful Session from several threads; no allocation per frame; the STATE section's
checks at load; the converter's suggestions and errors."""
from __future__ import annotations

import struct
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert import fileformat as fmt
from edgert.errors import ConversionError, InputError, ModelFormatError
from edgert.runtime import reader
from edgert.runtime.session import alloc_count

FRAMES = 200
TOL = 1e-4
ort = pytest.importorskip("onnxruntime")


def lstm_model(hidden: int = 32, features: int = 16, default_h: bool = False) -> onnx.ModelProto:
    """x [1, 1, F] -> LSTM (explicit initial_h / initial_c inputs) -> y = Y @ head, plus
    Y_h and Y_c: one step of a streaming recurrent model. default_h: initial_h has an
    initializer (an ONNX input with a default value)."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((1, 4 * hidden, features)) * 0.3).astype(np.float32)
    r = (rng.standard_normal((1, 4 * hidden, hidden)) * 0.3).astype(np.float32)
    b = (rng.standard_normal((1, 8 * hidden)) * 0.1).astype(np.float32)
    head = (rng.standard_normal((hidden, 4)) * 0.5).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B"),
             numpy_helper.from_array(head, "head"), numpy_helper.from_array(np.array([1, hidden], np.int64), "flat")]
    if default_h:
        inits.append(numpy_helper.from_array(np.full((1, 1, hidden), 0.25, np.float32), "initial_h"))
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B", "", "initial_h", "initial_c"], ["Y", "Y_h", "Y_c"],
                         hidden_size=hidden),
        helper.make_node("Reshape", ["Y", "flat"], ["Yf"]),
        helper.make_node("MatMul", ["Yf", "head"], ["y"]),
    ]
    state = [hidden and helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, hidden])
             for n in ("initial_h", "initial_c")]
    g = helper.make_graph(nodes, "lstm_stream", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, features])]
                          + state, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]),
                                    helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, 1, hidden]),
                                    helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, [1, 1, hidden])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


LSTM_STATE = {"Y_h": "initial_h", "Y_c": "initial_c"}


def accumulator_model(n: int = 64) -> onnx.ModelProto:
    """acc_out = acc + x, y = acc_out: the state sums every frame it sees."""
    g = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc_out"]),
                           helper.make_node("Identity", ["acc_out"], ["y"])], "acc",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n]),
                           helper.make_tensor_value_info("acc", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n]),
                           helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [1, n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def frames(shape, count: int = FRAMES, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((count, *shape)) * scale).astype(np.float32)


def ort_stream(model, xs: np.ndarray, x_name: str, pairs: dict[str, str], extra: dict | None = None,
               initial: dict | None = None) -> list[list[np.ndarray]]:
    """onnxruntime over the frames, each state output copied into its input for the next."""
    sess = ort.InferenceSession(model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model))
    shapes = {i.name: [d if isinstance(d, int) else 1 for d in i.shape] for i in sess.get_outputs()}
    state = {i: np.zeros(shapes[o], np.float32) for o, i in pairs.items()}
    state.update(initial or {})
    names = [o.name for o in sess.get_outputs()]
    outs = []
    for x in xs:
        ys = dict(zip(names, sess.run(None, {x_name: x, **state, **(extra or {})})))
        state = {i: ys[o] for o, i in pairs.items()}
        outs.append([v for k, v in ys.items() if k not in pairs])
    return outs


def edgert_stream(sess, xs: np.ndarray, x_name: str) -> list[list[np.ndarray]]:
    return [sess.run(None, {x_name: x}) for x in xs]


def assert_close(got, want, tol=TOL):
    worst = max(float(np.abs(g - w).max()) for gs, ws in zip(got, want) for g, w in zip(gs, ws))
    assert worst <= tol, f"max |edgert - onnxruntime| over the stream: {worst:.3g}"


# ---- the ONNX LSTM ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def lstm():
    m = lstm_model()
    return m, edgert.convert(m, None, state=LSTM_STATE)


def test_lstm_stream_matches_onnxruntime(lstm):
    m, data = lstm
    sess = edgert.Session(data)
    assert [t.name for t in sess.get_inputs()] == ["x"] and [t.name for t in sess.get_outputs()] == ["y"]
    assert [(t.name, t.shape) for t in sess.get_states()] == [("initial_h", [1, 1, 32]), ("initial_c", [1, 1, 32])]
    xs = frames((1, 1, 16))
    got = edgert_stream(sess, xs, "x")
    assert_close(got, ort_stream(m, xs, "x", LSTM_STATE))
    sess.reset_state()
    again = edgert_stream(sess, xs, "x")
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(got, again)), "reset_state must replay identically"


def test_state_file_layout(lstm):
    info = reader.read(lstm[1])
    assert info["version"] == "1.3"
    st = info["state"]
    assert [(p["input"], p["output"], p["initial"]) for p in st["pairs"]] == [
        ("initial_h", "Y_h", "zeros"), ("initial_c", "Y_c", "zeros")]
    byname = {t["name"]: t for t in info["tensors"]}
    region = st["region_offset"]
    spans = sorted((byname[n]["offset"], byname[n]["offset"] + byname[n]["nbytes"])
                   for p in st["pairs"] for n in (p["input"], p["output"]))
    assert spans[0][0] >= region and spans[-1][1] <= info["arena_bytes"]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    state_names = {n for p in st["pairs"] for n in (p["input"], p["output"])}
    for t in info["tensors"]:  # everything else below the region; no node scratch in it
        if t["storage"] == "arena" and t["name"] not in state_names and t["nbytes"]:
            assert t["offset"] + t["nbytes"] <= region, t["name"]
    for n in info["nodes"]:
        assert n["scratch"][1] == 0 or n["scratch"][0] + n["scratch"][1] <= region


def test_initializer_is_the_initial_value():
    m = lstm_model(default_h=True)
    data = edgert.convert(m, None, state=LSTM_STATE)
    assert [p["initial"] for p in reader.read(data)["state"]["pairs"]] == ["constant", "zeros"]
    sess = edgert.Session(data)
    np.testing.assert_array_equal(sess.get_state("initial_h"), np.full((1, 1, 32), 0.25, np.float32))
    xs = frames((1, 1, 16), 20, seed=3)
    assert_close(edgert_stream(sess, xs, "x"),
                 ort_stream(m, xs, "x", LSTM_STATE, initial={"initial_h": np.full((1, 1, 32), 0.25, np.float32)}))


def test_get_and_set_state_checkpoint(lstm):
    sess = edgert.Session(lstm[1])
    xs = frames((1, 1, 16), 60, seed=5)
    edgert_stream(sess, xs[:20], "x")
    saved = sess.get_state()
    first = edgert_stream(sess, xs[20:], "x")
    sess.set_state(saved)
    second = edgert_stream(sess, xs[20:], "x")
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(first, second))
    other = sess.stream()  # a stream moved to another context continues it
    other.set_state(saved)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(first, edgert_stream(other, xs[20:], "x")))
    other.close()
    with pytest.raises(InputError):
        sess.set_state("initial_h", np.zeros((1, 32), np.float32))
    with pytest.raises(InputError):
        sess.get_state("nope")


def test_no_allocation_per_frame(lstm):
    sess = edgert.Session(lstm[1])
    xs = frames((1, 1, 16), 50)
    sess.run(None, {"x": xs[0]})
    before = alloc_count()
    edgert_stream(sess, xs, "x")
    sess.reset_state()
    sess.get_state()
    assert alloc_count() == before


def test_streams_are_independent(lstm):
    """Two streams on one model, frames interleaved, each equal to its own run alone."""
    sess = edgert.Session(lstm[1])
    a, b = frames((1, 1, 16), 40, seed=1), frames((1, 1, 16), 40, seed=2)
    want_a = edgert_stream(sess, a, "x")
    sess.reset_state()
    want_b = edgert_stream(sess, b, "x")
    sess.reset_state()
    other = sess.stream()
    got_a, got_b = [], []
    for xa, xb in zip(a, b):
        got_a.append(sess.run(None, {"x": xa}))
        got_b.append(other.run(None, {"x": xb}))
    assert all(np.array_equal(g[0], w[0]) for g, w in zip(got_a, want_a))
    assert all(np.array_equal(g[0], w[0]) for g, w in zip(got_b, want_b))
    sess.close()  # the stream keeps the model alive
    assert len(other.run(None, {"x": a[0]})) == 1
    other.close()


# ---- threads ------------------------------------------------------------------------------

def test_one_stateful_session_from_threads():
    """4 threads x 150 runs on one Session of acc_out = acc + x: runs take turns, so the
    state ends as the exact sum of every frame (integers in float32: exact in any order);
    a lost or mixed update would show."""
    sess = edgert.Session(edgert.convert(accumulator_model(), None, state={"acc_out": "acc"}))
    threads, runs = 4, 150
    errors = []
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        try:
            start.wait()
            x = np.full((1, 64), t + 1, np.float32)
            for _ in range(runs):
                y, = sess.run(None, {"x": x})
                assert y.min() == y.max()  # one run's output: one state plus one x
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ths = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors
    np.testing.assert_array_equal(sess.get_state("acc"), np.full((1, 64), runs * sum(range(1, threads + 1)),
                                                                 np.float32))
    assert len(sess._contexts) == 1


def test_streams_in_threads(lstm):
    """Each thread its own stream: every stream's outputs equal a single-thread run of it."""
    sess = edgert.Session(lstm[1])
    seqs = [frames((1, 1, 16), 60, seed=10 + t) for t in range(4)]
    want = []
    for xs in seqs:
        sess.reset_state()
        want.append(edgert_stream(sess, xs, "x"))
    got: list = [None] * 4

    def work(t: int) -> None:
        with sess.stream() as s:
            got[t] = edgert_stream(s, seqs[t], "x")

    ths = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for g, w in zip(got, want):
        assert all(np.array_equal(a[0], b[0]) for a, b in zip(g, w))


def test_c_session_refuses_overlapping_state_calls(lstm):
    """The C guard: a state call that overlaps a run on the same C session gets
    EDGERT_ERR_BUSY and changes nothing; no call crashes."""
    from edgert.runtime.session import _load
    ffi, lib = _load()
    sess = edgert.Session(lstm[1])
    ctx = sess._idle[0]
    buf = np.zeros((1, 1, 32), np.float32)
    codes: set[int] = set()
    stop = threading.Event()

    def runner() -> None:
        while not stop.is_set():
            codes.add(int(lib.edgert_session_run(ctx)))

    th = threading.Thread(target=runner)
    th.start()
    try:
        for _ in range(3000):
            codes.add(int(lib.edgert_session_get_state(ctx, 0, ffi.from_buffer(buf), buf.nbytes)))
            codes.add(int(lib.edgert_session_reset_state(ctx)))
    finally:
        stop.set()
        th.join()
    assert codes <= {0, 502}, codes


# ---- real models ---------------------------------------------------------------------------

def test_silero_vad_stream(real_model):
    from tools import models
    path = real_model("silero_vad")
    data = edgert.convert(str(path), None, state=models.STATE_PAIRS["silero_vad"], **models.convert_kwargs("silero_vad"))
    sess = edgert.Session(data)
    assert [t.name for t in sess.get_inputs()] == ["input"]
    t = np.arange(512 * FRAMES, dtype=np.float64) / 16000
    audio = 0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0) + 0.01 * np.sin(2 * np.pi * 3000 * t)
    xs = audio.astype(np.float32).reshape(FRAMES, 1, 512)
    got = edgert_stream(sess, xs, "input")
    assert_close(got, ort_stream(onnx.load(str(path)), xs, "input", {"stateN": "state"},
                                 extra={"sr": np.array(16000, np.int64)}))
    sess.reset_state()
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(got, edgert_stream(sess, xs, "input")))


@pytest.mark.parametrize("name,x_name,shape", [("dtln_1", "input_2", (1, 1, 257)), ("dtln_2", "input_4", (1, 1, 512))])
def test_dtln_stream(real_model, name, x_name, shape):
    from tools import models
    path = real_model(name)
    pairs = models.STATE_PAIRS[name]
    sess = edgert.Session(edgert.convert(str(path), None, state=pairs))
    assert [t.name for t in sess.get_inputs()] == [x_name]
    xs = np.abs(frames(shape, seed=4))
    got = edgert_stream(sess, xs, x_name)
    assert_close(got, ort_stream(onnx.load(str(path)), xs, x_name, pairs))
    sess.reset_state()
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(got, edgert_stream(sess, xs, x_name)))


# ---- int8 ----------------------------------------------------------------------------------

def test_int8_stateful_model():
    """--quantize int8 with calibration frames that hold no state: the calibration runs
    them as a stream (each frame's state from the one before); the state pair stays
    float at the boundary, the int8 nodes keep their own parameters."""
    m = lstm_model()
    calib = {"x": frames((1, 1, 16), 64, seed=9)}
    data = edgert.convert(m, None, state=LSTM_STATE, quantize="int8", calibration=calib, calibration_method="minmax")
    info = reader.read(data)
    assert any(t["dtype"] == "int8" for t in info["tensors"])
    sess = edgert.Session(data)
    xs = frames((1, 1, 16), 60, seed=11)
    got = edgert_stream(sess, xs, "x")
    want = ort_stream(m, xs, "x", LSTM_STATE)
    scale = max(float(np.abs(w[0]).max()) for w in want)
    err = max(float(np.abs(g[0] - w[0]).max()) for g, w in zip(got, want))
    assert err <= 0.1 * scale, (err, scale)
    sess.reset_state()
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(got, edgert_stream(sess, xs, "x")))


# ---- the converter's messages ---------------------------------------------------------------

def test_suggestions_and_errors():
    m = lstm_model()
    meta = reader.read(edgert.convert(m, None))["metadata"]
    assert {(s["output"], s["input"]) for s in meta["state_suggestions"]} >= {("Y_h", "initial_h"), ("Y_c", "initial_c")}
    with pytest.raises(ConversionError, match="not an output of the model"):
        edgert.convert(m, None, state={"Y_hh": "initial_h"})
    with pytest.raises(ConversionError, match="not an input of the model"):
        edgert.convert(m, None, state={"Y_h": "h0"})
    with pytest.raises(ConversionError, match="Pairs that fit: .*--state Y_h=initial_h \\(names like a state pair"):
        edgert.convert(m, None, state={"y": "initial_c"})
    with pytest.raises(ConversionError, match="OUT=IN"):
        edgert.convert(m, None, state=["Y_h"])
    with pytest.raises(ConversionError, match="bounded"):
        edgert.convert(m, None, state=LSTM_STATE, input_shapes={"x": [1, 1, (8, 16)]})


def test_cli_convert_with_state(tmp_path):
    from click.testing import CliRunner
    from edgert.cli.main import main
    src = tmp_path / "lstm.onnx"
    onnx.save(lstm_model(), str(src))
    r = CliRunner().invoke(main, ["convert", str(src), "-o", str(tmp_path / "a.edgert"), "--state", "Y_h=initial_h",
                                  "--state", "Y_c=initial_c"])
    assert r.exit_code == 0, r.output
    assert "state in the session: Y_h -> initial_h" in r.output
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "a.edgert")])
    assert "state   initial_h: float32[1, 1, 32] <- Y_h" in r.output
    r = CliRunner().invoke(main, ["convert", str(src), "-o", str(tmp_path / "b.edgert")])
    assert r.exit_code == 0 and "hint: a streaming model?" in r.output and "--state Y_h=initial_h" in r.output


# ---- the loader's checks --------------------------------------------------------------------

def _state_section(data: bytes) -> tuple[int, int]:
    (_, _, _, _, _, _, nsec, toff, *_rest) = fmt._HEADER.unpack_from(data, 0)
    for k in range(nsec):
        kind, _, off, size, _, _ = fmt._ENTRY.unpack_from(data, toff + k * fmt.ENTRY_SIZE)
        if kind == fmt.STATE:
            return off, size
    raise AssertionError("no STATE section")


@pytest.mark.parametrize("edit,why", [
    (lambda b, o: struct.pack_into("<I", b, o + 16 + 4, struct.unpack_from("<I", b, o + 16)[0]), "bad tensor index"),
    (lambda b, o: struct.pack_into("<I", b, o + 16 + 8, 2), "bad tensor index or flags"),
    (lambda b, o: struct.pack_into("<Q", b, o + 8, 64), "reaches into the state region"),
    (lambda b, o: struct.pack_into("<Q", b, o + 8, 1 << 40), "outside the arena"),
    (lambda b, o: struct.pack_into("<I", b, o, 3), "bad count"),
    (lambda b, o: struct.pack_into("<I", b, o + 16 + 32 + 4, struct.unpack_from("<I", b, o + 16 + 4)[0]),
     "in another state"),
])
def test_loader_refuses_bad_state(lstm, edit, why):
    buf = bytearray(lstm[1])
    off, _ = _state_section(buf)
    edit(buf, off)
    fmt.seal(buf)
    with pytest.raises(ModelFormatError, match=why):
        edgert.Session(bytes(buf))


def test_loader_refuses_pair_of_other_shapes(lstm):
    """A state whose output is a tensor of another shape (the graph output y)."""
    info = reader.read(lstm[1])
    buf = bytearray(lstm[1])
    off, _ = _state_section(buf)
    struct.pack_into("<I", buf, off + 16 + 4, info["outputs"][0])
    fmt.seal(buf)
    with pytest.raises(ModelFormatError, match="differ in dtype, shape or quantization"):
        edgert.Session(bytes(buf))


def test_state_with_an_old_runtime_is_refused(lstm):
    """A runtime that does not know STATE refuses the file (the section is flagged
    required) instead of running it without its state: shown with the kind changed to
    one this runtime does not know."""
    buf = bytearray(lstm[1])
    (_, _, _, _, _, _, nsec, toff, *_rest) = fmt._HEADER.unpack_from(buf, 0)
    for k in range(nsec):
        if struct.unpack_from("<I", buf, toff + k * fmt.ENTRY_SIZE)[0] == fmt.STATE:
            struct.pack_into("<I", buf, toff + k * fmt.ENTRY_SIZE, 63)
    fmt.seal(buf)
    with pytest.raises(ModelFormatError, match="required section kind 63 is unknown"):
        edgert.Session(bytes(buf))
