#!/usr/bin/env python3
"""Time-bounded fuzzer for the ONNX and .tflite converter.

Seeds are real models (the shipped digits CNN, the same quantized by onnxruntime to QDQ
form, and the small cached real models, with their symbolic input dimensions fixed; the
cached MediaPipe .tflite models, mutated at the byte and flatbuffer-word level). Each case is one seed mutated either at the
byte level (bit flips, byte overwrites, truncation, inserted/deleted bytes of the
serialized protobuf) or structurally on the ModelProto (random dims, shuffled or cyclic
edges, huge shapes fed to Reshape/Expand/Tile/ConstantOfShape/Range, attributes of the
wrong type, duplicate outputs, missing inputs, external data locations inside and
outside the model's folder, with offsets/lengths past the end of the file).

Every case is written into its own folder and converted by path with edgert.convert in
a worker process. Outcomes:
  ok              the converter accepted the model;
  expected        it raised ConversionError or ModelFormatError (edgert's documented errors);
  finding         any other exception, a case that exceeds the time limit (hang), a worker
                  that dies (crash, out of memory), a file opened outside the model's
                  folder during conversion, or a converted file that the runtime's
                  validating loader refuses.
Findings are saved to --findings DIR/<kind>-<n>/ with the model and the traceback.
Cases are a pure function of (--seed, case index), so a finding can be regenerated with
--replay INDEX.

    python tools/fuzz_converter.py --seconds 60 --seed 1
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import pathlib
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback

import numpy as np

import edgert

PACKAGE = pathlib.Path(edgert.__file__).resolve().parent  # the edgert being tested (installed or not)
MODEL_CACHE = pathlib.Path(os.environ.get("EDGERT_MODEL_CACHE", pathlib.Path.home() / ".cache/edgert/models")) / "models"

# Seeds: (file, symbolic input dims fixed in the seed, input values frozen at conversion).
SEEDS = [
    (PACKAGE / "data/digits_cnn.onnx", {}, {}),
    (MODEL_CACHE / "ppocr_cls.onnx", {"x": [1, 3, 48, 192]}, {}),
    (MODEL_CACHE / "silero_vad.onnx", {"input": [1, 512], "state": [2, 1, 128]}, {"sr": 16000}),
]

# .tflite seeds (docs/tflite.md), when cached: mutated at the byte and flatbuffer-word level.
TFLITE_SEEDS = [MODEL_CACHE / "mp_face_detection.tflite", MODEL_CACHE / "mp_face_landmark.tflite"]

HUGE = [2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1, -2, -(2**63), 0, 46341, 65536 * 65536]

CASE_SECONDS = 10      # a case longer than this is a hang
WORKER_MEMORY = 6 << 30  # address-space limit of the worker: a runaway allocation fails there


class CaseTimeout(BaseException):
    pass


# ---- seeds ------------------------------------------------------------------------

def qdq_seed(src: pathlib.Path) -> bytes | None:
    """The digits CNN quantized by onnxruntime (QDQ, per channel): a seed for the import
    of quantized models. None when onnxruntime's quantization tools are missing."""
    try:
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    except ImportError:
        return None
    import logging
    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime's quantization advice
    rng = np.random.default_rng(0)
    calib = [{"input": rng.standard_normal((1, 1, 8, 8)).astype(np.float32)} for _ in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib)

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as d:
        dst = pathlib.Path(d) / "q.onnx"
        try:
            quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        except Exception:
            return None
        return dst.read_bytes()


def load_seeds() -> list[tuple[str, bytes, dict]]:
    import onnx

    out = []
    q = qdq_seed(SEEDS[0][0])
    if q is not None:
        out.append(("digits_qdq", q, {}))
    for path, shapes, values in SEEDS:
        if not path.is_file():
            continue
        m = onnx.load(str(path))
        for vi in m.graph.input:
            if vi.name in shapes:
                dims = vi.type.tensor_type.shape.dim
                for d, v in zip(dims, shapes[vi.name]):
                    d.Clear()
                    d.dim_value = v
        out.append((path.stem, m.SerializeToString(), values))
    for path in TFLITE_SEEDS:
        if path.is_file():
            out.append((path.stem, path.read_bytes(), {}))
    if not out:
        sys.exit("no seed models found")
    return out


