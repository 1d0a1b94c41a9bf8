#!/usr/bin/env python3
"""Models with ops edgert does not run, built from the shipped digits CNN, for fallback
partitions (docs/partitions.md).

- spatial_transformer(): a spatial transformer in front of the digits CNN: a small
  localisation net (Flatten, Gemm) predicts an affine theta, the sampling grid is the
  fixed base grid times theta (MatMul), and GridSample (no edgert kernel) warps the
  input before the CNN classifies it.
- einsum_middle(): the digits CNN with a per-channel Einsum scale inserted after its
  MaxPool, so the partition sits in the middle of the graph.
- detection_head(): a tiny detector ending in NonMaxSuppression, its output bounded to
  a fixed number of rows.

Usage: python tools/partition_models.py OUTDIR   (writes both .onnx files)
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np

DIGITS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "edgert", "data", "digits_cnn.onnx")


def _digits():
    import onnx

    path = DIGITS
    if not os.path.exists(path):  # installed package: the copy inside it
        import edgert
        path = os.path.join(os.path.dirname(edgert.__file__), "data", "digits_cnn.onnx")
    return onnx.load(path)


def _base_grid(h: int, w: int) -> np.ndarray:
    """[1, h*w, 3] rows (x, y, 1) of normalized pixel centres (align_corners=0)."""
    xs = (np.arange(w, dtype=np.float32) * 2 + 1) / w - 1
    ys = (np.arange(h, dtype=np.float32) * 2 + 1) / h - 1
    gx, gy = np.meshgrid(xs, ys)
    return np.stack([gx, gy, np.ones_like(gx)], -1).reshape(1, h * w, 3).astype(np.float32)


def spatial_transformer(angle_deg: float = 12.0, seed: int = 0):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = _digits()
    g = m.graph
    rng = np.random.default_rng(seed)
    a = math.radians(angle_deg)
    theta0 = np.array([[math.cos(a), -math.sin(a), 0.05], [math.sin(a), math.cos(a), -0.05]], np.float32)
    inits = [
        numpy_helper.from_array((rng.standard_normal((6, 64)) * 0.002).astype(np.float32), "stn.loc.weight"),
        numpy_helper.from_array(theta0.reshape(6), "stn.loc.bias"),
        numpy_helper.from_array(np.array([1, 2, 3], np.int64), "stn.theta_shape"),
        numpy_helper.from_array(_base_grid(8, 8), "stn.base_grid"),
        numpy_helper.from_array(np.array([1, 8, 8, 2], np.int64), "stn.grid_shape"),
    ]
    nodes = [
        helper.make_node("Flatten", ["image"], ["stn/flat"], name="stn/Flatten", axis=1),
        helper.make_node("Gemm", ["stn/flat", "stn.loc.weight", "stn.loc.bias"], ["stn/theta6"], name="stn/Gemm",
                         transB=1),
        helper.make_node("Reshape", ["stn/theta6", "stn.theta_shape"], ["stn/theta"], name="stn/Reshape"),
        helper.make_node("Transpose", ["stn/theta"], ["stn/thetaT"], name="stn/Transpose", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["stn.base_grid", "stn/thetaT"], ["stn/grid_flat"], name="stn/MatMul"),
        helper.make_node("Reshape", ["stn/grid_flat", "stn.grid_shape"], ["stn/grid"], name="stn/GridReshape"),
        helper.make_node("GridSample", ["image", "stn/grid"], ["input"], name="stn/GridSample",
                         mode="bilinear", padding_mode="zeros", align_corners=0),
    ]
    old = list(g.node)
    del g.node[:]
    g.node.extend(nodes + old)
    g.initializer.extend(inits)
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])
    del g.input[:]
    g.input.append(x)
    g.name = "stn_digits"
    onnx.checker.check_model(m)
    return m


def einsum_middle(base=None):
    """base: the model to edit (default the digits CNN; any model holding its nodes)."""
    import onnx
    from onnx import helper, numpy_helper

    m = _digits() if base is None else base
    g = m.graph
    names = [n.name for n in g.node]
    k = names.index("/6/MaxPool")
    pool_out = g.node[k].output[0]
    conv = g.node[k + 1]
    c = 16
    for t in g.initializer:
        if t.name == conv.input[1]:
            c = t.dims[1]
    scale = numpy_helper.from_array(np.linspace(0.8, 1.2, c).astype(np.float32), "mid.scale")
    ein = helper.make_node("Einsum", [pool_out, "mid.scale"], ["mid/scaled"], name="mid/Einsum",
                           equation="nchw,c->nchw")
    conv.input[0] = "mid/scaled"
    g.node.insert(k + 1, ein)
    g.initializer.append(scale)
    g.name = "digits_einsum"
    onnx.checker.check_model(m)
    return m


def detection_head(max_boxes: int = 10, seed: int = 0):
    """A detection-style model: a strided Conv predicts 4 box coordinates and a score per
    cell of an 8x8 grid; NonMaxSuppression picks boxes, and the model bounds its output
    the usual way (a fixed block of -1 rows appended, then the first `max_boxes` rows
    sliced), so "detections" is int64[max_boxes, 3] whatever the data."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    k = max_boxes
    inits = [
        numpy_helper.from_array((rng.standard_normal((5, 1, 4, 4)) * 0.5).astype(np.float32), "det.w"),
        numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "det.b"),
        numpy_helper.from_array(np.array([1, 5, 64], np.int64), "det.shape"),
        numpy_helper.from_array(np.array([4, 1], np.int64), "det.split"),
        numpy_helper.from_array(np.array([k], np.int64), "det.max_boxes"),
        numpy_helper.from_array(np.array([0.5], np.float32), "det.iou"),
        numpy_helper.from_array(np.array([0.3], np.float32), "det.score_min"),
        numpy_helper.from_array(np.full((k, 3), -1, np.int64), "det.pad"),
        numpy_helper.from_array(np.array([0], np.int64), "det.start"),
        numpy_helper.from_array(np.array([k], np.int64), "det.end"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "det.w", "det.b"], ["det/map"], name="det/Conv", strides=[4, 4]),
        helper.make_node("Sigmoid", ["det/map"], ["det/prob"], name="det/Sigmoid"),
        helper.make_node("Reshape", ["det/prob", "det.shape"], ["det/flat"], name="det/Reshape"),
        helper.make_node("Split", ["det/flat", "det.split"], ["det/box_t", "det/score"], name="det/Split",
                         axis=1),
        helper.make_node("Transpose", ["det/box_t"], ["det/boxes"], name="det/Transpose", perm=[0, 2, 1]),
        helper.make_node("NonMaxSuppression", ["det/boxes", "det/score", "det.max_boxes", "det.iou",
                                               "det.score_min"], ["det/selected"], name="det/NMS"),
        helper.make_node("Concat", ["det/selected", "det.pad"], ["det/padded"], name="det/Concat", axis=0),
        helper.make_node("Slice", ["det/padded", "det.start", "det.end"], ["detections"], name="det/Slice"),
    ]
    g = helper.make_graph(nodes, "det_head", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                            [1, 1, 32, 32])],
                          [helper.make_tensor_value_info("detections", TensorProto.INT64, [k, 3]),
                           helper.make_tensor_value_info("det/boxes", TensorProto.FLOAT, [1, 64, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main(argv: list[str]) -> int:
    import onnx

    out = argv[1] if len(argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name, fn in (("stn_digits", spatial_transformer), ("digits_einsum", einsum_middle),
                     ("det_head", detection_head)):
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(fn(), path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
