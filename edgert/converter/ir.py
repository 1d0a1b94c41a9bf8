"""The in-memory graph the converter works on: static shapes, edgert op names.

A Graph owns Tensors (by unique name) and Nodes (in a valid execution order after
`toposort`). A tensor with `data` is a constant; every other tensor is a graph input
or the output of exactly one node. Node attributes are plain Python values whose
meaning each op documents in its module under edgert/converter/ops/.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Iterable

import numpy as np

from ..errors import ConversionError

# The largest tensor the converter accepts (docs/design.md, "Untrusted ONNX: converter
# limits"): element counts and byte sizes must fit the runtime's 32-bit dimensions, and
# the converter refuses before allocating anything of that size.
MAX_TENSOR_ELEMENTS = 2**31 - 1
MAX_TENSOR_BYTES = 2**31 - 1


def check_shape(name: str, shape, dtype) -> tuple[int, ...]:
    """shape as a tuple of ints; ConversionError when a dimension is negative or the
    tensor exceeds MAX_TENSOR_ELEMENTS / MAX_TENSOR_BYTES (computed without overflow)."""
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ConversionError(f"tensor {name!r} has a negative dimension {list(dims)}")
    n = math.prod(dims)
    if n > MAX_TENSOR_ELEMENTS or any(d > MAX_TENSOR_ELEMENTS for d in dims):
        raise ConversionError(f"tensor {name!r} of shape {list(dims)} has {n} elements, more than the converter's "
                              f"limit of {MAX_TENSOR_ELEMENTS}")
    size = n * np.dtype(dtype).itemsize
    if size > MAX_TENSOR_BYTES:
        raise ConversionError(f"tensor {name!r} of shape {list(dims)} needs {size} bytes, more than the converter's "
                              f"limit of {MAX_TENSOR_BYTES}")
    return dims


@dataclasses.dataclass
class Quant:
    """Affine quantization: real = scale * (q - zero_point), per tensor (axis None)
    or per channel along `axis`."""

    scale: np.ndarray  # float32, shape (1,) or (C,)
    zero_point: np.ndarray  # int32, same shape
    axis: int | None = None


@dataclasses.dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None = None
    quant: Quant | None = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclasses.dataclass
class Node:
    op: str
    inputs: list[str]  # "" marks an absent optional input
    outputs: list[str]
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""


class Graph:
    def __init__(self) -> None:
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.metadata: dict[str, Any] = {}
        self._counter = itertools.count()

    # ---- construction -------------------------------------------------------
    def unique_name(self, hint: str) -> str:
        name = hint
        while name in self.tensors or not name:
            name = f"{hint}__{next(self._counter)}"
        return name

    def add_tensor(self, name: str, shape: Iterable[int], dtype, data: np.ndarray | None = None) -> Tensor:
        if name in self.tensors:
            raise ConversionError(f"tensor {name!r} defined twice")
        t = Tensor(name, check_shape(name, shape, dtype), np.dtype(dtype), data)
        self.tensors[name] = t
        return t

    def add_const(self, data: np.ndarray, hint: str = "const") -> str:
        data = np.require(np.asarray(data), requirements="C")  # keeps 0-d arrays 0-d
        name = self.unique_name(hint)
        self.add_tensor(name, data.shape, data.dtype, data)
        return name

    def add_derived_const(self, data: np.ndarray, source: str, hint: str = "const") -> str:
        """add_const for a new layout or encoding of constant `source` (a transpose, its
        int8 or CSR form); metadata["const_sources"] keeps the initializer it came from,
        which `edgert inspect` reports when one weight is stored in several forms."""
        name = self.add_const(data, hint)
        sources = dict(self.metadata.get("const_sources") or {})  # metadata may be shared with a copy
        sources[name] = sources.get(source, source)
        self.metadata["const_sources"] = sources
        return name

    def add_node(self, op: str, inputs: list[str], outputs: list[str], attrs: dict | None = None, name: str = "") -> Node:
        node = Node(op, list(inputs), list(outputs), dict(attrs or {}), name or outputs[0])
        self.nodes.append(node)
        return node

    # ---- queries ------------------------------------------------------------
    def const(self, name: str) -> np.ndarray | None:
        if not name:
            return None
        return self.tensors[name].data

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    # ---- maintenance --------------------------------------------------------
    def replace_uses(self, old: str, new: str) -> None:
        """Every use of tensor `old` (node inputs, graph outputs) becomes `new`."""
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
        self.outputs = [new if o == old else o for o in self.outputs]

    def rename_tensor(self, old: str, new: str) -> None:
        """Renames tensor `old` everywhere (new must be unused)."""
        if new in self.tensors:
            raise ConversionError(f"cannot rename {old!r}: {new!r} exists")
        t = self.tensors.pop(old)
        t.name = new
        self.tensors[new] = t
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
            n.outputs = [new if o == old else o for o in n.outputs]
        self.inputs = [new if i == old else i for i in self.inputs]
        self.outputs = [new if o == old else o for o in self.outputs]

    def remove_unused_tensors(self) -> None:
        used = set(self.inputs) | set(self.outputs)
        for n in self.nodes:
            used.update(i for i in n.inputs if i)
            used.update(n.outputs)
        for name in list(self.tensors):
            if name not in used:
                del self.tensors[name]

    def toposort(self) -> None:
        """Orders nodes so each runs after the producers of its inputs (stable)."""
        ready = {n for n, t in self.tensors.items() if t.is_const} | set(self.inputs)
        pending = list(self.nodes)
        ordered: list[Node] = []
        while pending:
            rest = []
            for n in pending:
                if all((not i) or i in ready for i in n.inputs):
                    ordered.append(n)
                    ready.update(n.outputs)
                else:
                    rest.append(n)
            if len(rest) == len(pending):
                missing = sorted({i for n in rest for i in n.inputs if i and i not in ready})
                raise ConversionError(f"graph has a cycle or undefined tensors: {missing[:10]}")
            pending = rest
        self.nodes = ordered

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return dict(sorted(counts.items()))