# ---- mutations --------------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.choice(["flip", "overwrite", "truncate", "insert", "delete", "splice"])
    # Mutations favor the head of the file (graph structure) over the weights.
    def pos():
        return int(len(b) * rng.random() ** 3) if rng.random() < 0.7 else rng.randrange(len(b))
    if kind == "truncate":
        return bytes(b[:pos()])
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        if not b:
            break
        p = pos() % len(b)
        if kind == "flip":
            b[p] ^= 1 << rng.randrange(8)
        elif kind == "overwrite":
            b[p] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        elif kind == "insert":
            b[p:p] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif kind == "delete":
            del b[p:p + rng.randrange(1, 8)]
        else:
            q = rng.randrange(len(b))
            n = rng.randrange(1, 64)
            b[p:p + n] = b[q:q + n]
    return bytes(b)


def _rand_node(rng, g):
    return g.node[rng.randrange(len(g.node))] if len(g.node) else None


def _all_names(g) -> list[str]:
    names = [i.name for i in g.input] + [i.name for i in g.initializer]
    for n in g.node:
        names.extend(o for o in n.output if o)
    return names


def _shape_const(g, name: str, values, dtype=np.int64):
    from onnx import numpy_helper
    t = numpy_helper.from_array(np.array(values, dtype), name)
    g.initializer.append(t)


