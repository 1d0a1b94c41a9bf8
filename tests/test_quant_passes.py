"""The graph steps of int8 conversion on tiny graphs: before/after of the preparation
passes, and the decisions of the int8 rewrite."""
import numpy as np

from edgert.converter import ops
from edgert.converter.pipeline import serialize
from edgert.converter.ir import Graph
from edgert.converter.quant.calibrate import batches, observe
from edgert.converter.quant.prepare import matmul_to_gemm, split_activations
from edgert.converter.quant.rewrite import qparams_from_ranges, quantize_int8
from edgert.runtime.session import Session


def _node(g, op, inputs, output, attrs=None):
    n = g.add_node(op, inputs, [output], attrs or {})
    (shape, dt), = ops.get(op).infer(n, g)
    g.add_tensor(output, shape, dt)
    return n


def _run(g, feeds):
    return Session(serialize(g)).run(None, feeds)


def test_split_activations():
    rng = np.random.default_rng(0)
    g = Graph()
    g.add_tensor("x", (1, 2, 5, 5), np.float32)
    g.inputs = ["x"]
    w = g.add_const(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    _node(g, "conv2d", ["x", w], "y", dict(kernel=[3, 3], act="hard_swish"))
    g.outputs = ["y"]
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    before = _run(g, {"x": x})[0]
    assert split_activations(g)
    assert [n.op for n in g.nodes] == ["conv2d", "hard_swish"] and "act" not in g.nodes[0].attrs
    np.testing.assert_allclose(_run(g, {"x": x})[0], before, rtol=1e-5, atol=1e-6)


def test_matmul_to_gemm():
    rng = np.random.default_rng(1)
    g = Graph()
    g.add_tensor("x", (2, 3, 4), np.float32)
    g.inputs = ["x"]
    b = g.add_const(rng.standard_normal((4, 5)).astype(np.float32), "b")
    _node(g, "matmul", ["x", b], "y")
    g.outputs = ["y"]
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    before = _run(g, {"x": x})[0]
    assert matmul_to_gemm(g)
    assert [n.op for n in g.nodes] == ["reshape", "gemm", "reshape"]
    np.testing.assert_allclose(_run(g, {"x": x})[0], before, rtol=1e-5, atol=1e-6)


def test_matmul_bias_add_folds_into_gemm():
    """matmul -> add(constant along the last dim) -> relu: one gemm with C and the relu;
    a bias that varies along another dim stays an add."""
    rng = np.random.default_rng(4)
    for c_shape, folds in (((5,), True), ((1, 1, 5), True), ((3, 1), False), ((3, 5), False)):
        g = Graph()
        g.add_tensor("x", (2, 3, 4), np.float32)
        g.inputs = ["x"]
        b = g.add_const(rng.standard_normal((4, 5)).astype(np.float32), "b")
        c = g.add_const(rng.standard_normal(c_shape).astype(np.float32), "c")
        _node(g, "matmul", ["x", b], "m")
        _node(g, "add", ["m", c], "y", dict(act="relu"))
        g.outputs = ["y"]
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        before = _run(g, {"x": x})[0]
        assert matmul_to_gemm(g)
        ops_ = [n.op for n in g.nodes]
        assert ops_ == (["reshape", "gemm", "reshape"] if folds else ["reshape", "gemm", "reshape", "add"]), c_shape
        if folds:
            assert len(g.nodes[1].inputs) == 3 and g.nodes[1].attrs.get("act") == "relu"
        np.testing.assert_allclose(_run(g, {"x": x})[0], before, rtol=1e-5, atol=1e-6)
        assert (before == 0).any() and (before > 0).any()


def test_tiling_transposed_conv_becomes_conv_and_shuffle():
    """conv_transpose2d with kernel = strides (2 and 3), bias and relu: a 1x1 conv2d and a
    CRD depth_to_space with the same float outputs; padded or overlapping windows stay."""
    from edgert.converter.quant.prepare import tiling_transposed_to_conv

    rng = np.random.default_rng(5)
    for k, s, pads, folds in ((2, 2, (0, 0, 0, 0), True), (3, 3, (0, 0, 0, 0), True),
                              (2, 2, (1, 0, 1, 0), False), (3, 2, (0, 0, 0, 0), False)):
        g = Graph()
        g.add_tensor("x", (1, 5, 4, 6), np.float32)
        g.inputs = ["x"]
        w = g.add_const(rng.standard_normal((5, 3, k, k)).astype(np.float32), "w")
        b = g.add_const(rng.standard_normal(3).astype(np.float32), "b")
        _node(g, "conv_transpose2d", ["x", w, b], "y", dict(kernel=[k, k], strides=[s, s], pads=list(pads),
                                                             act="relu"))
        g.outputs = ["y"]
        x = rng.standard_normal((1, 5, 4, 6)).astype(np.float32)
        before = _run(g, {"x": x})[0]
        assert tiling_transposed_to_conv(g) == folds
        assert [n.op for n in g.nodes] == (["conv2d", "depth_to_space"] if folds else ["conv_transpose2d"])
        np.testing.assert_allclose(_run(g, {"x": x})[0], before, rtol=1e-5, atol=1e-5)
        assert (before == 0).any() and (before > 0).any()


def test_rewrite_decisions():
    """conv(relu) -> max_pool -> resize -> concat(with the conv) -> sigmoid -> softmax:
    everything int8 up to the softmax (a graph output: it stays float), a dequantize
    before it."""
    rng = np.random.default_rng(2)
    g = Graph()
    g.add_tensor("x", (1, 3, 8, 8), np.float32)
    g.inputs = ["x"]
    w = g.add_const((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    _node(g, "conv2d", ["x", w], "c", dict(kernel=[3, 3], pads=[1, 1, 1, 1], act="relu"))
    _node(g, "max_pool2d", ["c"], "p", dict(kernel=[2, 2], strides=[2, 2]))
    _node(g, "resize", ["p"], "r", dict(mode="nearest", coord="asymmetric", nearest_mode="floor",
                                        scales=[1.0, 1.0, 2.0, 2.0], shape=[1, 4, 8, 8]))
    _node(g, "concat", ["r", "c"], "k", dict(axis=1))
    _node(g, "sigmoid", ["k"], "s")
    _node(g, "softmax", ["s"], "e", dict(axis=1))
    g.outputs = ["e"]
    feeds = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(8)]
    ranges = observe(g, batches(g, {"x": np.stack([f["x"] for f in feeds])}), "minmax", False)
    res = quantize_int8(g, qparams_from_ranges(ranges))
    q = res.graph
    assert [n.op for n in q.nodes] == ["quantize_linear", "conv2d", "max_pool2d", "resize", "concat", "sigmoid",
                                       "dequantize_linear", "softmax"]
    assert q.tensors["c"].dtype == np.int8 and q.tensors["e"].dtype == np.float32
    assert q.tensors["p"].quant.scale[0] == q.tensors["c"].quant.scale[0]  # max pool keeps the quantization
    want = _run(g, feeds[0])[0]
    got = _run(q, feeds[0])[0]
    assert np.abs(got - want).max() < 0.05
    kept = quantize_int8(g, qparams_from_ranges(ranges), keep_fp32=["c"]).graph
    assert [n.op for n in kept.nodes][:2] == ["conv2d", "max_pool2d"]
    assert kept.tensors[kept.nodes[1].inputs[0]].dtype == np.float32  # nothing int8 upstream: pool stays float


def test_fold_scale_shift_into_table():
    """conv -> hard_swish -> mul(scalar) -> add(scalar) -> padded conv (PP-LCNetV3's
    scale and shift, which cannot fold into a padded conv): on int8 the mul and add fold
    into the hard_swish table, with the same output bytes."""
    import copy

    from edgert.converter.quant.tables import fold_into_tables

    rng = np.random.default_rng(3)
    g = Graph()
    g.add_tensor("x", (1, 3, 8, 8), np.float32)
    g.inputs = ["x"]
    w = g.add_const((rng.standard_normal((4, 3, 1, 1)) * 0.5).astype(np.float32), "w")
    w2 = g.add_const((rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32), "w2")
    s = g.add_const(np.array([0.8], np.float32), "s")
    t = g.add_const(np.array([0.3], np.float32), "t")
    _node(g, "conv2d", ["x", w], "c", dict(kernel=[1, 1]))
    _node(g, "hard_swish", ["c"], "h")
    _node(g, "mul", [s, "h"], "m")
    _node(g, "add", ["m", t], "a")
    _node(g, "conv2d", ["a", w2], "y", dict(kernel=[3, 3], pads=[1, 1, 1, 1], group=4))
    g.outputs = ["y"]
    feeds = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(8)]
    ranges = observe(g, batches(g, {"x": np.stack([f["x"] for f in feeds])}), "minmax", False)
    q = quantize_int8(g, qparams_from_ranges(ranges)).graph
    assert [n.op for n in q.nodes] == ["quantize_linear", "conv2d", "hard_swish", "mul", "add", "conv2d",
                                       "dequantize_linear"]
    folded = copy.deepcopy(q)
    assert fold_into_tables(folded) == 2
    assert [n.op for n in folded.nodes] == ["quantize_linear", "conv2d", "hard_swish", "conv2d",
                                            "dequantize_linear"]
    for f in feeds:
        np.testing.assert_array_equal(_run(folded, f)[0], _run(q, f)[0])


def test_gemm_rows_as_conv():
    """An int8 gemm of at least gemm_rows.ROWS rows of A becomes transpose -> 1x1 conv2d ->
    transpose, with the same output bytes at 1 and 2 threads; fewer rows keep the gemm."""
    import copy

    from edgert.converter.quant import gemm_rows

    for m, k, n in ((gemm_rows.ROWS - 1, 7, 33), (gemm_rows.ROWS, 7, 33), (40, 120, 70)):
        rng = np.random.default_rng(m * 100 + k)
        g = Graph()
        g.add_tensor("x", (m, k), np.float32)
        g.inputs = ["x"]
        b = g.add_const((rng.standard_normal((k, n)) * 0.3).astype(np.float32), "b")
        c = g.add_const(rng.standard_normal(n).astype(np.float32), "c")
        _node(g, "gemm", ["x", b, c], "y", dict(act="relu"))
        g.outputs = ["y"]
        feeds = [{"x": rng.standard_normal((m, k)).astype(np.float32)} for _ in range(4)]
        ranges = observe(g, batches(g, {"x": np.stack([f["x"] for f in feeds])}), "minmax", False)
        q = quantize_int8(g, qparams_from_ranges(ranges)).graph
        assert [n.op for n in q.nodes] == ["quantize_linear", "gemm", "dequantize_linear"]
        lowered = copy.deepcopy(q)
        if m < gemm_rows.ROWS:
            assert gemm_rows.run(lowered) == 0
            continue
        assert gemm_rows.run(lowered) == 1
        assert [n.op for n in lowered.nodes] == ["quantize_linear", "transpose", "reshape", "conv2d", "reshape",
                                                 "transpose", "dequantize_linear"]
        for threads in (1, 2):
            for f in feeds:
                want = Session(serialize(q), threads=threads).run(None, f)[0]
                got = Session(serialize(lowered), threads=threads).run(None, f)[0]
                np.testing.assert_array_equal(got, want)
                assert len(np.unique(got)) > 8  # not saturated
