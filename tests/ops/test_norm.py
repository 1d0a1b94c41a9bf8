"""batch_norm, instance_norm, layer_norm, group_norm, lrn (and the MeanVarianceNormalization /
LpNormalization lowerings): the numpy reference against onnxruntime, and the C kernels end
to end, plus rejected cases."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.ops import REGISTRY
from tests.helpers import assert_close, check_against_ort, make_model, run_ort
from tests.ops.test_reduce import _graph_reference

RNG = np.random.default_rng(0)


def _f32(*shape, lo=None, hi=None):
    if lo is not None:
        return RNG.uniform(lo, hi, shape).astype(np.float32)
    return RNG.standard_normal(shape).astype(np.float32)


def _check(model, feeds, rtol=1e-4, atol=1e-5):
    want = run_ort(model, feeds)
    for k, (r, w) in enumerate(zip(_graph_reference(model, feeds), want)):
        assert_close(r, w, rtol, atol, what=f"numpy reference, output {k}")
    return check_against_ort(model, feeds, rtol, atol)


def _model(node, runtime, consts, opset):
    return make_model(node, runtime, [o for o in node.output if o], consts, opset=opset)


# ---- batch_norm -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 7), (2, 3, 4, 5), (1, 5, 2, 3, 2)])
@pytest.mark.parametrize("const_stats", [True, False])
def test_batch_norm(shape, const_stats):
    c = shape[1]
    vals = {"x": _f32(*shape) * 2 + 5, "s": _f32(c), "b": _f32(c), "mean": _f32(c) + 5,
            "var": _f32(c, lo=0.5, hi=2.0)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["y"], epsilon=1e-3)
    runtime = {k: v for k, v in vals.items() if k == "x" or not const_stats}
    consts = {k: v for k, v in vals.items() if k not in runtime}
    _check(_model(node, runtime, consts, 15), runtime)


def test_batch_norm_rejected():
    x, v = _f32(2, 3, 4), _f32(3, lo=0.5, hi=1.0)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1)
    m = make_model(node, {"x": x}, ["y"], {"s": v, "b": v, "m": v, "v": v}, opset=15)
    with pytest.raises(edgert.EdgertError, match="training_mode"):
        edgert.convert(m)


# ---- instance_norm ----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 7), (2, 3, 4, 5), (1, 4, 1, 1), (3, 2, 2, 3, 2)])
def test_instance_norm(shape):
    c = shape[1]
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)
    x = _f32(*shape) * 3 + 1
    _check(_model(node, {"x": x}, {"s": _f32(c), "b": _f32(c)}, 17), {"x": x})


# ---- layer_norm -------------------------------------------------------------------------

LN_CASES = [((2, 3, 8), -1), ((2, 3, 4, 5), 1), ((4, 6), 0), ((5,), 0), ((3, 1, 33), 2), ((2, 7, 3), -2)]


@pytest.mark.parametrize("shape,axis", LN_CASES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("stats", [False, True])
def test_layer_norm(shape, axis, bias, stats):
    norm = shape[axis:]
    x = _f32(*shape) * 2 + 3
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    outs = ["y", "mean", "inv"] if stats else ["y"]
    node = helper.make_node("LayerNormalization", ins, outs, axis=axis, epsilon=1e-3)
    consts = {"w": _f32(*norm)}
    if bias:
        consts["b"] = _f32(*norm)
    _check(_model(node, {"x": x}, consts, 17), {"x": x})


def test_layer_norm_runtime_scale_and_partial_outputs():
    x, w, b = _f32(3, 4, 16), _f32(16), _f32(16)
    node = helper.make_node("LayerNormalization", ["x", "w", "b"], ["y", "", "inv"])
    feeds = {"x": x, "w": w, "b": b}
    _check(make_model(node, feeds, ["y", "inv"], opset=17), feeds)


def test_layer_norm_broadcast_const_scale():
    # A constant scale of shape (1, 8) and a scalar bias broadcast to the normalized shape.
    x, w = _f32(2, 4, 8), _f32(1, 8)
    node = helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=-2)
    m = make_model(node, {"x": x}, ["y"], {"w": w, "b": np.array([0.5], np.float32)}, opset=17)
    got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
    xd = x.astype(np.float64)
    mean = xd.mean(axis=(1, 2), keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    assert_close(got, ((xd - mean) / np.sqrt(var + 1e-5) * w + 0.5).astype(np.float32))


def test_layer_norm_large_threads():
    x, w, b = _f32(256, 384), _f32(384), _f32(384)
    node = helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"])
    m = make_model(node, {"x": x}, ["y"], {"w": w, "b": b}, opset=17)
    want = run_ort(m, {"x": x})[0]
    got = edgert.Session(edgert.convert(m), threads=2).run(None, {"x": x})[0]
    assert_close(got, want)


def test_layer_norm_rejected():
    x = _f32(2, 8)
    node = helper.make_node("LayerNormalization", ["x", "w"], ["y"], stash_type=11)
    with pytest.raises(edgert.EdgertError, match="stash_type"):
        edgert.convert(make_model(node, {"x": x}, ["y"], {"w": _f32(8)}, opset=17))
    node = helper.make_node("LayerNormalization", ["x", "w"], ["y"])
    with pytest.raises(edgert.EdgertError, match="scale"):  # runtime scale of the wrong shape
        edgert.convert(make_model(node, {"x": x, "w": _f32(1)}, ["y"], opset=17))


# ---- group_norm -------------------------------------------------------------------------

def _gn_reference(x, s, b, groups, eps, per_group):
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    var = ((xg - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    if per_group:
        s, b = np.repeat(s, c // groups), np.repeat(b, c // groups)
    shp = (1, -1) + (1,) * (x.ndim - 2)
    return (y * s.reshape(shp) + b.reshape(shp)).astype(np.float32)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 2), 2), ((1, 8, 3, 3), 8), ((2, 4, 3), 1)])
@pytest.mark.parametrize("opset", [18, 21])
def test_group_norm(shape, groups, opset):
    c = shape[1]
    n_sb = groups if opset < 21 else c
    x, s, b = _f32(*shape) * 2 + 1, _f32(n_sb), _f32(n_sb)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-3)
    m = _model(node, {"x": x}, {"s": s, "b": b}, opset)
    want = _gn_reference(x, s, b, groups, 1e-3, opset < 21)
    assert_close(_graph_reference(m, {"x": x})[0], want, what="numpy reference")
    got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
    assert_close(got, want)
    if opset >= 21:  # onnxruntime implements the opset 21 form
        try:
            ort = run_ort(m, {"x": x})[0]
        except Exception as e:  # noqa: BLE001
            pytest.skip(f"onnxruntime cannot run GroupNormalization-{opset}: {e}")
        assert_close(got, ort)


def test_group_norm_rejected():
    x = _f32(2, 6, 3)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4)
    with pytest.raises(edgert.EdgertError, match="num_groups"):
        edgert.convert(_model(node, {"x": x}, {"s": _f32(6), "b": _f32(6)}, 21))


# ---- lrn --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 7, 3, 4), (1, 3, 5, 5), (2, 5, 6)])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_lrn(shape, size):
    x = _f32(*shape)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.02, beta=0.75, bias=1.5)
    m = _model(node, {"x": x}, {}, 13)
    if len(shape) == 4 and size % 2:
        _check(m, {"x": x})
        return
    # onnxruntime's LRN takes odd sizes and 4-D inputs only: compare with the reference,
    # which follows the ONNX definition of the window (floor / ceil of (size - 1) / 2).
    got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
    assert_close(got, _graph_reference(m, {"x": x})[0])


# ---- MeanVarianceNormalization, LpNormalization (lowered to other ops) -------------------

def _needs(*ops):
    missing = [o for o in ops if o not in REGISTRY]
    assert not missing, f"edgert ops {missing} are not defined"


@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3], [2, 3]])
def test_mvn(axes):
    _needs("sub", "mul", "add", "div", "sqrt")
    x = _f32(2, 3, 4, 5) * 2 + 1
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs)
    _check(_model(node, {"x": x}, {}, 13), {"x": x}, atol=1e-4)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_lp_norm(p, axis):
    _needs("max", "div")
    x = _f32(3, 4, 5)
    x[1, 2, :] = 0  # a zero norm along the last axis gives zeros
    x[:, 1, 3] = 0
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=axis, p=p)
    m = _model(node, {"x": x}, {}, 13)
    got = edgert.Session(edgert.convert(m)).run(None, {"x": x})[0]
    norm = np.sum(np.abs(x.astype(np.float64)) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    with np.errstate(invalid="ignore"):
        want = np.where(norm == 0, 0, x / norm).astype(np.float32)
    assert_close(got, want)


def test_lp_norm_rejected():
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
    with pytest.raises(edgert.EdgertError, match="p=3"):
        edgert.convert(_model(node, {"x": _f32(2, 3)}, {}, 13))


# ---- prepare rejects bad parameters ------------------------------------------------------

def test_prepare_rejects_bad_params():
    from tests.ops.test_reduce import mutate_params

    x = _f32(2, 4, 3, 3)
    c = {"s": _f32(4), "b": _f32(4), "m": _f32(4), "v": _f32(4, lo=0.5, hi=1.0)}
    nodes = [
        (helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]), c, 15),
        (helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]), c, 17),
        (helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2), c, 21),
        (helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4), c, 18),
        (helper.make_node("LRN", ["x"], ["y"], size=3), {}, 13),
        (helper.make_node("LayerNormalization", ["x", "w", "bb"], ["y", "mean", "inv"], axis=2),
         {"w": _f32(3, 3), "bb": _f32(3, 3)}, 17),
    ]
    for node, consts, opset in nodes:
        used = {k: v for k, v in consts.items() if k in node.input}
        mutate_params(_model(node, {"x": x}, used, opset), {"x": x})


def test_out_of_place():
    # Single-node models run batch_norm / layer_norm in place; here the input is used
    # again afterwards, so the outputs get their own buffers.
    x = _f32(2, 3, 5, 7)
    c = {"s": _f32(3), "b": _f32(3), "m": _f32(3), "v": _f32(3, lo=0.5, hi=1.0), "w": _f32(7), "bb": _f32(7)}
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y1"]),
             helper.make_node("LayerNormalization", ["x", "w", "bb"], ["y2"]),
             helper.make_node("Neg", ["x"], ["z"])]
    check_against_ort(make_model(nodes, {"x": x}, ["y1", "y2", "z"], c, opset=17), {"x": x})
