#!/usr/bin/env python3
"""MobileNetV2 (torchvision's layout) as an ONNX benchmark model with random weights.

    python tools/mobilenetv2.py -o DIR [--seed 0] [--n-calib 32]

writes DIR/mobilenetv2.onnx and DIR/calib.npz ({"input": float32 [N,3,224,224]}).

The graph is what `torch.onnx.export` gives for torchvision's `mobilenet_v2()` in eval
mode (width 1.0, 224x224): BatchNorm folded into the convolutions, ReLU6 as Clip(0, 6),
the inverted residuals (expansion 6, the first block 1) with their Add, a 1280-channel
last 1x1 convolution, GlobalAveragePool, Flatten and a 1000-class Gemm. Opset 13, input
"input" [1,3,224,224], output "output" [1,1000].

Weights: convolutions He-normal (fan_out, as torchvision initializes them), the Gemm
normal(0, 0.01). The BatchNorm folded into each convolution has random gamma and beta and
running statistics measured on the calibration images (the mean and variance of the
convolution's output over them, as training leaves them), so each pre-activation is
about N(beta, gamma^2) per channel and the activations have the spread of a trained
network's rather than blowing up or dying out through the 52 layers. The calibration
images are smooth synthetic pictures (tools/models.py's generator) normalized with
ImageNet's mean and std, as torchvision's preprocessing does.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))

# (expansion t, output channels c, repeats n, first stride s): torchvision's table.
SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1)]
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
BN_EPS = 1e-5


def images(n: int, seed: int) -> np.ndarray:
    """n synthetic 224x224 RGB pictures, ImageNet-normalized: float32 [n,3,224,224]."""
    from tools.models import _smooth_image

    rng = np.random.default_rng(seed)
    img = np.stack([_smooth_image(rng, 3, 224, 224) for _ in range(n)])
    return np.ascontiguousarray((img - IMAGENET_MEAN) / IMAGENET_STD, np.float32)


def _conv(x: np.ndarray, w: np.ndarray, stride: int, group: int) -> np.ndarray:
    """NCHW convolution, square kernel, 'same' padding k//2, no bias (group 1 or depthwise)."""
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    p = k // 2
    oh, ow = (h + 2 * p - k) // stride + 1, (wd + 2 * p - k) // stride + 1
    if k == 1 and group == 1:
        y = np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x[:, :, ::stride, ::stride], optimize=True)
        return y.astype(np.float32)
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    y = np.zeros((n, o, oh, ow), np.float32)
    for ky in range(k):
        for kx in range(k):
            tap = xp[:, :, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride]
            if group == 1:
                y += np.einsum("oc,nchw->nohw", w[:, :, ky, kx], tap, optimize=True)
            else:
                y += w[None, :, 0, ky, kx, None, None] * tap
    return y


