"""Data-movement ops (reshape family, transpose, concat, split, slice, expand, tile, pad,
depth_to_space, space_to_depth): the numpy reference against onnxruntime, and the C
kernels end to end (odd shapes, every element size, one and two threads), plus
rejected cases. Shape-like inputs are initializers (constants after folding)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import edgert
from edgert.converter.frontend.onnx_import import import_onnx
from edgert.converter.ops import get as get_op
from tests.helpers import assert_close, make_model, run_ort

RNG = np.random.default_rng(0)
I64 = np.int64


def data(shape, dtype=np.float32):
    """Distinct-ish values of `dtype` (so misplaced elements show)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return (np.arange(n) % min(int(info.max), 1000) + (3 if dtype.kind == "u" else -7)).astype(dtype).reshape(shape)
    return RNG.standard_normal(shape).astype(dtype)


def graph_reference(model, feeds, input_values=None):
    """The edgert graph's numpy meaning (lowering + each op's reference), checking every
    intermediate against the shapes and dtypes `infer` declared."""
    g = import_onnx(model, None, input_values)
    env = {k: np.asarray(v) for k, v in feeds.items()}
    for n in g.nodes:
        ins = [None if not i else env[i] if i in env else g.tensors[i].data for i in n.inputs]
        for name, val in zip(n.outputs, get_op(n.op).reference(n, ins)):
            t = g.tensors[name]
            assert tuple(val.shape) == t.shape and val.dtype == t.dtype, (n.op, val.shape, t.shape, val.dtype, t.dtype)
            env[name] = val
    return [env[o] for o in g.outputs]


def run_edgert(model, feeds, threads=1, input_values=None):
    sess = edgert.Session(edgert.convert(model, None, input_values=input_values), threads=threads)
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


def check(model, feeds, rtol=1e-5, atol=1e-6, expected=None, threads=(1, 2)):
    """Reference == onnxruntime (or `expected`), and edgert == reference."""
    want = run_ort(model, feeds) if expected is None else expected
    ref = graph_reference(model, feeds)
    assert len(ref) == len(want)
    for k, (r, w) in enumerate(zip(ref, want)):
        assert_close(r, w, rtol, atol, what=f"numpy reference, output {k}")
    for t in threads:
        got = run_edgert(model, feeds, threads=t)
        for k, (g, r) in enumerate(zip(got, ref)):
            assert_close(g, r, rtol, atol, what=f"edgert ({t} threads), output {k}")
    return ref


def one_node(op, x, inits=None, opset=17, outputs=("y",), extra_inputs=(), **attrs):
    """A model of one node op(x, *inits...) -> outputs; inits are initializers in order
    ("" skips an optional input)."""
    inits = inits or {}
    names = ["x", *list(inits)]
    node = helper.make_node(op, [*names, *extra_inputs], list(outputs), **attrs)
    return make_model(node, {"x": x}, list(outputs), {k: v for k, v in inits.items() if k}, opset=opset)


def rejects(model, match=None):
    with pytest.raises(edgert.EdgertError, match=match):
        edgert.convert(model)


ALL_DTYPES = [np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64, np.bool_, np.float16]


# ---- reshape family ----------------------------------------------------------------

@pytest.mark.parametrize("shape,target", [
    ((2, 3, 4), [4, -1]), ((2, 3, 4), [0, 0, -1]), ((2, 3, 4), [24]), ((5,), [1, 5, 1]),
    ((2, 3, 4), [-1, 2, 2, 3]), ((1, 7), [7, 1]),
])
def test_reshape(shape, target):
    x = data(shape)
    check(one_node("Reshape", x, {"s": np.array(target, I64)}), {"x": x})


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reshape_dtypes(dtype):
    x = data((3, 4, 5), dtype)
    check(one_node("Reshape", x, {"s": np.array([5, 12], I64)}), {"x": x}, threads=(1,))


