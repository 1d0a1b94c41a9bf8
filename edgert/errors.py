"""Every error edgert raises derives from EdgertError."""
from __future__ import annotations


class EdgertError(Exception):
    """Base class of all edgert errors. `code` is the C status when there is one."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class ModelFormatError(EdgertError):
    """A file that is not a valid .edgert (or ONNX) model: corrupt, truncated, wrong kind."""


class ConversionError(EdgertError):
    """The ONNX model cannot be converted as given (for example an unfixed dimension)."""


class OnnxFormatError(ModelFormatError, ConversionError):
    """An ONNX file the converter cannot read: not a protobuf, truncated or corrupt.
    Both a ModelFormatError and a ConversionError."""


class UnsupportedError(ConversionError):
    """Operators or attribute combinations edgert does not run. `problems` lists every
    one as (node name, op type, reason)."""

    def __init__(self, problems: list[tuple[str, str, str]]):
        self.problems = problems
        lines = [f"  {name or '<unnamed>'} ({op}): {why}" for name, op, why in problems]
        ops = sorted({str(op) for _, op, _ in problems})
        super().__init__(
            f"{len(problems)} node(s) cannot be converted (op types: {', '.join(ops)}):\n"
            + "\n".join(lines)
        )


class InputError(EdgertError, ValueError):
    """Wrong input names, shapes or dtypes given to a session, or input data that a run
    cannot use: an index value out of range (code 501, the message names the node)."""


class RuntimeFailure(EdgertError):
    """The C runtime returned an error status."""


class NoBackendError(RuntimeFailure):
    """A model has fallback partitions (docs/partitions.md) for a runtime that is not
    installed or not allowed here (code 202). The message names the partition, the
    nodes it holds and the pip extra that installs the runtime."""


class BackendError(RuntimeFailure):
    """A fallback partition's runtime failed to load its payload or to run it (code 203);
    the message names the partition and carries the runtime's own message."""
