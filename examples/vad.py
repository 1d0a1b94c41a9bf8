#!/usr/bin/env python3
"""Voice activity in a WAV file, frame by frame, with a stateful model.

    python examples/vad.py [WAV] [--model FILE.edgert] [--threshold 0.5]

The model is silero-vad (v6, from the silero-vad package): 16 kHz audio in frames of 512
samples (32 ms), each given with the last 64 samples of the frame before it, and a
recurrent state of [2, 1, 128] that carries what it heard from one frame to the next.
The frame size is fixed at conversion (input [1, 576], the sample rate frozen to 16000).

The state lives in the session: the conversion binds the `stateN` output to the `state`
input (`--state stateN=state`, docs/runtime.md "State"), so each run reads the state the
run before it left, in place, and the loop feeds only the audio. `sess.reset_state()`
starts a new stream (here: before the file).

Prints the speech probability of each frame as a strip (one character per frame) and the
speech segments, with silero's hysteresis: speech starts at >= threshold and ends after
100 ms below threshold - 0.15.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
import wave

import numpy as np

import edgert

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402

RATE, FRAME, CONTEXT = 16000, 512, 64


def read_wav(path: str) -> np.ndarray:
    """A 16-bit PCM WAV file at 16 kHz as float32 in [-1, 1] (channels averaged)."""
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getframerate() != RATE:
            sys.exit(f"{path}: need 16-bit PCM at {RATE} Hz (e.g. sox IN.wav -r 16000 -b 16 OUT.wav)")
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2").reshape(-1, w.getnchannels())
    return pcm.mean(axis=1, dtype=np.float32) / 32768.0


def segments(probs: np.ndarray, threshold: float) -> list[tuple[float, float]]:
    """(start, end) seconds of speech: starts on a frame >= threshold, ends once frames
    have stayed below threshold - 0.15 for 100 ms."""
    out, start, quiet = [], None, 0
    hang = int(np.ceil(0.1 * RATE / FRAME))
    for k, p in enumerate(probs):
        if start is None:
            if p >= threshold:
                start, quiet = k, 0
        elif p < threshold - 0.15:
            quiet += 1
            if quiet >= hang:
                out.append((start * FRAME / RATE, (k - quiet + 1) * FRAME / RATE))
                start = None
        else:
            quiet = 0
    if start is not None:
        out.append((start * FRAME / RATE, len(probs) * FRAME / RATE))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wav", nargs="?", default=str(common.DATA / "speech.wav"))
    ap.add_argument("--model", help="a converted .edgert file to run (skips conversion)")
    ap.add_argument("--threshold", type=float, default=0.5)
    args = ap.parse_args(argv)

    def convert(src: pathlib.Path, out: pathlib.Path) -> None:
        edgert.convert(src, out, input_shapes={"input": [1, CONTEXT + FRAME], "state": [2, 1, 128]},
                       input_values={"sr": np.array(RATE, np.int64)}, state={"stateN": "state"})

    sess = edgert.Session(common.edgert_model(args.model, "silero_vad", "16k-state", convert))
    audio = read_wav(args.wav)
    n = len(audio) // FRAME
    sess.reset_state()                                       # a new stream: silence so far
    x = np.zeros((1, CONTEXT + FRAME), np.float32)
    probs = np.empty(n, np.float32)
    t = time.perf_counter()
    for k in range(n):
        x[0, :CONTEXT] = x[0, -CONTEXT:]                     # the previous frame's tail
        x[0, CONTEXT:] = audio[k * FRAME:(k + 1) * FRAME]
        prob, = sess.run(None, {"input": x})                 # the state stays in the session
        probs[k] = prob[0, 0]
    ms = (time.perf_counter() - t) * 1e3

    print(f"{pathlib.Path(args.wav).name}: {len(audio) / RATE:.2f} s, {n} frames of {FRAME * 1000 // RATE} ms "
          f"({ms / max(n, 1):.2f} ms per frame)")
    print("  " + "".join("#" if p >= args.threshold else "+" if p >= args.threshold - 0.15 else "." for p in probs))
    for a, b in segments(probs, args.threshold):
        print(f"  speech {a:5.2f} s - {b:5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
