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
from edgert import format as fmt
from edgert.converter import serialize
from edgert.errors import BackendError, ModelFormatError, NoBackendError
from edgert.ir import Graph

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


def test_threads_share_one_session(ort_file):
    """4 threads x 50 runs on one Session (one C context each, one onnxruntime session
    shared): every result equals the one-by-one result of its input."""
    s = edgert.Session(ort_file, max_contexts=4)
    xs = inputs(200, seed=1)
    want = [s.run(None, {"x": x})[0] for x in xs]
    for x, w in zip(xs[:4], want):
        np.testing.assert_allclose(w, reference(x), rtol=0, atol=1e-6)
    wrong = []

    def work(t: int) -> None:
        for r in range(50):
            k = t * 50 + r
            y, = s.run(None, {"x": xs[k]})
            if not np.array_equal(y, want[k]):
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong
    assert len(s._contexts) >= 1


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


@pytest.mark.parametrize("word,value,text", [(0, 7, "backend code 7"), (2, 0, "boundary inputs"),
                                             (1, 0x80000000, "partition number")])
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
    with pytest.raises(ModelFormatError, match="payload, a non-empty constant uint8 1-D tensor"):
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
