"""Static memory planning: every non-constant tensor, and every node's scratch, gets an
offset in one arena, computed offline.

Lifetimes are measured in steps: node k runs at step k; a graph input is defined at
step 0; a graph output lives to the end. A tensor is alive from the step that defines
it to the last step that reads it, inclusive, so a node's inputs and outputs never
share bytes unless the planner aliases them on purpose:

- view aliases: a `reshape` output shares its input's buffer (no bytes move);
- in-place aliases: an op registered `inplace` writes its output over its first input
  when that input's buffer is read by no later node and is not a graph output.

Shape programs (bounded dimensions, docs/runtime.md): the outputs of value nodes, which
the runtime's shape pass computes before a run, are alive from step 0, so that they
share no bytes with a graph input or another value node's output.

State tensors (docs/runtime.md, "State"): the input and output of each state pair keep
their values from one run to the next, so they take no part in lifetimes or aliases and
get a region of their own after the arena that is reused within a run: [state_offset,
arena_bytes), each tensor at its own 64-aligned offset.

Aliased tensors form one buffer. Buffers are placed greedily (largest first, lowest
offset that does not collide with a placed buffer alive at an overlapping step),
trying a few orders and keeping the smallest arena. `lower_bound` is the largest total
of bytes alive at one step; `verify` re-derives lifetimes from the graph and checks
that no two tensors alive at the same step overlap, except legal aliases.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from . import ops as edgert_ops
from ..errors import ConversionError
from .ir import Graph

ALIGN = 64
VIEW_OPS = {"reshape"}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclasses.dataclass
class Plan:
    offsets: dict[str, int]                 # arena tensor -> offset
    scratch: dict[int, tuple[int, int]]     # node index -> (offset, bytes)
    aliases: dict[str, tuple[str, str]]     # tensor -> (tensor whose buffer it shares, "view"|"inplace")
    arena_bytes: int
    lower_bound: int
    state_offset: int = 0                   # start of the state region (= arena_bytes when none)


# The inputs whose values an op's shape function reads (csrc/src/bounds.c, value_inputs).
VALUE_INPUTS = {"range": (0, 1, 2), "expand": (1,), "tile": (1,)}


def value_nodes(g: Graph) -> set[int]:
    """Indices of the value nodes: those whose outputs a shape function reads, directly or
    through other value nodes (`shape` reads no value of its input). The runtime finds
    the same ones at load (csrc/src/bounds.c, mark_values)."""
    need: set[str] = set()
    out: set[int] = set()
    for k in range(len(g.nodes) - 1, -1, -1):
        node = g.nodes[k]
        value = any(o in need for o in node.outputs)
        if value:
            out.add(k)
        reads = range(len(node.inputs)) if value and node.op != "shape" else VALUE_INPUTS.get(node.op, ())
        need.update(node.inputs[i] for i in reads if i < len(node.inputs) and node.inputs[i])
    return out


def state_tensors(pairs) -> set[str]:
    """Names of the tensors of state pairs [(input, output), ...]."""
    return {t for pair in pairs or () for t in pair[:2]}


def lifetimes(g: Graph, state=()) -> dict[str, tuple[int, int]]:
    """Inclusive [first, last] step of every arena (non-constant) tensor, state tensors
    (pairs or their names) excepted."""
    skip = state if isinstance(state, set) else state_tensors(state)
    n = len(g.nodes)
    life: dict[str, list[int]] = {}
    for name in g.inputs:
        life[name] = [0, 0]
    values = value_nodes(g)
    for k, node in enumerate(g.nodes):
        for i in node.inputs:
            if i and not g.tensors[i].is_const and i not in skip:
                life[i][1] = max(life[i][1], k)
        for o in node.outputs:
            if o not in skip:
                life[o] = [0 if k in values else k, k]
    for o in g.outputs:
        if o in life:
            life[o][1] = max(n, life[o][1])
    return {k: (v[0], v[1]) for k, v in life.items()}


def scratch_bytes(g: Graph) -> list[int]:
    """Each node's scratch; at least g.metadata["scratch_at_least"][k] when given (the
    largest need over the sizes a file with bounded dimensions was converted at)."""
    out = []
    least = g.metadata.get("scratch_at_least") or [0] * len(g.nodes)
    for node, lo in zip(g.nodes, least):
        fn = edgert_ops.get(node.op).scratch
        out.append(max(int(fn(node, g)) if fn else 0, int(lo)))
    return out


def _groups(g: Graph, life: dict[str, tuple[int, int]]):
    """Union of aliased tensors: returns (group of tensor, members of group, aliases)."""
    group = {t: t for t in life}
    members = {t: [t] for t in life}
    aliases: dict[str, tuple[str, str]] = {}
    outputs = set(g.outputs)

    def last_use(root: str) -> int:
        return max(life[m][1] for m in members[root])

    for k, node in enumerate(g.nodes):
        if not node.inputs or not node.inputs[0] or len(node.outputs) != 1:
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if src not in life or dst not in life:  # state tensors keep buffers of their own
            continue
        if g.tensors[src].is_const or g.tensors[src].nbytes != g.tensors[dst].nbytes:
            continue
        if g.tensors[src].dtype != g.tensors[dst].dtype and node.op not in VIEW_OPS:
            continue
        opdef = edgert_ops.get(node.op)
        if not opdef.inplace:
            continue
        root = group[src]
        if node.op in VIEW_OPS:
            kind = "view"
        else:
            if g.tensors[src].shape != g.tensors[dst].shape:
                continue
            if last_use(root) > k or any(m in outputs for m in members[root]):
                continue
            if src in node.inputs[1:]:
                continue
            kind = "inplace"
        aliases[dst] = (src, kind)
        members[root].extend(members.pop(dst))
        for m in members[root]:
            group[m] = root
    return group, members, aliases


def _place(buffers: list[tuple[int, int, int]], order: list[int]) -> tuple[list[int], int]:
    """buffers: (size, first, last). Greedy placement in `order`; returns offsets, arena size."""
    offsets = [-1] * len(buffers)
    placed: list[int] = []
    top = 0
    for b in order:
        size, first, last = buffers[b]
        clashes = sorted(
            (offsets[p], offsets[p] + _align(buffers[p][0]))
            for p in placed
            if buffers[p][1] <= last and first <= buffers[p][2]
        )
        off = 0
        need = _align(size)
        for lo, hi in clashes:
            if off + need <= lo:
                break
            off = max(off, hi)
        offsets[b] = off
        placed.append(b)
        top = max(top, off + need)
    return offsets, top


def plan(g: Graph, state=()) -> Plan:
    """The arena plan of g; `state`: its state pairs [(input, output), ...], placed in a
    region of their own after the rest."""
    skip = state_tensors(state)
    life = lifetimes(g, skip)
    scratch = scratch_bytes(g)
    group, members, aliases = _groups(g, life)
    roots = list(members)
    buffers: list[tuple[int, int, int]] = []
    for r in roots:
        size = max(g.tensors[m].nbytes for m in members[r])
        buffers.append((size, min(life[m][0] for m in members[r]), max(life[m][1] for m in members[r])))
    scratch_ids = []
    for k, s in enumerate(scratch):
        if s > 0:
            scratch_ids.append((len(buffers), k))
            buffers.append((s, k, k))

    n_steps = len(g.nodes) + 1
    alive = np.zeros(n_steps + 1, np.int64)
    for size, first, last in buffers:
        alive[first:last + 1] += size
    lower = int(alive.max()) if len(buffers) else 0

    idx = range(len(buffers))
    orders = [
        sorted(idx, key=lambda b: (-buffers[b][0], buffers[b][1])),
        sorted(idx, key=lambda b: (-(buffers[b][2] - buffers[b][1]), -buffers[b][0])),
        sorted(idx, key=lambda b: (-buffers[b][0] * (buffers[b][2] - buffers[b][1] + 1), buffers[b][1])),
        sorted(idx, key=lambda b: (buffers[b][1], -buffers[b][0])),
    ]
    best = None
    for order in orders:
        offs, top = _place(buffers, order)
        if best is None or top < best[1]:
            best = (offs, top)
    offs, top = best if best else ([], 0)
    offsets = {}
    for b, r in enumerate(roots):
        for m in members[r]:
            offsets[m] = offs[b]
    scratch_map = {k: (offs[b], scratch[k]) for b, k in scratch_ids}
    top = _align(int(top))
    region = top
    for pair in state or ():
        for t in pair[:2]:
            offsets[t] = top
            top += _align(g.tensors[t].nbytes)
    lower += top - region  # state is alive at every step
    p = Plan(offsets, scratch_map, aliases, int(top), lower, region)
    return p


def verify(g: Graph, p: Plan, state=()) -> None:
    """Raises ConversionError when two tensors (or scratch areas) alive at the same step
    share bytes without being a legal alias, or a range leaves the arena; state tensors
    must lie in the state region, apart from each other and from everything else."""
    skip = state_tensors(state)
    life = lifetimes(g, skip)
    spans = sorted((p.offsets[t], p.offsets[t] + g.tensors[t].nbytes, t) for t in skip)
    for k, (lo, hi, t) in enumerate(spans):
        if lo < p.state_offset or hi > p.arena_bytes or lo % ALIGN or (k and lo < spans[k - 1][1]):
            raise ConversionError(f"plan: state tensor {t} [{lo}, {hi}) is outside the state region or overlaps "
                                  "another")
    names = list(life)
    # Resolve alias chains to their root and check each in-place write is safe.
    root = {}
    for t in names:
        r, seen = t, set()
        while r in p.aliases:
            if r in seen:
                raise ConversionError(f"plan: alias cycle at {t}")
            seen.add(r)
            r = p.aliases[r][0]
        root[t] = r
    producer_step = {o: k for k, n in enumerate(g.nodes) for o in n.outputs}
    for dst, (src, kind) in p.aliases.items():
        if p.offsets[dst] != p.offsets[src]:
            raise ConversionError(f"plan: alias {dst} -> {src} at different offsets")
        if kind == "inplace":
            k = producer_step[dst]
            for t in names:
                if root[t] == root[dst] and t != dst and producer_step.get(t, 0) <= k and life[t][1] > k:
                    raise ConversionError(f"plan: in-place write of {dst} clobbers {t}, still read at step {life[t][1]}")
    items = [(t, p.offsets[t], g.tensors[t].nbytes, life[t][0], life[t][1]) for t in names]
    items += [(f"<scratch of node {k}>", off, size, k, k) for k, (off, size) in p.scratch.items()]
    limit = p.state_offset if skip else p.arena_bytes
    for name, off, size, _, _ in items:
        if off % ALIGN or off < 0 or off + size > limit:
            raise ConversionError(f"plan: {name} [{off}, {off + size}) outside the arena of {p.arena_bytes} bytes or misaligned")
    if not items:
        return
    off = np.array([i[1] for i in items], np.int64)
    end = off + np.array([i[2] for i in items], np.int64)
    first = np.array([i[3] for i in items], np.int64)
    last = np.array([i[4] for i in items], np.int64)
    roots = [root.get(i[0], i[0]) for i in items]
    for a in range(len(items)):
        clash = (off[a] < end) & (off < end[a]) & (first[a] <= last) & (first <= last[a])
        clash[: a + 1] = False
        for b in np.nonzero(clash)[0]:
            if items[a][2] == 0 or items[b][2] == 0:
                continue
            if roots[a] == roots[b]:
                continue
            raise ConversionError(
                f"plan: {items[a][0]} and {items[b][0]} are alive at the same step and share arena bytes")
