"""Running a graph while pruning: outputs of a (copied) graph on calibration inputs
through the C runtime, and the error measures the report and the sensitivity search use."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..ir import Graph

MAX_SAMPLES = 32  # calibration samples used to measure errors


def load_calibration(data: Any, g: Graph) -> dict[str, np.ndarray] | None:
    """{graph input: [S, ...sample shape]} from an .npz path or a dict; a single array
    feeds the only input. Samples are split along axis 0 into the model's batch size."""
    if data is None:
        return None
    if isinstance(data, (str, os.PathLike)):
        with np.load(os.fspath(data), allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    if isinstance(data, np.ndarray):
        data = {g.inputs[0]: data}
    feeds = {}
    for name in g.inputs:
        if name in data:
            arr = np.asarray(data[name])
        elif len(g.inputs) == 1 and len(data) == 1:
            arr = np.asarray(next(iter(data.values())))
        else:
            from ...errors import ConversionError
            raise ConversionError(f"calibration data has no values for input {name!r}")
        feeds[name] = arr.astype(g.tensors[name].dtype, copy=False)
    return feeds


def random_inputs(g: Graph, samples: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in g.inputs:
        t = g.tensors[name]
        shape = (samples * t.shape[0],) + tuple(t.shape[1:]) if t.shape else (samples,)
        out[name] = (rng.random(shape).astype(t.dtype) if t.dtype.kind == "f"
                     else rng.integers(0, 2, shape).astype(t.dtype))
    return out


def run_graph(g: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Each output of g over all samples (concatenated along axis 0), run natively."""
    from ..emit import serialize
    from ...runtime.session import Session

    sess = Session(serialize(g))
    batch = {n: max(g.tensors[n].shape[0], 1) if g.tensors[n].shape else 1 for n in g.inputs}
    count = min(len(v) // batch[n] for n, v in feeds.items())
    count = min(count, MAX_SAMPLES)
    outs: list[list[np.ndarray]] = []
    for s in range(count):
        res = sess.run(None, {n: v[s * batch[n]:(s + 1) * batch[n]] for n, v in feeds.items()})
        outs.append([np.asarray(r, np.float64) for r in res])
    return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))] if outs else []


def sqnr_db(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """Signal-to-quantization-noise ratio of got against ref over all outputs, in dB
    (inf when equal)."""
    sig = sum(float(np.sum(r * r)) for r in ref)
    noise = sum(float(np.sum((r - x) ** 2)) for r, x in zip(ref, got))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(max(sig, 1e-30) / noise)


def relative_error(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """Noise over signal energy of all outputs, plus, for an output that looks like class
    scores ([..., classes > 1]), the share of samples whose top class changed: a
    saturated softmax can hide a wrong answer from the energy ratio."""
    sig = sum(float(np.sum(r * r)) for r in ref)
    noise = sum(float(np.sum((r - x) ** 2)) for r, x in zip(ref, got))
    err = noise / max(sig, 1e-30)
    for r, x in zip(ref, got):
        if r.ndim >= 2 and r.shape[-1] > 1 and r.size:
            err += float(np.mean(r.argmax(-1) != x.argmax(-1)))
    return err


def tensor_mean(g: Graph, tensor: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """Mean of an intermediate tensor over the samples (and its batch axis): the shape of
    the tensor without axis 0."""
    import copy

    h = copy.copy(g)
    h.outputs = [tensor]
    h.metadata = dict(g.metadata, output_names=None)
    (out,) = run_graph(h, feeds)
    return out.mean(axis=0)
