"""The op registry: OpDef, register, get and the helpers every op module uses.

What an op registers is described in the package's docstring (edgert/converter/ops/__init__.py)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from ..._oplist import OPS
from ...errors import ConversionError

Shape = tuple[int, ...]


class OpUnsupported(ConversionError):
    """Raised by infer (or a lowering) for a dtype or attribute combination edgert does
    not compute. The importer collects these per node."""


@dataclasses.dataclass
class OpDef:
    name: str
    infer: Callable[..., list[tuple[Shape, np.dtype]]]
    pack: Callable[..., list[Any]]
    reference: Callable[..., list[np.ndarray]]
    scratch: Callable[..., int] | None = None
    inplace: bool = False

    @property
    def code(self) -> int:
        return OPS[self.name]


REGISTRY: dict[str, OpDef] = {}


def register(name: str, *, infer, pack, reference, scratch=None, inplace: bool = False) -> OpDef:
    """Registers op `name`. infer(node, graph) -> [(shape, dtype)] per output;
    pack(node, graph) -> list of int (int32 word) / float (binary32 word);
    reference(node, inputs) -> list of outputs (inputs: ndarray or None if absent);
    scratch(node, graph) -> bytes."""
    if name not in OPS:
        raise KeyError(f"op {name!r} is not in csrc/include/edgert_ops.def")
    if name in REGISTRY:
        raise KeyError(f"op {name!r} registered twice")
    d = OpDef(name, infer, pack, reference, scratch, inplace)
    REGISTRY[name] = d
    return d


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise OpUnsupported(f"edgert op {name!r} has no Python definition") from None


def in_shapes(node, graph) -> list[Shape | None]:
    return [graph.tensors[i].shape if i else None for i in node.inputs]


def in_dtypes(node, graph) -> list[np.dtype | None]:
    return [graph.tensors[i].dtype if i else None for i in node.inputs]


def require_dtype(node, graph, idx: int, allowed) -> np.dtype:
    """The dtype of input idx, or OpUnsupported when it is not one of `allowed`."""
    dt = graph.tensors[node.inputs[idx]].dtype
    allowed = [np.dtype(a) for a in allowed]
    if dt not in allowed:
        raise OpUnsupported(
            f"{node.op}: input {idx} has dtype {dt}, supported: {', '.join(str(a) for a in allowed)}"
        )
    return dt

