"""ONNX models whose initializers are used by many nodes, built with onnx.helper and
numpy (for tests/test_shared_weights.py and tools/bench_shared.py):

  unrolled_lstm   a bidirectional LSTM unrolled over T steps the way PyTorch exports an
                  LSTMCell loop: per step Gemm(x_t, W_ih, transB=1) + Gemm(h, W_hh,
                  transB=1), Split into 4 gates, Sigmoid/Tanh cell math; every step of a
                  direction uses the same W_ih, W_hh and biases. With cnn=True a small
                  CNN turns a text-line image into the T feature columns (a CRNN).
  tied_embedding  token embedding E [V, D] (Gather), a shared block applied `layers`
                  times (one W for every layer, as in ALBERT), and the output projection
                  on E itself: MatMul with Transpose(E), or Gemm(h, E, transB=1).
  siamese         two Conv/Gemm towers with the same weights and an L2 distance.

Each returns (onnx.ModelProto, example feeds).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

F32 = np.float32


def _model(nodes, inputs, outputs, inits, opset: int = 17) -> onnx.ModelProto:
    vin = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for n, v in inputs.items()]
    vout = [helper.make_empty_tensor_value_info(o) for o in outputs]
    init = [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()]
    m = helper.make_model(helper.make_graph(nodes, "shared", vin, vout, init),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.k = 0

    def init(self, name: str, arr) -> str:
        self.inits[name] = np.asarray(arr)
        return name

    def weight(self, name: str, shape, scale: float | None = None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return self.init(name, (self.rng.uniform(-s, s, shape)).astype(F32))

    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        self.k += 1
        outs = [f"{op_type.lower()}_{self.k}_{j}" for j in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=f"{op_type}_{self.k}", **attrs))
        return outs[0] if n_out == 1 else outs


def _lstm_direction(b: _Builder, xs: list[str], input_size: int, hidden: int, prefix: str,
                    reverse: bool) -> list[str]:
    """One direction of an unrolled LSTMCell loop; returns h per step in time order."""
    w_ih = b.weight(f"{prefix}.weight_ih", (4 * hidden, input_size))
    w_hh = b.weight(f"{prefix}.weight_hh", (4 * hidden, hidden))
    b_ih = b.weight(f"{prefix}.bias_ih", (4 * hidden,), 1.0 / np.sqrt(hidden))
    b_hh = b.weight(f"{prefix}.bias_hh", (4 * hidden,), 1.0 / np.sqrt(hidden))
    h = c = b.init(f"{prefix}.zeros", np.zeros((1, hidden), F32))
    hs: dict[int, str] = {}
    for t in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        gi = b.op("Gemm", [xs[t], w_ih, b_ih], transB=1)
        gh = b.op("Gemm", [h, w_hh, b_hh], transB=1)
        gates = b.op("Add", [gi, gh])
        i, f, g, o = b.op("Split", [gates], 4, axis=1)
        i, f, g, o = b.op("Sigmoid", [i]), b.op("Sigmoid", [f]), b.op("Tanh", [g]), b.op("Sigmoid", [o])
        c = b.op("Add", [b.op("Mul", [f, c]), b.op("Mul", [i, g])])
        h = b.op("Mul", [o, b.op("Tanh", [c])])
        hs[t] = h
    return [hs[t] for t in range(len(xs))]


def unrolled_lstm(steps: int = 20, input_size: int = 32, hidden: int = 64, classes: int = 11, cnn: bool = False,
                  cnn_channels: tuple[int, ...] = (32, 64, 128), seed: int = 0):
    """x [1, steps, input_size] (or an image [1, 1, 32, 4 * steps] with cnn=True) ->
    logits [1, steps, classes]."""
    b = _Builder(seed)
    rng = b.rng
    if cnn:
        # Three 3x3 conv + ReLU stages (2x2 pooling after the first two) and a max over
        # the remaining 8 rows: one feature column per step.
        x_in = rng.standard_normal((1, 1, 32, 4 * steps)).astype(F32)
        cur, cin = "image", 1
        for k, cout in enumerate(cnn_channels):
            w = b.weight(f"cnn.{k}.weight", (cout, cin, 3, 3))
            bias = b.weight(f"cnn.{k}.bias", (cout,), 0.1)
            cur = b.op("Relu", [b.op("Conv", [cur, w, bias], pads=[1, 1, 1, 1])])
            if k < 2:
                cur = b.op("MaxPool", [cur], kernel_shape=[2, 2], strides=[2, 2])
            cin = cout
        cur = b.op("MaxPool", [cur], kernel_shape=[8, 1], strides=[8, 1])  # [1, C, 1, steps]
        cur = b.op("Squeeze", [cur, b.init("axis2", np.array([2], np.int64))])
        seq = b.op("Transpose", [cur], perm=[0, 2, 1])  # [1, steps, C]
        input_size = cin
        feeds = {"image": x_in}
    else:
        feeds = {"x": rng.standard_normal((1, steps, input_size)).astype(F32)}
        seq = "x"
    xs = [b.op("Gather", [seq, b.init(f"t{t}", np.array(t, np.int64))], axis=1) for t in range(steps)]
    fw = _lstm_direction(b, xs, input_size, hidden, "rnn.fw", reverse=False)
    bw = _lstm_direction(b, xs, input_size, hidden, "rnn.bw", reverse=True)
    axis1 = b.init("axis1", np.array([1], np.int64))
    cols = [b.op("Unsqueeze", [b.op("Concat", [f, r], axis=1), axis1]) for f, r in zip(fw, bw)]
    seq_out = b.op("Concat", cols, axis=1)  # [1, steps, 2H]
    w_out = b.weight("fc.weight", (2 * hidden, classes))
    b_out = b.weight("fc.bias", (classes,), 0.1)
    b.nodes.append(helper.make_node("MatMul", [seq_out, w_out], ["mm_out"], name="fc_matmul"))
    b.nodes.append(helper.make_node("Add", ["mm_out", b_out], ["logits"], name="fc_add"))
    return _model(b.nodes, feeds, ["logits"], b.inits), feeds


def tied_embedding(vocab: int = 2000, dim: int = 128, seq: int = 16, layers: int = 3, head: str = "transpose",
                   seed: int = 0):
    """ids [1, seq] int64 -> logits [1, seq, vocab] (head "transpose") or [seq, vocab]
    (head "gemm")."""
    b = _Builder(seed)
    ids = b.rng.integers(0, vocab, (1, seq)).astype(np.int64)
    emb = b.weight("embed.weight", (vocab, dim), 0.5)
    h = b.op("Gather", [emb, "ids"], axis=0)  # [1, seq, dim]
    w = b.weight("block.weight", (dim, dim))
    bias = b.weight("block.bias", (dim,), 0.1)
    for _ in range(layers):
        h = b.op("Add", [h, b.op("Tanh", [b.op("Add", [b.op("MatMul", [h, w]), bias])])])
    if head == "transpose":
        out = b.op("MatMul", [h, b.op("Transpose", [emb], perm=[1, 0])])
    else:
        flat = b.op("Reshape", [h, b.init("flat_shape", np.array([seq, dim], np.int64))])
        out = b.op("Gemm", [flat, emb], transB=1)
    b.nodes.append(helper.make_node("Identity", [out], ["logits"], name="logits"))
    return _model(b.nodes, {"ids": ids}, ["logits"], b.inits), {"ids": ids}


def siamese(size: int = 32, channels: tuple[int, ...] = (16, 32), embed: int = 64, seed: int = 0):
    """a, b [1, 3, size, size] -> distance [1, 1]: the same Conv/Gemm tower on both."""
    bld = _Builder(seed)
    feeds = {n: bld.rng.standard_normal((1, 3, size, size)).astype(F32) for n in ("a", "b")}
    convs, cin = [], 3
    for k, cout in enumerate(channels):
        convs.append((bld.weight(f"tower.conv{k}.weight", (cout, cin, 3, 3)),
                      bld.weight(f"tower.conv{k}.bias", (cout,), 0.1)))
        cin = cout
    side = size // (2 ** len(channels))
    fc_w = bld.weight("tower.fc.weight", (embed, cin * side * side))
    fc_b = bld.weight("tower.fc.bias", (embed,), 0.1)

    def tower(x: str) -> str:
        for w, bias in convs:
            x = bld.op("MaxPool", [bld.op("Relu", [bld.op("Conv", [x, w, bias], pads=[1, 1, 1, 1])])],
                       kernel_shape=[2, 2], strides=[2, 2])
        return bld.op("Gemm", [bld.op("Flatten", [x], axis=1), fc_w, fc_b], transB=1)

    diff = bld.op("Sub", [tower("a"), tower("b")])
    dist = bld.op("ReduceSum", [bld.op("Mul", [diff, diff]), bld.init("axes", np.array([1], np.int64))], keepdims=1)
    bld.nodes.append(helper.make_node("Sqrt", [dist], ["distance"], name="distance"))
    return _model(bld.nodes, feeds, ["distance"], bld.inits), feeds


def crnn(steps: int = 20, hidden: int = 512, seed: int = 0):
    """A CRNN-sized text-line reader (~19 MB of float32 weights)."""
    return unrolled_lstm(steps=steps, hidden=hidden, classes=37, cnn=True, cnn_channels=(64, 128, 384), seed=seed)


def calibration(feeds: dict[str, np.ndarray], n: int = 8, seed: int = 1) -> dict[str, np.ndarray]:
    """n samples per input, stacked on axis 0 (the layout convert's calibration takes)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in feeds.items():
        if v.dtype.kind == "f":
            out[k] = rng.standard_normal((n,) + v.shape).astype(v.dtype)
        else:
            out[k] = rng.integers(0, int(v.max()) + 1, (n,) + v.shape).astype(v.dtype)
    return out

