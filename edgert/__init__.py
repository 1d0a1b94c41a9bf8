"""edgert: convert ONNX models into compact statically planned files and run them with a
small C runtime.

    import edgert
    edgert.convert("model.onnx", "model.edgert", input_shapes={"x": [1, 3, 224, 224]})
    sess = edgert.Session("model.edgert")
    y, = sess.run(None, {"x": x})

`convert` needs the `onnx` package (the `convert` extra); `Session` needs only numpy and
cffi. Every error raised derives from EdgertError.
"""
from __future__ import annotations

from .errors import (ConversionError, EdgertError, InputError, ModelFormatError, OnnxFormatError, RuntimeFailure,
                     UnsupportedError)
from .runtime.session import Session, TensorInfo, runtime_info

__version__ = "0.1.0"

__all__ = ["convert", "Session", "TensorInfo", "runtime_info", "EdgertError", "ConversionError", "UnsupportedError",
           "ModelFormatError", "OnnxFormatError", "InputError", "RuntimeFailure", "__version__"]


def convert(model, output=None, input_shapes=None, input_values=None, optimize: bool = True, **options) -> bytes:
    """Converts an ONNX model (path, bytes or onnx.ModelProto) to .edgert; see
    edgert.converter.convert for the arguments. Returns the file's bytes."""
    from .converter.pipeline import convert as _convert

    return _convert(model, output, input_shapes=input_shapes, input_values=input_values, optimize=optimize,
                    **options)
