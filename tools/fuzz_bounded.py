#!/usr/bin/env python3
"""Random graphs at random sizes: the bounded mode of the differential tester.

Each case is a random chain of 2-8 spatial ONNX nodes over an NCHW input whose height and
width are symbolic ("H", "W") with random bounds: Conv (every auto_pad, strides,
dilations, groups), ConvTranspose (strides, dilations, output_padding, pads), MaxPool and
AveragePool (every auto_pad, ceil_mode, dilations, count_include_pad), Resize (nearest
and linear, integer and fractional scales, coordinate modes), Pad (constant, reflect,
edge), Slice (spatial axes, negative and out-of-range bounds, negative steps), Concat and
Add of a branch with its own activation. The case is converted once with bounds
(`input_shapes={"x": [1, C, (hlo, hhi), (wlo, whi)]}`) and run at SIZES random sizes
within them (both corners, odd and prime sizes among them). At each size:

* the oracle is a static conversion of the same model at that size (what the float32
  mode of tools/fuzz_graphs.py checks against onnxruntime and the ONNX spec), and
  onnxruntime's output shape where onnxruntime runs it;
* pass: the bounded file's output equals the static file's (shape, and values within
  1e-5 relative), or both refuse the size (the bounded file with an EdgertError naming
  the input and rule);
* mismatch: a different shape or value, or the bounded file runs a size that the static
  conversion refuses and onnxruntime's values do not back it (kind says which);
* runtime_error: the bounded file fails at run time with anything but an input error
  (a kernel or scratch error: what the bounds' planning must rule out);
* narrowed: the bounded file refuses a size the static conversion runs (a constraint
  wider than needed; counted, not a failure).
A case whose bounded conversion is refused with a clear message is "rejected" (grouped by
cause); one whose static conversion fails at the upper bounds is "invalid".

    python tools/fuzz_bounded.py --seed 1 --graphs 200 [--out DIR]
    python tools/fuzz_bounded.py --seed 7 --minutes 30 --out /tmp/fb
    python tools/fuzz_bounded.py --seed 1 --replay 12
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import re
import sys
import time
import traceback

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 20
SIZES = 8
PRIMES = [p for p in range(2, 400) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


def _w(rng, name, shape, inits):
    inits[name] = (rng.standard_normal(shape) * 0.5).astype(np.float32)
    return name


def generate(seed: int, index: int):
    """(model bytes, input_shapes with bounds, description) of case `index`."""
    rng = np.random.default_rng([seed, index, 0xB0])
    c = int(rng.integers(1, 4))
    bounds = []
    for _ in range(2):
        lo = int(rng.choice([1, 3, 8, 9, 12, 16, 17, 24, 31]))
        bounds.append((lo, lo + int(rng.integers(1, 70))))
    nodes, inits = [], {}
    cur, k = "x", 0

    def name(prefix):
        nonlocal k
        k += 1
        return f"{prefix}{k}"

    for _ in range(int(rng.integers(2, 9))):
        op = str(rng.choice(["Conv", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "Resize", "Pad", "Slice",
                             "Concat", "Add"]))
        out = name("t")
        if op in ("Conv", "ConvTranspose"):
            kern = [int(rng.integers(1, 5)) for _ in range(2)]
            attrs = {"kernel_shape": kern, "strides": [int(rng.integers(1, 4)) for _ in range(2)],
                     "dilations": [int(rng.integers(1, 3)) for _ in range(2)]}
            auto = str(rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
            if auto == "NOTSET":
                attrs["pads"] = [int(rng.integers(0, 3)) for _ in range(4)]
            else:
                attrs["auto_pad"] = auto
            co = int(rng.integers(1, 5))
            if op == "Conv":
                w = _w(rng, name("w"), [co, c, *kern], inits)
            else:
                w = _w(rng, name("w"), [c, co, *kern], inits)
                attrs["output_padding"] = [int(rng.integers(0, min(s, d) if min(s, d) > 1 else 1))
                                           for s, d in zip(attrs["strides"], attrs["dilations"])]
            b = _w(rng, name("b"), [co], inits)
            nodes.append(helper.make_node(op, [cur, w, b], [out], name=out, **attrs))
            c = co
        elif op in ("MaxPool", "AveragePool"):
            attrs = {"kernel_shape": [int(rng.integers(1, 4)) for _ in range(2)],
                     "strides": [int(rng.integers(1, 4)) for _ in range(2)]}
            auto = str(rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
            if auto == "NOTSET":
                attrs["pads"] = [int(rng.integers(0, 2)) for _ in range(4)]
                attrs["pads"] = [min(p, kk - 1) for p, kk in zip(attrs["pads"], attrs["kernel_shape"] * 2)]
                attrs["ceil_mode"] = int(rng.integers(0, 2))
            else:
                attrs["auto_pad"] = auto
            if op == "MaxPool" and rng.random() < 0.4:
                attrs["dilations"] = [int(rng.integers(1, 3)) for _ in range(2)]
            if op == "AveragePool":
                attrs["count_include_pad"] = int(rng.integers(0, 2))
            nodes.append(helper.make_node(op, [cur], [out], name=out, **attrs))
        elif op == "Resize":
            mode = str(rng.choice(["nearest", "nearest", "linear"]))
            scale = [float(rng.choice([1.0, 2.0, 2.0, 3.0, 0.5, 1.5])) for _ in range(2)]
            sc = name("scales")
            inits[sc] = np.array([1.0, 1.0, *scale], np.float32)
            attrs = {"mode": mode, "coordinate_transformation_mode":
                     str(rng.choice(["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"]))}
            if mode == "nearest":
                attrs["nearest_mode"] = str(rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]))
            nodes.append(helper.make_node("Resize", [cur, "", sc], [out], name=out, **attrs))
        elif op == "Pad":
            mode = str(rng.choice(["constant", "reflect", "edge"]))
            pads = name("pads")
            inits[pads] = np.array([0, 0, *[int(rng.integers(0, 3)) for _ in range(2)], 0, 0,
                                    *[int(rng.integers(0, 3)) for _ in range(2)]], np.int64)
            nodes.append(helper.make_node("Pad", [cur, pads], [out], name=out, mode=mode))
        elif op == "Slice":
            axis = int(rng.integers(2, 4))
            step = int(rng.choice([1, 1, 2, -1]))
            if step > 0:
                start, end = int(rng.choice([0, 1, 2, -3])), int(rng.choice([2**31, -1, -2, 2**62]))
            else:
                start, end = int(rng.choice([-1, 2**31, -2])), int(rng.choice([-(2**31), -(2**62)]))
            names = [name(p) for p in ("starts", "ends", "axes", "steps")]
            for nm, v in zip(names, (start, end, axis, step)):
                inits[nm] = np.array([v], np.int64)
            nodes.append(helper.make_node("Slice", [cur, *names], [out], name=out))
        elif op in ("Concat", "Add"):
            act = name("a")
            nodes.append(helper.make_node(str(rng.choice(["Relu", "Sigmoid", "Tanh"])), [cur], [act], name=act))
            if op == "Concat":
                nodes.append(helper.make_node("Concat", [cur, act], [out], name=out, axis=1))
                c *= 2
            else:
                nodes.append(helper.make_node("Add", [cur, act], [out], name=out))
        cur = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "C", "H", "W"])
    y = helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)
    cin = int(np.random.default_rng([seed, index, 0xB0]).integers(1, 4))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, "H", "W"])
    g = helper.make_graph(nodes, "bounded", [x], [y], [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)
    return model.SerializeToString(), {"x": [1, cin, bounds[0], bounds[1]]}, [n.op_type for n in nodes]


def sizes_for(rng, bounds) -> list[tuple[int, int]]:
    """SIZES sizes: both corners, an odd and a prime size per axis, then random ones."""
    (hlo, hhi), (wlo, whi) = bounds

    def pick(lo, hi, kind):
        pool = [v for v in range(lo, hi + 1) if (kind == "odd" and v % 2) or (kind == "prime" and v in PRIMES)]
        return int(rng.choice(pool)) if pool else int(rng.integers(lo, hi + 1))

    out = [(hlo, wlo), (hhi, whi), (pick(hlo, hhi, "odd"), pick(wlo, whi, "odd")),
           (pick(hlo, hhi, "prime"), pick(wlo, whi, "prime"))]
    while len(out) < SIZES:
        out.append((int(rng.integers(hlo, hhi + 1)), int(rng.integers(wlo, whi + 1))))
    return out


def _cause(msg: str) -> str:
    msg = re.sub(r"node '[^']*'", "node", msg)
    msg = re.sub(r"\[[0-9, ]*\]|\b\d+\b", "N", msg)
    m = re.search(r"op (\w+) does not support bounded dimensions yet \(([^)]*)\)", msg)
    if m:
        return f"op {m.group(1)}: {m.group(2)[:60]}"
    m = re.search(r"bounded dimensions: (.{0,70})", msg)
    return m.group(1) if m else msg.splitlines()[0][:90]


def _peak(a: np.ndarray) -> float:
    return float(np.abs(a[np.isfinite(a)]).max(initial=0))


def run_case(seed: int, index: int) -> dict:
    """The case's record: class, and per size what happened."""
    import onnxruntime as ort

    import edgert
    from edgert.errors import ConversionError, EdgertError, InputError
    from edgert.runtime import session as runtime
    model, shapes, ops = generate(seed, index)
    rec = {"seed": seed, "index": index, "ops": ops, "bounds": [list(b) for b in shapes["x"][2:]], "sizes": []}
    cin = shapes["x"][1]
    hi = [1, cin, shapes["x"][2][1], shapes["x"][3][1]]
    try:
        edgert.convert(model, None, input_shapes={"x": hi})
    except EdgertError as e:
        rec.update(cls="invalid", why=str(e).splitlines()[0][:200])
        return rec
    try:
        data = edgert.convert(model, None, input_shapes=shapes)
    except ConversionError as e:
        rec.update(cls="rejected", cause=_cause(str(e)), why=str(e).splitlines()[0][:300])
        return rec
    sess = runtime.Session(data, max_contexts=1)
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    ref = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng([seed, index, 0x51])
    cls = "pass"
    for h, w in sizes_for(rng, [tuple(b) for b in shapes["x"][2:]]):
        x = rng.standard_normal((1, cin, h, w)).astype(np.float32)
        one = {"size": [h, w]}
        try:
            st = runtime.Session(edgert.convert(model, None, input_shapes={"x": [1, cin, h, w]}), max_contexts=1)
            want = st.run(None, {"x": x})[0]
        except EdgertError as e:
            want, one["static"] = None, str(e).splitlines()[0][:160]
        try:
            ort_out = ref.run(None, {"x": x})[0]
        except Exception:
            ort_out = None
        try:
            got = sess.run(None, {"x": x})[0]
        except InputError as e:
            got, one["bounded"] = None, "input: " + str(e)[:160]
        except EdgertError as e:
            got, one["bounded"] = None, "runtime: " + str(e)[:200]
            if want is not None:
                one["kind"] = "runtime_error"
        if want is not None and got is not None:
            if got.shape != want.shape:
                one["kind"] = "shape"
            elif not np.allclose(got, want, rtol=1e-5, atol=1e-5 * (1 + _peak(want)), equal_nan=True):
                one["kind"] = "values"
        elif want is None and got is not None:
            backed = ort_out is not None and ort_out.shape == got.shape and np.allclose(
                got, ort_out, rtol=1e-3, atol=1e-3 * (1 + _peak(ort_out)), equal_nan=True)
            if not backed:
                one["kind"] = "runs_unchecked"
        elif want is not None and got is None and "kind" not in one:
            one["kind"] = "narrowed"
        if ort_out is not None and got is not None and ort_out.shape != got.shape:
            one["ort_shape"] = list(ort_out.shape)
        rec["sizes"].append(one)
        kind = one.get("kind")
        if kind == "runtime_error":
            cls = "runtime_error"
        elif kind in ("shape", "values", "runs_unchecked") and cls != "runtime_error":
            cls = "mismatch"
        elif kind == "narrowed" and cls == "pass":
            cls = "narrowed"
    rec["cls"] = cls
    return rec


