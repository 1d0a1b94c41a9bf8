"""Each graph pass on a tiny graph: the ops before and after, and the same numbers."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter import passes
from edgert.converter.pipeline import build_graph, serialize
from edgert.converter.passes import (dce, fold_batchnorm, fold_constants, fold_conv_input, fuse_activation,
                                     fuse_gelu, fuse_hard_swish, fuse_layernorm, fuse_silu, remove_identity)
from tests.helpers import assert_close, make_model, run_ort

RNG = np.random.default_rng(0)


def graph_of(model, **kw):
    return build_graph(model, optimize=False, **kw)


def run_graph(g, feeds):
    sess = edgert.Session(serialize(g))
    return sess.run(None, {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}})


def apply(pass_module, model, feeds, rtol=1e-5, atol=1e-6):
    """Runs one pass (until it stops changing the graph); checks numbers against
    onnxruntime before and after; returns (ops before, ops after)."""
    g = graph_of(model)
    before = [n.op for n in g.nodes]
    want = run_ort(model, feeds)
    for got, w in zip(run_graph(g, feeds), want):
        assert_close(got, w, rtol, atol)
    while pass_module.run(g):
        pass
    g.toposort()
    dce.run(g)
    after = [n.op for n in g.nodes]
    for got, w in zip(run_graph(g, feeds), want):
        assert_close(got, w, rtol, atol)
    return before, after


def conv_model(extra_nodes, out, bias=True, c=3, m=4):
    w = RNG.standard_normal((m, c, 3, 3)).astype(np.float32)
    init = {"w": w}
    ins = ["x", "w"]
    if bias:
        init["b"] = RNG.standard_normal(m).astype(np.float32)
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], pads=[1, 1, 1, 1])] + extra_nodes
    x = RNG.standard_normal((1, c, 5, 5)).astype(np.float32)
    return nodes, init, x


def test_fold_batchnorm():
    bn = {"s": RNG.uniform(0.5, 2, 4), "bb": RNG.standard_normal(4), "mu": RNG.standard_normal(4) * 100,
          "var": RNG.uniform(1e4, 1e6, 4)}
    nodes, init, x = conv_model([helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["y"])], "y")
    init.update({k: v.astype(np.float32) for k, v in bn.items()})
    m = make_model(nodes, {"x": x}, ["y"], init)
    before, after = apply(fold_batchnorm, m, {"x": x}, rtol=1e-4, atol=1e-5)
    assert before == ["conv2d", "batch_norm"] and after == ["conv2d"]


@pytest.mark.parametrize("group", [1, 2])
def test_fold_add_batchnorm_into_conv_transpose(group):
    """conv_transpose2d (W [C, M/group, kH, kW]) -> add(const) -> batch_norm: one
    conv_transpose2d, each output channel's weights scaled in its group's rows."""
    c, m = 4, 6
    init = {"w": RNG.standard_normal((c, m // group, 2, 2)).astype(np.float32),
            "q": RNG.standard_normal((1, m, 1, 1)).astype(np.float32),
            "s": RNG.uniform(0.5, 2, m).astype(np.float32), "bb": RNG.standard_normal(m).astype(np.float32),
            "mu": RNG.standard_normal(m).astype(np.float32), "var": RNG.uniform(0.5, 2, m).astype(np.float32)}
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], group=group),
             helper.make_node("Add", ["c", "q"], ["d"]),
             helper.make_node("BatchNormalization", ["d", "s", "bb", "mu", "var"], ["y"])]
    x = RNG.standard_normal((1, c, 5, 5)).astype(np.float32)
    m_ = make_model(nodes, {"x": x}, ["y"], init)
    before, after = apply(fold_batchnorm, m_, {"x": x}, rtol=1e-4, atol=1e-5)
    assert before == ["conv_transpose2d", "add", "batch_norm"] and after == ["conv_transpose2d"]


def test_fold_per_channel_mul_add_into_conv():
    nodes, init, x = conv_model([helper.make_node("Mul", ["c", "k"], ["d"]), helper.make_node("Add", ["q", "d"], ["y"])],
                                "y", bias=False)
    init["k"] = RNG.standard_normal((1, 4, 1, 1)).astype(np.float32)
    init["q"] = RNG.standard_normal((4, 1, 1)).astype(np.float32)
    m = make_model(nodes, {"x": x}, ["y"], init)
    before, after = apply(fold_batchnorm, m, {"x": x})
    assert before == ["conv2d", "mul", "add"] and after == ["conv2d"]


def test_fold_add_with_fused_activation_into_conv():
    """conv -> add(const) that already carries an activation: the add folds into the
    bias and the activation moves onto the conv."""
    nodes, init, x = conv_model([helper.make_node("Add", ["c", "k"], ["d"]), helper.make_node("HardSwish", ["d"], ["y"])],
                                "y")
    init["k"] = np.array([0.75], np.float32)  # a scalar, as PP-LCNetV3's learnable affine
    m = make_model(nodes, {"x": x}, ["y"], init)
    g = graph_of(m)
    assert fuse_activation.run(g) and [n.op for n in g.nodes] == ["conv2d", "add"]
    assert fold_batchnorm.run(g)
    assert [n.op for n in g.nodes] == ["conv2d"] and g.nodes[0].attrs["act"] == 4
    assert_close(run_graph(g, {"x": x})[0], run_ort(m, {"x": x})[0], 1e-5, 1e-6)


@pytest.mark.parametrize("group,kernel", [(1, 1), (1, 3), (2, 1), (4, 3)])
def test_fold_affine_into_following_conv(group, kernel):
    """relu -> mul(const) -> add(const) -> conv without padding: both fold into the conv
    (per input channel, grouped and depthwise included)."""
    c = m = 4
    w = RNG.standard_normal((m, c // group, kernel, kernel)).astype(np.float32)
    init = {"w": w, "b": RNG.standard_normal(m).astype(np.float32),
            "s": RNG.uniform(0.5, 2, (1, c, 1, 1)).astype(np.float32),
            "t": RNG.standard_normal((c, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "s"], ["u"]),
             helper.make_node("Add", ["t", "u"], ["v"]),
             helper.make_node("Conv", ["v", "w", "b"], ["y"], group=group)]
    x = RNG.standard_normal((2, c, 6, 5)).astype(np.float32)
    before, after = apply(fold_conv_input, make_model(nodes, {"x": x}, ["y"], init), {"x": x}, rtol=1e-5, atol=1e-5)
    assert before == ["relu", "mul", "add", "conv2d"] and after == ["relu", "conv2d"]


def test_no_fold_into_padded_conv():
    """With padding the border taps would read unshifted zeros: no fold."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "t"], ["v"]),
             helper.make_node("Conv", ["v", "w"], ["y"], pads=[1, 1, 1, 1])]
    init = {"w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "t": RNG.standard_normal((1, 3, 1, 1)).astype(np.float32)}
    x = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    before, after = apply(fold_conv_input, make_model(nodes, {"x": x}, ["y"], init), {"x": x})
    assert after == before


def test_no_fold_when_broadcast_changes_shape():
    nodes, init, x = conv_model([helper.make_node("Add", ["c", "k"], ["y"])], "y")
    init["k"] = RNG.standard_normal((2, 4, 1, 1)).astype(np.float32)  # broadcasts the batch up
    m = make_model(nodes, {"x": x}, ["y"], init)
    before, after = apply(fold_batchnorm, m, {"x": x})
    assert after == before


@pytest.mark.parametrize("act,attrs,kind", [
    ("Relu", {}, 1), ("Sigmoid", {}, 5), ("Tanh", {}, 8), ("HardSwish", {}, 4),
    ("LeakyRelu", {"alpha": 0.2}, 7), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 3),
])
def test_fuse_activation_into_conv(act, attrs, kind):
    nodes, init, x = conv_model([helper.make_node(act, ["c"], ["y"], **attrs)], "y")
    m = make_model(nodes, {"x": x}, ["y"], init)
    before, after = apply(fuse_activation, m, {"x": x})
    assert len(before) == 2 and after == ["conv2d"]
    g = graph_of(m)
    fuse_activation.run(g)
    assert g.nodes[0].attrs["act"] == kind


