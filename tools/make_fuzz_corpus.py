#!/usr/bin/env python3
"""Writes a seed corpus of valid .edgert files for the loader fuzzer.

Usage: python tools/make_fuzz_corpus.py DIR
Seeds are small graphs converted with the current converter (so they always match
the current format) and the shipped digits CNN.
"""
from __future__ import annotations

import os
import sys

import numpy as np
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout

import edgert  # noqa: E402


def _model(nodes, inputs, outputs, inits=()):
    vin = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    vout = [helper.make_empty_tensor_value_info(o) for o in outputs]
    g = helper.make_graph(nodes, "seed", vin, vout, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def seeds():
    from onnx import numpy_helper
    rng = np.random.default_rng(0)
    yield "transpose", _model([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])], [("x", [3, 5])], ["y"])
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    yield "conv_relu", _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["c"], ["y"])], [("x", [1, 3, 6, 6])], ["y"], [w, b])
    yield "add_concat", _model([helper.make_node("Add", ["x", "z"], ["s"]),
                                helper.make_node("Concat", ["s", "x"], ["y"], axis=1)],
                               [("x", [2, 3]), ("z", [1, 3])], ["y"])
    # Sparse weights: the 3x3 conv is stored in the SPARSE section, the 1x1 conv becomes spmm.
    ws = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    ws[rng.random(ws.shape) < 0.6] = 0
    w1 = rng.standard_normal((16, 8, 1, 1)).astype(np.float32)
    w1[rng.random(w1.shape) < 0.9] = 0
    yield "sparse", _model([helper.make_node("Conv", ["x", "ws"], ["c"], pads=[1, 1, 1, 1]),
                            helper.make_node("Conv", ["c", "w1"], ["y"])], [("x", [1, 4, 5, 5])], ["y"],
                           [numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(w1, "w1")])
    yield "digits_cnn", os.path.join(ROOT, "edgert", "data", "digits_cnn.onnx")
    # Bounded dimensions: a BOUNDS section with output-dim (reshape) and parameter rules.
    yield "bounded", (_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                              helper.make_node("Flatten", ["c"], ["f"], axis=2),
                              helper.make_node("Slice", ["f", "st", "en", "ax"], ["y"])],
                             [("x", [1, 3, 6, "n"])], ["y"],
                             [w, b, numpy_helper.from_array(np.array([0], np.int64), "st"),
                              numpy_helper.from_array(np.array([2**62], np.int64), "en"),
                              numpy_helper.from_array(np.array([1], np.int64), "ax")]),
                      {"x": [1, 3, 6, (2, 9)]})
    # The shape functions of pad, tile, split and the recurrent ops over a bounded sequence.
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    wg = numpy_helper.from_array(rng.standard_normal((1, 9, 4)).astype(np.float32), "wg")
    rg = numpy_helper.from_array(rng.standard_normal((1, 9, 3)).astype(np.float32), "rg")
    yield "bounded_recurrent", (_model([helper.make_node("Pad", ["x", "pads"], ["p"]),
                                        helper.make_node("Tile", ["p", "reps"], ["t"]),
                                        helper.make_node("Split", ["t", "parts"], ["a", "b"], axis=2),
                                        helper.make_node("Concat", ["b", "a"], ["c"], axis=2),
                                        helper.make_node("GRU", ["c", "wg", "rg"], ["y", "h"], hidden_size=3)],
                                       [("x", ["n", 1, 4])], ["y", "h"],
                                       [i64("pads", [1, 0, 0, 2, 0, 0]), i64("reps", [2, 1, 1]), i64("parts", [2, 2]),
                                        wg, rg]),
                                {"x": [(1, 9), 1, 4]})
    # State (a STATE section): a GRU step whose hidden state stays in the session, the
    # initial value from the input's initializer.
    h0 = numpy_helper.from_array(np.full((1, 1, 3), 0.5, np.float32), "h0")
    yield "state_gru", (_model([helper.make_node("GRU", ["x", "wg", "rg", "", "", "h0"], ["y", "hn"], hidden_size=3)],
                               [("x", [1, 1, 4]), ("h0", [1, 1, 3])], ["y", "hn"], [wg, rg, h0]),
                        None, {"hn": "h0"})


def main() -> int:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, model in seeds():
        model, shapes, *state = model if isinstance(model, tuple) else (model, None)
        try:
            data = edgert.convert(model, input_shapes=shapes, state=state[0] if state else ())
        except edgert.EdgertError as e:
            print(f"seed {name} skipped: {e}", file=sys.stderr)
            continue
        with open(os.path.join(out, name + ".edgert"), "wb") as f:
            f.write(data)
        n += 1
    print(f"{n} seeds in {out}")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
