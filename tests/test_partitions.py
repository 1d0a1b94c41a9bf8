"""Fallback partitions at run time (docs/partitions.md, "Runtime"): .edgert files with
partition nodes built directly from the IR, run by the real onnxruntime and the real
ai-edge-litert through the C library's backend interface, against onnxruntime on the
whole original model."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import edgert
from edgert import fileformat as fmt
from edgert.converter.pipeline import serialize
from edgert.errors import BackendError, ModelFormatError, NoBackendError
from edgert.converter.ir import Graph

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPE = (1, 3, 4, 5)
T_SHAPE = (1, 4, 3, 5)  # after the partition's Einsum "nchw->nhcw"


# ---- models -----------------------------------------------------------------------


def original_onnx() -> onnx.ModelProto:
    """x -> Neg -> Einsum (transpose) -> Mul(0.5) -> Relu -> Sigmoid -> y: the model whose
    middle edgert hands to onnxruntime."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(T_SHAPE))
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    nodes = [helper.make_node("Neg", ["x"], ["t"], name="neg"),
             helper.make_node("Einsum", ["t"], ["e"], equation="nchw->nhcw", name="einsum"),
             helper.make_node("Mul", ["e", "half"], ["m"], name="mul"),
             helper.make_node("Relu", ["m"], ["u"], name="relu"),
             helper.make_node("Sigmoid", ["u"], ["y"], name="sigmoid")]
    g = helper.make_graph(nodes, "original", [x], [y], [half])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def ort_payload(out_shape=T_SHAPE) -> bytes:
    """The partition: Einsum, Mul, Relu of the original, t -> u."""
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT, list(SHAPE))
    u = helper.make_tensor_value_info("u", TensorProto.FLOAT, list(out_shape))
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    nodes = [helper.make_node("Einsum", ["t"], ["e"], equation="nchw->nhcw", name="einsum"),
             helper.make_node("Mul", ["e", "half"], ["m"], name="mul"),
             helper.make_node("Relu", ["m"], ["u"], name="relu")]
    g = helper.make_graph(nodes, "partition_0", [t], [u], [half])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def tiny_tflite(shape=SHAPE, perm=(0, 2, 1, 3), scale=0.5) -> bytes:
    """The partition of original_onnx() as a .tflite flatbuffer (TRANSPOSE, MUL, RELU),
    written field by field with the flatbuffers package (a dependency of ai-edge-litert)
    following LiteRT's schema.fbs, so no TensorFlow is needed."""
    import flatbuffers
    out_shape = [shape[p] for p in perm]
    b = flatbuffers.Builder(1024)

    def ints(vals):
        b.StartVector(4, len(vals), 4)
        for v in reversed(vals):
            b.PrependInt32(int(v))
        return b.EndVector()

    def offsets(offs):
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def table(fields):
        b.StartObject(len(fields) and max(f[0] for f in fields) + 1)
        for slot, kind, value in fields:
            getattr(b, f"Prepend{kind}Slot")(slot, value, 0)
        return b.EndObject()

    def buffer(data: bytes):
        if not data:
            return table([])
        b.StartVector(1, len(data), 16)
        for x in reversed(data):
            b.PrependUint8(x)
        v = b.EndVector()
        return table([(0, "UOffsetTRelative", v)])

    def tensor(name, shp, ttype, buf):
        n, s = b.CreateString(name), ints(shp)
        return table([(0, "UOffsetTRelative", s), (1, "Int8", ttype), (2, "Uint32", buf), (3, "UOffsetTRelative", n)])

    bufs = [buffer(b""), buffer(np.array(perm, "<i4").tobytes()), buffer(np.array(scale, "<f4").tobytes())]
    tensors = [tensor("t", shape, 0, 0), tensor("perm", [len(perm)], 2, 1), tensor("e", out_shape, 0, 0),
               tensor("half", [], 0, 2), tensor("m", out_shape, 0, 0), tensor("u", out_shape, 0, 0)]
    ops = []
    for idx, ins, outs in ((0, [0, 1], [2]), (1, [2, 3], [4]), (2, [4], [5])):
        i, o = ints(ins), ints(outs)
        ops.append(table([(0, "Uint32", idx), (1, "UOffsetTRelative", i), (2, "UOffsetTRelative", o)]))
    codes = [table([(0, "Int8", c), (2, "Int32", 1), (3, "Int32", c)]) for c in (39, 18, 19)]  # TRANSPOSE, MUL, RELU
    name = b.CreateString("partition_0")
    tv, iv, ov, opv = offsets(tensors), ints([0]), ints([5]), offsets(ops)
    sub = table([(0, "UOffsetTRelative", tv), (1, "UOffsetTRelative", iv), (2, "UOffsetTRelative", ov),
                 (3, "UOffsetTRelative", opv), (4, "UOffsetTRelative", name)])
    cv, sv, bv = offsets(codes), offsets([sub]), offsets(bufs)
    model = table([(0, "Uint32", 3), (1, "UOffsetTRelative", cv), (2, "UOffsetTRelative", sv),
                   (4, "UOffsetTRelative", bv)])
    b.Finish(model, file_identifier=b"TFL3")
    return bytes(b.Output())


