#!/usr/bin/env python3
"""Recurrent models on the host, one thread, edgert against onnxruntime (issue 37).

    python tools/bench_rnn.py [--models gru,crnn,silero] [--runs 40] [--clock thread|wall]
                              [--json OUT] [--write-gru DIR]

Models:

  gru     a two-layer GRU noise suppressor as onnx.helper builds it: 100 frames of 161
          features, hidden 400, linear_before_reset=1, batch 1; x [1, 100, 161]
          batch-first, transposed to time-major as PyTorch exports batch_first=True;
          Squeeze between the layers, the second layer's Y the output. gru_model().
  crnn    tools/shared_models.py's CRNN-sized text-line reader: a 3-stage CNN and a
          bidirectional LSTM (384 -> 512, 20 steps) unrolled as Gemm, Split,
          Sigmoid/Tanh and Mul nodes per step (what exporters write for an LSTMCell loop).
  silero  silero-vad (tools/models.py's cached model) over a 30 s clip: 937 runs of a
          512-sample chunk, each run's state fed to the next. Its LSTM is one LSTMCell
          step per chunk, exported as Gemm, Sigmoid, Tanh and Mul nodes.
  rec_unrolled, rec_lstm  the CRNN's recurrence alone (bidirectional, 384 -> 512, 20
          steps): unrolled as in crnn, and as one ONNX LSTM op (not in the default list).

Per model: edgert and onnxruntime (1 intra-op thread) latency, the lowest of 5 medians of
the calls interleaved call by call (CPU time of the calling thread unless --clock wall),
their ratio, and max |edgert - onnxruntime| over the outputs. The edgert package is the
one Python imports (PYTHONPATH selects another checkout, to measure a "before").

--write-gru DIR writes gru.onnx and gru.npz (its input), and lstm.onnx and lstm.npz
(rec_lstm's), for tools/arm_icount.py:

    python tools/arm_icount.py --models DIR/gru.onnx --calib DIR/gru.npz --ort --skip-ref
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_shared  # noqa: E402
import edgert  # noqa: E402

CLOCK = time.thread_time


def gru_model(frames: int = 100, features: int = 161, hidden: int = 400, layers: int = 2, seed: int = 0):
    """(onnx.ModelProto, feeds): `layers` GRU layers (linear_before_reset=1), x [1, frames, features]."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [helper.make_node("Transpose", ["x"], ["xt"], name="time_major", perm=[1, 0, 2])], []
    cur, size = "xt", features
    axis1 = numpy_helper.from_array(np.array([1], np.int64), "axis1")
    inits.append(axis1)
    for k in range(layers):
        s = 1.0 / np.sqrt(hidden)
        w = rng.uniform(-s, s, (1, 3 * hidden, size)).astype(np.float32)
        r = rng.uniform(-s, s, (1, 3 * hidden, hidden)).astype(np.float32)
        b = rng.uniform(-s, s, (1, 6 * hidden)).astype(np.float32)
        for name, v in ((f"W{k}", w), (f"R{k}", r), (f"B{k}", b)):
            inits.append(numpy_helper.from_array(v, name))
        nodes.append(helper.make_node("GRU", [cur, f"W{k}", f"R{k}", f"B{k}"], [f"y{k}"], name=f"gru{k}",
                                      hidden_size=hidden, linear_before_reset=1))
        out = "out" if k == layers - 1 else f"h{k}"
        nodes.append(helper.make_node("Squeeze", [f"y{k}", "axis1"], [out], name=f"squeeze{k}"))
        cur, size = out, hidden
    g = helper.make_graph(nodes, "gru", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                       [1, frames, features])],
                          [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [frames, 1, hidden])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    feeds = {"x": rng.standard_normal((1, frames, features)).astype(np.float32)}
    return m, feeds


