"""lstm, gru, rnn: the numpy reference against onnxruntime, and the C kernels end to end."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.frontend.onnx_import import import_onnx
from edgert.converter.ops import get as get_op
from tests.helpers import assert_close, check_against_ort, make_model, run_edgert, run_ort

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
ONNX_INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def _case(op, *, S=4, N=1, I=5, H=3, direction="forward", bias=True, h0=False, c0=False, peep=False,
          layout=0, outputs=("Y", "Y_h", "Y_c"), runtime=("X",), seed=0, scale=0.5, **attrs):
    """An ONNX model with one `op` node and its feeds. `runtime` names the inputs given at run
    time; the others are initializers. Weights are N(0, scale^2): large hidden sizes need a
    scale near 1/sqrt(H) to keep the recurrence contractive (else rounding differences grow)."""
    rng = np.random.default_rng(seed)
    G, D = GATES[op], 2 if direction == "bidirectional" else 1
    vals = {
        "X": rng.standard_normal((S, N, I) if layout == 0 else (N, S, I)),
        "W": rng.standard_normal((D, G * H, I)) * scale,
        "R": rng.standard_normal((D, G * H, H)) * scale,
    }
    state = (D, N, H) if layout == 0 else (N, D, H)
    if bias:
        vals["B"] = rng.standard_normal((D, 2 * G * H)) * 0.5
    if h0:
        vals["initial_h"] = rng.standard_normal(state)
    if c0:
        vals["initial_c"] = rng.standard_normal(state)
    if peep:
        vals["P"] = rng.standard_normal((D, 3 * H))
    vals = {k: v.astype(np.float32) for k, v in vals.items()}
    names = [n if n in vals else "" for n in ONNX_INPUTS[: (8 if op == "LSTM" else 6)]]
    while names and not names[-1]:
        names.pop()
    outs = [o for o in outputs if op == "LSTM" or o != "Y_c"]
    node_outs = list(outs)
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, names, node_outs, hidden_size=H, direction=direction, **attrs)
    feeds = {k: v for k, v in vals.items() if k in runtime}
    inits = {k: v for k, v in vals.items() if k not in runtime}
    model = make_model(node, feeds, [o for o in node_outs if o], inits)
    return model, feeds


def _reference(model, feeds):
    """The edgert graph's numpy meaning (lowering + edgert.converter.ops reference)."""
    g = import_onnx(model)
    env = {k: np.asarray(v) for k, v in feeds.items()}
    for n in g.nodes:
        ins = [None if not i else env[i] if i in env else g.tensors[i].data for i in n.inputs]
        for name, val in zip(n.outputs, get_op(n.op).reference(n, ins)):
            env[name] = val
    return [env[o] for o in g.outputs]


def _oracle(model, feeds):
    """onnxruntime's outputs. Its CPU kernels lack layout=1, so a batch-major node runs as
    the equivalent time-major node on transposed inputs, and its outputs are transposed back."""
    node = model.graph.node[0]
    layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
    if len(model.graph.node) != 1 or layout == 0:
        return run_ort(model, feeds)
    from onnx import numpy_helper

    m = type(model)()
    m.CopyFrom(model)
    n = m.graph.node[0]
    next(a for a in n.attribute if a.name == "layout").i = 0
    swap = {n.input[k]: (1, 0, 2) for k in (0, 5, 6) if k < len(n.input) and n.input[k]}
    feeds = {k: v.transpose(swap[k]).copy() if k in swap else v for k, v in feeds.items()}
    for vi in m.graph.input:
        if vi.name in swap:
            dims = vi.type.tensor_type.shape.dim
            dims[0].dim_value, dims[1].dim_value = dims[1].dim_value, dims[0].dim_value
    for init in m.graph.initializer:
        if init.name in swap:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).transpose(swap[init.name]).copy(),
                                                  init.name))
    outs = run_ort(m, feeds)
    names = [o.name for o in m.graph.output]
    return [o.transpose(2, 0, 1, 3) if name == n.output[0] else o.transpose(1, 0, 2)
            for name, o in zip(names, outs)]


def _check_reference(model, feeds):
    want = _oracle(model, feeds)
    got = _reference(model, feeds)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, what=f"reference output {k}")


def e2e(fn):
    """Marks tests that go through conversion and the C runtime."""
    return fn