PART_NODES = ["einsum", "mul", "relu"]
PART_OPS = ["Einsum", "Mul", "Relu"]


def partition_file(payload: bytes, backend: str = "onnxruntime", shape=SHAPE, out_shape=T_SHAPE,
                   delegate: str | None = None, nodes=PART_NODES, ops=PART_OPS) -> bytes:
    """x -> neg -> t -> partition_0 -> u -> sigmoid -> y, as the converter lays it out."""
    g = Graph()
    for name, s in (("x", shape), ("t", shape), ("u", out_shape), ("y", out_shape)):
        g.add_tensor(name, s, np.float32)
    g.inputs, g.outputs = ["x"], ["y"]
    g.add_node("neg", ["x"], ["t"], name="neg")
    pl = g.add_const(np.frombuffer(payload, np.uint8).copy(), "partition_0_payload")
    attrs = {"backend": backend, "index": 0, "delegate": delegate, "nodes": list(nodes), "ops": list(ops)}
    g.add_node("partition", ["t", pl], ["u"], attrs, name="partition_0")
    g.add_node("sigmoid", ["u"], ["y"], name="sigmoid")
    meta = {"partitions": [{"index": 0, "backend": backend, "delegate": delegate, "node": "partition_0",
                            "nodes": list(nodes), "ops": list(ops), "inputs": ["t"], "outputs": ["u"],
                            "bytes": len(payload)}]}
    return serialize(g, meta)


