"""Bad input gets a clear error and loses nothing."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import edgert
from tests.helpers import make_model


def _transpose_model(dims):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_empty_tensor_value_info("y")
    n = helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0], name="tr")
    m = helper.make_model(helper.make_graph([n], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    return m


def test_unfixed_symbolic_dim_is_named():
    with pytest.raises(edgert.ConversionError, match=r"x \[batch,4\].*dimension\(s\) 0 \(batch\)"):
        edgert.convert(_transpose_model(["batch", 4]))


def test_input_shape_fixes_symbolic_dim():
    data = edgert.convert(_transpose_model(["batch", 4]), input_shapes={"x": [3, 4]})
    s = edgert.Session(data)
    assert s.get_inputs()[0].shape == [3, 4]
    assert s.get_outputs()[0].shape == [4, 3]


def test_input_shape_errors():
    with pytest.raises(edgert.ConversionError, match="rank 2"):
        edgert.convert(_transpose_model(["batch", 4]), input_shapes={"x": [3, 4, 5]})
    with pytest.raises(edgert.ConversionError, match="fixed to 4"):
        edgert.convert(_transpose_model(["batch", 4]), input_shapes={"x": [3, 5]})
    with pytest.raises(edgert.ConversionError, match="unknown input name"):
        edgert.convert(_transpose_model([2, 4]), input_shapes={"nope": [3, 5]})


def test_every_unsupported_op_is_listed():
    x = np.zeros((2, 3), np.float32)
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"], name="first_bad"),
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0], name="fine"),
        helper.make_node("Unique", ["t"], ["u"], name="second_bad"),
        helper.make_node("Transpose", ["u"], ["y"], name="after_bad"),
    ]
    with pytest.raises(edgert.UnsupportedError) as ei:
        edgert.convert(make_model(nodes, {"x": x}, ["nz", "y"]))
    msg = str(ei.value)
    assert "first_bad (NonZero)" in msg and "second_bad (Unique)" in msg
    names = [p[0] for p in ei.value.problems]
    assert names == ["first_bad", "second_bad"]


def test_not_an_onnx_file(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"this is not a protobuf \xff\xff\xff")
    with pytest.raises(edgert.ModelFormatError):
        edgert.convert(str(p))
    with pytest.raises(edgert.ModelFormatError, match="no such file"):
        edgert.convert(str(tmp_path / "missing.onnx"))


def test_cli_leaves_no_partial_output(tmp_path):
    x = np.zeros((2, 3), np.float32)
    m = make_model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], {"x": x}, ["y"])
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    out = tmp_path / "m.edgert"
    r = subprocess.run([sys.executable, "-m", "edgert.cli", "convert", str(src), "-o", str(out)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode != 0
    assert "nz (NonZero)" in r.stderr
    assert not out.exists()
    assert [f for f in os.listdir(tmp_path) if f != "m.onnx"] == []


def test_session_input_errors():
    data = edgert.convert(_transpose_model([2, 4]))
    s = edgert.Session(data)
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(edgert.InputError, match="unknown input name"):
        s.run(None, {"x": x, "extra": x})
    with pytest.raises(edgert.InputError, match="missing input"):
        s.run(None, {})
    with pytest.raises(edgert.InputError, match="dtype float64"):
        s.run(None, {"x": x.astype(np.float64)})
    with pytest.raises(edgert.InputError, match=r"shape \[4, 2\]"):
        s.run(None, {"x": np.zeros((4, 2), np.float32)})
    with pytest.raises(edgert.InputError, match="unknown output"):
        s.run(["nope"], {"x": x})
    y, = s.run(["y"], {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    np.testing.assert_array_equal(y, np.arange(8, dtype=np.float32).reshape(2, 4).T)


def test_corrupt_edgert_file(tmp_path):
    data = bytearray(edgert.convert(_transpose_model([2, 4])))
    for cut in (0, 10, 63, 64, len(data) // 2, len(data) - 1):
        with pytest.raises(edgert.ModelFormatError):
            edgert.Session(bytes(data[:cut]))
    data[len(data) // 2] ^= 0x40
    with pytest.raises(edgert.ModelFormatError, match="checksum"):
        edgert.Session(bytes(data))
    with pytest.raises(edgert.ModelFormatError, match="no such file"):
        edgert.Session(str(tmp_path / "missing.edgert"))
