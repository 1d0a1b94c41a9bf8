"""Whole models with bounded dimensions at random sizes within their bounds, against
onnxruntime (docs/runtime.md, "Bounded dimensions"): recurrent models over 1..500 frames
(GRU, LSTM, RNN; both layouts, every direction, initial states, peepholes, sequence_lens
computed from the input's shape), a model whose pads and tiles follow the input, and the
real MiniLM, PP-OCR recognizer, captcha recognizer (CNN + LSTM) and voice activity
detector (pad, split, LSTM). Each file runs at least 20 sizes drawn by a seeded RNG
(both bounds, an odd one, a prime one, the rest uniform, in random order so the shape
pass follows growing and shrinking sizes): the output shapes are onnxruntime's, the
values within 1e-3 of max |onnxruntime output|, and no run allocates. What the runtime
cannot follow is refused at conversion, naming the node and op."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert.errors import ConversionError
from edgert.runtime import reader
from edgert.runtime import session as runtime

TOL = 1e-3  # max |edgert - onnxruntime| <= TOL * max |onnxruntime|
N_SIZES = 24


def is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def random_sizes(rng: np.random.Generator, lo: int, hi: int, n: int = N_SIZES) -> list[int]:
    """n distinct sizes within lo..hi (fewer when the range is smaller): both bounds, a
    random odd and a random prime one, the rest uniform; shuffled."""
    out = [lo, hi]
    odd = [v for v in range(lo + 1, hi) if v % 2]
    primes = [v for v in range(lo + 1, hi) if is_prime(v)]
    for pool in (odd, primes):
        if pool:
            out.append(int(rng.choice(pool)))
    while len(set(out)) < min(n, hi - lo + 1):
        out.append(int(rng.integers(lo, hi + 1)))
    out = list(dict.fromkeys(out))
    rng.shuffle(out)
    return out


def _ort(model, **kw):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), so,
                                providers=["CPUExecutionProvider"], **kw)


def run_sizes(data: bytes, reference, feeds_at, sizes: list[int]) -> float:
    """Runs the bounded file at every size against reference(feeds) -> outputs; returns
    the largest error relative to max |reference output| (integer outputs must be equal)."""
    assert len(sizes) >= 20 and len(set(sizes)) == len(sizes)
    sess = runtime.Session(data, max_contexts=1)
    before = runtime.alloc_count()  # the first run included
    worst = 0.0
    for s in sizes:
        feeds = feeds_at(s)
        got = sess.run(None, feeds)  # a kernel, shape or scratch error fails the test
        want = reference(feeds)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape, f"size {s}, output {k}: {g.shape} != onnxruntime's {w.shape}"
            if w.dtype.kind in "biu":
                np.testing.assert_array_equal(g, w, err_msg=f"size {s}, output {k}")
                continue
            scale = float(np.abs(w).max())
            err = float(np.abs(g.astype(np.float64) - w).max()) / scale if scale > 0 else float(np.abs(g).max())
            assert err <= TOL, f"size {s}, output {k}: relative error {err:.2e}"
            worst = max(worst, err)
    assert runtime.alloc_count() == before, "a run allocated"
    return worst


# ---- synthetic models --------------------------------------------------------------------------

def _w(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _i64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _model(nodes, inputs, outputs, inits) -> bytes:
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    g = helper.make_graph(nodes, "g", inputs, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
HIDDEN, FEATURES = 64, 40


def recurrent_model(op: str, direction: str = "forward", layout: int = 0, batch_first: bool = True,
                    seed: int = 0) -> bytes:
    """x [1, T, 40] (batch_first) or [T, 1, 40] -> op (hidden 64, random weights and
    bias, initial states, LSTM peepholes, sequence_lens = T from Shape(x)) -> Y as
    [1, T, D*64] -> MatMul [D*64, 10]; outputs y and the last states. layout 1 takes X
    and gives Y and the states batch first; with batch 1 its initial states hold the same
    values as layout 0's (onnxruntime runs only layout 0)."""
    rng = np.random.default_rng(seed)
    D, G, H = (2 if direction == "bidirectional" else 1), GATES[op], HIDDEN
    t_axis = 1 if batch_first else 0
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", FEATURES] if batch_first else
                                      ["T", 1, FEATURES])
    # The simple RNN's tanh recurrence stays contractive with small weights (its rounding
    # would otherwise grow over 500 steps, in onnxruntime and edgert alike).
    rscale = 0.3 if op != "RNN" else 0.5 / np.sqrt(H)
    inits = [_w(rng, "W", (D, G * H, FEATURES), 0.3 if op != "RNN" else 0.1), _w(rng, "R", (D, G * H, H), rscale),
             _w(rng, "B", (D, 2 * G * H), 0.2), _w(rng, "Wo", (D * H, 10)), _i64("t_axis", [t_axis]),
             _i64("y_shape", [1, -1, D * H])]
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Gather", ["x_shape", "t_axis"], ["t64"], axis=0),
             helper.make_node("Cast", ["t64"], ["seq_lens"], to=TensorProto.INT32)]
    xin = "x"
    if batch_first != (layout == 1):  # X to the op's layout
        nodes.append(helper.make_node("Transpose", ["x"], ["x_op"], perm=[1, 0, 2]))
        xin = "x_op"
    states = (D, 1, H) if layout == 0 else (1, D, H)
    inputs = [xin, "W", "R", "B", "seq_lens", "h0"]
    inits.append(_w(rng, "h0", states, 0.5))
    outputs = ["Y", "Y_h"]
    attrs = {"hidden_size": H, "direction": direction}
    if layout:
        attrs["layout"] = 1
    if op == "LSTM":
        inputs += ["c0", "P"]
        inits += [_w(rng, "c0", states, 0.5), _w(rng, "P", (D, 3 * H), 0.3)]
        outputs.append("Y_c")
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    nodes.append(helper.make_node(op, inputs, outputs, name="recurrent", **attrs))
    # Y [T, D, 1, H] (layout 0) or [1, T, D, H] (layout 1) -> [1, T, D*H]
    perm = [2, 0, 1, 3] if layout == 0 else [0, 1, 2, 3]
    nodes += [helper.make_node("Transpose", ["Y"], ["Y_t"], perm=perm),
              helper.make_node("Reshape", ["Y_t", "y_shape"], ["Y_r"]),
              helper.make_node("MatMul", ["Y_r", "Wo"], ["y"])]
    return _model(nodes, [x], ["y"] + outputs[1:], inits)


