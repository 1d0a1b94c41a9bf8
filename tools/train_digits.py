#!/usr/bin/env python3
"""Trains the small digits CNN shipped as edgert/data/digits_cnn.onnx.

Data: scikit-learn's bundled 8x8 digits (1,797 images, no download). A stratified 20 %
test split (seed 0) is written next to the model as digits_test.npz ("input"
[N,1,8,8] float32 in 0..1, "label" [N] int64), and 256 images of the training split
(a seeded choice) as digits_calib.npz ("input" only): the calibration samples of int8
quantization. The exported graph keeps its BatchNormalization nodes so the converter's
Conv+BN folding is exercised.

Needs torch (CPU) and scikit-learn; CI does not run this script (its outputs are committed).
--calib-only rewrites digits_calib.npz from the same split without training (needs only
scikit-learn).

    python tools/train_digits.py [--epochs 60] [--out edgert/data] [--calib-only]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test); images scaled to 0..1, shape [N,1,8,8]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)
    return xtr, ytr, xte, yte


CALIB_COUNT = 256


def save_calibration(xtr: np.ndarray, out: str) -> str:
    """Writes CALIB_COUNT training images, chosen by a fixed seed and kept in split order, as
    out/digits_calib.npz; returns its path."""
    pick = np.sort(np.random.default_rng(1).permutation(len(xtr))[:CALIB_COUNT])
    path = os.path.join(out, "digits_calib.npz")
    np.savez_compressed(path, input=np.ascontiguousarray(xtr[pick], np.float32))
    return path


def build_net():
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, 10),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--out", default=os.path.join(ROOT, "edgert", "data"))
    ap.add_argument("--calib-only", action="store_true",
                    help="only write digits_calib.npz (no training; the model and test split stay as they are)")
    args = ap.parse_args(argv)

    if args.calib_only:
        os.makedirs(args.out, exist_ok=True)
        path = save_calibration(load_split()[0], args.out)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
        return 0

    import torch

    torch.manual_seed(0)
    np.random.seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    xtr, ytr, xte, yte = load_split()
    net = build_net()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    gen = torch.Generator().manual_seed(0)
    for epoch in range(args.epochs):
        net.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for k in range(0, len(perm), 64):
            idx = perm[k:k + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1}: train loss {total / len(xt):.4f}")

    net.eval()
    with torch.no_grad():
        pred = net(torch.from_numpy(xte)).argmax(1).numpy()
    acc = float((pred == yte).mean())
    print(f"test accuracy (torch): {acc:.4f} on {len(yte)} images")

    os.makedirs(args.out, exist_ok=True)
    onnx_path = os.path.join(args.out, "digits_cnn.onnx")
    torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), onnx_path, input_names=["input"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    _strip(onnx_path)
    np.savez_compressed(os.path.join(args.out, "digits_test.npz"), input=xte.astype(np.float32),
                        label=yte.astype(np.int64))
    calib_path = save_calibration(xtr, args.out)

    import onnx
    import onnxruntime as ort

    m = onnx.load(onnx_path)
    ops = sorted({n.op_type for n in m.graph.node})
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    ort_pred = np.array([int(np.argmax(s.run(None, {"input": xte[k:k + 1]})[0])) for k in range(len(xte))])
    ort_acc = float((ort_pred == yte).mean())
    print(f"test accuracy (onnxruntime): {ort_acc:.4f}; ops {ops}")
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path)} bytes) and digits_test.npz "
          f"({os.path.getsize(os.path.join(args.out, 'digits_test.npz'))} bytes) and digits_calib.npz "
          f"({os.path.getsize(calib_path)} bytes)")
    if "BatchNormalization" not in ops:
        print("error: the exported graph lost its BatchNormalization nodes", file=sys.stderr)
        return 1
    return 0


def _strip(path: str) -> None:
    """Drops the exporter's doc strings and metadata so the committed file is small and stable."""
    import onnx

    m = onnx.load(path)
    m.producer_version = ""
    m.doc_string = ""
    for n in m.graph.node:
        n.doc_string = ""
    del m.graph.value_info[:]
    onnx.checker.check_model(m)
    onnx.save(m, path)


if __name__ == "__main__":
    sys.exit(main())
