"""Bounded dimensions at sizes the converter did not sample: a file either runs every
size within its bounds with onnxruntime's shapes and values, or the conversion refuses
with a message naming the node and op (docs/runtime.md, "Bounded dimensions"). Never a
wrong shape or value, never a kernel or scratch error at run time."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert.converter import bounds as bounds_
from edgert.runtime import session as runtime

PRIMES = [p for p in range(2, 1000) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


def _w(rng, name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def _model(nodes, inputs, inits, out_name="y"):
    y = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", inputs, [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def keras_same_net():
    """Channels-last (Transposes around the body), SAME_UPPER and SAME_LOWER convs and
    pools with kernel 3 and stride 2: the pads follow the size's parity at each level."""
    rng = np.random.default_rng(10)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "H", "W", 3])
    nodes = [
        helper.make_node("Transpose", ["x"], ["t0"], perm=[0, 3, 1, 2], name="to_nchw"),
        helper.make_node("Conv", ["t0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2],
                         auto_pad="SAME_UPPER", name="conv_su"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER",
                         name="pool_su"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2],
                         auto_pad="SAME_LOWER", name="conv_sl"),
        helper.make_node("MaxPool", ["c2"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER",
                         name="pool_sl"),
        helper.make_node("Conv", ["p2", "w3"], ["c3"], kernel_shape=[3, 3], auto_pad="SAME_UPPER", name="conv_s1"),
        helper.make_node("Transpose", ["c3"], ["y"], perm=[0, 2, 3, 1], name="to_nhwc"),
    ]
    inits = [_w(rng, "w1", (8, 3, 3, 3)), _w(rng, "b1", (8,)), _w(rng, "w2", (8, 8, 3, 3)), _w(rng, "b2", (8,)),
             _w(rng, "w3", (4, 8, 3, 3))]
    return _model(nodes, [x], inits), {"x": [1, (16, 96), (32, 128), 3]}, ("H", "W")


def ceil_dilated_net():
    """NCHW: dilated convs and ceil_mode max and average pools."""
    rng = np.random.default_rng(11)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], dilations=[2, 2],
                         pads=[2, 2, 2, 2], name="conv_dil"),
        helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                         name="maxpool_ceil"),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 1],
                         pads=[1, 1, 1, 1], name="conv_dil_s2"),
        helper.make_node("AveragePool", ["c2"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                         pads=[1, 1, 1, 1], count_include_pad=0, name="avgpool_ceil"),
    ]
    inits = [_w(rng, "w1", (6, 3, 3, 3)), _w(rng, "b1", (6,)), _w(rng, "w2", (5, 6, 3, 3))]
    return _model(nodes, [x], inits), {"x": [1, 3, (16, 83), (16, 107)]}, ("H", "W")


def conv_transpose_head():
    """A CenterFace-style upsampling head: its transposed conv's scratch (row chunks of
    budget // (64 * W) rows) peaks at widths between the bounds, not at the upper one."""
    rng = np.random.default_rng(12)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="stem"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("ConvTranspose", ["r1", "wt", "bt"], ["u1"], kernel_shape=[4, 4], strides=[2, 2],
                         pads=[1, 1, 1, 1], name="up"),
        helper.make_node("ConvTranspose", ["u1", "wt2"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], output_padding=[1, 1], name="up_outpad"),
    ]
    inits = [_w(rng, "w1", (8, 3, 3, 3)), _w(rng, "b1", (8,)), _w(rng, "wt", (8, 4, 4, 4)), _w(rng, "bt", (4,)),
             _w(rng, "wt2", (4, 2, 3, 3))]
    return _model(nodes, [x], inits), {"x": [1, 3, (12, 40), (70, 400)]}, ("H", "W")


MODELS = {"keras_same": keras_same_net, "ceil_dilated": ceil_dilated_net, "conv_transpose_head": conv_transpose_head}