LSTM_CASES = [
    dict(),
    dict(direction="reverse"),
    dict(direction="bidirectional"),
    dict(N=3, bias=False),
    dict(N=3, direction="bidirectional", h0=True, c0=True),
    dict(N=3, h0=True, peep=True),
    dict(direction="bidirectional", peep=True, c0=True, h0=True, N=2),
    dict(layout=1, N=3, h0=True, c0=True),
    dict(layout=1, N=2, direction="bidirectional", h0=True, c0=True, peep=True),
    dict(clip=0.7, N=2, h0=True, c0=True, peep=True),
    dict(input_forget=1, N=2, c0=True),
    dict(outputs=("Y",)),
    dict(outputs=("", "Y_h")),
    dict(outputs=("", "", "Y_c"), direction="reverse"),
    dict(runtime=("X", "W", "R", "B", "initial_h", "initial_c", "P"), h0=True, c0=True, peep=True, N=2),
    dict(activations=["HardSigmoid", "LeakyRelu", "Softsign"], activation_alpha=[0.3, 0.05],
         activation_beta=[0.6]),
    dict(activations=["Sigmoid", "Elu", "Softplus", "HardSigmoid", "Tanh", "Relu"],
         direction="bidirectional"),
]
GRU_CASES = [
    dict(),
    dict(direction="reverse", N=3),
    dict(direction="bidirectional", h0=True),
    dict(linear_before_reset=1),
    dict(linear_before_reset=1, direction="bidirectional", N=3, h0=True),
    dict(linear_before_reset=1, bias=False),
    dict(bias=False, N=3),
    dict(layout=1, N=3, h0=True),
    dict(layout=1, N=2, direction="bidirectional", linear_before_reset=1, h0=True),
    dict(clip=0.5, h0=True, N=2),
    dict(clip=0.5, linear_before_reset=1, h0=True, N=2),
    dict(outputs=("", "Y_h")),
    dict(runtime=("X", "W", "R", "B", "initial_h"), h0=True, N=2),
    dict(activations=["HardSigmoid", "ScaledTanh"], activation_alpha=[0.25, 1.5], activation_beta=[0.5, 0.8]),
]
RNN_CASES = [
    dict(),
    dict(direction="reverse", N=3, h0=True),
    dict(direction="bidirectional", N=3),
    dict(bias=False, h0=True),
    dict(layout=1, N=3, h0=True, direction="bidirectional"),
    dict(clip=0.3, N=2),
    dict(activations=["Relu"]),
    dict(activations=["Affine"], activation_alpha=[0.8], activation_beta=[0.1]),
    dict(activations=["ThresholdedRelu", "Softsign"], activation_alpha=[0.2], direction="bidirectional"),
    dict(outputs=("", "Y_h")),
]
ALL_CASES = ([("LSTM", c) for c in LSTM_CASES] + [("GRU", c) for c in GRU_CASES]
             + [("RNN", c) for c in RNN_CASES])
IDS = [f"{op}-{k}" for op, cases in (("LSTM", LSTM_CASES), ("GRU", GRU_CASES), ("RNN", RNN_CASES))
       for k in range(len(cases))]


# The C kernels' cases run over sequence lengths drawn from 1..500 (seeded: the same
# lengths every run; the first case of each op at 1, the second at 500).
_LEN_RNG = np.random.default_rng(37)
LENGTHS = [int(v) for v in _LEN_RNG.integers(1, 501, len(ALL_CASES))]
for _op, _first in (("LSTM", 0), ("GRU", len(LSTM_CASES)), ("RNN", len(LSTM_CASES) + len(GRU_CASES))):
    LENGTHS[_first], LENGTHS[_first + 1] = 1, 500


@pytest.mark.parametrize("op,kw", ALL_CASES, ids=IDS)
def test_reference_matches_onnxruntime(op, kw):
    _check_reference(*_case(op, **kw))


@e2e
@pytest.mark.parametrize("op,kw,S", [(op, kw, S) for (op, kw), S in zip(ALL_CASES, LENGTHS)],
                         ids=[f"{i}-S{S}" for i, S in zip(IDS, LENGTHS)])
def test_kernel_matches_onnxruntime(op, kw, S):
    model, feeds = _case(op, S=S, **kw)
    want = _oracle(model, feeds)
    got = run_edgert(model, feeds)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, what=f"output {k}")


# Hidden sizes around the kernels' 16-unit panels, batches, both layouts, and the same
# weights over several random lengths (1..500); weights ~ 1/sqrt(H) keep long sequences
# contractive.
PANEL_CASES = [
    ("LSTM", dict(H=20, I=7, N=2, direction="bidirectional", h0=True, c0=True, peep=True)),
    ("LSTM", dict(H=33, I=5, N=3, layout=1, clip=1.5, h0=True)),
    ("LSTM", dict(H=16, I=3, N=1, input_forget=1, c0=True)),
    ("GRU", dict(H=20, I=7, N=2, direction="bidirectional", linear_before_reset=1, h0=True)),
    ("GRU", dict(H=17, I=9, N=1)),
    ("GRU", dict(H=40, I=6, N=2, layout=1, direction="reverse", clip=2.0, h0=True)),
    ("GRU", dict(H=31, I=4, N=1, linear_before_reset=1, activations=["HardSigmoid", "Tanh"],
                 activation_alpha=[0.25], activation_beta=[0.5])),
    ("RNN", dict(H=24, I=5, N=2, direction="bidirectional", h0=True)),
]