def mutate_model(rng: random.Random, m, case_dir: pathlib.Path, outside: pathlib.Path) -> str:
    """Mutates ModelProto m in place; returns a description. May write external data
    files into case_dir."""
    from onnx import AttributeProto, helper, numpy_helper

    g = m.graph
    kind = rng.choice(["dims", "dims", "cycle", "shuffle", "huge_shape_op", "huge_shape_op", "huge_shape_op",
                       "attr_type", "dup_output", "missing_input", "external", "external", "drop_attr",
                       "empty", "init_dims", "rewire", "op_type", "range", "const_node",
                       "attr_value", "attr_value"])
    if kind == "dims":
        # Random dims on inputs, value infos and initializers.
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if rng.random() < 0.3 and vi.type.tensor_type.shape.dim:
                d = rng.choice(vi.type.tensor_type.shape.dim)
                d.Clear()
                d.dim_value = rng.choice(HUGE + [1, 2, 3, rng.randrange(1, 100)]) % (2**63)
        return kind
    if kind == "init_dims" and len(g.initializer):
        t = g.initializer[rng.randrange(len(g.initializer))]
        if t.dims:
            k = rng.randrange(len(t.dims))
            t.dims[k] = rng.choice(HUGE + [0, 1, t.dims[k] + 1, max(t.dims[k] - 1, 0)])
        else:
            t.dims.append(rng.choice(HUGE))
        return f"{kind} {t.name}"
    if kind == "cycle" and len(g.node) >= 2:
        a, b = sorted(rng.sample(range(len(g.node)), 2))
        na, nb = g.node[a], g.node[b]
        if na.input and nb.output:
            na.input[rng.randrange(len(na.input))] = nb.output[0]  # an earlier node reads a later one
        if rng.random() < 0.5 and nb.input and na.output:
            nb.input[0] = na.output[0]
        return f"{kind} {na.name}<-{nb.name}"
    if kind == "shuffle":
        nodes = list(g.node)
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
        return kind
    if kind == "rewire" and len(g.node):
        names = _all_names(g)
        for _ in range(rng.randrange(1, 4)):
            n = _rand_node(rng, g)
            if n.input:
                n.input[rng.randrange(len(n.input))] = rng.choice(names)
        return kind
    if kind in ("huge_shape_op", "range"):
        # Insert a shape-driven op on an existing tensor (or on nothing) with hostile sizes.
        op = "Range" if kind == "range" else rng.choice(["Reshape", "Expand", "Tile", "ConstantOfShape", "Pad",
                                                          "Resize", "OneHot", "Upsample"])
        src = rng.choice(_all_names(g))
        out = f"fz_{op}_out"
        sname = f"fz_{op}_shape"
        rank = rng.randrange(1, 6)
        vals = [rng.choice(HUGE + [1, 2, -1, 0, rng.randrange(1, 1 << 16)]) for _ in range(rank)]
        vals = [max(min(v, 2**63 - 1), -(2**63)) for v in vals]
        if op == "Range":
            start, limit, delta = (rng.choice([0, 1.0, -1e30, 0]), rng.choice([2**40, 1e30, 10, float("inf")]),
                                   rng.choice([1, 1e-30, 0, -1, 1e-7]))
            dt = rng.choice([np.float32, np.int64, np.float64])
            for nm, v in (("fz_s", start), ("fz_l", limit), ("fz_d", delta)):
                with np.errstate(all="ignore"):
                    g.initializer.append(numpy_helper.from_array(np.array(v).astype(dt), nm))
            node = helper.make_node("Range", ["fz_s", "fz_l", "fz_d"], [out], name="fz_range")
        elif op == "ConstantOfShape":
            _shape_const(g, sname, vals)
            node = helper.make_node(op, [sname], [out], name="fz_cos")
        elif op == "OneHot":
            _shape_const(g, sname, [vals[0]])
            _shape_const(g, "fz_vals", [0.0, 1.0], np.float32)
            node = helper.make_node(op, [src, sname, "fz_vals"], [out], name="fz_onehot")
        elif op in ("Resize", "Upsample"):
            _shape_const(g, sname, [float(abs(v)) if rng.random() < 0.5 else 1e30 for v in vals], np.float32)
            ins = [src, "", sname] if op == "Resize" else [src, sname]
            node = helper.make_node(op, ins, [out], name=f"fz_{op.lower()}")
        elif op == "Pad":
            _shape_const(g, sname, vals * 2)
            node = helper.make_node(op, [src, sname], [out], name="fz_pad")
        else:
            _shape_const(g, sname, vals)
            node = helper.make_node(op, [src, sname], [out], name=f"fz_{op.lower()}")
        pos = rng.randrange(len(g.node) + 1)
        g.node.insert(pos, node)
        if rng.random() < 0.5 or not len(g.output):
            g.output.append(helper.make_empty_tensor_value_info(out))
        else:
            g.output[0].name = out
        return f"{kind} {op} {vals}"
    if kind in ("attr_type", "drop_attr"):
        cands = [n for n in g.node if n.attribute]
        if not cands:
            return kind + " (none)"
        n = rng.choice(cands)
        a = rng.choice(n.attribute)
        if kind == "drop_attr":
            n.attribute.remove(a)
            return f"{kind} {n.name}.{a.name}"
        new = rng.choice([helper.make_attribute(a.name, 3), helper.make_attribute(a.name, 2.5),
                          helper.make_attribute(a.name, "x"), helper.make_attribute(a.name, [1, 2, 3]),
                          helper.make_attribute(a.name, [0.5]), helper.make_attribute(a.name, [2**62, -2**62]),
                          helper.make_attribute(a.name, numpy_helper.from_array(np.zeros(3, np.float32))),
                          helper.make_attribute(a.name, helper.make_graph([], "g", [], []))])
        if rng.random() < 0.3:
            # The type tag disagrees with the payload.
            new.type = rng.choice([AttributeProto.UNDEFINED, AttributeProto.INT, AttributeProto.FLOATS])
        a.CopyFrom(new)
        return f"{kind} {n.name}.{a.name}"
    if kind == "attr_value":
        # Hostile values of the right type: pads, strides, axes, group, perm, ...
        cands = [(n, a) for n in g.node for a in n.attribute
                 if a.type in (AttributeProto.INT, AttributeProto.INTS, AttributeProto.FLOAT, AttributeProto.FLOATS)]
        if not cands:
            return kind + " (none)"
        n, a = rng.choice(cands)
        pick = [0, -1, 1, 2, -2**31, 2**31, 2**62, -(2**63), 7, 100, -100]
        fpick = [0.0, -1.0, 1e30, -1e30, float("nan"), float("inf"), 1e-30]
        if a.type == AttributeProto.INT:
            a.i = rng.choice(pick)
        elif a.type == AttributeProto.FLOAT:
            a.f = rng.choice(fpick)
        elif a.type == AttributeProto.INTS:
            vals = list(a.ints) or [1]
            if rng.random() < 0.3:
                vals = vals + [rng.choice(pick)] if rng.random() < 0.5 else vals[:-1]
            else:
                vals[rng.randrange(len(vals))] = rng.choice(pick)
            del a.ints[:]
            a.ints.extend(vals)
        else:
            vals = list(a.floats) or [1.0]
            vals[rng.randrange(len(vals))] = rng.choice(fpick)
            del a.floats[:]
            a.floats.extend(vals)
        return f"{kind} {n.name}.{a.name}"
    if kind == "dup_output" and len(g.node) >= 2:
        a, b = rng.sample(range(len(g.node)), 2)
        if g.node[a].output and g.node[b].output:
            g.node[a].output[0] = g.node[b].output[0]
        return f"{kind} {g.node[a].name}"
    if kind == "missing_input" and len(g.node):
        n = _rand_node(rng, g)
        if n.input:
            n.input[rng.randrange(len(n.input))] = "fz_not_defined"
        else:
            n.input.append("fz_not_defined")
        return f"{kind} {n.name}"
    if kind == "op_type" and len(g.node):
        n = _rand_node(rng, g)
        n.op_type = rng.choice(["Reshape", "Expand", "Tile", "Gather", "Conv", "If", "Loop", "Constant", "Range",
                                "ConstantOfShape", "Concat", "Split", "Slice", "MatMul", "Resize", "NonExistent"])
        return f"{kind} {n.name}->{n.op_type}"
    if kind == "empty":
        choice = rng.randrange(3)
        if choice == 0:
            del g.node[:]
        elif choice == 1:
            del g.output[:]
        else:
            del g.node[:]
            del g.output[:]
            del g.input[:]
        return f"{kind} {choice}"
    if kind == "external" and len(g.initializer):
        return _external(rng, m, case_dir, outside)
    if kind == "const_node" and len(g.initializer):
        # An initializer becomes a Constant node, whose tensor may be hostile (dims, data
        # type, data length, external data).
        t = g.initializer.pop(rng.randrange(len(g.initializer)))
        node = helper.make_node("Constant", [], [t.name], name="fz_const", value=t)
        g.node.insert(0, node)
        vt = node.attribute[0].t
        r = rng.random()
        if r < 0.25 and vt.dims:
            vt.dims[rng.randrange(len(vt.dims))] = rng.choice(HUGE)
        elif r < 0.4:
            vt.data_type = rng.choice([0, 8, 16, 23, 1000])
        elif r < 0.55:
            vt.raw_data = vt.raw_data[:rng.randrange(len(vt.raw_data) + 1)]
        elif r < 0.8:
            return "const_node " + _external(rng, m, case_dir, outside, vt)
        return f"const_node {t.name} {r:.2f}"
    return kind + " (no-op)"


