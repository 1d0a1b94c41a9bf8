"""spmm (edgert/converter/ops/spmm.py, csrc/kernels/ref/spmm.c): the C kernel against the numpy
reference on graphs built directly (the op has no ONNX counterpart; the sparse pass's
rewrites of conv2d, gemm and matmul are checked against onnxruntime in
tests/test_sparse.py)."""
from __future__ import annotations

import numpy as np
import pytest

import edgert
from edgert.converter import pipeline as converter
from edgert.converter.ir import Graph
from edgert.converter.ops.binary import act_apply
from edgert.converter.ops.spmm import spmm_reference
from edgert.converter.sparse import _csr


def _graph(x_shape, w, k, p, out_shape, bias=None, act=0):
    g = Graph()
    g.add_tensor("x", x_shape, np.float32)
    g.inputs = ["x"]
    values, cols, rows = _csr(w)
    ins = ["x", g.add_const(values, "v"), g.add_const(cols, "c"), g.add_const(rows, "r")]
    if bias is not None:
        ins.append(g.add_const(bias, "b"))
    g.add_tensor("y", out_shape, np.float32)
    g.add_node("spmm", ins, ["y"], {"k": k, "p": p, "out_shape": tuple(out_shape), "act": act})
    g.outputs = ["y"]
    g.metadata["output_names"] = ["y"]
    return g, (values, cols, rows)


@pytest.mark.parametrize("n,k,p,r,zeros,with_bias,act", [
    (1, 37, 1, 13, 0.9, True, 0),     # vector path, row lengths not multiples of 4
    (3, 64, 1, 20, 0.7, False, 1),    # batch of rows, relu
    (1, 16, 49, 24, 0.8, True, 1),    # 1x1 conv on a 7x7 map
    (2, 5, 17, 3, 0.5, True, 0),      # odd sizes, batch 2
    (1, 8, 4, 6, 1.0, True, 0),       # every weight zero: bias only
])
def test_spmm_matches_reference(n, k, p, r, zeros, with_bias, act):
    rng = np.random.default_rng(k * 100 + p)
    w = rng.standard_normal((r, k)).astype(np.float32)
    w[rng.random((r, k)) < zeros] = 0
    w[0] = 0  # an empty row
    x = rng.standard_normal((n, k, p)).astype(np.float32)
    bias = rng.standard_normal(r).astype(np.float32) if with_bias else None
    g, (values, cols, rows) = _graph(x.shape, w, k, p, (n, r, p), bias, act)
    got = edgert.Session(converter.serialize(g)).run(None, {"x": x})[0]
    want = act_apply(act, 0.0, 0.0, spmm_reference(x, values, cols, rows, bias, k, p).astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_spmm_rejects_bad_shapes():
    w = np.eye(4, dtype=np.float32)
    g, _ = _graph((1, 4, 3), w, 4, 3, (1, 4, 3))
    g.nodes[0].attrs["p"] = 5  # 12 elements are not a multiple of K*P = 20
    with pytest.raises(edgert.EdgertError):
        converter.serialize(g)