def test_reshape_allowzero():
    x = data((3, 4, 5))
    check(one_node("Reshape", x, {"s": np.array([5, 0, 3], I64)}, opset=14, allowzero=0), {"x": x}, threads=(1,))
    # allowzero=1: 0 is a literal zero-size dim, which cannot hold 60 elements.
    rejects(one_node("Reshape", x, {"s": np.array([5, 0, 3], I64)}, opset=14, allowzero=1))


def test_reshape_chain_in_place():
    # Reshape -> Transpose -> Reshape: the planner may reuse buffers; results must not change.
    x = data((2, 6, 5))
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Transpose", ["a"], ["b"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["b", "s2"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], {"s1": np.array([6, 2, 5], I64), "s2": np.array([-1], I64)})
    check(m, {"x": x})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    x = data((2, 3, 4, 5))
    check(one_node("Flatten", x, axis=axis), {"x": x}, threads=(1,))


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    x = data((1, 3, 1, 5))
    if opset >= 13:
        sq = one_node("Squeeze", x, {"a": np.array([0, -2], I64)}, opset=opset)
        sq_all = one_node("Squeeze", x, opset=opset)
        un = one_node("Unsqueeze", x, {"a": np.array([-1, 0, 3], I64)}, opset=opset)
    else:
        sq = one_node("Squeeze", x, opset=opset, axes=[0, -2])
        sq_all = one_node("Squeeze", x, opset=opset)
        un = one_node("Unsqueeze", x, opset=opset, axes=[-1, 0, 3])
    for m in (sq, sq_all, un):
        check(m, {"x": x}, threads=(1,))


def test_reshape_rejects_runtime_shape():
    x = data((2, 3))
    m = make_model(helper.make_node("Reshape", ["x", "s"], ["y"]), {"x": x, "s": np.array([3, 2], I64)}, ["y"])
    rejects(m, "constant")


def test_squeeze_rejects_non_unit_dim():
    x = data((2, 3))
    rejects(one_node("Squeeze", x, {"a": np.array([0], I64)}, opset=13))


# ---- transpose ----------------------------------------------------------------------

@pytest.mark.parametrize("shape,perm", [
    ((5, 7), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [0, 2, 1]), ((2, 3, 4, 5), [0, 2, 3, 1]),
    ((2, 3, 4, 5), [0, 3, 1, 2]), ((2, 3, 4, 5), [3, 2, 1, 0]), ((1, 3, 1, 5), [2, 3, 0, 1]),
    ((2, 1, 3, 1, 2, 3), [5, 0, 3, 1, 4, 2]), ((3, 4, 5), [0, 1, 2]),
])
def test_transpose(shape, perm):
    x = data(shape)
    check(one_node("Transpose", x, perm=perm), {"x": x})


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_transpose_dtypes(dtype):
    x = data((3, 5, 7), dtype)
    check(one_node("Transpose", x, perm=[2, 0, 1]), {"x": x}, threads=(1,))
    x = data((2, 37, 70), dtype)  # tiled path: full 4x4 (bytes: 8x8) blocks, partial tiles and ragged edges
    check(one_node("Transpose", x, perm=[0, 2, 1]), {"x": x}, threads=(1,))
    x = data((131, 75), dtype)  # two tiles of output rows, the second of 11
    check(one_node("Transpose", x, perm=[1, 0]), {"x": x}, threads=(1, 2))


@pytest.mark.parametrize("shape,perm", [((130, 257), [1, 0]), ((2, 40, 33, 33), [0, 2, 3, 1]),
                                        ((2, 33, 33, 40), [0, 3, 1, 2]), ((9, 70, 40), [1, 2, 0])])
def test_transpose_large_threads(shape, perm):
    x = data(shape)  # > 64 KiB: parallel and tiled paths
    check(one_node("Transpose", x, perm=perm), {"x": x})


def test_transpose_default_perm():
    x = data((2, 3, 4))
    check(one_node("Transpose", x), {"x": x}, threads=(1,))