def _external(rng, m, case_dir: pathlib.Path, outside: pathlib.Path, t=None) -> str:
    """Moves one initializer's data to an external file, with a location that may point
    outside the model's folder and offsets/lengths that may be wrong."""
    from onnx import TensorProto

    g = m.graph
    if t is None:
        t = max(g.initializer, key=lambda t: len(t.raw_data)) if rng.random() < 0.5 else \
            g.initializer[rng.randrange(len(g.initializer))]
    if not t.raw_data:
        return "external (no raw data)"
    raw = t.raw_data
    where = rng.choice(["inside", "inside", "subdir", "abs_outside", "dotdot", "symlink_file", "symlink_dir",
                        "abs_inside", "missing", "dir", "empty_name", "devzero"])
    loc = "weights.bin"
    if where in ("inside", "abs_inside"):
        (case_dir / "weights.bin").write_bytes(raw)
        loc = str(case_dir / "weights.bin") if where == "abs_inside" else "weights.bin"
    elif where == "subdir":
        (case_dir / "sub").mkdir()
        (case_dir / "sub/w.bin").write_bytes(raw)
        loc = "sub/w.bin" if rng.random() < 0.5 else "sub/../sub/w.bin"
    elif where == "abs_outside":
        loc = str(outside)
    elif where == "dotdot":
        loc = os.path.relpath(outside, case_dir)
    elif where == "symlink_file":
        os.symlink(outside, case_dir / "weights.bin")
    elif where == "symlink_dir":
        os.symlink(outside.parent, case_dir / "sub")
        loc = "sub/" + outside.name
    elif where == "missing":
        loc = "nothing_here.bin"
    elif where == "dir":
        (case_dir / "adir").mkdir()
        loc = "adir"
    elif where == "empty_name":
        loc = ""
    elif where == "devzero":
        loc = "/dev/zero"
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    entries = [("location", loc)]
    r = rng.random()
    if r < 0.2:
        entries.append(("offset", str(rng.choice([0, len(raw), 2**40, -1, 7]))))
    elif r < 0.4:
        entries.append(("length", str(rng.choice([len(raw), len(raw) + 1, 0, 2**62, -5]))))
    elif r < 0.5:
        entries.append(("offset", "abc"))
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    return f"external {where} {entries}"


