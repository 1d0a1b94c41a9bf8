#!/usr/bin/env python3
"""Per-frame cost of streaming models on the host: a Python loop over frames, edgert with
the state kept in the session (`--state`) against onnxruntime fed the copied states, in the
same run (docs/runtime.md, "State").

    python tools/bench_state.py [--models silero_vad,dtln_1,dtln_2,lstm] [--frames 2000] [--rounds 5]
                                [--json FILE]

Both sides run one thread, the same frames, in alternating rounds; each round times a
loop of `frames` calls (onnxruntime: run(None, {x, state}) then state = outputs[k], as
its users write it; edgert: run(None, {x})). The figure is the median over the rounds of
the time per frame, and the ratio edgert / onnxruntime. "lstm" is the small LSTM of
tests/test_state.py (no download); the others come from the model cache
(tools/fetch_models.py).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed edgert first; tools/ and tests/ from the checkout

import edgert  # noqa: E402
from tools import models  # noqa: E402

# name -> (frame input, frame shape, {state output: state input}, frozen inputs)
CASES = {
    "silero_vad": ("input", (1, 512), {"stateN": "state"}, {"sr": np.array(16000, np.int64)}),
    "dtln_1": ("input_2", (1, 1, 257), {"tf_op_layer_stack_2": "input_3"}, {}),
    "dtln_2": ("input_4", (1, 1, 512), {"tf_op_layer_stack_5": "input_5"}, {}),
    "lstm": ("x", (1, 1, 16), {"Y_h": "initial_h", "Y_c": "initial_c"}, {}),
}


def onnx_model(name: str):
    if name == "lstm":
        from tests.test_state import lstm_model
        return lstm_model().SerializeToString()
    return str(models.model_path(name))


def convert(name: str) -> bytes:
    x, shape, pairs, frozen = CASES[name]
    kwargs = models.convert_kwargs(name) if name in models.MODELS else {}
    return edgert.convert(onnx_model(name), None, state=pairs, **kwargs)


def bench(name: str, n_frames: int, rounds: int) -> dict:
    import onnxruntime as ort

    x_name, shape, pairs, frozen = CASES[name]
    rng = np.random.default_rng(0)
    xs = [np.ascontiguousarray(f) for f in (rng.standard_normal((n_frames, *shape)) * 0.1).astype(np.float32)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    osess = ort.InferenceSession(onnx_model(name), so, providers=["CPUExecutionProvider"])
    onames = [o.name for o in osess.get_outputs()]
    oshape = {o.name: [d if isinstance(d, int) else 1 for d in o.shape] for o in osess.get_outputs()}
    slots = [(onames.index(o), i) for o, i in pairs.items()]
    esess = edgert.Session(convert(name), threads=1)

    def run_ort() -> float:
        state = {i: np.zeros(oshape[o], np.float32) for o, i in pairs.items()}
        t0 = time.perf_counter()
        for x in xs:
            ys = osess.run(None, {x_name: x, **state, **frozen})
            state = {i: ys[k] for k, i in slots}
        return (time.perf_counter() - t0) / n_frames

    def run_edgert() -> float:
        esess.reset_state()
        t0 = time.perf_counter()
        for x in xs:
            esess.run(None, {x_name: x})
        return (time.perf_counter() - t0) / n_frames

    for f in (run_ort, run_edgert):  # warm up
        f()
    ort_t, ert_t = [], []
    for _ in range(rounds):
        ort_t.append(run_ort())
        ert_t.append(run_edgert())
    o, e = statistics.median(ort_t), statistics.median(ert_t)
    return {"model": name, "frames": n_frames, "rounds": rounds, "onnxruntime_us": o * 1e6, "edgert_us": e * 1e6,
            "ratio": e / o}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(CASES))
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    print(f"{'model':12s} {'onnxruntime us/frame':>21s} {'edgert us/frame':>16s} {'edgert/ort':>11s}")
    for name in a.models.split(","):
        if name != "lstm" and not models.is_cached(name):
            print(f"{name:12s} not cached: python tools/fetch_models.py --models {name}")
            continue
        r = bench(name, a.frames, a.rounds)
        rows.append(r)
        print(f"{name:12s} {r['onnxruntime_us']:21.1f} {r['edgert_us']:16.1f} {r['ratio']:11.2f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