def test_fuse_clip_into_add_but_not_when_shared():
    x = RNG.standard_normal((2, 8)).astype(np.float32) * 4
    lo, hi = np.array(-1, np.float32), np.array(2, np.float32)
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Clip", ["s", "lo", "hi"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], {"lo": lo, "hi": hi})
    assert apply(fuse_activation, m, {"x": x})[1] == ["add"]
    # s is also a graph output: it must stay unfused.
    m2 = make_model(nodes, {"x": x}, ["y", "s"], {"lo": lo, "hi": hi})
    assert apply(fuse_activation, m2, {"x": x})[1] == ["add", "clip"]


def test_fuse_hard_swish_decomposed():
    x = (RNG.standard_normal((1, 4, 3, 3)) * 5).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]),
             helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["x", "c"], ["m"]),
             helper.make_node("Div", ["m", "six"], ["y"])]
    consts = {"three": np.array(3, np.float32), "zero": np.array(0, np.float32), "six": np.array(6, np.float32)}
    m = make_model(nodes, {"x": x}, ["y"], consts)
    before, after = apply(fuse_hard_swish, m, {"x": x})
    assert before == ["add", "clip", "mul", "div"] and after == ["hard_swish"]


def test_fuse_silu():
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    m = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"])],
                   {"x": x}, ["y"])
    assert apply(fuse_silu, m, {"x": x}) == (["sigmoid", "mul"], ["silu"])