# ---- concat / split -------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float16, np.int64])
def test_concat(axis, dtype):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    xs = [data(s, dtype) for s in shapes]
    sizes = [1, 3, 2]
    for k in range(3):
        s = list(shapes[k])
        s[axis] = sizes[k]
        xs[k] = data(tuple(s), dtype)
    node = helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=axis)
    m = make_model(node, {"a": xs[0], "b": xs[1]}, ["y"], {"c": xs[2]})  # one constant input
    check(m, {"a": xs[0], "b": xs[1]}, threads=(1,))


def test_concat_large_threads():
    a, b = data((6, 50, 70)), data((6, 30, 70))
    m = make_model(helper.make_node("Concat", ["a", "b"], ["y"], axis=1), {"a": a, "b": b}, ["y"])
    check(m, {"a": a, "b": b})
    # batch 1 along the channels: one output row, cut into 64 KB pieces that start and end
    # inside the inputs' runs (one input of zero channels among them)
    xs = {k: data(s) for k, s in (("a", (1, 7, 61, 67)), ("b", (1, 0, 61, 67)), ("c", (1, 13, 61, 67)),
                                  ("d", (1, 1, 61, 67)))}
    m = make_model(helper.make_node("Concat", list(xs), ["y"], axis=1), xs, ["y"])
    check(m, xs)


@pytest.mark.parametrize("opset,kw,inits,n", [
    (11, {"axis": 1, "split": [1, 4, 2]}, {}, 3),
    (13, {"axis": 1}, {"sp": np.array([2, 0, 5], I64)}, 3),
    (13, {"axis": -1}, {}, 3),
    (18, {"axis": 1, "num_outputs": 3}, {}, 3),
    (18, {"axis": 2, "num_outputs": 2}, {}, 2),
])
def test_split(opset, kw, inits, n):
    x = data((2, 7, 9))
    outs = [f"y{k}" for k in range(n)]
    check(one_node("Split", x, inits, opset=opset, outputs=outs, **kw), {"x": x})


def test_split_rejects_uneven_default():
    rejects(one_node("Split", data((2, 7)), opset=13, outputs=("a", "b"), axis=1))


# ---- slice --------------------------------------------------------------------------

BIG = np.iinfo(np.int64).max


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [3], [0], [1]),
    ([0, 1], [2, -1], [0, 2], [1, 2]),
    ([-1], [-BIG], [1], [-1]),
    ([10], [BIG], [2], [1]),            # start beyond the end: empty
    ([-100, 2], [100, 0], [1, 2], [3, -1]),
    ([5, 6], [0, 1], [-1, -2], [-2, -3]),
    ([0], [-1], [3], [1]),
    ([1, 0, 0, 2], [2, 4, 5, 6], [0, 1, 2, 3], [1, 1, 1, 1]),
])
def test_slice(starts, ends, axes, steps):
    x = data((3, 4, 7, 6))
    inits = {"st": np.array(starts, I64), "en": np.array(ends, I64), "ax": np.array(axes, I64),
             "sp": np.array(steps, I64)}
    check(one_node("Slice", x, inits, opset=13), {"x": x})


def test_slice_opset9_attrs_and_dtypes():
    for dt in (np.uint8, np.int16, np.float16, np.int64, np.bool_):
        x = data((4, 5), dt)
        check(one_node("Slice", x, opset=9, starts=[1, -3], ends=[3, 100], axes=[0, 1]), {"x": x}, threads=(1,))


def test_slice_large_negative_step_threads():
    x = data((64, 40, 30))
    inits = {"st": np.array([-1, 35], I64), "en": np.array([-BIG, 2], I64), "ax": np.array([0, 1], I64),
             "sp": np.array([-1, -2], I64)}
    check(one_node("Slice", x, inits, opset=13), {"x": x})