FAILING = ("mismatch", "runtime_error", "crash")


def run(seed: int, graphs: int | None, minutes: float | None, out: pathlib.Path | None, verbose=False) -> dict:
    counts: collections.Counter = collections.Counter()
    causes: collections.Counter = collections.Counter()
    failures = []
    sizes = 0
    t0 = time.time()
    i = 0
    while (graphs is None or i < graphs) and (minutes is None or time.time() - t0 < minutes * 60):
        try:
            rec = run_case(seed, i)
        except Exception as e:  # noqa: BLE001 - a defect in edgert or this tool: reported, counted
            rec = {"seed": seed, "index": i, "cls": "crash", "why": f"{type(e).__name__}: {e}",
                   "trace": traceback.format_exc()[-2000:]}
        counts[rec["cls"]] += 1
        sizes += len(rec.get("sizes", ()))
        if rec["cls"] == "rejected":
            causes[rec["cause"]] += 1
        if rec["cls"] in FAILING:
            failures.append(rec)
            if out is not None:
                d = out / f"{rec['cls']}-{seed}-{i}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "model.onnx").write_bytes(generate(seed, i)[0])
                (d / "record.json").write_text(json.dumps(rec, indent=1))
        if verbose:
            print(json.dumps(rec, indent=1))
        i += 1
    return {"seed": seed, "graphs": i, "sizes": sizes, "seconds": round(time.time() - t0, 1),
            "counts": dict(counts), "rejected_by_cause": dict(causes.most_common()), "failures": failures}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--graphs", type=int)
    p.add_argument("--minutes", type=float)
    p.add_argument("--out", type=pathlib.Path)
    p.add_argument("--replay", type=int, help="run one case and print its record")
    a = p.parse_args(argv)
    if a.replay is not None:
        rec = run_case(a.seed, a.replay)
        print(json.dumps(rec, indent=1))
        return int(rec["cls"] in FAILING)
    s = run(a.seed, a.graphs if a.graphs or a.minutes else 100, a.minutes, a.out)
    print(json.dumps({k: v for k, v in s.items() if k != "failures"}, indent=1))
    for f in s["failures"][:20]:
        print(f"{f['cls']}: case {f['index']} {f.get('ops')} bounds {f.get('bounds')}: "
              + "; ".join(f"{o['size']} {o.get('kind')}" for o in f.get("sizes", []) if o.get("kind")
                          and o.get("kind") != "narrowed") + (f" {f.get('why', '')}" if f["cls"] == "crash" else ""))
    return int(any(s["counts"].get(c) for c in FAILING))


if __name__ == "__main__":
    sys.exit(main())