def lstm_op_model(steps: int = 20, input_size: int = 384, hidden: int = 512, seed: int = 0):
    """(onnx.ModelProto, feeds): one bidirectional ONNX LSTM; x [1, steps, input_size]
    batch-first, transposed to time-major as in gru_model."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    H, I = hidden, input_size
    w = (rng.uniform(-1, 1, (2, 4 * H, I)) / np.sqrt(I)).astype(np.float32)
    r = (rng.uniform(-1, 1, (2, 4 * H, H)) / np.sqrt(H)).astype(np.float32)
    b = (rng.uniform(-1, 1, (2, 8 * H)) / np.sqrt(H)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="time_major", perm=[1, 0, 2]),
             helper.make_node("LSTM", ["xt", "W", "R", "B"], ["y"], name="lstm", hidden_size=H,
                              direction="bidirectional")]
    g = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, steps, I])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [steps, 2, 1, H])],
                          [numpy_helper.from_array(v, k) for k, v in (("W", w), ("R", r), ("B", b))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, {"x": rng.standard_normal((1, steps, I)).astype(np.float32)}


def _timed(fns: dict, runs: int) -> dict:
    """bench_shared's interleaved timing on this tool's clock (--clock)."""
    return bench_shared._timed(fns, runs, clock=CLOCK)


def _ort(model_bytes):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def _err(got, want) -> float:
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64))))
               for g, w in zip(got, want))


def _whole(model, feeds, runs):
    """A model run once per call on the same feeds."""
    ref = _ort(model.SerializeToString())
    sess = edgert.Session(edgert.convert(model), threads=1)
    err = _err(sess.run(None, feeds), ref.run(None, feeds))
    t = _timed({"ort": lambda: ref.run(None, feeds), "edgert": lambda: sess.run(None, feeds)}, runs)
    return t, err


def _silero(runs, seconds: float = 30.0):
    """silero-vad streamed over a clip: one call is the whole clip, chunk by chunk."""
    import onnx

    from tools import models

    path = models.model_path("silero_vad")
    chunk = 512
    n = int(seconds * 16000) // chunk
    feeds0 = models.example_inputs("silero_vad")
    rng = np.random.default_rng(5)
    t = np.arange(n * chunk) / 16000.0
    voice = 0.3 * np.sin(2 * np.pi * 180 * t) * (np.sin(2 * np.pi * 0.25 * t) > 0)
    clip = np.clip(voice + 0.02 * rng.standard_normal(t.shape), -1, 1).astype(np.float32)
    chunks = [np.ascontiguousarray(clip[None, k * chunk:(k + 1) * chunk]) for k in range(n)]
    state0 = np.zeros_like(feeds0["state"])
    sess = edgert.Session(edgert.convert(str(path), **models.convert_kwargs("silero_vad")), threads=1)
    ref = _ort(onnx.load(str(path)).SerializeToString())
    sr = np.array(16000, np.int64)
    names = [o.name for o in ref.get_outputs()]
    enames = [o.name for o in sess.get_outputs()]
    si, ei = names.index("stateN") if "stateN" in names else 1, enames.index("stateN") if "stateN" in enames else 1

    def run_ort():
        st, probs = state0, []
        for x in chunks:
            outs = ref.run(None, {"input": x, "state": st, "sr": sr})
            st = outs[si]
            probs.append(outs[1 - si])
        return probs

    def run_edgert():
        st, probs = state0, []
        for x in chunks:
            outs = sess.run(None, {"input": x, "state": st})
            st = outs[ei]
            probs.append(outs[1 - ei])
        return probs

    err = _err(run_edgert(), run_ort())
    t = _timed({"ort": run_ort, "edgert": run_edgert}, max(runs // 4, 10))
    return t, err


def bench(name: str, runs: int) -> dict:
    if name == "gru":
        t, err = _whole(*gru_model(), runs)
    elif name == "crnn":
        import shared_models as sm

        t, err = _whole(*sm.crnn(), runs)
    elif name == "silero":
        t, err = _silero(runs)
    elif name == "rec_unrolled":
        import shared_models as sm

        t, err = _whole(*sm.unrolled_lstm(steps=20, input_size=384, hidden=512, classes=37), runs)
    elif name == "rec_lstm":
        t, err = _whole(*lstm_op_model(), runs)
    else:
        raise SystemExit(f"unknown model {name!r}")
    return {"model": name, "ort_ms": t["ort"], "edgert_ms": t["edgert"], "ratio": t["edgert"] / t["ort"],
            "err": err}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gru,crnn,silero")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--clock", choices=("thread", "wall"), default="thread")
    ap.add_argument("--json", default=None)
    ap.add_argument("--write-gru", default=None, metavar="DIR")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if a.clock == "thread" else time.perf_counter
    if a.write_gru:
        import onnx

        os.makedirs(a.write_gru, exist_ok=True)
        for name, (m, feeds) in (("gru", gru_model()), ("lstm", lstm_op_model())):
            onnx.save(m, os.path.join(a.write_gru, f"{name}.onnx"))
            np.savez(os.path.join(a.write_gru, f"{name}.npz"), **feeds)
            print(f"wrote {a.write_gru}/{name}.onnx and {name}.npz")
        return
    print(f"edgert from {os.path.dirname(edgert.__file__)}")
    print(f"{'model':8s} {'ort ms':>9s} {'edgert ms':>10s} {'ratio':>6s} {'max err':>9s}")
    rows = []
    for name in a.models.split(","):
        r = bench(name, a.runs)
        rows.append(r)
        print(f"{name:8s} {r['ort_ms']:9.2f} {r['edgert_ms']:10.2f} {r['ratio']:6.2f} {r['err']:9.1e}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
