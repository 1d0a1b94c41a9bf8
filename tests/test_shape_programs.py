"""Shape programs (docs/runtime.md, "Shape programs"): values computed from the input
size (a detector's anchor grid and strides) run at run time in a bounded file, at every
size within the bounds, against onnxruntime; what is refused, at conversion and at load."""
import time

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert import fileformat
from edgert.converter.bounds import Bounds, Symbol
from edgert.converter.ir import Graph
from edgert.converter.pipeline import build_graph, serialize
from edgert.errors import ConversionError, InputError, ModelFormatError
from edgert.runtime import reader, session as runtime

BOUNDS = {"x": [1, 3, (32, 640), (32, 640)]}


def yolo_head(fpn: bool = False, tile: bool = False, size_op: bool = False) -> bytes:
    """A YOLOv8-style detector head on input [1, 3, H, W]: five stride-2 convolutions,
    levels at strides 8, 16 and 32 (fpn: the stride-16 level also takes the stride-32 one
    upsampled by 2, so only sizes whose halvings stay even on the way match). Per level a
    1x1 box convolution gives distances (sigmoid * 16) [1, 4, h, w], and the anchor grid
    is computed from the level's shape as torch exports ultralytics' make_anchors:
    Shape -> Gather h, w -> Cast -> Range + 0.5 -> meshgrid (Reshape, Shape, Concat,
    Expand; tile: Tile on one level; the last level's target through torch's
    Where(Equal(size, -1), ones, size)) -> Unsqueeze, Concat (stack) -> Reshape(-1, 2);
    strides by ConstantOfShape (by Expand on one level). Boxes: x1y1 = anchors - lt,
    x2y2 = anchors + rb, (centre, size) * strides: output [1, 4, N], N = sum of h*w.
    size_op: the stride-8 level's h*w by Size (not supported in a shape program)."""
    rng = np.random.default_rng(5)
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, outs, name, **kw):
        nodes.append(helper.make_node(op, ins, outs, name=name, **kw))
        return outs[0]

    c, prev, feats = 8, "x", []
    for k in range(5):
        w = init(f"w{k}", (rng.standard_normal([c, 3 if k == 0 else c, 3, 3]) * 0.4).astype(np.float32))
        b = init(f"b{k}", (rng.standard_normal([c]) * 0.1).astype(np.float32))
        conv = node("Conv", [prev, w, b], [f"c{k}"], f"down{k}", kernel_shape=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1])
        prev = node("Relu", [conv], [f"r{k}"], f"act{k}")
        if k >= 2:
            feats.append(prev)
    if fpn:
        up = node("Resize", [feats[2], "", init("scales", np.array([1, 1, 2, 2], np.float32))], ["up"], "up",
                  mode="nearest")
        cat = node("Concat", [up, feats[1]], ["p4_cat"], "p4_cat", axis=1)
        w = init("wp4", (rng.standard_normal([c, 2 * c, 1, 1]) * 0.4).astype(np.float32))
        feats[1] = node("Relu", [node("Conv", [cat, w], ["p4_conv"], "p4_conv", kernel_shape=[1, 1])], ["p4"], "p4")
    for name, v in (("i2", np.array(2, np.int64)), ("i3", np.array(3, np.int64)), ("f0", np.array(0, np.float32)),
                    ("f1", np.array(1, np.float32)), ("half", np.array(0.5, np.float32)),
                    ("m1", np.array([-1], np.int64)), ("one1", np.array([1], np.int64)),
                    ("ax0", np.array([0], np.int64)), ("axm1", np.array([-1], np.int64)),
                    ("box_shape", np.array([1, 4, -1], np.int64)), ("pts_shape", np.array([-1, 2], np.int64)),
                    ("sixteen", np.array(16, np.float32)), ("two", np.array(2, np.float32))):
        init(name, v)
    anchors, strides, boxes = [], [], []
    for lvl, (stride, f) in enumerate(zip((8, 16, 32), feats)):
        p = f"l{lvl}_"
        w = init(p + "wbox", (rng.standard_normal([4, c, 1, 1]) * 0.5).astype(np.float32))
        box = node("Conv", [f, w, init(p + "bbox", np.zeros(4, np.float32))], [p + "box"], p + "box",
                   kernel_shape=[1, 1])
        box = node("Mul", [node("Sigmoid", [box], [p + "sig"], p + "sig"), "sixteen"], [p + "dist"], p + "dist")
        boxes.append(node("Reshape", [box, "box_shape"], [p + "dist_flat"], p + "dist_flat"))
        s = node("Shape", [f], [p + "shape"], p + "shape")
        h = node("Gather", [s, "i2"], [p + "h"], p + "h", axis=0)
        w = node("Gather", [s, "i3"], [p + "w"], p + "w", axis=0)
        sx = node("Range", ["f0", node("Cast", [w], [p + "wf"], p + "wf", to=TensorProto.FLOAT), "f1"],
                  [p + "rx"], p + "range_x")
        sy = node("Range", ["f0", node("Cast", [h], [p + "hf"], p + "hf", to=TensorProto.FLOAT), "f1"],
                  [p + "ry"], p + "range_y")
        sx = node("Add", [sx, "half"], [p + "sx"], p + "sx")
        sy = node("Add", [sy, "half"], [p + "sy"], p + "sy")
        # torch.meshgrid(sy, sx, indexing="ij")
        ty = node("Reshape", [sy, "m1"], [p + "ty"], p + "ty")
        tx = node("Reshape", [sx, "m1"], [p + "tx"], p + "tx")
        shy = node("Shape", [ty], [p + "shy"], p + "shy")
        shx = node("Shape", [tx], [p + "shx"], p + "shx")
        grid = node("Concat", [shy, shx], [p + "grid"], p + "grid", axis=0)
        if lvl == 2:  # torch's expand: Where(Equal(size, -1), ones, size)
            ones = node("ConstantOfShape", [node("Shape", [grid], [p + "grid_rank"], p + "grid_rank")],
                        [p + "ones"], p + "ones", value=numpy_helper.from_array(np.array([1], np.int64)))
            neg = node("Mul", [ones, init(p + "neg1", np.array(-1, np.int64))], [p + "neg"], p + "neg")
            grid = node("Where", [node("Equal", [grid, neg], [p + "is_neg"], p + "is_neg"), ones, grid],
                        [p + "grid_fixed"], p + "grid_fixed")
        vy = node("Reshape", [ty, node("Concat", [shy, "one1"], [p + "vy_shape"], p + "vy_shape", axis=0)],
                  [p + "vy"], p + "vy")
        vx = node("Reshape", [tx, node("Concat", ["one1", shx], [p + "vx_shape"], p + "vx_shape", axis=0)],
                  [p + "vx"], p + "vx")
        gy = node("Expand", [vy, grid], [p + "gy"], p + "gy")
        if tile and lvl == 0:
            gx = node("Tile", [vx, node("Concat", [shy, "one1"], [p + "reps"], p + "reps", axis=0)], [p + "gx"],
                      p + "gx")
        else:
            gx = node("Expand", [vx, grid], [p + "gx"], p + "gx")
        st = node("Concat", [node("Unsqueeze", [gx, "axm1"], [p + "ux"], p + "ux"),
                             node("Unsqueeze", [gy, "axm1"], [p + "uy"], p + "uy")], [p + "stack"], p + "stack", axis=-1)
        anchors.append(node("Reshape", [st, "pts_shape"], [p + "pts"], p + "pts"))
        if size_op and lvl == 0:
            hw = node("Size", [gx], [p + "hw"], p + "hw")
        else:
            hw = node("Mul", [h, w], [p + "hw"], p + "hw")
        fill = node("Concat", [node("Unsqueeze", [hw, "ax0"], [p + "hw1"], p + "hw1"), "one1"], [p + "fill"], p + "fill",
                    axis=0)
        if lvl == 1:
            strides.append(node("Expand", [init(p + "stride", np.array([[stride]], np.float32)), fill],
                                [p + "strides"], p + "strides"))
        else:
            strides.append(node("ConstantOfShape", [fill], [p + "strides"], p + "strides",
                                value=numpy_helper.from_array(np.array([stride], np.float32))))
    a = node("Concat", anchors, ["anchor_points"], "anchor_points", axis=0)
    a = node("Unsqueeze", [node("Transpose", [a], ["anchors_t"], "anchors_t", perm=[1, 0]), "ax0"], ["anchors"],
             "anchors")
    st = node("Transpose", [node("Concat", strides, ["stride_list"], "stride_list", axis=0)], ["strides"], "strides",
              perm=[1, 0])
    dist = node("Concat", boxes, ["dist"], "dist", axis=2)
    nodes.append(helper.make_node("Split", [dist, init("halves", np.array([2, 2], np.int64))], ["lt", "rb"],
                                  name="dist_split", axis=1))
    x1y1 = node("Sub", [a, "lt"], ["x1y1"], "x1y1")
    x2y2 = node("Add", [a, "rb"], ["x2y2"], "x2y2")
    cxy = node("Div", [node("Add", [x1y1, x2y2], ["xy_sum"], "xy_sum"), "two"], ["cxy"], "cxy")
    wh = node("Sub", [x2y2, x1y1], ["wh"], "wh")
    node("Mul", [node("Concat", [cxy, wh], ["dbox"], "dbox", axis=1), st], ["boxes"], "boxes")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, "N"])
    m = helper.make_model(helper.make_graph(nodes, "yolo_head", [x], [y], inits),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def sizes(n_random: int, seed: int) -> list[tuple[int, int]]:
    """Both extremes and their mixes, odd and prime sizes, then random ones."""
    fixed = [(32, 32), (640, 640), (32, 640), (640, 32), (33, 35), (53, 97), (101, 211), (479, 331), (613, 599),
             (631, 37), (127, 509)]
    rng = np.random.default_rng(seed)
    return fixed + [(int(a), int(b)) for a, b in rng.integers(32, 641, (n_random, 2))]


def _relative_error(got, want) -> float:
    """max |got - want| / |want|, elementwise, with |want| at least 1e-3 of its largest."""
    floor = 1e-3 * float(np.abs(want).max())
    return float((np.abs(got - want) / np.maximum(np.abs(want), floor)).max())


def _ort(model: bytes):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # the sizes it refuses are expected
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def _check_runs(model: bytes, sess, shapes) -> float:
    ref = _ort(model)
    rng = np.random.default_rng(11)
    worst = 0.0
    for h, w in shapes:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape, (h, w)
        err = _relative_error(got, want)
        assert err <= 1e-3, (h, w, err)
        worst = max(worst, err)
    return worst


def test_yolo_head_runs_every_size_against_onnxruntime():
    model = yolo_head()
    t = time.perf_counter()
    data = edgert.convert(model, None, input_shapes=BOUNDS)
    seconds = time.perf_counter() - t
    sess = runtime.Session(data, max_contexts=1)
    (x,) = sess.get_inputs()
    assert x.shape == [1, 3, "H", "W"] and not x.constraints, x  # every size runs
    before = runtime.alloc_count()
    worst = _check_runs(model, sess, sizes(12, seed=1))
    assert runtime.alloc_count() == before
    print(f"yolo head: converted in {seconds:.1f} s, {len(sizes(12, 1))} sizes, max relative error {worst:.2e}")


def test_yolo_head_with_tile_and_fpn_constraint():
    """A Tile in the meshgrid, and an FPN whose stride-16 level takes the stride-32 one
    upsampled: sizes that break the derived constraint are refused with the rule, the
    others (odd and prime ones among them) run as onnxruntime does."""
    model = yolo_head(fpn=True, tile=True)
    data = edgert.convert(model, None, input_shapes=BOUNDS)
    sess = runtime.Session(data, max_contexts=1)
    (x,) = sess.get_inputs()
    step, res = x.steps[2]
    assert step == 32 and x.steps[3] == (step, res), x.steps
    ref = _ort(model)
    ok = [(h, w) for h, w in sizes(30, seed=2) if h % step in res and w % step in res]
    bad = [(h, w) for h, w in sizes(30, seed=2) if h % step not in res]
    assert len(ok) >= 10 and len(bad) >= 5 and any(h % 2 and w % 2 for h, w in ok), (ok, bad)
    before = runtime.alloc_count()
    _check_runs(model, sess, ok)
    assert runtime.alloc_count() == before
    for h, w in bad:
        with pytest.raises(InputError, match=rf"input 'x' dim 2 is {h}: the model runs 'H' = {step}\*k \+ r only"):
            sess.run(None, {"x": np.zeros((1, 3, h, w), np.float32)})
        with pytest.raises(Exception):  # onnxruntime refuses them too
            ref.run(None, {"x": np.zeros((1, 3, h, w), np.float32)})


def test_the_shape_program_runs_in_the_shape_pass():
    """shapes_at gives the output length before any run (the value nodes run in the shape
    pass), and a run after it keeps the input data it was given."""
    sess = runtime.Session(edgert.convert(yolo_head(), None, input_shapes=BOUNDS), max_contexts=1)
    ref = _ort(yolo_head())
    for h, w in ((97, 53), (640, 640), (32, 33)):
        n = sum(-(-h // s) * -(-w // s) for s in (8, 16, 32))
        assert list(sess.shapes_at({"x": [1, 3, h, w]}).values()) == [[1, 4, n]]
        x = np.random.default_rng(h).standard_normal((1, 3, h, w)).astype(np.float32)
        assert _relative_error(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]) <= 1e-3


def test_size_in_a_shape_program_is_refused_naming_the_node():
    with pytest.raises(ConversionError, match=r"l0_hw \(Size\): Size in a computation kept for run time"):
        edgert.convert(yolo_head(size_op=True), None, input_shapes=BOUNDS)


def test_static_conversion_still_folds_the_anchors():
    model = yolo_head()
    assert not {"shape", "range"} & set(build_graph(model, {"x": [1, 3, 96, 160]}).op_counts())
    x = np.random.default_rng(0).standard_normal((1, 3, 96, 160)).astype(np.float32)
    got = edgert.Session(edgert.convert(model, None, input_shapes={"x": [1, 3, 96, 160]})).run(None, {"x": x})[0]
    want = _ort(model).run(None, {"x": x})[0]
    assert _relative_error(got, want) <= 1e-3


def _max_error(got, want) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("option", ["fp16", "int8", "onnxruntime"])
def test_shape_programs_with_quantization_and_partitions(option):
    """fp16 gives what the static fp16 file of each size gives; int8 keeps the program and
    what it computes float (their ranges follow the size) and, at the calibration size,
    is as close to onnxruntime as the static int8 file there; an onnxruntime partition
    (the last stage) beside the program runs as float does."""
    model = yolo_head()
    rng = np.random.default_rng(4)
    cal = {"x": rng.standard_normal((4, 1, 3, 160, 128)).astype(np.float32)}
    kw = {"fp16": {"quantize": "fp16"}, "int8": {"quantize": "int8", "calibration": cal},
          "onnxruntime": {"fallback": "onnxruntime", "fallback_ops": ["act4"]}}[option]
    data = edgert.convert(model, None, input_shapes=BOUNDS, **kw)
    sess = runtime.Session(data, max_contexts=1)
    ref = _ort(model)
    if option == "int8":
        kept = set(reader.read(data)["metadata"]["quantization"]["fp32_nodes"])
        assert {"l0_shape", "l0_range_x", "anchors", "strides", "x1y1", "boxes"} <= kept, kept
    for h, w in ((160, 128), (53, 97), (640, 640)):
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape, (h, w)
        if option == "onnxruntime":
            assert _relative_error(got, want) <= 1e-3, (h, w)
        elif option == "fp16" or (h, w) == (160, 128):
            static = edgert.convert(model, None, input_shapes={"x": [1, 3, h, w]}, **kw)
            bound = _max_error(edgert.Session(static).run(None, {"x": x})[0], want)
            assert _max_error(got, want) <= bound * 1.1 + 1e-6, (h, w, _max_error(got, want), bound)


# ---- files the loader refuses ---------------------------------------------------------


def _range_graph(limit_from_input: bool) -> Graph:
    """x [1, N] bounded 1..16; y = range(0, limit, 1) + 0 where limit is a float input
    (limit_from_input: a shape follows an input's values) or Cast(shape(x)[1])."""
    g = Graph()
    g.add_tensor("x", (1, 16), np.float32)
    g.inputs.append("x")
    g.add_const(np.array(0, np.float32), "zero")
    g.add_const(np.array(1, np.float32), "one")
    if limit_from_input:
        g.add_tensor("limit", (), np.float32)
        g.inputs.append("limit")
    else:
        g.add_const(np.array([1], np.int64), "i1")
        g.add_tensor("dims", (2,), np.int64)
        g.add_node("shape", ["x"], ["dims"], {"start": 0, "end": 2}, "dims")
        g.add_tensor("n", (1,), np.int64)
        g.add_node("gather", ["dims", "i1"], ["n"], {"axis": 0}, "n")
        g.add_tensor("limit1", (1,), np.float32)
        g.add_node("cast", ["n"], ["limit1"], {"to": "float32"}, "limit1")
        g.add_tensor("limit", (), np.float32)
        g.add_node("reshape", ["limit1"], ["limit"], {"shape": []}, "limit")
    g.add_tensor("y", (16,), np.float32)
    g.add_node("range", ["zero", "limit", "one"], ["y"], {"length": 16}, "y")
    g.outputs.append("y")
    g.metadata["bounds"] = Bounds([Symbol("N", 1, 16)], [("x", 1, 0)])
    return g


def test_loader_runs_a_hand_built_shape_program():
    sess = runtime.Session(serialize(_range_graph(False)), max_contexts=1)
    for n in (1, 7, 16):
        np.testing.assert_array_equal(sess.run(None, {"x": np.zeros((1, n), np.float32)})[0], np.arange(n))


def test_loader_refuses_a_shape_that_follows_input_values():
    with pytest.raises(ModelFormatError, match="a shape follows the values of input 'limit'"):
        runtime.Session(serialize(_range_graph(True)))


def test_loader_refuses_a_value_node_over_an_input():
    """A value node's output, written by the shape pass before a run, must not lie over a
    graph input's bytes (the planner keeps them apart; a file that does not is refused)."""
    data = bytearray(serialize(_range_graph(False)))
    hdr = fileformat._HEADER.unpack_from(data, 0)
    sections = {}
    for k in range(hdr[6]):
        kind, _, off, size, _, count = fileformat._ENTRY.unpack_from(data, hdr[7] + k * fileformat.ENTRY_SIZE)
        sections[kind] = (off, size, count)
    s_off = sections[fileformat.STRINGS][0]
    t_off, _, n_tensors = sections[fileformat.TENSORS]
    recs = {}
    for k in range(n_tensors):
        rec = list(fileformat._TENSOR.unpack_from(data, t_off + k * fileformat.TENSOR_SIZE))
        recs[bytes(data[s_off + rec[0]:s_off + rec[0] + rec[1]]).decode()] = (k, rec)
    k, rec = recs["n"]
    rec[-2] = recs["x"][1][-2]  # the arena offset of x
    fileformat._TENSOR.pack_into(data, t_off + k * fileformat.TENSOR_SIZE, *rec)
    fileformat.seal(data)
    with pytest.raises(ModelFormatError, match="its output 'n' is computed before a run, over input 'x'"):
        runtime.Session(bytes(data))


# ---- expand's target and tile's repeats as data ------------------------------------------


def _target_graph(op: str, target, out_shape, x_shape=(1, 3)) -> Graph:
    """x -> op(x, target) -> y; target: an array (a constant) or (shape, dtype) (an input)."""
    g = Graph()
    g.add_tensor("x", x_shape, np.float32)
    g.inputs.append("x")
    if isinstance(target, tuple):
        g.add_tensor("t", *target)
        g.inputs.append("t")
    else:
        g.add_const(np.asarray(target), "t")
    g.add_tensor("y", out_shape, np.float32)
    attrs = {"shape": list(out_shape)} if op == "expand" else {"repeats": [o // i for o, i in zip(out_shape, x_shape)]}
    g.add_node(op, ["x", "t"], ["y"], attrs, "n")
    g.outputs.append("y")
    return g


@pytest.mark.parametrize("op,target,out_shape,message", [
    ("expand", np.array([2.0, 3.0], np.float32), (2, 3), "the target must be int32 or int64"),
    ("expand", np.array([4, 3], np.int64), (2, 3), "the target does not give the output shape"),
    ("expand", np.array([2, 1, 3], np.int64), (2, 3), "the target must be int32 or int64 \\[k\\], k <= the output rank"),
    ("tile", np.array([2, 1, 1], np.int64), (2, 3), "repeats must be int32 or int64 \\[rank\\]"),
    ("tile", np.array([3, 1], np.int32), (2, 3), "dim 0: 1 \\* 3 != 2"),
])
def test_bad_targets_refused_at_load(op, target, out_shape, message):
    with pytest.raises(ModelFormatError, match=rf"node 'n' \({op}\): {message}"):
        edgert.Session(serialize(_target_graph(op, target, out_shape)))


@pytest.mark.parametrize("op", ["expand", "tile"])
def test_target_data_that_breaks_the_planned_shape_stops_the_run(op):
    """A target that is data (only a file written by hand has one): the run checks it
    still gives the output shape, never copying another."""
    sess = edgert.Session(serialize(_target_graph(op, ((2,), np.int64), (4, 3))))
    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    good = np.array([4, 3] if op == "expand" else [4, 1], np.int64)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "t": good})[0], np.broadcast_to(x, (4, 3)))
    with pytest.raises(ModelFormatError, match=rf"node 'n' \({op}\): its (target|repeats) no longer give"):
        sess.run(None, {"x": x, "t": np.array([5, 3] if op == "expand" else [5, 1], np.int64)})