class _Builder:
    def __init__(self, rng: np.random.Generator, calib: np.ndarray):
        from onnx import helper

        self.h = helper
        self.rng = rng
        self.x = calib  # the running calibration activations (numpy forward pass)
        self.nodes: list = []
        self.inits: list = []
        self.k = 0

    def _name(self, kind: str) -> str:
        self.k += 1
        return f"{kind}_{self.k}"

    def conv_bn(self, src: str, cin: int, cout: int, k: int, stride: int, group: int, relu6: bool) -> str:
        from onnx import numpy_helper

        fan_out = cout * k * k // group
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_out)).astype(np.float32)
        y = _conv(self.x, w, stride, group)
        mean = y.mean(axis=(0, 2, 3))
        var = y.var(axis=(0, 2, 3))
        gamma = self.rng.uniform(0.5, 1.5, cout).astype(np.float32)
        beta = (self.rng.standard_normal(cout) * (0.5 if relu6 else 0.1)).astype(np.float32)
        scale = gamma / np.sqrt(var + BN_EPS)
        wf = (w * scale[:, None, None, None]).astype(np.float32)
        bf = (beta - mean * scale).astype(np.float32)
        y = y * scale[None, :, None, None] + bf[None, :, None, None]
        name = self._name("Conv")
        self.inits += [numpy_helper.from_array(wf, f"{name}.weight"), numpy_helper.from_array(bf, f"{name}.bias")]
        out = f"{name}_out"
        self.nodes.append(self.h.make_node("Conv", [src, f"{name}.weight", f"{name}.bias"], [out], name=name,
                                           kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                                           group=group, dilations=[1, 1]))
        if relu6:
            clip = self._name("Clip")
            self.nodes.append(self.h.make_node("Clip", [out, "clip_min", "clip_max"], [f"{clip}_out"], name=clip))
            out = f"{clip}_out"
            y = np.clip(y, 0.0, 6.0)
        self.x = y.astype(np.float32)
        return out

    def inverted_residual(self, src: str, cin: int, cout: int, stride: int, t: int) -> str:
        x_in = self.x
        hidden = cin * t
        h = src
        if t != 1:
            h = self.conv_bn(h, cin, hidden, 1, 1, 1, True)
        h = self.conv_bn(h, hidden, hidden, 3, stride, hidden, True)
        h = self.conv_bn(h, hidden, cout, 1, 1, 1, False)
        if stride == 1 and cin == cout:
            add = self._name("Add")
            self.nodes.append(self.h.make_node("Add", [src, h], [f"{add}_out"], name=add))
            self.x = (self.x + x_in).astype(np.float32)
            return f"{add}_out"
        return h


def build(seed: int = 0, n_calib: int = 32) -> tuple[bytes, np.ndarray]:
    """(the serialized ONNX model, the calibration images [n_calib,3,224,224])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    calib = images(n_calib, seed + 1000)
    rng = np.random.default_rng(seed)
    # BatchNorm statistics from a subset keep the numpy forward pass small.
    b = _Builder(rng, calib[: min(n_calib, 8)])
    b.inits += [numpy_helper.from_array(np.array(0.0, np.float32), "clip_min"),
                numpy_helper.from_array(np.array(6.0, np.float32), "clip_max")]
    x = b.conv_bn("input", 3, 32, 3, 2, 1, True)
    cin = 32
    for t, c, n, s in SETTINGS:
        for i in range(n):
            x = b.inverted_residual(x, cin, c, s if i == 0 else 1, t)
            cin = c
    x = b.conv_bn(x, cin, 1280, 1, 1, 1, True)
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool_out"], name="GlobalAveragePool"))
    b.nodes.append(helper.make_node("Flatten", ["pool_out"], ["flat_out"], name="Flatten", axis=1))
    fc_w = (rng.standard_normal((1000, 1280)) * 0.01).astype(np.float32)
    fc_b = np.zeros(1000, np.float32)
    b.inits += [numpy_helper.from_array(fc_w, "classifier.weight"), numpy_helper.from_array(fc_b, "classifier.bias")]
    b.nodes.append(helper.make_node("Gemm", ["flat_out", "classifier.weight", "classifier.bias"], ["output"],
                                    name="Gemm", alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(b.nodes, "mobilenetv2",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="edgert-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString(), calib


def write(out_dir: str | pathlib.Path, seed: int = 0, n_calib: int = 32) -> tuple[pathlib.Path, pathlib.Path]:
    """Writes mobilenetv2.onnx and calib.npz into out_dir; returns their paths."""
    d = pathlib.Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    data, calib = build(seed, n_calib)
    onnx_path, calib_path = d / "mobilenetv2.onnx", d / "calib.npz"
    onnx_path.write_bytes(data)
    np.savez(calib_path, input=calib)
    return onnx_path, calib_path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output-dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-calib", type=int, default=32, help="calibration images in calib.npz")
    a = ap.parse_args()
    if a.n_calib < 1:
        ap.error("--n-calib must be >= 1")
    onnx_path, calib_path = write(a.output_dir, a.seed, a.n_calib)
    print(f"{onnx_path} ({onnx_path.stat().st_size / 1e6:.1f} MB), {calib_path}")


if __name__ == "__main__":
    main()