def pad_tile_model() -> bytes:
    """x [1, T, 40]: tiled twice along time, reflect- and edge-padded by constant pads; a
    learned vector tiled to T steps (repeats from Shape(x)) and concatenated to x, then
    edge-padded by T more steps (pads from Shape(x)) and constant-padded with a negative
    pad (a crop)."""
    rng = np.random.default_rng(8)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", FEATURES])
    nodes = [
        helper.make_node("Tile", ["x", "reps_time"], ["t0"], name="tile_time"),
        helper.make_node("Pad", ["t0", "pads_reflect"], ["p0"], mode="reflect", name="pad_reflect"),
        helper.make_node("Pad", ["p0", "pads_edge"], ["p1"], mode="edge", name="pad_edge"),
        helper.make_node("Mul", ["p1", "scale"], ["y1"], name="mul"),
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "one"], ["T"], axis=0),
        helper.make_node("Concat", ["one", "T", "one"], ["reps_t"], axis=0),
        helper.make_node("Tile", ["vec", "reps_t"], ["t1"], name="tile_by_shape"),
        helper.make_node("Concat", ["x", "t1"], ["c1"], axis=2, name="concat"),
        helper.make_node("Concat", ["zero", "zero", "zero", "zero", "T", "zero"], ["pads_t"], axis=0),
        helper.make_node("Pad", ["c1", "pads_t"], ["p2"], mode="edge", name="pad_by_shape"),
        helper.make_node("Pad", ["p2", "pads_crop", "fill"], ["p3"], mode="constant", name="pad_crop"),
        helper.make_node("Relu", ["p3"], ["y2"], name="relu"),
    ]
    inits = [_i64("reps_time", [1, 2, 1]), _i64("pads_reflect", [0, 1, 0, 0, 1, 0]),
             _i64("pads_edge", [0, 2, 0, 0, 3, 0]), _i64("one", [1]), _i64("zero", [0]),
             _w(rng, "vec", (1, 1, 8)), _i64("pads_crop", [0, 1, -1, 0, 0, 2]),
             helper.make_tensor("fill", TensorProto.FLOAT, [], [0.25]), _w(rng, "scale", (FEATURES,))]
    return _model(nodes, [x], ["y1", "y2"], inits)


def _bounded_vs_static(model, bounded_shapes, static_shapes, **kw) -> tuple[bytes, int, int]:
    data = edgert.convert(model, None, input_shapes=bounded_shapes, **kw)
    static = edgert.convert(model, None, input_shapes=static_shapes, **kw)
    return data, reader.read(data)["arena_bytes"], reader.read(static)["arena_bytes"]


def _frames(rng, batch_first):
    def feeds_at(t):
        shape = (1, t, FEATURES) if batch_first else (t, 1, FEATURES)
        return {"x": rng.standard_normal(shape).astype(np.float32)}
    return feeds_at


@pytest.mark.parametrize("op,direction,batch_first", [("GRU", "forward", True), ("LSTM", "bidirectional", False),
                                                      ("RNN", "reverse", True)])