@e2e
@pytest.mark.parametrize("op,kw", PANEL_CASES, ids=[f"{op}-{k}" for k, (op, _) in enumerate(PANEL_CASES)])
def test_random_sequence_lengths(op, kw):
    kw = dict(kw)
    H = kw.pop("H")
    rng = np.random.default_rng(H * 101 + len(kw))
    for S in sorted({1, *(int(v) for v in rng.integers(2, 501, 3))}):
        model, feeds = _case(op, S=S, H=H, seed=S, scale=1.0 / np.sqrt(H), **kw)
        want = _oracle(model, feeds)
        got = run_edgert(model, feeds)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, what=f"S={S} output {k}")


@e2e
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_crnn_sized_bidirectional_two_threads(op):
    # Big enough for the kernels' multi-threaded path (CRNN-like: batch 1, long sequence).
    model, feeds = _case(op, S=26, N=1, I=48, H=128, direction="bidirectional", seed=3, scale=0.1)
    want = run_ort(model, feeds)
    data = edgert.convert(model)
    for threads in (1, 2):
        got = edgert.Session(data, threads=threads).run(None, feeds)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, what=f"{op} threads={threads} output {k}")


@e2e
def test_lstm_streaming_state_matches_whole_sequence():
    # A streaming model runs one step at a time, feeding its state back in.
    S, I, H = 5, 4, 6
    rng = np.random.default_rng(7)
    W = (rng.standard_normal((1, 4 * H, I)) * 0.5).astype(np.float32)
    R = (rng.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32)
    B = (rng.standard_normal((1, 8 * H)) * 0.5).astype(np.float32)
    X = rng.standard_normal((S, 1, I)).astype(np.float32)
    zero = np.zeros((1, 1, H), np.float32)
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h", "c"], ["", "hn", "cn"], hidden_size=H)
    step = make_model(node, {"x": X[:1], "h": zero, "c": zero}, ["hn", "cn"], {"W": W, "R": R, "B": B})
    sess = edgert.Session(edgert.convert(step))
    h, c = zero, zero
    for t in range(S):
        h, c = sess.run(None, {"x": X[t:t + 1], "h": h, "c": c})
    whole = make_model(helper.make_node("LSTM", ["x", "W", "R", "B"], ["", "hn", "cn"], hidden_size=H),
                       {"x": X}, ["hn", "cn"], {"W": W, "R": R, "B": B})
    want_h, want_c = run_ort(whole, {"x": X})
    assert_close(h, want_h)
    assert_close(c, want_c)


def _with_seq_lens(model, lens, runtime=False):
    """Sets the node's sequence_lens input (an initializer, or a graph input when runtime)."""
    from onnx import numpy_helper

    node = model.graph.node[0]
    while len(node.input) < 5:
        node.input.append("")
    node.input[4] = "seq_lens"
    arr = np.array(lens, np.int32)
    if runtime:
        model.graph.input.append(helper.make_tensor_value_info("seq_lens", 6, list(arr.shape)))
    else:
        model.graph.initializer.append(numpy_helper.from_array(arr, "seq_lens"))
    return model


@e2e
def test_sequence_lens_constant_full_length_is_accepted():
    model, feeds = _case("GRU", S=3, N=2, h0=True)
    check_against_ort(_with_seq_lens(model, [3, 3]), feeds)


def _stacked_bidirectional_lstm(S=6, N=2, I=5, H=4):
    """Two bidirectional LSTM layers as PyTorch exports them: Y [S,2,N,H] -> Transpose
    (0,2,1,3) -> Reshape [S,N,2H] -> the next layer."""
    rng = np.random.default_rng(11)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.4).astype(np.float32)

    inits = {"W0": w(2, 4 * H, I), "R0": w(2, 4 * H, H), "B0": w(2, 8 * H),
             "W1": w(2, 4 * H, 2 * H), "R1": w(2, 4 * H, H), "B1": w(2, 8 * H),
             "shape": np.array([0, 0, -1], np.int64)}
    nodes = [
        helper.make_node("LSTM", ["x", "W0", "R0", "B0", "", "h0", "c0"], ["y0", "hn0", "cn0"], hidden_size=H,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["y0"], ["y0t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y0t", "shape"], ["x1"]),
        helper.make_node("LSTM", ["x1", "W1", "R1", "B1", "", "h1", "c1"], ["y1", "hn1", "cn1"], hidden_size=H,
                         direction="bidirectional"),
    ]
    feeds = {"x": rng.standard_normal((S, N, I)).astype(np.float32)}
    for k in ("h0", "c0", "h1", "c1"):
        feeds[k] = rng.standard_normal((2, N, H)).astype(np.float32)
    return make_model(nodes, feeds, ["y1", "hn0", "cn0", "hn1", "cn1"], inits), feeds