def _random_sizes(rng, bounds, sampled, n=24):
    """n (H, W) pairs within the bounds that are no sample pair: odd, prime and random
    sizes, each bound at an extreme with the other free."""
    (hlo, hhi), (wlo, whi) = bounds
    odd = lambda lo, hi: int(rng.integers(lo, hi + 1)) | 1 if hi > lo else lo
    prime = lambda lo, hi: int(rng.choice([p for p in PRIMES if lo <= p <= hi]))
    out = []
    cands = [(hlo, odd(wlo, whi - 1)), (hhi, prime(wlo, whi)), (odd(hlo, hhi - 1), wlo), (prime(hlo, hhi), whi),
             (prime(hlo, hhi), prime(wlo, whi)), (odd(hlo, hhi - 1), odd(wlo, whi - 1))]
    while len(out) < n:
        h, w = cands.pop() if cands else (int(rng.integers(hlo, hhi + 1)), int(rng.integers(wlo, whi + 1)))
        if min(h, hhi) != h or (h, w) in sampled or (h, w) in out or not (wlo <= w <= whi):
            continue
        out.append((h, w))
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_random_sizes_match_onnxruntime(name, tmp_path):
    model, input_shapes, syms = MODELS[name]()
    dims = input_shapes["x"]
    axes = [k for k, d in enumerate(dims) if isinstance(d, tuple)]
    data = edgert.convert(model, tmp_path / "m.edgert", input_shapes=input_shapes)
    sampled = {tuple(v) for v in bounds_.sample_values(bounds_.Bounds(
        [bounds_.Symbol(s, *dims[a]) for s, a in zip(syms, axes)], []))}
    rng = np.random.default_rng(2024)
    sizes = _random_sizes(rng, [dims[a] for a in axes], sampled)
    assert len(sizes) >= 20 and not sampled & set(sizes)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    sess = runtime.Session(data, max_contexts=1)
    for h, w in sizes:
        shape = [d if not isinstance(d, tuple) else None for d in dims]
        shape[axes[0]], shape[axes[1]] = h, w
        x = rng.standard_normal(shape).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]  # a kernel or scratch error fails the test
        assert got.shape == want.shape, (name, h, w)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max() + 1e-6),
                                   err_msg=f"{name} at {h}x{w}")


def test_same_pad_rule_is_the_onnx_formula():
    """The runtime's SAME rule (bounds.same_pad mirrors csrc/src/bounds.c) gives the
    importer's auto_pad pads at random sizes, kernels, strides and dilations."""
    from edgert.converter.frontend.onnx_ops.conv import _same_pads
    rng = np.random.default_rng(20261128)
    for _ in range(3000):
        x, k, s, d = (int(rng.integers(1, 400)), int(rng.integers(1, 12)), int(rng.integers(1, 9)),
                      int(rng.integers(1, 5)))
        k_eff = (k - 1) * d + 1
        for upper in (True, False):
            want = _same_pads(x, k, s, d, upper)
            got = tuple(bounds_.same_pad(x, k_eff | s << 16 | end << 28 | (not upper) << 29) for end in (0, 1))
            assert got == want, (x, k, s, d, upper)


def test_samples_cover_residues():
    s = bounds_.Symbol("H", 12, 720)
    got = bounds_.samples(s)
    assert got[0] == 720 and 12 in got
    for m in (2, 4, 8, 16, 32, 64):
        assert len({v % m for v in got}) > 1, m
    assert {v % 4 for v in got if v > 700} == {0, 1, 2, 3}
    assert all(12 <= v <= 720 for v in got) and len(set(got)) == len(got)
    assert bounds_.samples(bounds_.Symbol("n", 5, 5)) == [5]
    assert sorted(bounds_.samples(bounds_.Symbol("n", 1, 3))) == [1, 2, 3]


def test_scratch_is_swept_between_samples(tmp_path):
    """The transposed conv's need peaks at widths no sample has; the plan covers every
    width (the run at each would fail with 'needs N scratch bytes' otherwise)."""
    model, input_shapes, _ = conv_transpose_head()
    data = edgert.convert(model, tmp_path / "t.edgert", input_shapes=input_shapes)
    sess = runtime.Session(data, max_contexts=1)
    for w in (93, 341, 113, 127):  # rows * W = 1023, 1023, 1017, 1016 of a 1024 budget
        assert sess.run(None, {"x": np.zeros((1, 3, 40, w), np.float32)})[0].shape == (1, 2, 160, 4 * w)