def test_recurrent_over_1_to_500_frames(op, direction, batch_first):
    model = recurrent_model(op, direction, 0, batch_first)
    t = [1, (1, 500), FEATURES] if batch_first else [(1, 500), 1, FEATURES]
    data, arena, static_arena = _bounded_vs_static(model, {"x": t}, {"x": [500 if isinstance(d, tuple) else d
                                                                          for d in t]})
    assert arena == static_arena  # planned for the upper bound, as the static file at 500 frames
    rng = np.random.default_rng(32)
    ref = _ort(model)
    run_sizes(data, lambda f: ref.run(None, f), _frames(rng, batch_first), random_sizes(rng, 1, 500))


@pytest.mark.parametrize("op,direction", [("GRU", "bidirectional"), ("LSTM", "reverse"), ("RNN", "forward")])
def test_recurrent_layout_1(op, direction):
    """layout 1 (batch first X, Y and states), which onnxruntime does not run: the
    reference is the layout-0 model with the same weights."""
    model = recurrent_model(op, direction, 1, True, seed=5)
    data = edgert.convert(model, None, input_shapes={"x": [1, (1, 300), FEATURES]})
    sess = _ort(recurrent_model(op, direction, 0, True, seed=5))

    def reference(feeds):
        outs = sess.run(None, feeds)
        return [outs[0]] + [o.transpose(1, 0, 2) for o in outs[1:]]  # states [D, 1, H] -> [1, D, H]

    rng = np.random.default_rng(33)
    run_sizes(data, reference, _frames(rng, True), random_sizes(rng, 1, 300))


def test_recurrent_batch_and_time_bounded():
    """Batch and time both bounded; zero initial states built from the input's shape
    (ConstantOfShape [1, N, H], as exporters write them: at run time a slice of the upper
    bound's zeros); the last step read by Gather and Slice at -1, and a mean over time."""
    rng = np.random.default_rng(34)
    H, I = 32, 12
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", I])
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Gather", ["x_shape", "one"], ["N"], axis=0),
             helper.make_node("Concat", ["one", "N", "hidden"], ["state_shape"], axis=0),
             helper.make_node("ConstantOfShape", ["state_shape"], ["zeros"]),
             helper.make_node("LSTM", ["x", "W", "R", "B", "", "zeros", "zeros"], ["Y", "Y_h", "Y_c"], hidden_size=H,
                              name="lstm"),
             helper.make_node("Squeeze", ["Y", "one"], ["Y_s"], name="squeeze"),
             helper.make_node("Gather", ["Y_s", "minus1"], ["last"], axis=0, name="gather_last"),
             helper.make_node("Slice", ["Y_s", "minus1s", "end", "zero"], ["last_slice"], name="slice_last"),
             helper.make_node("ReduceMean", ["Y_s"], ["mean"], axes=[0], keepdims=0, name="mean")]
    inits = [_w(rng, "W", (1, 4 * H, I)), _w(rng, "R", (1, 4 * H, H)), _w(rng, "B", (1, 8 * H)),
             _i64("one", [1]), _i64("hidden", [H]), helper.make_tensor("minus1", TensorProto.INT64, [], [-1]),
             _i64("minus1s", [-1]), _i64("end", [2 ** 62]), _i64("zero", [0])]
    model = _model(nodes, [x], ["last", "last_slice", "mean", "Y_h", "Y_c"], inits)
    data = edgert.convert(model, None, input_shapes={"x": [(1, 100), (1, 8), I]})
    ref = _ort(model)
    # Random (T, N) pairs, run by their index: both corners, then uniform.
    pairs = [(1, 1), (100, 8), (97, 1), (1, 7)] + [(int(rng.integers(1, 101)), int(rng.integers(1, 9)))
                                                   for _ in range(40)]
    pairs = list(dict.fromkeys(pairs))[:N_SIZES]
    run_sizes(data, lambda f: ref.run(None, f),
              lambda k: {"x": rng.standard_normal((pairs[k][0], pairs[k][1], I)).astype(np.float32)},
              list(range(len(pairs))))


def test_pad_and_tile_follow_the_input():
    model = pad_tile_model()
    data, arena, static_arena = _bounded_vs_static(model, {"x": [1, (1, 500), FEATURES]}, {"x": [1, 500, FEATURES]})
    assert arena == static_arena
    rng = np.random.default_rng(35)
    ref = _ort(model)
    run_sizes(data, lambda f: ref.run(None, f), _frames(rng, True), random_sizes(rng, 1, 500))


