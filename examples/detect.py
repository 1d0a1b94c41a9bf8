#!/usr/bin/env python3
"""Text detection at the picture's own size: one converted file for every size.

    python examples/detect.py [IMAGE] [-o BOXES.png] [--model FILE.edgert]

The model is PP-OCRv4's text detector (DB, from the rapidocr-onnxruntime package). It is
converted once with bounded height and width, 32..960 (`--input-shape x=1,3,32..960,32..960`
on the command line): the file is planned for the largest size and runs every size within
the bounds without allocating. The picture runs at its own size, or the next size the
model runs (its feature pyramid needs 32*k + {0, 29, 30, 31}; the session's input info
says so), padded at the right and bottom with the picture's edge; pictures larger than
960 are scaled down first. The probability map is then decoded into boxes (threshold,
connected regions, scored, grown as DB's "unclip" does), overlapping boxes are removed
by non-maximum suppression, and the picture is saved with the boxes drawn.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

import edgert

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402

BOUNDS = (32, 960)
THRESH, BOX_THRESH, UNCLIP, IOU = 0.3, 0.6, 1.5, 0.3   # rapidocr's DB settings, and NMS overlap


def allowed_size(n: int, bounds: tuple[int, int], step: tuple[int, list[int]]) -> int:
    """The smallest size >= n that the model runs: within its bounds and step * k + r for one
    of its residues r (as edgert.Session reports them for a bounded dimension)."""
    every, residues = step
    for size in range(max(n, bounds[0]), bounds[1] + 1):
        if size % every in residues:
            return size
    raise ValueError(f"no size >= {n} within {bounds}")


def model_input(img: Image.Image, info: edgert.TensorInfo) -> np.ndarray:
    """The picture as the detector's input at the smallest size it runs that holds the
    picture: BGR, (x/255 - 0.5) / 0.5 as PaddleOCR, padded by repeating the last row and
    column."""
    w, h = img.size
    rh, rw = (allowed_size(n, info.bounds[d], info.steps[d]) for n, d in ((h, 2), (w, 3)))
    a = np.asarray(img.convert("RGB"), np.float32)[:, :, ::-1] / 127.5 - 1.0
    a = np.pad(a, ((0, rh - h), (0, rw - w), (0, 0)), mode="edge")
    return np.ascontiguousarray(a.transpose(2, 0, 1)[None], np.float32)


def components(mask: np.ndarray) -> list[np.ndarray]:
    """8-connected regions of a boolean map, as arrays of (row, col) pixels. Runs of set
    pixels in each row are joined with the runs they touch in the row above (union-find)."""
    runs = []                                   # (row, start, end) with end exclusive
    for r in range(mask.shape[0]):
        d = np.diff(np.concatenate(([0], mask[r].view(np.int8), [0])))
        runs += [(r, int(a), int(b)) for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1))]
    parent = list(range(len(runs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    above, first = [], 0                        # the previous row's runs
    for i, (r, a, b) in enumerate(runs):
        while first < i and runs[first][0] < r - 1:
            first += 1
        above = [j for j in range(first, i) if runs[j][0] == r - 1]
        for j in above:
            if runs[j][1] <= b and a <= runs[j][2]:          # touching, diagonals included
                parent[find(j)] = find(i)
    groups: dict[int, list[tuple[int, int, int]]] = {}
    for i, run in enumerate(runs):
        groups.setdefault(find(i), []).append(run)
    return [np.array([(r, c) for r, a, b in g for c in range(a, b)]) for g in groups.values()]


def decode(prob: np.ndarray) -> list[tuple[float, tuple[int, int, int, int]]]:
    """DB's probability map [H, W] -> [(score, (x0, y0, x1, y1))]: regions above THRESH,
    scored by their mean probability, kept above BOX_THRESH, each box grown by
    area * UNCLIP / perimeter on every side (the text's border, which DB shrinks in training)."""
    h, w = prob.shape
    boxes = []
    for pix in components(prob > THRESH):
        if len(pix) < 10:
            continue
        score = float(prob[pix[:, 0], pix[:, 1]].mean())
        if score < BOX_THRESH:
            continue
        y0, x0 = pix.min(0)
        y1, x1 = pix.max(0) + 1
        bw, bh = x1 - x0, y1 - y0
        grow = bw * bh * UNCLIP / (2 * (bw + bh))
        boxes.append((score, (max(0, int(x0 - grow)), max(0, int(y0 - grow)),
                              min(w, int(np.ceil(x1 + grow))), min(h, int(np.ceil(y1 + grow))))))
    return boxes


def nms(boxes: list[tuple[float, tuple[int, int, int, int]]], iou: float) -> list:
    """Non-maximum suppression: the best-scoring box first, then every box that overlaps
    no kept box by more than `iou` (intersection over union)."""
    kept: list = []
    for score, b in sorted(boxes, key=lambda sb: -sb[0]):
        area = (b[2] - b[0]) * (b[3] - b[1])
        for _, k in kept:
            iw = min(b[2], k[2]) - max(b[0], k[0])
            ih = min(b[3], k[3]) - max(b[1], k[1])
            inter = max(0, iw) * max(0, ih)
            if inter / (area + (k[2] - k[0]) * (k[3] - k[1]) - inter) > iou:
                break
        else:
            kept.append((score, b))
    return sorted(kept, key=lambda sb: (sb[1][1], sb[1][0]))      # reading order


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image", nargs="?", default=str(common.DATA / "page.png"))
    ap.add_argument("-o", "--output", default="boxes.png", help="the picture with the boxes drawn")
    ap.add_argument("--model", help="a converted .edgert file to run (skips conversion)")
    args = ap.parse_args(argv)

    def convert(src: pathlib.Path, out: pathlib.Path) -> None:
        edgert.convert(src, out, input_shapes={"x": [1, 3, BOUNDS, BOUNDS]})

    sess = edgert.Session(common.edgert_model(args.model, "ppocr_det", "32-960", convert))
    info, = sess.get_inputs()
    img = Image.open(args.image).convert("RGB")
    scale = min(1.0, BOUNDS[1] / max(img.size))
    if scale < 1.0:
        img = img.resize((int(img.width * scale), int(img.height * scale)), Image.BILINEAR)
    w, h = img.size
    x = model_input(img, info)
    rh, rw = x.shape[2:]
    t = time.perf_counter()
    prob, = sess.run(None, {"x": x})
    ms = (time.perf_counter() - t) * 1e3
    boxes = nms(decode(prob[0, 0, :h, :w]), IOU)

    print(f"{pathlib.Path(args.image).name}: {w}x{h}, run at {rw}x{rh} (bounds {BOUNDS[0]}..{BOUNDS[1]}), "
          f"{len(boxes)} text boxes ({ms:.0f} ms)")
    draw = ImageDraw.Draw(img)
    for score, (x0, y0, x1, y1) in boxes:
        print(f"  ({x0:3d},{y0:3d})-({x1:3d},{y1:3d})  score {score:.2f}")
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=(220, 30, 30), width=2)
    img.save(args.output)
    print(f"saved {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