def _have_lowerings(*op_types: str) -> bool:
    from edgert.converter.frontend.onnx_import import LOWERINGS

    return all(t in LOWERINGS for t in op_types)


def test_stacked_bidirectional_lstm_reference():
    _check_reference(*_stacked_bidirectional_lstm())


@e2e
def test_stacked_bidirectional_lstm():
    check_against_ort(*_stacked_bidirectional_lstm())


REJECTED = [
    ("LSTM", dict(activations=["Affine", "Tanh", "Tanh"])),            # Affine needs explicit alpha/beta
    ("LSTM", dict(activations=["Sigmoid", "Tanh"])),                   # wrong count
    ("LSTM", dict(activations=["Sigmoid", "Tanh", "Tanh"], direction="bidirectional")),  # needs 6
    ("LSTM", dict(activations=["Sigmoid", "Tanh", "Gelu"])),           # unknown activation
    ("RNN", dict(activations=["Relu"], activation_alpha=[0.5])),       # alpha nobody uses
    ("GRU", dict(linear_before_reset=2)),
]


@pytest.mark.parametrize("op,kw", REJECTED)
def test_rejected_attributes(op, kw):
    model, feeds = _case(op, **kw)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(model)


@pytest.mark.parametrize("lens,runtime", [([3, 2], False), ([3, 3], True)])
def test_rejected_sequence_lens(lens, runtime):
    model, _ = _case("LSTM", S=3, N=2)
    with pytest.raises(edgert.EdgertError):
        edgert.convert(_with_seq_lens(model, lens, runtime))


def _tampered(monkeypatch, op_type, op, words=None, scratch=None):
    """A converted one-node model whose parameter words / scratch size are replaced (as an
    untrusted file could have them): the C prepare must refuse it at load."""
    from edgert.converter import pipeline as converter
    from edgert.converter.ops import REGISTRY

    model, _ = _case(op_type, N=2, direction="bidirectional", peep=op_type == "LSTM", h0=True)
    g = converter.build_graph(model)
    d = REGISTRY[op]
    if words is not None:
        good = d.pack
        monkeypatch.setattr(d, "pack", lambda node, graph: words(good(node, graph)))
    if scratch is not None:
        good_s = d.scratch
        monkeypatch.setattr(d, "scratch", lambda node, graph: scratch(good_s(node, graph)))
    return converter.serialize(g)


def _set(k, v):
    def f(words):
        words = list(words)
        words[k] = v
        return words
    return f


BAD_PARAMS = [
    ("direction", _set(0, 3)), ("direction2", _set(0, 0)), ("hidden", _set(1, 0)), ("hidden2", _set(1, 5)),
    ("layout", _set(2, 2)), ("clipflag", _set(3, 2)), ("clip", lambda w: w[:3] + [1, -1.0] + w[5:]),
    ("flag", _set(5, 7)), ("act", _set(6, 99)), ("act2", _set(6, -1)), ("alpha", _set(7, float("nan"))),
    ("short", lambda w: w[:5]), ("long", lambda w: w + [0]),
]


@e2e
@pytest.mark.parametrize("op_type", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("what,words", BAD_PARAMS, ids=[b[0] for b in BAD_PARAMS])
def test_prepare_rejects_bad_params(monkeypatch, op_type, what, words):
    data = _tampered(monkeypatch, op_type, op_type.lower(), words=words)
    with pytest.raises(edgert.EdgertError):
        edgert.Session(data)


@e2e
@pytest.mark.parametrize("op_type", ["LSTM", "GRU", "RNN"])
def test_prepare_rejects_small_scratch(monkeypatch, op_type):
    data = _tampered(monkeypatch, op_type, op_type.lower(), scratch=lambda n: n - 4)
    with pytest.raises(edgert.EdgertError):
        edgert.Session(data)


@e2e
def test_run_allocates_nothing():
    from edgert.runtime import session as runtime

    model, feeds = _case("LSTM", N=2, direction="bidirectional", h0=True, c0=True, peep=True,
                         runtime=("X", "initial_h", "initial_c"))
    sess = edgert.Session(edgert.convert(model), threads=2)
    sess.run(None, feeds)
    before = runtime.alloc_count()
    sess.run(None, feeds)
    assert runtime.alloc_count() == before
