"""Real models end to end: edgert against onnxruntime on the same inputs, the memory plan
against its lower bound, no heap allocation while running, and the shipped digits CNN's
accuracy. Models come from the cache (tools/fetch_models.py); see tests/conftest.py."""
from __future__ import annotations

import numpy as np
import pytest

import edgert
from edgert.runtime import reader as fmt
from tools import models

NAMES = list(models.MODELS)
_converted: dict[str, bytes] = {}


def _ort_session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _convert(name: str, path) -> bytes:
    """The converted model, once per test session."""
    if name not in _converted:
        _converted[name] = edgert.convert(str(path), None, **models.convert_kwargs(name))
    return _converted[name]


@pytest.mark.parametrize("name", NAMES)
def test_matches_onnxruntime(name, real_model):
    path = real_model(name)
    data = _convert(name, path)
    feeds = models.reference_feeds(name)
    ort_sess = _ort_session(path)
    want_names = [o.name for o in ort_sess.get_outputs()]
    want = ort_sess.run(None, feeds)

    sess = edgert.Session(data, threads=1)
    got_names = [o.name for o in sess.get_outputs()]
    in_names = {i.name for i in sess.get_inputs()}
    # Values are compared by name when the names match, else by position, so that a naming
    # mismatch (asserted last) still shows the numeric comparison.
    same_names = sorted(got_names) == sorted(want_names)
    got = sess.run(want_names if same_names else None, {k: v for k, v in feeds.items() if k in in_names})
    assert len(got) == len(want), f"{len(got)} outputs, onnxruntime has {len(want)}"

    report = []
    for oname, g, w in zip(want_names, got, want):
        assert g.shape == w.shape, f"{name}/{oname}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{name}/{oname}: dtype {g.dtype} != {w.dtype}"
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
        ref = float(np.max(np.abs(w.astype(np.float64)))) if w.size else 0.0
        report.append((oname, err, ref))
    print(f"{name}: " + ", ".join(f"{o}: max|err| {e:.3g} (max|ref| {r:.3g})" for o, e, r in report))
    for oname, err, ref in report:
        assert err <= 1e-3 * max(1.0, ref), f"{name}/{oname}: max|edgert-ort| = {err:.4g}, max|ort| = {ref:.4g}"
    assert got_names == want_names, f"output names {got_names} != onnxruntime's {want_names}"


@pytest.mark.parametrize("name", NAMES)
def test_arena_near_lower_bound(name, real_model):
    info = fmt.read(_convert(name, real_model(name)))
    arena, lower = info["arena_bytes"], info["arena_lower_bound_bytes"]
    print(f"{name}: arena {arena} bytes, lower bound {lower} ({arena / max(lower, 1):.3f}x)")
    assert lower > 0
    assert arena <= 1.05 * lower, f"{name}: arena {arena} > 1.05 x lower bound {lower}"


@pytest.mark.parametrize("name", NAMES)
def test_run_allocates_nothing(name, real_model):
    sess = edgert.Session(_convert(name, real_model(name)), threads=1)
    feeds = models.example_inputs(name)
    in_names = {i.name for i in sess.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in in_names}
    before = edgert.runtime.alloc_count()
    sess.run(None, feeds)
    sess.run(None, feeds)
    assert edgert.runtime.alloc_count() == before


def _digits():
    data = np.load(models.DIGITS_TEST)
    return data["input"], data["label"]


def test_shipped_digits_files():
    assert models.DIGITS_MODEL.stat().st_size < 100_000
    x, y = _digits()
    assert x.dtype == np.float32 and x.shape[1:] == (1, 8, 8) and y.dtype == np.int64 and len(x) == len(y)


def test_digits_accuracy_matches_onnxruntime():
    x, y = _digits()
    sess = edgert.Session(edgert.convert(str(models.DIGITS_MODEL)), threads=1)
    ort_sess = _ort_session(models.DIGITS_MODEL)
    got = np.array([int(np.argmax(sess.run(None, {"input": x[k:k + 1]})[0])) for k in range(len(x))])
    want = np.array([int(np.argmax(ort_sess.run(None, {"input": x[k:k + 1]})[0])) for k in range(len(x))])
    acc_e, acc_o = float(np.mean(got == y)), float(np.mean(want == y))
    print(f"digits: edgert accuracy {acc_e:.4f}, onnxruntime {acc_o:.4f} on {len(y)} images")
    assert acc_e == acc_o
    assert acc_e > 0.9


def test_digits_batchnorm_folded():
    info = fmt.read(edgert.convert(str(models.DIGITS_MODEL)))
    ops = [n["op"] for n in info["nodes"]]
    assert "batch_norm" not in ops, ops
    assert ops.count("conv2d") == 3, ops


def test_find_model():
    assert models.find_model("digits") == models.DIGITS_MODEL
    assert models.find_model(str(models.DIGITS_MODEL)) == models.DIGITS_MODEL
    with pytest.raises(edgert.EdgertError, match="not a known model"):
        models.find_model("no-such-model")


@pytest.mark.parametrize("name", NAMES)
def test_example_inputs_deterministic(name):
    a, b = models.example_inputs(name), models.example_inputs(name)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert set(a) | set(models.MODELS[name].input_values) == set(models.MODELS[name].input_shapes) | set(
        models.MODELS[name].input_values)