def test_split_follows_the_input():
    """A split of the time axis into [T - 3, 3] (sizes from Shape(x)), then of the
    features into [2, 4]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", 6])
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"]), helper.make_node("Gather", ["x_shape", "one"], ["T"], axis=0),
             helper.make_node("Sub", ["T", "three"], ["head"]),
             helper.make_node("Concat", ["head", "three"], ["sizes"], axis=0),
             helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1, name="split_time"),
             helper.make_node("Split", ["a", "sizes_feat"], ["c", "d"], axis=2, name="split_features")]
    model = _model(nodes, [x], ["b", "c", "d"], [_i64("one", [1]), _i64("three", [3]), _i64("sizes_feat", [2, 4])])
    data = edgert.convert(model, None, input_shapes={"x": [1, (4, 500), 6]})
    rng = np.random.default_rng(41)
    ref = _ort(model)
    run_sizes(data, lambda f: ref.run(None, f), lambda t: {"x": rng.standard_normal((1, t, 6)).astype(np.float32)},
              random_sizes(rng, 4, 500))


def _pad_time(name: str, nodes: list, inits: list) -> bytes:
    """x [1, T, 4] padded at the end of the time axis by `p` (computed by nodes)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["T"], axis=0), *nodes,
             helper.make_node("Concat", ["z", "z", "z", "z", "p", "z"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["y"], name=name)]
    return _model(nodes, [x], ["y"], [_i64("one", [1]), _i64("z", [0]), *inits])


def test_what_cannot_follow_is_refused_at_conversion():
    """A recurrent op whose constant sequence_lens holds at one size only is refused,
    naming the node. (Pads to a fixed length or to a multiple of 8 and a split into equal
    halves, refused before expression rules, run: tests/test_bounded_expressions.py.)"""
    rng = np.random.default_rng(36)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 4])
    nodes = [helper.make_node("GRU", ["x", "W", "R", "", "lens"], ["y"], hidden_size=8, name="the_gru")]
    inits = [_w(rng, "W", (1, 24, 4)), _w(rng, "R", (1, 24, 8)),
             helper.make_tensor("lens", TensorProto.INT32, [1], [20])]
    with pytest.raises(ConversionError, match="the_gru"):
        edgert.convert(_model(nodes, [x], ["y"], inits), None, input_shapes={"x": [(1, 20), 1, 4]})


# ---- real models --------------------------------------------------------------------------------

def test_minilm_sequence_1_to_128(real_model):
    src = real_model("minilm")
    data = edgert.convert(src, None, input_shapes={"input_ids": [1, (1, 128)]})
    ref = _ort(src)
    rng = np.random.default_rng(37)

    def feeds_at(n):
        mask = np.ones((1, n), np.int64)
        mask[0, int(rng.integers(1, n + 1)):] = 0  # padded tail of random length
        return {"input_ids": rng.integers(0, 30000, (1, n)).astype(np.int64), "attention_mask": mask}

    run_sizes(data, lambda f: ref.run(None, f), feeds_at, random_sizes(rng, 1, 128))


def test_ppocr_rec_widths_32_to_960(real_model):
    src = real_model("ppocr_rec")
    data = edgert.convert(src, None, input_shapes={"x": [1, 3, 48, (32, 960)]})
    ref = _ort(src)
    rng = np.random.default_rng(38)
    run_sizes(data, lambda f: ref.run(None, f),
              lambda w: {"x": rng.standard_normal((1, 3, 48, w)).astype(np.float32)}, random_sizes(rng, 32, 960))


def test_ddddocr_widths_8_to_1024(real_model):
    """A CNN + LSTM captcha recognizer whose sequence is the image width / 8."""
    src = real_model("ddddocr")
    data = edgert.convert(src, None, input_shapes={"input1": [1, 1, 64, (8, 1024)]})
    ref = _ort(src)
    rng = np.random.default_rng(39)
    run_sizes(data, lambda f: ref.run(None, f),
              lambda w: {"input1": rng.standard_normal((1, 1, 64, w)).astype(np.float32)},
              random_sizes(rng, 8, 1024))


def test_silero_vad_chunks_256_to_4096(real_model):
    """Reflect pad, a convolutional STFT, split and an LSTM over chunks of any length."""
    src = real_model("silero_vad")
    sr = np.array(16000, np.int64)
    data = edgert.convert(src, None, input_shapes={"input": [1, (256, 4096)], "state": [2, 1, 128]},
                          input_values={"sr": sr})
    ref = _ort(src)
    rng = np.random.default_rng(40)

    def feeds_at(n):
        return {"input": (rng.standard_normal((1, n)) * 0.1).astype(np.float32),
                "state": (rng.standard_normal((2, 1, 128)) * 0.1).astype(np.float32)}

    run_sizes(data, lambda f: ref.run(None, dict(f, sr=sr)), feeds_at, random_sizes(rng, 256, 4096))
