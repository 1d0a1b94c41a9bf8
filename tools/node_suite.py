#!/usr/bin/env python3
"""Runs ONNX's own node test suite (generated offline by onnx.backend.test.case.node)
through edgert and classifies every case:

  pass      converted, and every output matches the expected one
  rejected  conversion raised an EdgertError (clean rejection)
  mismatch  converted, but an output differs: a bug (a wrong result must never happen)
  crash     any other exception: a bug

Usage: python tools/node_suite.py [--write-allowlist] [--filter SUBSTR] [-v]
--write-allowlist rewrites tests/onnx_node_allowlist.txt with the passing cases.
Prints the number of op types all of whose cases pass.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout
ALLOWLIST = os.path.join(ROOT, "tests", "onnx_node_allowlist.txt")


def cases():
    from onnx.backend.test.case.node import collect_testcases

    return sorted(collect_testcases(), key=lambda c: c.name)


def op_type_of(case) -> str:
    """The op a case is about: its single node, else the op named by the test."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    return "+".join(sorted({n.op_type for n in nodes}))


def _tensors(values):
    """Inputs/outputs of a data set as ndarrays (numpy scalars and TensorProtos included),
    or None when one is a sequence, map or optional."""
    import onnx
    from onnx import numpy_helper

    out = []
    for v in values:
        if isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, np.generic):
            v = np.asarray(v)
        if not isinstance(v, np.ndarray) or v.dtype == object:
            return None
        out.append(v)
    return out


# Cases whose expected outputs edgert does not follow, on purpose (docs/ops.md, "Known
# deviations"): each is checked against onnxruntime instead, so the deviation stays the
# one written down.
DEVIATIONS = {
    "test_resize_downsample_scales_linear_align_corners":
        "align_corners divides by the integer output length less one (the ONNX text's length_resized, "
        "onnxruntime, PyTorch); the suite's data use the unrounded scale * length",
    "test_resize_downsample_scales_cubic_align_corners":
        "as test_resize_downsample_scales_linear_align_corners",
}


def _onnxruntime_outputs(case, inputs) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(case.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    g = case.model.graph
    init = {i.name for i in g.initializer}
    names = [i.name for i in g.input if i.name not in init]
    return sess.run(None, dict(zip(names, inputs)))


def run_case(case) -> tuple[str, str]:
    import edgert

    results = []
    for inputs, expected in case.data_sets:
        g = case.model.graph
        init = {i.name for i in g.initializer}
        names = [i.name for i in g.input if i.name not in init]
        inputs, expected = _tensors(inputs), _tensors(expected)
        if inputs is None or expected is None:
            return "rejected", "non-tensor inputs or outputs"
        if case.name in DEVIATIONS:
            expected = _onnxruntime_outputs(case, inputs)
        feeds = dict(zip(names, inputs))
        shapes = {k: list(v.shape) for k, v in feeds.items()}
        try:
            try:
                data = edgert.convert(case.model, None, input_shapes=shapes)
            except edgert.EdgertError as e:
                # The suite feeds parameters edgert needs as constants (axes, shapes, pads,
                # scales, ...) as graph inputs: freeze every input but the first, as a user
                # would with --input-value, and retry.
                frozen = {k: v for k, v in list(feeds.items())[1:]}
                if not frozen or "constant" not in str(e):
                    raise
                feeds = {k: v for k, v in feeds.items() if k not in frozen}
                data = edgert.convert(case.model, None, input_shapes={k: shapes[k] for k in feeds},
                                      input_values=frozen)
        except edgert.EdgertError as e:
            return "rejected", str(e).splitlines()[-1].strip()[:200]
        except Exception as e:  # noqa: BLE001
            return "crash", f"convert: {type(e).__name__}: {e}"
        try:
            sess = edgert.Session(data)
            got = sess.run(None, feeds)
        except edgert.EdgertError as e:
            return "crash", f"run: {e}"
        except Exception as e:  # noqa: BLE001
            return "crash", f"run: {type(e).__name__}: {e}"
        for k, (g_, w) in enumerate(zip(got, expected)):
            w = np.asarray(w)
            if g_.shape != w.shape or g_.dtype != w.dtype:
                return "mismatch", f"output {k}: {g_.dtype}{list(g_.shape)} vs {w.dtype}{list(w.shape)}"
            if w.dtype.kind in "fc":
                if not np.allclose(g_, w, rtol=1e-3, atol=1e-5, equal_nan=True):
                    err = float(np.nanmax(np.abs(g_.astype(np.float64) - w)))
                    return "mismatch", f"output {k}: max error {err:.3g}"
            elif not np.array_equal(g_, w):
                return "mismatch", f"output {k}: values differ"
        results.append("ok")
    return "pass", ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-allowlist", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    status: dict[str, tuple[str, str]] = {}
    by_op: dict[str, list[str]] = collections.defaultdict(list)
    for case in cases():
        if args.filter and args.filter not in case.name:
            continue
        st, why = run_case(case)
        status[case.name] = (st, why)
        by_op[op_type_of(case)].append(case.name)
        if args.verbose or st in ("mismatch", "crash"):
            print(f"{st:9s} {case.name}: {why}")
    counts = collections.Counter(s for s, _ in status.values())
    full = sorted(op for op, names in by_op.items() if "+" not in op and all(status[n][0] == "pass" for n in names))
    partial = sorted(op for op, names in by_op.items()
                     if "+" not in op and op not in full and any(status[n][0] == "pass" for n in names))
    print(f"cases: {dict(counts)}")
    print(f"op types with every case passing: {len(full)}")
    print("  " + " ".join(full))
    clean = sorted(op for op, names in by_op.items()
                   if "+" not in op and any(status[n][0] == "pass" for n in names)
                   and all(status[n][0] in ("pass", "rejected") for n in names))
    print(f"op types clean (some cases pass, every other is rejected, none wrong): {len(clean)}")
    print(f"op types with some cases passing: {len(partial)}")
    print("  " + " ".join(f"{op}({sum(status[n][0] == 'pass' for n in by_op[op])}/{len(by_op[op])})" for op in partial))
    if args.write_allowlist:
        with open(ALLOWLIST, "w") as f:
            f.write("# ONNX node test cases that pass through edgert (tools/node_suite.py --write-allowlist).\n")
            f.write("# Every other case must be rejected cleanly at convert time (tests/test_onnx_node_suite.py).\n")
            for name in sorted(n for n, (s, _) in status.items() if s == "pass"):
                f.write(name + "\n")
    return 1 if counts.get("mismatch") or counts.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())
