"""resize (ONNX Resize, Upsample): the numpy reference against onnxruntime where its
arithmetic agrees with the ONNX reference (exact scales, sizes), against onnx's
ReferenceEvaluator elsewhere (fractional scales, half_pixel_symmetric, antialias,
tf_crop_and_resize, keep_aspect_ratio_policy, axes), and the C kernels end to end;
plus rejected cases.

align_corners divides by the integer output length less one, as the ONNX text
(`length_resized`), onnxruntime and PyTorch do (onnx's ReferenceEvaluator uses the
unrounded length scale * length_original, which differs at non-integer scales:
docs/ops.md, "Known deviations"); those cases are checked against onnxruntime at random
sizes and scales."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from tests.helpers import make_model, run_ort
from tests.ops.test_shape_ops import check, data, rejects

F32, I64 = np.float32, np.int64


def resize_model(x, scales=None, sizes=None, roi=None, opset=19, **attrs):
    inits, names = {}, ["x", "", "", ""]
    if roi is not None:
        inits["roi"], names[1] = np.array(roi, F32), "roi"
    if scales is not None:
        inits["scales"], names[2] = np.array(scales, F32), "scales"
    if sizes is not None:
        inits["sizes"], names[3] = np.array(sizes, I64), "sizes"
    while names[-1] == "":
        names.pop()
    if opset == 10:  # Resize-10: (X, scales)
        names = ["x", "scales"]
    if opset == 11 and len(names) > 1 and names[1] == "":  # opset 11: roi is required
        inits["roi"], names[1] = np.array([], F32), "roi"
    return make_model(helper.make_node("Resize", names, ["y"], **attrs), {"x": x}, ["y"], inits, opset=opset)


def onnx_reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


# ---- against onnxruntime ---------------------------------------------------------------

NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
COORDS = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"]


@pytest.mark.parametrize("scale", [2.0, 3.0, 0.5])
@pytest.mark.parametrize("coord", COORDS + ["tf_half_pixel_for_nn"])
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
def test_nearest_scales_vs_ort(scale, coord, nearest_mode):
    x = data((1, 2, 6, 8))
    m = resize_model(x, scales=[1, 1, scale, scale], opset=13 if coord == "tf_half_pixel_for_nn" else 19,
                     mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest_mode)
    check(m, {"x": x}, threads=(1,))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("scale", [2.0, 0.5, 4.0])
def test_interpolate_scales_vs_ort(mode, coord, scale):
    x = data((2, 3, 6, 8))
    if coord == "align_corners":
        m = resize_model(x, sizes=[2, 3, int(6 * scale), int(8 * scale)], mode=mode,
                         coordinate_transformation_mode=coord)
    else:
        m = resize_model(x, scales=[1, 1, scale, scale], mode=mode, coordinate_transformation_mode=coord)
    check(m, {"x": x}, rtol=1e-5, atol=2e-5, threads=(1,))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("sizes", [[1, 3, 10, 13], [1, 3, 3, 4], [1, 3, 1, 1], [1, 3, 7, 9]])
def test_sizes_vs_ort(mode, sizes):
    x = data((1, 3, 7, 9))
    for coord in ("half_pixel", "align_corners", "pytorch_half_pixel"):
        m = resize_model(x, sizes=sizes, mode=mode, coordinate_transformation_mode=coord)
        check(m, {"x": x}, rtol=1e-5, atol=2e-5, threads=(1,))


def test_cubic_options_vs_ort():
    x = data((1, 2, 5, 6))
    for a, ex in ((-0.5, 1), (-0.75, 1), (-0.5, 0)):
        m = resize_model(x, scales=[1, 1, 2, 0.5], mode="cubic", cubic_coeff_a=a, exclude_outside=ex)
        check(m, {"x": x}, rtol=1e-5, atol=2e-5, threads=(1,))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 3, 2], [1, 1, 0.5, 0.5], [1, 2, 2, 1]])
def test_opset10_and_upsample_vs_ort(mode, scales):
    x = data((1, 2, 4, 6))
    m = resize_model(x, scales=scales, opset=10, mode=mode)
    check(m, {"x": x}, rtol=1e-5, atol=1e-5, threads=(1,))
    if min(scales) >= 1:
        m = make_model(helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode), {"x": x}, ["y"],
                       {"s": np.array(scales, F32)}, opset=9)
        check(m, {"x": x}, rtol=1e-5, atol=1e-5, threads=(1,))
        m = make_model(helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[float(s) for s in scales]),
                       {"x": x}, ["y"], opset=7)
        check(m, {"x": x}, rtol=1e-5, atol=1e-5, threads=(1,))


def test_opset11_with_empty_roi_and_sizes():
    x = data((1, 2, 4, 5))
    m = make_model(helper.make_node("Resize", ["x", "roi", "scales", "sizes"], ["y"], mode="linear"), {"x": x}, ["y"],
                   {"roi": np.array([], F32), "scales": np.array([], F32), "sizes": np.array([1, 2, 7, 3], I64)},
                   opset=11)
    check(m, {"x": x}, rtol=1e-5, atol=1e-5, threads=(1,))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_detector_upsample_large_threads(mode):
    # YOLO-style x2 nearest / DB-head bilinear upsampling of a feature map (> 64 KiB).
    x = data((1, 16, 40, 40))
    m = resize_model(x, scales=[1, 1, 2, 2], mode=mode,
                     coordinate_transformation_mode="asymmetric" if mode == "nearest" else "half_pixel",
                     nearest_mode="floor")
    check(m, {"x": x}, rtol=1e-5, atol=1e-5)


def test_linear_3d_trilinear_vs_ort():
    x = data((1, 2, 3, 4, 5))
    m = resize_model(x, scales=[1, 1, 2, 2, 2], mode="linear")
    check(m, {"x": x}, rtol=1e-5, atol=2e-5, threads=(1,))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64, np.float16, np.bool_])
def test_nearest_dtypes(dtype):
    # Nearest copies elements: the float result of the same data, cast, is the expectation.
    x = data((1, 2, 3, 5), dtype)
    xf = x.astype(F32)
    attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel")
    want = run_ort(resize_model(xf, scales=[1, 1, 2, 1.5], **attrs), {"x": xf})[0].astype(dtype)
    check(resize_model(x, scales=[1, 1, 2, 1.5], **attrs), {"x": x}, expected=[want])


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("w", [7, 8, 16, 21, 37])
def test_nearest_x2_rows(dtype, w):
    # Nearest x2 whose column table is o -> o // 2 (rows of 16 input bytes or more take
    # the board kernels' row doubling): each element twice along both axes.
    x = data((1, 3, 5, w), dtype)
    attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    want = np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)
    check(resize_model(x, scales=[1, 1, 2, 2], **attrs), {"x": x}, expected=[want])
    # the same sizes with a table that is not o -> o // 2 (align_corners)
    xf = x.astype(F32)
    attrs = dict(mode="nearest", coordinate_transformation_mode="align_corners", nearest_mode="floor")
    want = run_ort(resize_model(xf, sizes=[1, 3, 10, 2 * w], **attrs), {"x": xf})[0].astype(dtype)
    check(resize_model(x, sizes=[1, 3, 10, 2 * w], **attrs), {"x": x}, expected=[want])


@pytest.mark.parametrize("seed", range(12))
def test_align_corners_at_random_scales_vs_ort(seed):
    """align_corners at non-integer scales (a 5x7 input at [1.5, 3.0] was 0.56 off when
    the unrounded output length was used): random sizes, scales and modes."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(1, 10, 2))
    sh, sw = (float(np.float32(v)) for v in rng.uniform(0.3, 3.5, 2))
    if int(h * sh) < 1 or int(w * sw) < 1:
        sh, sw = sh + 1.0, sw + 1.0
    mode = ["linear", "cubic", "nearest"][seed % 3]
    x = data((1, 2, h, w))
    m = resize_model(x, scales=[1, 1, sh, sw], mode=mode, coordinate_transformation_mode="align_corners")
    check(m, {"x": x}, rtol=1e-4, atol=1e-4, threads=(1,))


