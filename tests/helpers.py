"""Shared test utilities: build small ONNX models, run them in onnxruntime and edgert."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def make_model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], initializers: dict[str, np.ndarray] | None = None,
               opset: int = 17) -> onnx.ModelProto:
    """A model of `nodes` (NodeProto or list) whose graph inputs are `inputs` (name -> example
    array, shapes taken from it) and whose outputs are `outputs` (types left to inference)."""
    if isinstance(nodes, onnx.NodeProto):
        nodes = [nodes]
    vin = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in inputs.items()]
    vout = [helper.make_empty_tensor_value_info(o) for o in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
    g = helper.make_graph(list(nodes), "test", vin, vout, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def run_edgert(model: onnx.ModelProto, feeds: dict[str, np.ndarray], **convert_kw) -> list[np.ndarray]:
    import edgert

    data = edgert.convert(model, None, **convert_kw)
    sess = edgert.Session(data)
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


def assert_close(got, want, rtol=1e-4, atol=1e-5, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def check_against_ort(model, feeds, rtol=1e-4, atol=1e-5, **convert_kw) -> list[np.ndarray]:
    """Runs `model` in onnxruntime and edgert and asserts every output matches."""
    want = run_ort(model, feeds)
    got = run_edgert(model, feeds, **convert_kw)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol, atol, what=f"output {k}")
    return got


def rnn_cell_model(features: int = 16, hidden: int = 32, outputs: int = 4) -> onnx.ModelProto:
    """A recurrent cell out of plain ops: h_new = tanh(x @ Wx + h @ Wh + b), y = h_new @ Wy;
    outputs y and h_new. With --state h_new=h it is a streaming model whose int8 form
    (gemm, add, tanh by table) is integer from end to end, so host and boards agree bit
    for bit."""
    rng = np.random.default_rng(3)
    inits = {"Wx": (rng.standard_normal((features, hidden)) * 0.3).astype(np.float32),
             "Wh": (rng.standard_normal((hidden, hidden)) * 0.2).astype(np.float32),
             "b": (rng.standard_normal((1, hidden)) * 0.1).astype(np.float32),
             "Wy": (rng.standard_normal((hidden, outputs)) * 0.5).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "Wx"], ["xw"]), helper.make_node("MatMul", ["h", "Wh"], ["hw"]),
             helper.make_node("Add", ["xw", "hw"], ["s"]), helper.make_node("Add", ["s", "b"], ["sb"]),
             helper.make_node("Tanh", ["sb"], ["h_new"]), helper.make_node("MatMul", ["h_new", "Wy"], ["y"])]
    return make_model(nodes, {"x": np.zeros((1, features), np.float32), "h": np.zeros((1, hidden), np.float32)},
                      ["y", "h_new"], inits, opset=14)
