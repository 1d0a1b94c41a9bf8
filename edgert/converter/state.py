"""State pairs: a model output that the next run reads back as an input (a streaming
model's recurrent state: silero-vad's `state` -> `stateN`, DTLN's LSTM states, an ONNX
LSTM's `initial_h` -> `Y_h`). `edgert convert --state OUT=IN` binds them: the pair
leaves the model's inputs and outputs and lives in the session (docs/runtime.md, "State").

Through the pipeline the pair stays an ordinary graph input and output (so the passes
keep the output's nodes, and calibration can feed the input); `bind` takes them out
when the file is written, and the planner gives them a region of their own.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np

from ..errors import ConversionError
from .ir import Graph


def parse(value: Any) -> tuple[tuple[str, str], ...]:
    """The `state` option as ((output, input), ...): from a dict {output: input}, "OUT=IN"
    strings or (output, input) pairs."""
    if value is None or value == () or value == []:
        return ()
    items = value.items() if isinstance(value, dict) else [value] if isinstance(value, str) else list(value)
    out = []
    for item in items:
        if isinstance(item, str):
            if item.count("=") != 1 or not all(item.split("=")):
                raise ConversionError(f"--state {item!r}: expected OUT=IN (a model output, then the input that the "
                                      "next run reads it back as)")
            item = tuple(item.split("="))
        if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(v, str) and v for v in item)):
            raise ConversionError(f"state must be OUT=IN pairs (a dict {{output: input}} or 'OUT=IN' strings), "
                                  f"got {item!r}")
        out.append((item[0], item[1]))
    for what, k in (("output", 0), ("input", 1)):
        names = [p[k] for p in out]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConversionError(f"--state: {what} {dup[0]!r} is bound twice")
    return tuple(out)


# ---- suggestions ------------------------------------------------------------------

def _name_score(out: str, inp: str) -> int:
    """2 when the names follow a state pattern (state/stateN, h0/hn, x_in/x_out,
    initial_h/Y_h, past/present, prev/next), 0 otherwise."""
    o, i = out.lower(), inp.lower()
    if o == i:
        return 0
    for suffix in ("n", "_n", "_out", "out", "_next", "_new", "_1", "1", "_o"):
        if o == i + suffix:
            return 2
    for prefix in ("next_", "new_", "out_", "updated_"):
        if o == prefix + i:
            return 2
    pairs = [("_in", "_out"), ("in", "out"), ("0", "n"), ("_0", "_n"), ("_prev", "_next"), ("prev", "next"),
             ("_old", "_new"), ("_i", "_o")]
    for a, b in pairs:
        if i.endswith(a) and o == i[: len(i) - len(a)] + b:
            return 2
    for a, b in (("prev", "next"), ("past", "present"), ("in_", "out_"), ("initial_", "y_"), ("old", "new")):
        if i.startswith(a) and o == b + i[len(a):]:
            return 2
    m = re.fullmatch(r"(.*?)(state|h|c|hidden|cell)(\d*)", i)
    if m and re.fullmatch(re.escape(m.group(1)) + m.group(2) + r"(n|_?out|_?next|\d+)", o):
        return 2
    return 0


def suggest(g: Graph, exclude: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    """Pairs (output, input, why) that look like state: same shape and dtype, ranked by
    name pattern (then by rank, higher first). `exclude`: names already bound."""
    skip = set(exclude)
    found = []
    outputs = [o for o in g.outputs if o not in skip]
    for i in g.inputs:
        if i in skip:
            continue
        ti = g.tensors[i]
        for o in outputs:
            to = g.tensors[o]
            if o == i or to.shape != ti.shape or to.dtype != ti.dtype:
                continue
            score = _name_score(o, i)
            why = (f"names like a state pair, same shape {list(ti.shape)}" if score else
                   f"same shape {list(ti.shape)} and dtype {ti.dtype}")
            found.append((-score, -len(ti.shape), o, i, why))
    found.sort()
    return [(o, i, why) for _, _, o, i, why in found]


def hint(g: Graph, exclude: Iterable[str] = ()) -> str:
    """A line naming the likely state pairs of g (name patterns first), or ""."""
    pairs = suggest(g, exclude)
    if not pairs:
        return ""
    return "; ".join(f"--state {o}={i} ({why})" for o, i, why in pairs[:4])


# ---- the ONNX model before import ----------------------------------------------------

def prepare_model(model, pairs: tuple[tuple[str, str], ...], input_values: dict) -> tuple[Any, dict]:
    """(model, {input: initial value}): a state input with an ONNX initializer (an input
    with a default) becomes a plain input, and the initializer its initial value."""
    if not pairs:
        return model, {}
    g = model.graph
    input_names = {vi.name for vi in g.input}
    output_names = [o.name for o in g.output]
    inits = {t.name: t for t in g.initializer}
    for out, inp in pairs:
        problems = []
        if inp in input_values:
            raise ConversionError(f"--state {out}={inp}: {inp!r} is also frozen with --input-value")
        if inp not in input_names:
            problems.append(f"{inp!r} is not an input of the model (its inputs: "
                            f"{[n for n in (vi.name for vi in g.input) if n not in inits]})")
        if out not in output_names:
            problems.append(f"{out!r} is not an output of the model (its outputs: {output_names})")
        if problems:
            raise ConversionError(f"--state {out}={inp}: " + "; ".join(problems) + _later_hint)
    initial: dict[str, np.ndarray] = {}
    bound = {inp for _, inp in pairs}
    if not any(n in inits for n in bound):
        return model, initial
    from onnx import numpy_helper
    m = type(model)()
    m.CopyFrom(model)
    keep = []
    for t in m.graph.initializer:
        if t.name in bound:
            initial[t.name] = numpy_helper.to_array(t)
        else:
            keep.append(t)
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    return m, initial


_later_hint = " (the converted graph's likely pairs are listed once the names are right; convert without --state " \
              "to see them)"


def check_graph(g: Graph, pairs: tuple[tuple[str, str], ...]) -> None:
    """ConversionError when a pair's input and output differ in shape or dtype; the
    message lists the pairs that would fit."""
    for out, inp in pairs:
        ti, to = g.tensors.get(inp), g.tensors.get(out)
        if ti is None or to is None or inp not in g.inputs or out not in g.outputs:
            raise ConversionError(f"--state {out}={inp}: not an input/output pair of the converted graph")
        if ti.shape != to.shape or ti.dtype != to.dtype:
            h = hint(g, [p for pair in pairs if pair != (out, inp) for p in pair])
            raise ConversionError(f"--state {out}={inp}: output {out!r} is {list(to.shape)} {to.dtype}, input {inp!r} "
                                  f"is {list(ti.shape)} {ti.dtype}; a state pair needs one shape and dtype"
                                  + (f". Pairs that fit: {h}" if h else ""))


# ---- the file ----------------------------------------------------------------------

def bind(g: Graph, pairs: tuple[tuple[str, str], ...], initial: dict[str, np.ndarray]) -> tuple[Graph, list]:
    """(graph without the pairs among its inputs and outputs, [(input, output, initial or
    None)]) for the planner and the writer."""
    producers = g.producers()
    state = []
    for out, inp in pairs:
        if out not in g.outputs or inp not in g.inputs:
            raise ConversionError(f"--state {out}={inp}: the pair is no longer an output and an input of the graph")
        if out not in producers:
            raise ConversionError(f"--state {out}={inp}: output {out!r} is not computed by the model (it is an input "
                                  "or a constant), so there is no state to carry")
        readers = [n for n in g.nodes if inp in n.inputs] + [producers[out]]
        if any(n.op == "partition" for n in readers):
            raise ConversionError(f"--state {out}={inp}: the state is read or written by a fallback partition, "
                                  "which cannot hold state yet")
        if g.outputs.count(out) > 1:
            raise ConversionError(f"--state {out}={inp}: {out!r} is listed as an output twice")
        init = initial.get(inp)
        if init is not None:
            init = np.asarray(init)
            t = g.tensors[inp]
            if init.size != t.numel:
                raise ConversionError(f"--state {out}={inp}: the initializer of {inp!r} has shape {list(init.shape)}, "
                                      f"the input {list(t.shape)}")
        state.append((inp, out, init))
    h = Graph()
    h.tensors, h.nodes = g.tensors, g.nodes
    bound_in = {s[0] for s in state}
    bound_out = {s[1] for s in state}
    h.inputs = [t for t in g.inputs if t not in bound_in]
    h.outputs = [t for t in g.outputs if t not in bound_out]
    h.metadata = dict(g.metadata)
    names = g.metadata.get("output_names")
    if names:
        h.metadata["output_names"] = [n for n in names if n not in bound_out]
    return h, state