def reference(x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(original_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]


@pytest.fixture(scope="module")
def ort_file(tmp_path_factory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("partitions") / "ort.edgert"
    p.write_bytes(partition_file(ort_payload()))
    return p


# ---- onnxruntime partitions ------------------------------------------------------------


def test_ort_partition_matches_onnxruntime(ort_file):
    s = edgert.Session(ort_file)
    for x in inputs(3):
        y, = s.run(None, {"x": x})
        np.testing.assert_allclose(y, reference(x), rtol=0, atol=1e-6)
    # The partition is a node of the file like any other.
    assert [n.op for n in s.nodes()] == ["neg", "partition", "sigmoid"]


def test_session_from_bytes_and_partitions_report(ort_file):
    s = edgert.Session(ort_file.read_bytes())
    x = inputs(1, seed=5)[0]
    np.testing.assert_allclose(s.run(None, {"x": x})[0], reference(x), rtol=0, atol=1e-6)
    assert s.partitions() == [{"index": 0, "node": "partition_0", "backend": "onnxruntime",
                               "runtime": f"onnxruntime {ort.__version__}", "delegate": None,
                               "delegate_loaded": False, "reason": None, "nodes": PART_NODES}]


def test_models_without_partitions_report_none(tmp_path):
    g = Graph()
    g.add_tensor("x", (2, 3), np.float32)
    g.add_tensor("y", (2, 3), np.float32)
    g.inputs, g.outputs = ["x"], ["y"]
    g.add_node("relu", ["x"], ["y"])
    assert edgert.Session(serialize(g)).partitions() == []


def test_run_allocates_nothing_in_edgert(ort_file):
    """onnxruntime allocates in its own code; edgert's allocation count stays put."""
    s = edgert.Session(ort_file, max_contexts=1)
    x = inputs(1)[0]
    s.run(None, {"x": x})
    before = edgert.runtime.alloc_count()
    for _ in range(5):
        s.run(None, {"x": x})
    assert edgert.runtime.alloc_count() == before


def wrong_in_threads(s, xs, want, threads: int = 4) -> list[int]:
    """Runs input k of xs on Session s from `threads` threads at once (len(xs) / threads
    each); the indices whose output differs from want[k]."""
    wrong: list[int] = []
    per = len(xs) // threads

    def work(t: int) -> None:
        for k in range(t * per, (t + 1) * per):
            if not np.array_equal(s.run(None, {"x": xs[k]})[0], want[k]):
                wrong.append(k)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return wrong


def test_threads_share_one_session(ort_file):
    """4 threads x 50 runs on one Session (one C context each, one onnxruntime session
    shared): every result equals the one-by-one result of its input."""
    s = edgert.Session(ort_file, max_contexts=4)
    xs = inputs(200, seed=1)
    want = [s.run(None, {"x": x})[0] for x in xs]
    for x, w in zip(xs[:4], want):
        np.testing.assert_allclose(w, reference(x), rtol=0, atol=1e-6)
    assert not wrong_in_threads(s, xs, want)
    assert len(s._contexts) >= 1


def test_delegate_for_onnxruntime_partitions_is_reported(ort_file):
    with pytest.warns(RuntimeWarning, match="delegates apply to LiteRT partitions"):
        s = edgert.Session(ort_file, delegate="edgetpu")
    info, = s.partitions()
    assert info["delegate"] is None and not info["delegate_loaded"] and "LiteRT" in info["reason"]
    x = inputs(1, seed=9)[0]
    np.testing.assert_allclose(s.run(None, {"x": x})[0], reference(x), rtol=0, atol=1e-6)


# ---- no backend ----------------------------------------------------------------------


def test_fallback_that_cannot_run_the_kind(ort_file):
    with pytest.raises(NoBackendError) as ei:
        edgert.Session(ort_file, fallback="litert")
    msg = str(ei.value)
    assert ei.value.code == 202
    for part in ("partition_0", "einsum, mul, relu", "Einsum", "fallback='litert'", "pip install 'edgert[ort]'",
                 "no onnxruntime backend was given"):
        assert part in msg, msg


def test_disabled_runtime_is_not_installed(ort_file, monkeypatch):
    monkeypatch.setenv("EDGERT_DISABLE_BACKENDS", "onnxruntime")
    with pytest.raises(NoBackendError) as ei:
        edgert.Session(ort_file)
    msg = str(ei.value)
    assert "partition_0" in msg and "onnxruntime is not installed" in msg and "edgert[ort]" in msg, msg
    monkeypatch.delenv("EDGERT_DISABLE_BACKENDS")
    assert edgert.Session(ort_file).partitions()[0]["runtime"].startswith("onnxruntime")


def test_bad_fallback_argument(ort_file):
    with pytest.raises(edgert.errors.InputError, match="fallback must be"):
        edgert.Session(ort_file, fallback="tensorrt")


# ---- bad payloads -----------------------------------------------------------------------


def test_corrupt_payload_is_a_clear_error(tmp_path):
    good = ort_payload()
    bad = bytes(b ^ 0x5A for b in good)  # same size, not a protobuf onnxruntime reads
    p = tmp_path / "bad.edgert"
    p.write_bytes(partition_file(bad))
    with pytest.raises(BackendError) as ei:
        edgert.Session(p)
    msg = str(ei.value)
    assert ei.value.code == 203
    assert "partition_0" in msg and "onnxruntime" in msg and "cannot load the payload" in msg, msg


def test_payload_bytes_flipped_in_the_file_fail_the_checksum(ort_file):
    data = bytearray(ort_file.read_bytes())
    at = bytes(data).index(ort_payload()[:16])
    data[at + 8] ^= 0xFF
    with pytest.raises(ModelFormatError, match="checksum"):
        edgert.Session(bytes(data))


def test_payload_output_mismatch_fails_the_run_not_the_process(tmp_path):
    """A payload whose output differs from the node's boundary tensor: the run fails with
    EDGERT_ERR_BACKEND naming the partition; the session stays usable."""
    p = tmp_path / "mismatch.edgert"
    # The node says u is [1,4,3,5]; the payload's Einsum gives [1,3,4,5].
    mismatched = ort_payload().replace(b"nchw->nhcw", b"nchw->nchw")
    p.write_bytes(partition_file(mismatched))
    s = edgert.Session(p, max_contexts=1)
    for _ in range(2):
        with pytest.raises(BackendError) as ei:
            s.run(None, {"x": inputs(1)[0]})
        msg = str(ei.value)
        assert "partition_0" in msg and "onnxruntime" in msg and "payload output 0" in msg, msg


def _param_word_offset(data: bytes, node_index: int, word: int) -> int:
    """File offset of parameter `word` of node `node_index`."""
    (_, _, _, _, _, _, nsec, toff, *_r) = fmt._HEADER.unpack_from(data, 0)
    secs = {}
    for k in range(nsec):
        kind, _, off, size, _, _ = fmt._ENTRY.unpack_from(data, toff + k * fmt.ENTRY_SIZE)
        secs[kind] = off
    rec = fmt._NODE.unpack_from(data, secs[fmt.NODES] + node_index * fmt.NODE_SIZE)
    return secs[fmt.PARAMS] + 4 * (rec[8] + word)


@pytest.mark.parametrize("word,value,text", [(0, 7, "unknown backend code 7"), (0, 0, "unknown backend code 0"),
                                             (2, 0, "its 0 boundary inputs, then the payload")])
def test_loader_rejects_bad_partition_parameters(ort_file, word, value, text):
    data = bytearray(ort_file.read_bytes())
    at = _param_word_offset(bytes(data), 1, word)
    data[at:at + 4] = int(value).to_bytes(4, "little")
    fmt.seal(data)
    with pytest.raises(ModelFormatError, match=text):
        edgert.Session(bytes(data))


def test_loader_rejects_a_payload_that_is_not_1d(tmp_path):
    g = Graph()
    for name in ("x", "t"):
        g.add_tensor(name, (4,), np.float32)
    g.inputs, g.outputs = ["x"], ["t"]
    blob = g.add_const(np.frombuffer(ort_payload(), np.uint8).reshape(1, -1).copy(), "payload")
    g.add_node("partition", ["x", blob], ["t"], {"backend": "onnxruntime", "index": 0}, name="partition_0")
    with pytest.raises(ModelFormatError, match=r"then the payload \(a constant uint8 1-D tensor, not empty\)"):
        edgert.Session(serialize(g))


def test_c_partition_test_program(tmp_path):
    """csrc/tests/partition_test.c: a C backend that adds 1: prepare/invoke/release order,
    NO_BACKEND, invoke and prepare failures, no allocation in run."""
    g = Graph()
    for name in ("x", "a", "b", "y"):
        g.add_tensor(name, (2, 3), np.float32)
    g.inputs, g.outputs = ["x"], ["y"]
    p0 = g.add_const(np.frombuffer(b"ONNX:p0", np.uint8).copy(), "p0")
    p1 = g.add_const(np.frombuffer(b"TFLITE1", np.uint8).copy(), "p1")
    g.add_node("partition", ["x", p0], ["a"], {"backend": "onnxruntime", "index": 0}, name="partition_0")
    g.add_node("relu", ["a"], ["b"], name="relu")
    g.add_node("partition", ["b", p1], ["y"], {"backend": "litert", "index": 1}, name="partition_1")
    model = tmp_path / "two.edgert"
    model.write_bytes(serialize(g))
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run(["make", "-s", "-C", str(ROOT / "csrc"), "partition-test"], check=True, env=env)
    r = subprocess.run([str(ROOT / "build" / "host" / "bin" / "partition_test"), str(model)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "partition_test: ok" in r.stdout


# ---- LiteRT partitions --------------------------------------------------------------------


@pytest.fixture(scope="module")
def litert_file(tmp_path_factory) -> pathlib.Path:
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert has no wheel for this machine")
    p = tmp_path_factory.mktemp("partitions") / "litert.edgert"
    p.write_bytes(partition_file(tiny_tflite(), backend="litert"))
    return p


def test_litert_partition_matches_onnxruntime(litert_file):
    from importlib.metadata import version

    s = edgert.Session(litert_file)
    for x in inputs(3, seed=2):
        np.testing.assert_allclose(s.run(None, {"x": x})[0], reference(x), rtol=0, atol=1e-6)
    assert s.partitions() == [{"index": 0, "node": "partition_0", "backend": "litert",
                               "runtime": f"ai-edge-litert {version('ai-edge-litert')}", "delegate": None,
                               "delegate_loaded": False, "reason": None, "nodes": PART_NODES}]


def test_litert_delegate_that_cannot_load_warns_and_runs_on_cpu(litert_file, tmp_path):
    missing = str(tmp_path / "libno_such_delegate.so")
    with pytest.warns(RuntimeWarning, match="could not be loaded"):
        s = edgert.Session(litert_file, delegate=missing, delegate_options={"device": "usb"})
    info, = s.partitions()
    assert info["delegate"] == missing and info["delegate_loaded"] is False
    assert "libno_such_delegate.so" in info["reason"], info
    x = inputs(1, seed=3)[0]
    np.testing.assert_allclose(s.run(None, {"x": x})[0], reference(x), rtol=0, atol=1e-6)


def test_delegate_recorded_at_conversion_is_used(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert has no wheel for this machine")
    p = tmp_path / "edgetpu.edgert"
    p.write_bytes(partition_file(tiny_tflite(), backend="litert", delegate="edgetpu"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = edgert.Session(p)
    info, = s.partitions()
    assert info["delegate"] == "edgetpu"
    if not info["delegate_loaded"]:  # no Edge TPU runtime on this machine: never silent
        assert "libedgetpu.so.1" in info["reason"]
        assert any("edgetpu" in str(w.message) for w in caught), [str(w.message) for w in caught]
    x = inputs(1, seed=4)[0]
    np.testing.assert_allclose(s.run(None, {"x": x})[0], reference(x), rtol=0, atol=1e-6)


def test_litert_threads_each_context_has_its_interpreter(litert_file):
    s = edgert.Session(litert_file, max_contexts=4)
    xs = inputs(200, seed=6)
    want = [s.run(None, {"x": x})[0] for x in xs]
    assert not wrong_in_threads(s, xs, want)
    runners = [r for _, r in s._backends.states.values()]
    assert len({id(r) for r in runners}) == len(s._contexts) == len(runners)


def test_litert_no_backend_errors(litert_file, monkeypatch):
    with pytest.raises(NoBackendError) as ei:
        edgert.Session(litert_file, fallback="onnxruntime")
    msg = str(ei.value)
    assert "partition_0" in msg and "fallback='onnxruntime' cannot run litert partitions" in msg, msg
    assert "no litert backend was given" in msg and ".tflite" in msg, msg
    monkeypatch.setenv("EDGERT_DISABLE_BACKENDS", "litert,tflite")
    with pytest.raises(NoBackendError) as ei:
        edgert.Session(litert_file)
    msg = str(ei.value)
    assert "ai-edge-litert or tflite-runtime is not installed" in msg and "edgert[litert]" in msg, msg
    assert "einsum, mul, relu" in msg, msg


def test_tflite_runtime_choice_when_absent(litert_file):
    try:
        import tflite_runtime  # noqa: F401
    except ImportError:
        with pytest.raises(NoBackendError, match="tflite-runtime is not installed"):
            edgert.Session(litert_file, fallback="tflite")
    else:
        assert edgert.Session(litert_file, fallback="tflite").partitions()[0]["runtime"].startswith("tflite-runtime")


def test_corrupt_tflite_payload(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert has no wheel for this machine")
    good = tiny_tflite()
    p = tmp_path / "bad.edgert"
    p.write_bytes(partition_file(good[:8] + bytes(len(good) - 8), backend="litert"))
    with pytest.raises(BackendError) as ei:
        edgert.Session(p)
    assert "partition_0" in str(ei.value) and "litert" in str(ei.value), str(ei.value)


# ---- command line ----------------------------------------------------------------------


def test_cli_run_and_inspect_show_partitions(ort_file, tmp_path):
    import json

    from click.testing import CliRunner

    from edgert.cli.main import main

    x = inputs(1, seed=7)[0]
    np.save(tmp_path / "x.npy", x)
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart by default
        runner = CliRunner()
    r = runner.invoke(main, ["run", str(ort_file), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
                             str(tmp_path / "out")])
    assert r.exit_code == 0, r.output + r.stderr
    assert f"partition partition_0 (3 nodes): onnxruntime on onnxruntime {ort.__version__}, CPU" in r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), reference(x), rtol=0, atol=1e-6)

    r = runner.invoke(main, ["run", str(ort_file), "--input", f"x={tmp_path / 'x.npy'}", "--fallback", "litert"])
    assert r.exit_code != 0 and "edgert[ort]" in r.output + r.stderr

    r = runner.invoke(main, ["inspect", str(ort_file), "--json"])
    assert r.exit_code == 0, r.output
    parts = json.loads(r.stdout)["partitions"]
    assert [(p["node"], p["backend"], p["nodes"]) for p in parts] == [("partition_0", "onnxruntime", PART_NODES)]
    r = runner.invoke(main, ["inspect", str(ort_file)])
    assert "partition partition_0: onnxruntime" in r.stdout and "3 nodes (Einsum, Mul, Relu)" in r.stdout, r.stdout


def test_abi_mode_library_runs_partitions(ort_file, tmp_path):
    """The same backends through a prebuilt libedgert.so loaded in cffi ABI mode
    (EDGERT_LIBRARY), as on boards without a compiler."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run(["make", "-s", "-C", str(ROOT / "csrc"), "lib"], check=True, env=env)
    x = inputs(1, seed=8)[0]
    np.save(tmp_path / "x.npy", x)
    code = ("import sys, numpy as np, edgert; s = edgert.Session(sys.argv[1]); "
            "np.save(sys.argv[3], s.run(None, {'x': np.load(sys.argv[2])})[0]); print(s.partitions()[0]['runtime'])")
    env["EDGERT_LIBRARY"] = str(ROOT / "build" / "host" / "libedgert.so")
    r = subprocess.run([sys.executable, "-c", code, str(ort_file), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"onnxruntime {ort.__version__}"
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), reference(x), rtol=0, atol=1e-6)


def test_litert_payload_from_the_tflite_writer(tmp_path):
    """A payload written by edgert.converter.tflite.writer.write_tflite for an IR subgraph (relu on
    NCHW boundaries) runs as a litert partition: y = sigmoid(relu(-x))."""
    writer = pytest.importorskip("edgert.converter.tflite.writer", reason="the TFLite writer is not part of this build")
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert has no wheel for this machine")
    sub = Graph()
    sub.add_tensor("t", SHAPE, np.float32)
    sub.add_tensor("u", SHAPE, np.float32)
    sub.inputs, sub.outputs = ["t"], ["u"]
    sub.add_node("relu", ["t"], ["u"], name="relu")
    p = tmp_path / "written.edgert"
    p.write_bytes(partition_file(writer.write_tflite(sub), backend="litert", out_shape=SHAPE, nodes=["relu"],
                                 ops=["Relu"]))
    s = edgert.Session(p)
    assert s.partitions()[0]["backend"] == "litert"
    x = inputs(1, seed=10)[0]
    want = 1.0 / (1.0 + np.exp(-np.maximum(-x, 0.0)))
    np.testing.assert_allclose(s.run(None, {"x": x})[0], want, rtol=0, atol=1e-6)