def test_slice_rejects_runtime_starts():
    x = data((4, 5))
    node = helper.make_node("Slice", ["x", "st", "en"], ["y"])
    m = make_model(node, {"x": x, "st": np.array([1], I64)}, ["y"], {"en": np.array([3], I64)}, opset=13)
    rejects(m, "constant")


# ---- expand / tile --------------------------------------------------------------------

@pytest.mark.parametrize("shape,target", [((3, 1), [2, 3, 4]), ((1,), [5, 2]), ((2, 1, 4), [1, 3, 1]),
                                          ((4,), [4]), ((1, 1, 1), [2, 1, 3]), ((3, 1, 5), [3, 6, 5])])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int64])
def test_expand(shape, target, dtype):
    x = data(shape, dtype)
    check(one_node("Expand", x, {"s": np.array(target, I64)}, opset=13), {"x": x}, threads=(1,))


def test_expand_large_threads():
    x = data((1, 40, 1, 33))
    check(one_node("Expand", x, {"s": np.array([3, 40, 20, 33], I64)}, opset=13), {"x": x})


def test_expand_rejects_incompatible():
    rejects(one_node("Expand", data((3, 2)), {"s": np.array([3, 4], I64)}, opset=13))


@pytest.mark.parametrize("shape,reps", [((2, 3), [1, 1]), ((2, 3), [3, 2]), ((2, 1, 3), [2, 4, 1]), ((5,), [0]),
                                        ((1, 2, 3, 4), [2, 1, 2, 3])])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.bool_])
def test_tile(shape, reps, dtype):
    x = data(shape, dtype)
    m = one_node("Tile", x, {"r": np.array(reps, I64)}, opset=13)
    if 0 in reps:
        ref = graph_reference(m, {"x": x})
        assert ref[0].shape == tuple(s * r for s, r in zip(shape, reps))
        return
    check(m, {"x": x}, threads=(1,))


# ---- pad ---------------------------------------------------------------------------

PADS = [[0, 1, 2, 3], [2, 0, 0, 1], [1, 3, 2, 3], [-1, 1, 0, -2], [1, -1, 1, 2], [0, 0, 0, 0]]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", PADS, ids=[str(p) for p in PADS])
def test_pad(mode, pads):
    x = data((4, 5))
    inits = {"p": np.array(pads, I64)}
    if mode == "constant":
        inits["v"] = np.array(1.5, np.float32)
    m = one_node("Pad", x, inits, opset=19, mode=mode)
    check(m, {"x": x}, threads=(1,))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.bool_])
def test_pad_dtypes(dtype):
    x = data((2, 3, 4), dtype)
    v = np.array(1 if dtype != np.bool_ else True, dtype)
    # onnxruntime lacks some of these dtypes: numpy's pad is the expectation.
    m = one_node("Pad", x, {"p": np.array([0, 1, 2, 1, 0, 1], I64), "v": v}, opset=13)
    want = np.pad(x, [(0, 1), (1, 0), (2, 1)], constant_values=v)
    check(m, {"x": x}, expected=[want], threads=(1,))
    m = one_node("Pad", x, {"p": np.array([1, 0, 2, 0, 2, 1], I64)}, opset=13, mode="reflect")
    check(m, {"x": x}, expected=[np.pad(x, [(1, 0), (0, 2), (2, 1)], mode="reflect")], threads=(1,))


def test_pad_axes_and_opset2():
    x = data((1, 3, 5, 6))
    m = one_node("Pad", x, {"p": np.array([1, 2, 3, 0], I64), "v": np.array(-2.0, np.float32),
                            "ax": np.array([-1, 2], I64)}, opset=18)
    check(m, {"x": x}, threads=(1,))
    m = one_node("Pad", x, opset=10, mode="edge", pads=[0, 0, 1, 2, 0, 0, 2, 1])
    check(m, {"x": x}, threads=(1,))