def test_align_corners_5x7_by_1_5_and_3():
    x = data((1, 2, 5, 7))
    m = resize_model(x, scales=[1, 1, 1.5, 3.0], mode="linear", coordinate_transformation_mode="align_corners")
    check(m, {"x": x}, rtol=1e-5, atol=2e-5, threads=(1,))


# ---- against onnx's ReferenceEvaluator -------------------------------------------------------

REF_CASES = [
    dict(scales=[1, 1, 1.7, 0.6], mode="nearest", nearest_mode="floor"),
    dict(scales=[1, 1, 0.5, 0.3], mode="linear", antialias=1),
    dict(sizes=[1, 2, 3, 2], mode="cubic", antialias=1),
    dict(scales=[1, 1, 0.6, 0.8], mode="cubic", antialias=1, exclude_outside=1, cubic_coeff_a=-0.5),
    dict(sizes=[1, 2, 4, 4], roi=[0, 0, 0.4, 0.6, 1, 1, 1.2, 0.7], mode="linear",
         coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0),
    dict(sizes=[1, 2, 3, 5], roi=[0, 0, -0.2, 0.1, 1, 1, 0.8, 1.3], mode="nearest",
         coordinate_transformation_mode="tf_crop_and_resize"),
    dict(sizes=[6, 5], axes=[3, 2], mode="nearest", keep_aspect_ratio_policy="not_larger"),
    dict(sizes=[6, 5], axes=[2, 3], mode="linear", keep_aspect_ratio_policy="not_smaller"),
    dict(scales=[2.5, 0.5], axes=[3, 2], mode="linear"),
    dict(sizes=[5, 3], roi=[0.1, 0.2, 0.9, 0.7], axes=[2, 3], mode="cubic",
         coordinate_transformation_mode="tf_crop_and_resize"),
]


