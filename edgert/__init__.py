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

__all__ = ["convert", "ConvertOptions", "Session", "TensorInfo", "runtime_info", "EdgertError", "ConversionError",
           "UnsupportedError", "ModelFormatError", "OnnxFormatError", "InputError", "RuntimeFailure", "__version__"]


def convert(model, output=None, options=None, **kwargs) -> bytes:
    """Converts an ONNX model (path, bytes or onnx.ModelProto) to .edgert; the settings
    are an edgert.ConvertOptions and/or its fields as keyword arguments (see
    edgert.converter.pipeline.convert). Returns the file's bytes."""
    from .converter.pipeline import convert as _convert

    return _convert(model, output, options, **kwargs)


def __getattr__(name: str):
    # The converter side is imported on first use: a runtime-only install (numpy, cffi)
    # imports edgert without it.
    if name == "ConvertOptions":
        from .converter.options import ConvertOptions

        return ConvertOptions
    raise AttributeError(f"module 'edgert' has no attribute {name!r}")