def test_pad_large_threads_nchw():
    x = data((1, 16, 60, 62))
    m = one_node("Pad", x, {"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], I64)}, opset=13, mode="reflect")
    check(m, {"x": x})


def test_pad_reflect_beyond_border_matches_numpy():
    # onnxruntime refuses reflect pads >= the dim; edgert reflects periodically like numpy.
    x = data((3, 4))
    m = one_node("Pad", x, {"p": np.array([0, 5, 0, 6], I64)}, opset=13, mode="reflect")
    check(m, {"x": x}, expected=[np.pad(x, [(0, 0), (5, 6)], mode="reflect")], threads=(1,))


def test_pad_rejects_runtime_pads():
    x = data((2, 3))
    m = make_model(helper.make_node("Pad", ["x", "p"], ["y"]), {"x": x, "p": np.zeros(4, I64)}, ["y"], opset=13)
    rejects(m, "constant")


# ---- depth_to_space / space_to_depth -------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,b", [((1, 8, 2, 3), 2), ((2, 18, 3, 2), 3), ((1, 4, 1, 1), 2)])
def test_depth_to_space(mode, shape, b):
    x = data(shape)
    check(one_node("DepthToSpace", x, opset=13, blocksize=b, mode=mode), {"x": x}, threads=(1,))


@pytest.mark.parametrize("shape,b", [((1, 2, 4, 6), 2), ((2, 3, 6, 3), 3), ((1, 1, 2, 2), 2)])
def test_space_to_depth(shape, b):
    x = data(shape)
    check(one_node("SpaceToDepth", x, opset=13, blocksize=b), {"x": x}, threads=(1,))


def test_depth_space_large_and_dtypes():
    x = data((1, 64, 20, 30))
    check(one_node("DepthToSpace", x, opset=13, blocksize=2, mode="DCR"), {"x": x})
    x = data((1, 3, 40, 60), np.uint8)
    check(one_node("SpaceToDepth", x, opset=13, blocksize=4), {"x": x})
    for w in (37, 40, 141):  # bytes, 2x: two runs interleaved, 8 bytes a step and the rest
        x = data((1, 8, 5, w), np.uint8)
        check(one_node("DepthToSpace", x, opset=13, blocksize=2, mode="CRD"), {"x": x})


def test_space_to_depth_crd_mode_reference():
    # SpaceToDepth's mode attribute is newer than onnxruntime's opsets: check the reference directly.
    x = data((1, 2, 4, 6))
    from edgert.converter.ir import Node
    node = Node("space_to_depth", ["x"], ["y"], {"blocksize": 2, "mode": "CRD"})
    (y,) = get_op("space_to_depth").reference(node, [x])
    want = x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 8, 2, 3)
    np.testing.assert_array_equal(y, want)


def test_depth_to_space_rejects_bad_channels():
    rejects(one_node("DepthToSpace", data((1, 6, 2, 2)), opset=13, blocksize=2))


# ---- robustness: mutated parameter words --------------------------------------------------

def _fuzz_models():
    """Small converted models covering every op of this family and its kin (gather, resize,
    misc), with runtime data inputs."""
    x4 = data((2, 4, 4, 6))
    x2 = data((4, 6))
    i = np.array([[1, -1], [0, 3]], I64)
    models = [
        (one_node("Transpose", x4, perm=[0, 2, 3, 1]), {"x": x4}),
        (one_node("Slice", x4, {"s": np.array([1, -1], I64), "e": np.array([3, -5], I64),
                                "a": np.array([1, 3], I64), "p": np.array([1, -2], I64)}, opset=13), {"x": x4}),
        (one_node("Pad", x2, {"p": np.array([1, -1, 2, 3], I64)}, opset=13, mode="reflect"), {"x": x2}),
        (one_node("Pad", x2, {"p": np.array([1, 1, 2, 3], I64), "v": np.array(2.0, np.float32)}, opset=13), {"x": x2}),
        (one_node("Tile", x2, {"r": np.array([2, 3], I64)}, opset=13), {"x": x2}),
        (one_node("Expand", x2[:1], {"s": np.array([3, 4, 6], I64)}, opset=13), {"x": x2[:1]}),
        (one_node("Split", x2, opset=13, outputs=("a", "b"), axis=1), {"x": x2}),
        (make_model(helper.make_node("Concat", ["x", "z"], ["y"], axis=1), {"x": x2, "z": x2}, ["y"]),
         {"x": x2, "z": x2}),
        (make_model(helper.make_node("Gather", ["x", "i"], ["y"], axis=1), {"x": x2, "i": i}, ["y"]),
         {"x": x2, "i": i}),
        (make_model(helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1), {"x": x2, "i": i}, ["y"]),
         {"x": x2, "i": i}),
        (make_model(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add"),
                    {"x": x2, "i": i, "u": data((2, 2))}, ["y"], opset=18), {"x": x2, "i": i, "u": data((2, 2))}),
        (make_model(helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=1), {"i": i}, ["y"],
                    {"d": np.array(5, I64), "v": np.array([0, 1], np.float32)}, opset=11), {"i": i}),
        (one_node("DepthToSpace", x4, opset=13, blocksize=2, mode="CRD"), {"x": x4}),
        (one_node("SpaceToDepth", x4, opset=13, blocksize=2), {"x": x4}),
        (one_node("CumSum", x2, {"a": np.array(1, I64)}, opset=14, exclusive=1, reverse=1), {"x": x2}),
        (one_node("Trilu", x2, {"k": np.array(1, I64)}, opset=14), {"x": x2}),
        (one_node("TopK", x2, {"k": np.array([3], I64)}, opset=11, outputs=("v", "i")), {"x": x2}),
    ]
    for mode in ("nearest", "linear", "cubic"):
        node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode)
        models.append((make_model(node, {"x": x4}, ["y"], {"s": np.array([1, 1, 1.5, 0.5], np.float32)}, opset=13),
                       {"x": x4}))
    node = helper.make_node("Resize", ["x", "r", "", "z"], ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize")
    models.append((make_model(node, {"x": x4}, ["y"], {"r": np.array([0, 0, -0.5, 0.2, 1, 1, 1.2, 0.9], np.float32),
                                                       "z": np.array([2, 4, 3, 5], I64)}, opset=13), {"x": x4}))
    return models


def _fuzz_main() -> None:
    """Every parameter word of every model set to edge values: each load must succeed or
    fail with a status; loads that succeed run on zeroed inputs. Prints status counts."""
    import json
    import struct

    from tests.test_c_loader import PARAMS, fix_crc, load_status, section_offsets
    counts: dict[int, int] = {}
    for model, _ in _fuzz_models():
        data_ = edgert.convert(model)
        off, size = section_offsets(data_)[PARAMS]
        n = size // 4
        for w in range(min(n, 48)):
            orig = struct.unpack_from("<i", data_, off + 4 * w)[0]
            for v in {0, 1, -1, 2, 3, 8, 9, 64, 2**31 - 1, -2**31, 2**16, orig + 1, orig - 1, orig * 2 + 1}:
                if not -2**31 <= v < 2**31 or v == orig:
                    continue
                b = bytearray(data_)
                struct.pack_into("<i", b, off + 4 * w, v)
                st = load_status(fix_crc(b))
                counts[st] = counts.get(st, 0) + 1
    print(json.dumps(counts))


def test_param_mutations_never_crash():
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # tests.conftest imports the installed edgert first (cwd, the checkout, is on sys.path).
    code = "import tests.conftest; from tests.ops.test_shape_ops import _fuzz_main; _fuzz_main()"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert r.returncode == 0, f"a mutated model crashed the runtime (rc {r.returncode}):\n{r.stderr[-3000:]}"
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert sum(counts.values()) > 1000 and len(counts) > 1, counts


def test_fuzz_models_run():
    for model, feeds in _fuzz_models():
        check(model, feeds, rtol=1e-5, atol=2e-5, threads=(1,), expected=run_ort(model, feeds))