def mutate_words(rng: random.Random, data: bytes) -> bytes:
    """1-4 aligned 32-bit words (offsets, lengths, indices of a flatbuffer) overwritten
    with hostile values, mostly near the head where the tables are."""
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4])):
        limit = len(b) if rng.random() < 0.2 else min(len(b), 4096)
        pos = rng.randrange(max(1, (limit - 4) // 4)) * 4
        v = rng.choice([0, 1, 3, 4, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(b), len(b) - 4, 2**31 - 1])
        b[pos:pos + 4] = int(v).to_bytes(4, "little")
    return bytes(b)


def make_case(seed: int, index: int, seeds, workdir: pathlib.Path, outside: pathlib.Path):
    """(case folder, model path, description, input values) of case `index`."""
    import onnx

    rng = random.Random(seed * 1_000_003 + index)
    name, data, values = seeds[rng.randrange(len(seeds))]
    case_dir = workdir / f"case{index}"
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    tflite = data[4:8] == b"TFL3"
    path = case_dir / ("model.tflite" if tflite else "model.onnx")
    if tflite:
        out = mutate_words(rng, data) if rng.random() < 0.6 else mutate_bytes(rng, data)
        desc = "tflite bytes"
    elif rng.random() < 0.35:
        out = data
        steps = []
        for _ in range(rng.choice([1, 1, 2])):
            out = mutate_bytes(rng, out)
            steps.append("bytes")
        desc = "bytes"
    else:
        m = onnx.ModelProto()
        m.ParseFromString(data)
        steps = [mutate_model(rng, m, case_dir, outside) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        desc = "; ".join(steps)
        out = m.SerializeToString()
    path.write_bytes(out)
    return case_dir, path, f"{name}: {desc}", values


# ---- running a case ---------------------------------------------------------------

def _alarm(signum, frame):
    raise CaseTimeout()


_OPEN_GUARD: dict = {"root": None, "bad": []}


def _allowed() -> tuple[str, ...]:
    """Folders whose files conversion may open besides the model's (Python and edgert)."""
    return tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, str(PACKAGE)} if p)


def _audit(event, args):
    if event != "open" or _OPEN_GUARD["root"] is None:
        return
    path = args[0]
    if isinstance(path, int) or path is None:
        return
    try:
        real = os.path.realpath(os.fsdecode(path))
    except Exception:
        return
    if real.startswith(_OPEN_GUARD["root"]):
        return
    # Python's own files (lazy imports) are not model data.
    if real.endswith((".py", ".pyc", ".so")) or real.startswith(("/proc/", "/sys/")) or \
            any(real.startswith(p) for p in _OPEN_GUARD["allowed"]):
        return
    _OPEN_GUARD["bad"].append(real)


def load_check(data: bytes) -> str:
    """"" when the C loader accepts the converted file, else its message (the model is
    only loaded: no session, so no arena is allocated)."""
    from edgert.runtime import session as runtime

    ffi, lib = runtime._load()
    buf = np.empty(len(data) + 64, np.uint8)
    start = (-buf.ctypes.data) % 64
    buf = buf[start:start + len(data)]
    buf[:] = np.frombuffer(data, np.uint8)
    err = ffi.new("char[]", 1024)
    out = ffi.new("edgert_model **")
    status = lib.edgert_model_load_memory(ffi.cast("void *", buf.ctypes.data), len(data), out, err, 1024)
    if status != 0:
        return f"the runtime refuses the converted file: status {status}: {ffi.string(err).decode(errors='replace')}"
    lib.edgert_model_free(out[0])
    return ""


def run_case(path: pathlib.Path, values) -> tuple[str, str]:
    """(outcome, detail): outcome ok / expected / internal / error / hang / invalid-file /
    outside."""
    _OPEN_GUARD["root"] = os.path.realpath(path.parent) + os.sep
    _OPEN_GUARD["bad"] = []
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        data = edgert.convert(str(path), input_values=values or None)
        outcome, detail = "ok", ""
        problem = load_check(data)
        if problem:  # the runtime's validating loader must accept every file the converter writes
            outcome, detail = "invalid-file", problem
    except (edgert.ConversionError, edgert.ModelFormatError) as e:
        # "internal error" marks an unexpected exception the converter turned into a
        # ConversionError: a clear error for the user, but a defect to fix.
        outcome = "internal" if "internal error" in str(e) else "expected"
        detail = f"{type(e).__name__}: {e}\n" + (traceback.format_exc() if outcome == "internal" else "")
    except CaseTimeout:
        outcome, detail = "hang", traceback.format_exc()
    except Exception:
        outcome, detail = "error", traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _OPEN_GUARD["root"] = None
    if _OPEN_GUARD["bad"]:
        return "outside", "opened outside the model's folder: " + ", ".join(sorted(set(_OPEN_GUARD["bad"])))
    return outcome, detail


def worker(conn, seed: int, workdir: str, outside: str, start: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    signal.signal(signal.SIGALRM, _alarm)
    import warnings
    warnings.simplefilter("ignore")
    _OPEN_GUARD["allowed"] = _allowed()
    sys.addaudithook(_audit)
    seeds = load_seeds()
    wd = pathlib.Path(workdir)
    index = start
    while True:
        conn.send(("start", index))
        try:
            case_dir, path, desc, values = make_case(seed, index, seeds, wd, pathlib.Path(outside))
        except Exception:  # a mutation that does not apply to this seed
            conn.send(("done", index, "skipped", "", ""))
            index += 1
            continue
        outcome, detail = run_case(path, values)
        conn.send(("done", index, outcome, desc, detail))
        shutil.rmtree(case_dir, ignore_errors=True)
        index += 1


def save_finding(findings: pathlib.Path, kind: str, seed: int, index: int, desc: str, detail: str,
                 workdir: pathlib.Path, outside: pathlib.Path, seeds) -> pathlib.Path:
    d = findings / f"{kind}-s{seed}-i{index}"
    if d.exists():
        shutil.rmtree(d)
    # Regenerate the case (a pure function of seed and index) into the findings folder.
    case_dir, _, _, _ = make_case(seed, index, seeds, workdir / "replay", outside)
    shutil.copytree(case_dir, d, symlinks=True)
    shutil.rmtree(case_dir, ignore_errors=True)
    (d / "finding.txt").write_text(f"kind: {kind}\nseed: {seed}\nindex: {index}\nmutation: {desc}\n"
                                   f"replay: python tools/fuzz_converter.py --seed {seed} --replay {index}\n\n{detail}\n")
    return d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--findings", default="fuzz-findings")
    ap.add_argument("--replay", type=int, default=None, help="run one case in this process and print its outcome")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    findings = pathlib.Path(args.findings)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="edgert-fuzz-"))
    workdir = tmp / "cases"
    workdir.mkdir()
    outside = tmp / "secret.bin"  # a file outside every model's folder: opening it is a finding
    outside.write_bytes(os.urandom(4096))
    seeds = load_seeds()
    try:
        if args.replay is not None:
            case_dir, path, desc, values = make_case(args.seed, args.replay, seeds, workdir, outside)
            _OPEN_GUARD["allowed"] = _allowed()
            sys.addaudithook(_audit)
            signal.signal(signal.SIGALRM, _alarm)
            outcome, detail = run_case(path, values)
            print(f"case {args.replay}: {desc}\noutcome: {outcome}\n{detail}")
            return 0 if outcome in ("ok", "expected") else 1
        return fuzz(args, findings, workdir, outside, seeds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fuzz(args, findings, workdir, outside, seeds) -> int:
    ctx = mp.get_context("fork")
    counts: collections.Counter = collections.Counter()
    found: list[str] = []
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    index = 0
    while time.monotonic() < deadline:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(child, args.seed, str(workdir), str(outside), index), daemon=True)
        proc.start()
        child.close()
        current = None
        while True:
            left = deadline - time.monotonic()
            # The worker's own alarm catches most hangs; this catches those stuck in C.
            wait = CASE_SECONDS * 3 if current is not None else 60
            if not parent.poll(min(wait, max(left, 0) + CASE_SECONDS * 3)):
                kind = "hang-hard" if proc.is_alive() else "crash"
                break
            try:
                msg = parent.recv()
            except EOFError:
                kind = "crash"
                break
            if msg[0] == "start":
                current = msg[1]
                if time.monotonic() >= deadline:
                    kind = None
                    break
                continue
            _, i, outcome, desc, detail = msg
            counts[outcome] += 1
            current = None
            index = i + 1
            if outcome not in ("ok", "expected", "skipped"):
                d = save_finding(findings, outcome, args.seed, i, desc, detail, workdir, outside, seeds)
                found.append(str(d))
                if not args.quiet:
                    print(f"FINDING {outcome} case {i} ({desc}): {detail.strip().splitlines()[-1][:200]}", flush=True)
        if proc.is_alive():
            proc.kill()
        proc.join()
        if kind is not None and current is not None:
            counts[kind] += 1
            code = proc.exitcode
            d = save_finding(findings, kind, args.seed, current, "see replay", f"worker exit code {code}",
                             workdir, outside, seeds)
            found.append(str(d))
            print(f"FINDING {kind} case {current} (worker exit code {code})", flush=True)
            index = current + 1
        elif kind is None:
            break
    elapsed = time.monotonic() - t0
    n = sum(counts.values())
    print(f"executions: {n} in {elapsed:.1f} s ({n / elapsed:.1f}/s); outcomes: {dict(sorted(counts.items()))}")
    print(f"findings: {len(found)}" + (f" (in {findings})" if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
