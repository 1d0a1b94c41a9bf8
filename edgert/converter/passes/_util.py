"""Small helpers the passes share: who reads a tensor, scalar constants, rewiring."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node


class Uses:
    """Consumers and producers of every tensor, computed once per pass run."""

    def __init__(self, g: Graph):
        self.g = g
        self.consumers = g.consumers()
        self.producer = g.producers()
        self.outputs = set(g.outputs)

    def only_consumer(self, tensor: str) -> Node | None:
        """The single node reading `tensor`, when it is also not a graph output."""
        c = self.consumers.get(tensor, [])
        if len(c) != 1 or tensor in self.outputs:
            return None
        return c[0]

    def single_use(self, tensor: str) -> bool:
        return len(self.consumers.get(tensor, [])) == 1 and tensor not in self.outputs

    def made_by(self, tensor: str, op: str) -> Node | None:
        n = self.producer.get(tensor)
        return n if n is not None and n.op == op else None


def scalar(g: Graph, name: str) -> float | None:
    """The value of a constant whose elements are all equal, else None."""
    if not name:
        return None
    v = g.const(name)
    if v is None or v.size == 0 or v.dtype.kind != "f":
        return None
    flat = v.reshape(-1)
    if not np.all(flat == flat[0]):
        return None
    return float(flat[0])


def is_scalar(g: Graph, name: str, value: float, tol: float = 1e-6) -> bool:
    s = scalar(g, name)
    return s is not None and abs(s - value) <= tol * max(1.0, abs(value))


def other_input(node: Node, name: str) -> str | None:
    """For a binary node with `name` as one input, the other input."""
    if len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if a == name:
        return b
    if b == name:
        return a
    return None


def remove_nodes(g: Graph, dead: list[Node]) -> None:
    ids = {id(n) for n in dead}
    g.nodes = [n for n in g.nodes if id(n) not in ids]
