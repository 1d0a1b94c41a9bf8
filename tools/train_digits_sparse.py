#!/usr/bin/env python3
"""Trains, prunes and fine-tunes the sparse digits CNN shipped as
tests/data/digits_sparse90.onnx: the model that exercises sparse storage and the
sparse kernels (docs/sparse.md).

Same data and split as tools/train_digits.py (scikit-learn's bundled 8x8 digits, no
download). The network has a wide 1x1-convolution block (256 channels at 8x8) and a
256-wide fully connected layer, so most of its multiply-adds sit in layers the sparse
kernel handles. After dense training, every layer but the first is pruned by weight
magnitude (torch.nn.utils.prune, L1 unstructured) in steps to SPARSITY, fine-tuning
after each step; the masks are then baked in, so the exported weights hold exact zeros.
BatchNormalization follows every convolution; the converter folds it into the weights
(a per-channel scale keeps zeros zero).

Needs torch (CPU) and scikit-learn; CI does not run this script (its output is committed).

    python tools/train_digits_sparse.py [--epochs 30] [--finetune 8] [--sparsity 0.9]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from train_digits import _strip, load_split  # noqa: E402


def build_net():
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 256, 1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.Conv2d(256, 256, 1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.Conv2d(256, 256, 1), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(256, 128), nn.ReLU(),
        nn.Linear(128, 10),
    )


def _train(net, xt, yt, epochs: int, lr: float, gen) -> None:
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    for epoch in range(epochs):
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
        if (epoch + 1) % 10 == 0 or epoch + 1 == epochs:
            print(f"  epoch {epoch + 1}: train loss {total / len(xt):.4f}")


def _accuracy(net, x: np.ndarray, y: np.ndarray) -> float:
    import torch

    net.eval()
    with torch.no_grad():
        return float((net(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--finetune", type=int, default=8, help="fine-tuning epochs after each pruning step")
    ap.add_argument("--sparsity", type=float, default=0.9)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "digits_sparse90.onnx"))
    args = ap.parse_args(argv)

    import torch
    import torch.nn as nn
    from torch.nn.utils import prune

    torch.manual_seed(0)
    np.random.seed(0)
    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(0)

    xtr, ytr, xte, yte = load_split()
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    net = build_net()
    print("dense training")
    _train(net, xt, yt, args.epochs, 3e-3, gen)
    print(f"dense test accuracy: {_accuracy(net, xte, yte):.4f}")

    layers = [m for m in net if isinstance(m, (nn.Conv2d, nn.Linear))][1:]
    steps = [args.sparsity * f for f in (0.5, 0.8, 1.0)]
    done = 0.0
    for target in steps:
        # Each call prunes a fraction of the weights still unpruned.
        step = 1.0 - (1.0 - target) / (1.0 - done)
        for m in layers:
            prune.l1_unstructured(m, "weight", amount=step)
        done = target
        print(f"pruned to {target:.0%}, fine-tuning")
        _train(net, xt, yt, args.finetune, 1e-3, gen)
        print(f"test accuracy at {target:.0%}: {_accuracy(net, xte, yte):.4f}")
    for m in layers:
        prune.remove(m, "weight")
    zeros = sum(int((m.weight == 0).sum()) for m in layers)
    total = sum(m.weight.numel() for m in layers)
    acc = _accuracy(net, xte, yte)
    print(f"pruned layers: {zeros / total:.1%} zeros of {total} weights; test accuracy {acc:.4f}")

    net.eval()
    torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), args.out, input_names=["input"], output_names=["logits"],
                      opset_version=17, dynamo=False)
    _strip(args.out)

    import onnxruntime as ort

    s = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"])
    pred = np.array([int(np.argmax(s.run(None, {"input": xte[k:k + 1]})[0])) for k in range(len(xte))])
    print(f"onnxruntime test accuracy {float((pred == yte).mean()):.4f}; wrote {args.out} "
          f"({os.path.getsize(args.out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
