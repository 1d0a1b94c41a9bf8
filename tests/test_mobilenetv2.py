"""The MobileNetV2 benchmark model of tools/mobilenetv2.py: torchvision's layout, and it
converts (float and int8) and runs like onnxruntime."""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import edgert
from tools import mobilenetv2


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("mobilenetv2")
    onnx_path, calib_path = mobilenetv2.write(d, seed=0, n_calib=8)
    return onnx_path, dict(np.load(calib_path))


def test_layout(model):
    m = onnx.load(str(model[0]))
    ops = Counter(n.op_type for n in m.graph.node)
    # torchvision's mobilenet_v2() exported with BatchNorm folded: 52 convolutions (17
    # depthwise), 35 ReLU6, 10 residual adds, one classifier.
    assert ops == {"Conv": 52, "Clip": 35, "Add": 10, "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    assert sum(1 for n in m.graph.node if n.op_type == "Conv"
               and next(a.i for a in n.attribute if a.name == "group") > 1) == 17
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    assert 3_400_000 < params < 3_600_000  # torchvision: 3.50 M (3.47 M after folding BatchNorm)
    assert model[1]["input"].shape == (8, 3, 224, 224)


def test_converts_and_matches_onnxruntime(model, tmp_path):
    onnx_path, calib = model
    x = mobilenetv2.images(2, seed=7)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    refs = [sess.run(None, {"input": x[i:i + 1]})[0] for i in range(2)]
    assert refs[0].std() > 0.05 and np.argmax(refs[0]) != np.argmax(refs[1])  # not a constant output
    fp32 = edgert.Session(edgert.convert(str(onnx_path), None))
    int8 = edgert.Session(edgert.convert(str(onnx_path), None, quantize="int8", calibration=calib))
    for i, ref in enumerate(refs):
        out = fp32.run(None, {"input": x[i:i + 1]})[0]
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
        q = int8.run(None, {"input": x[i:i + 1]})[0]
        assert np.corrcoef(q.ravel(), ref.ravel())[0, 1] > 0.9
