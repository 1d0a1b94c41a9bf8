#!/usr/bin/env python3
"""How the example inputs in this folder were made (run once; the results are committed,
so the examples need neither fonts nor a speech synthesizer on the board).

    python examples/data/make_data.py

- page.png: a short printed page, rendered with Pillow and the DejaVu fonts
  (Debian: fonts-dejavu-core). 500x380 pixels: not a multiple of 32, so detect.py shows
  how a size the text detector does not run is padded to the next one it does.
- speech.wav: 16 kHz mono 16-bit, 4.4 s: two spoken phrases with pauses around them,
  from espeak-ng, resampled with sox (Debian: espeak-ng, sox), over faint noise.
"""
from __future__ import annotations

import pathlib
import subprocess
import tempfile
import wave

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
FONTS = pathlib.Path("/usr/share/fonts/truetype/dejavu")

LINES = [
    ("DejaVuSans-Bold.ttf", 24, "Field notes: edgert on a board"),
    ("DejaVuSerif.ttf", 17, "Convert the trained model on your PC,"),
    ("DejaVuSerif.ttf", 17, "copy the one file to the Raspberry Pi,"),
    ("DejaVuSerif.ttf", 17, "and run it with the small C runtime."),
    ("DejaVuSerif.ttf", 17, "The memory is planned before deployment:"),
    ("DejaVuSerif.ttf", 17, "nothing is allocated while it runs."),
    ("DejaVuSans.ttf", 13, "Page 1 of 1      printed 28 November 2026"),
]


def page() -> None:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (500, 380), (246, 243, 234))
    draw = ImageDraw.Draw(img)
    y = 34
    for k, (font, size, text) in enumerate(LINES):
        f = ImageFont.truetype(str(FONTS / font), size)
        if k == len(LINES) - 1:
            y += 18
        draw.text((36, y), text, fill=(30, 30, 40), font=f)
        y += int(size * (1.9 if k == 0 else 1.75))
    img.save(HERE / "page.png", optimize=True)


def speech() -> None:
    rate = 16000
    phrases = ["Hello from the Raspberry Pi.", "Listening."]
    pauses = [0.5, 0.7, 0.5]                       # seconds: before, between, after
    parts = [np.zeros(int(pauses[0] * rate), np.int16)]
    with tempfile.TemporaryDirectory() as tmp:
        for k, text in enumerate(phrases):
            raw, wav = pathlib.Path(tmp) / f"{k}.wav", pathlib.Path(tmp) / f"{k}-16k.wav"
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "160", "-w", str(raw), text], check=True)
            subprocess.run(["sox", str(raw), "-r", str(rate), "-c", "1", "-b", "16", str(wav)], check=True)
            with wave.open(str(wav)) as w:
                parts.append(np.frombuffer(w.readframes(w.getnframes()), np.int16))
            parts.append(np.zeros(int(pauses[k + 1] * rate), np.int16))
    audio = np.concatenate(parts).astype(np.int32)
    audio += np.rint(np.random.default_rng(0).normal(0.0, 30.0, audio.shape)).astype(np.int32)  # about -60 dBFS
    audio = np.clip(audio, -32768, 32767).astype(np.int16)
    with wave.open(str(HERE / "speech.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(audio.tobytes())


if __name__ == "__main__":
    page()
    speech()