@pytest.mark.parametrize("half_first", [False, True])
def test_fuse_gelu(half_first):
    x = RNG.standard_normal((2, 5, 6)).astype(np.float32)
    c = {"r2": np.array(math.sqrt(2), np.float32), "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if half_first:
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], c)
    before, after = apply(fuse_gelu, m, {"x": x})
    assert len(before) == 5 and after == ["gelu"]


def test_fuse_layernorm():
    x = RNG.standard_normal((2, 3, 16)).astype(np.float32) * 3 + 1
    c = {"two": np.array(2, np.float32), "eps": np.array(1e-5, np.float32),
         "g": RNG.standard_normal(16).astype(np.float32), "b": RNG.standard_normal(16).astype(np.float32)}
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
             helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], c, opset=13)
    before, after = apply(fuse_layernorm, m, {"x": x}, rtol=1e-4, atol=1e-5)
    assert len(before) >= 8 and after == ["layer_norm"]


def test_remove_identity_and_reshape_chains():
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Reshape", ["i", "s1"], ["r1"]),
             helper.make_node("Reshape", ["r1", "s2"], ["r2"]),
             helper.make_node("Relu", ["r2"], ["y"])]
    c = {"s1": np.array([3, 4], np.int64), "s2": np.array([12], np.int64)}
    m = make_model(nodes, {"x": x}, ["y"], c)
    before, after = apply(remove_identity, m, {"x": x})
    assert before == ["reshape", "reshape", "relu"] and after == ["reshape", "relu"]


def test_fold_constants_and_dce():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["unused"])],
                   {"x": x}, ["y"])
    g = graph_of(m)
    assert [n.op for n in g.nodes] == ["relu"]  # build_graph already ran dce
    # A node with constant inputs is computed away by fold_constants.
    k = g.add_const(np.array([-1.0, 2.0], np.float32), "k")
    g.add_tensor("kk", (2,), np.float32)
    g.add_node("relu", [k], ["kk"])
    g.outputs.append("kk")
    assert fold_constants.run(g)
    np.testing.assert_array_equal(g.tensors["kk"].data, [0.0, 2.0])
    assert [n.op for n in g.nodes] == ["relu"]


def test_pipeline_lists_every_pass():
    names = {p.__name__.rsplit(".", 1)[-1] for p in passes.PIPELINE}
    assert names == {"fold_constants", "dce", "remove_identity", "fuse_hard_swish", "fuse_silu", "fuse_gelu",
                     "fuse_layernorm", "fold_batchnorm", "fold_conv_input", "fuse_activation", "share_constants",
                     "batch_gemms"}


def test_batch_gemms_stacks_independent_rows_only():
    """Gemms on one constant weight: the two on independent rows become one over both
    (then split), the one on a row computed from the first's output stays; the outputs
    match onnxruntime."""
    import edgert
    from edgert.runtime import reader as fmt

    rng = np.random.default_rng(3)
    w = (rng.standard_normal((8, 6)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(8) * 0.1).astype(np.float32)
    feeds = {"x1": rng.standard_normal((1, 6)).astype(np.float32),
             "x2": rng.standard_normal((2, 6)).astype(np.float32)}
    nodes = [helper.make_node("Gemm", ["x1", "W", "B"], ["y1"], transB=1),
             helper.make_node("Gemm", ["x2", "W", "B"], ["y2"], transB=1),
             helper.make_node("Slice", ["y1", "st", "en", "ax"], ["h"]),  # [1, 6] from y1
             helper.make_node("Gemm", ["h", "W", "B"], ["y3"], transB=1)]
    inits = {"W": w, "B": b, "st": np.array([0], np.int64), "en": np.array([6], np.int64),
             "ax": np.array([1], np.int64)}
    model = make_model(nodes, feeds, ["y1", "y2", "y3"], inits)
    data = edgert.convert(model)
    ops = [n["op"] for n in fmt.read(data)["nodes"]]
    assert ops.count("gemm") == 2 and ops.count("concat") == 1 and ops.count("split") == 1
    want = run_ort(model, feeds)
    for got, exp in zip(edgert.Session(data).run(None, feeds), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)
