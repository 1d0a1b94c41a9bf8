"""Calibration data and the runs that observe every tensor of a float graph.

Calibration data is a dict {input name: array with samples stacked on axis 0}, the
path of an .npz file with such arrays, or a folder of .npz files (read in name order
and concatenated). The graph is run by the C runtime itself: a copy of it exposing
every float arena tensor as an output is serialized and run with edgert.Session, one
model-sized batch at a time.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ...errors import ConversionError
from ..ir import Graph
from ..progress import Progress  # noqa: F401  (re-exported: callers import it from here)
from .observers import Observer


def load_calibration(data: Any) -> dict[str, np.ndarray]:
    """{input name: stacked samples} from a dict, an .npz path, a folder of .npz, or a
    list of feed dicts (one batch each, as an onnxruntime calibration reader yields)."""
    if isinstance(data, dict):
        return {k: np.asarray(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)) and data and all(isinstance(f, dict) for f in data):
        names = set(data[0])
        if any(set(f) != names for f in data):
            raise ConversionError("calibration feeds name different inputs")
        return {k: np.concatenate([np.asarray(f[k]) for f in data], axis=0) for k in data[0]}
    if not isinstance(data, (str, bytes, os.PathLike)):
        raise ConversionError(f"calibration data must be a dict {{input name: samples}}, an .npz path, a "
                              f"folder of .npz or a list of feed dicts, not {type(data).__name__}")
    path = os.fspath(data)
    if os.path.isdir(path):
        files = sorted(f for f in os.listdir(path) if f.endswith(".npz"))
        if not files:
            raise ConversionError(f"calibration folder {path} holds no .npz files")
        parts: dict[str, list[np.ndarray]] = {}
        for f in files:
            with np.load(os.path.join(path, f), allow_pickle=False) as z:
                for k in z.files:
                    parts.setdefault(k, []).append(z[k])
        return {k: np.concatenate(v, axis=0) for k, v in parts.items()}
    if not os.path.exists(path):
        raise ConversionError(f"calibration data {path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise ConversionError(f"calibration data {path}: cannot read ({e})") from None


def batches(g: Graph, data: dict[str, np.ndarray], limit: int | None = None) -> list[dict[str, np.ndarray]]:
    """The feeds of every calibration run: each graph input's samples cut into pieces of
    the input's shape (stacked samples [S, *shape] or, when the input's first dimension
    is the batch, [S*B, *shape[1:]])."""
    pairs = g.metadata.get("state_pairs") or ()
    streamed = {i for _, i in pairs if i not in data}  # state inputs carried over the samples
    names = [n for n in g.inputs if n not in streamed]
    missing = [n for n in names if n not in data]
    if missing:
        raise ConversionError(f"calibration data lacks input(s) {missing}; it has {sorted(data)}")
    per_input = []
    for name in names:
        t = g.tensors[name]
        arr = np.asarray(data[name])
        shape = tuple(t.shape)
        if arr.shape[1:] == shape:
            pieces = [arr[k] for k in range(arr.shape[0])]
        elif shape and arr.shape[1:] == shape[1:] and shape[0] > 0 and arr.shape[0] % shape[0] == 0:
            pieces = [arr[k:k + shape[0]] for k in range(0, arr.shape[0], shape[0])]
        else:
            raise ConversionError(f"calibration data for {name!r} has shape {list(arr.shape)}; "
                                  f"expected [samples, {', '.join(map(str, shape))}]")
        per_input.append([np.ascontiguousarray(p.astype(t.dtype, copy=False)) for p in pieces])
    n = min(len(p) for p in per_input)
    if n == 0:
        raise ConversionError("calibration data holds no samples")
    if limit is not None:
        n = min(n, limit)
    feeds = [{name: per_input[i][k] for i, name in enumerate(names)} for k in range(n)]
    if streamed:  # the samples are a stream of frames: each one's state is the float model's after the last
        stream_feeds(g, feeds, pairs, g.metadata.get("state_initial") or {})
    return feeds


def stream_feeds(g: Graph, feeds: list[dict[str, np.ndarray]], pairs, initial: dict[str, np.ndarray]) -> None:
    """Fills each feed's state inputs, in order, with the states the float graph carries
    from the previous feed (the first from the initial values): calibration data for a
    stateful model is a stream of frames."""
    from ..emit import serialize
    from ...runtime.session import Session
    missing = [(o, i) for o, i in pairs if any(i not in f for f in feeds)]
    if not missing:
        return
    h = Graph()
    h.tensors, h.nodes, h.inputs, h.outputs, h.metadata = g.tensors, g.nodes, list(g.inputs), [o for o, _ in missing], {}
    cur = {i: np.zeros(g.tensors[i].shape, g.tensors[i].dtype) if initial.get(i) is None
           else np.asarray(initial[i]).astype(g.tensors[i].dtype).reshape(g.tensors[i].shape) for _, i in missing}
    with Session(serialize(h)) as sess:
        for f in feeds:
            f.update({i: v.copy() for i, v in cur.items()})
            outs = sess.run(None, f)
            cur = {i: v for (_, i), v in zip(missing, outs)}


def exposed_session(g: Graph, names: list[str]):
    """A Session running g with `names` (float arena tensors) as its outputs. A graph
    with fallback partitions runs on the ops' numpy meanings (the partitions on their
    own runtime) when the C runtime in use cannot run partitions."""
    from ..emit import serialize
    from ...runtime.session import Session

    h = Graph()
    h.tensors, h.nodes, h.inputs = g.tensors, g.nodes, list(g.inputs)
    h.outputs = list(dict.fromkeys(list(g.outputs) + [n for n in names if n not in g.inputs]))
    h.metadata = {}
    if any(n.op == "partition" for n in g.nodes) and not hasattr(Session, "partitions"):
        return ReferenceSession(h), h.outputs
    return Session(serialize(h)), h.outputs


class ReferenceSession:
    """Runs a Graph node by node with each op's numpy `reference` (edgert/converter/ops/);
    `run(None, feeds)` returns the graph outputs like Session.run."""

    def __init__(self, g: Graph):
        from .. import ops

        self.g = g
        self.defs = [ops.get(n.op) for n in g.nodes]

    def run(self, output_names, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        g = self.g
        values: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in feeds.items()}
        last_use = {}
        for k, n in enumerate(g.nodes):
            for i in n.inputs:
                last_use[i] = k
        keep = set(output_names or g.outputs)
        for k, (n, d) in enumerate(zip(g.nodes, self.defs)):
            ins = [None if not i else (values[i] if i in values else g.tensors[i].data) for i in n.inputs]
            for o, v in zip(n.outputs, d.reference(n, ins)):
                values[o] = np.asarray(v)
            for i in n.inputs:  # free what no later node reads
                if i and last_use.get(i) == k and i not in keep and i not in feeds:
                    values.pop(i, None)
        return [values[o] if o in values else g.tensors[o].data for o in (output_names or g.outputs)]

    def close(self) -> None:
        self.values = None


def float_tensors(g: Graph) -> list[str]:
    """Every float32 tensor computed at run time (graph inputs and node outputs)."""
    names = list(g.inputs) + [o for n in g.nodes for o in n.outputs]
    return [t for t in dict.fromkeys(names) if g.tensors[t].dtype == np.float32 and not g.tensors[t].is_const]


def _channel_sum(v: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(per-channel sum in float64, values per channel) of v."""
    v = np.asarray(v, np.float64)
    if v.ndim >= 3:
        axes = (0,) + tuple(range(2, v.ndim))
        return v.sum(axis=axes), v.size // v.shape[1]
    if v.ndim == 2:
        return v.sum(axis=0), v.shape[0]
    return None