# Whole-number source coordinates that onnx's evaluator computes 1 ulp off (half_pixel_symmetric
# at 0.5: 3.5 * (1 - 3 / 3.5) + 1 - 0.5 = 1 exactly, which it takes for just below 1 and reads
# row 0); edgert snaps them, as onnxruntime's arithmetic lands on them.
ORT_EXACT_CASES = [
    dict(scales=[1, 1, 0.5, 1.5], mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
    dict(scales=[1, 1, 0.5, 0.7], mode="nearest", coordinate_transformation_mode="half_pixel_symmetric"),
    dict(sizes=[1, 2, 17, 9], mode="nearest", coordinate_transformation_mode="half_pixel_symmetric"),
]


@pytest.mark.parametrize("case", ORT_EXACT_CASES, ids=[str(i) for i in range(len(ORT_EXACT_CASES))])
def test_whole_number_coordinates_vs_ort(case):
    x = data((1, 2, 7, 9))
    check(resize_model(x, **case), {"x": x}, rtol=1e-5, atol=2e-5, threads=(1,))


@pytest.mark.parametrize("case", REF_CASES, ids=[str(i) for i in range(len(REF_CASES))])
def test_vs_onnx_reference(case):
    x = data((1, 2, 7, 9))
    m = resize_model(x, **case)
    want = onnx_reference(m, {"x": x})
    check(m, {"x": x}, rtol=1e-5, atol=2e-5, expected=want)


# ---- rejected ------------------------------------------------------------------------

def test_rejects_runtime_scales():
    x = data((1, 1, 2, 2))
    m = make_model(helper.make_node("Resize", ["x", "", "s"], ["y"]), {"x": x, "s": np.ones(4, F32)}, ["y"], opset=13)
    rejects(m, "constant")


def test_rejects_linear_on_integers():
    x = data((1, 1, 2, 2), np.uint8)
    rejects(resize_model(x, scales=[1, 1, 2, 2], mode="linear"), "float32")


def test_rejects_nearest_antialias_and_unknown_modes():
    x = data((1, 1, 4, 4))
    rejects(resize_model(x, scales=[1, 1, 0.5, 0.5], mode="nearest", antialias=1))
    rejects(resize_model(x, scales=[1, 1, 2, 2], mode="linear", coordinate_transformation_mode="bogus"))
    rejects(resize_model(x, scales=[1, 1, 2, 2], mode="area"))


def test_rejects_too_many_tap_combinations():
    x = data((2, 2, 2, 2, 2, 2))
    rejects(resize_model(x, scales=[2] * 6, mode="cubic"), "combinations")