def observe(g: Graph, feeds: list[dict[str, np.ndarray]], method: str, progress: bool | None = None,
            tensors: list[str] | None = None,
            means: dict[str, np.ndarray] | None = None) -> dict[str, tuple[float, float]]:
    """Runs g on every feed and returns the observed range of each float tensor. For each
    key of `means`, fills in the tensor's mean per channel (axis 1 of a rank >= 3
    tensor, the last axis of a matrix) over all samples."""
    names = tensors if tensors is not None else float_tensors(g)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    sess, outs = exposed_session(g, names)
    observers = {t: Observer(method) for t in names}
    passes = 2 if observers and next(iter(observers.values())).needs_histogram else 1
    bar = Progress(f"calibrating ({method})", passes * len(feeds), progress)
    done = 0
    for p in range(passes):
        for feed in feeds:
            values = dict(zip(outs, sess.run(None, feed)))
            values.update(feed)
            for t, ob in observers.items():
                v = values.get(t)
                if v is None:
                    continue
                if p == 0:
                    ob.update_range(v)
                    if means is not None and t in means:
                        m = _channel_sum(v)
                        if m is not None:
                            sums[t] = sums.get(t, 0.0) + m[0]
                            counts[t] = counts.get(t, 0) + m[1]
                else:
                    ob.update_hist(v)
            done += 1
            bar.update(done)
    sess.close()
    if means is not None:
        for t in list(means):
            if t in sums and counts[t]:
                means[t] = sums[t] / counts[t]
            else:
                del means[t]
    # Graph outputs keep their full range: clipping them (logits) would change results.
    return {t: (ob.lo, ob.hi) if t in g.outputs and np.isfinite(ob.lo) else ob.range()
            for t, ob in observers.items()}
