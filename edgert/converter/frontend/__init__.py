"""Model formats in: each front end turns a model file into an edgert Graph.

    onnx_import.py   ONNX (the importer, LowerCtx and the lowering registry)
    onnx_ops/        the ONNX lowerings, registered when this package is imported

A TFLite front end takes its place beside them (tflite_import.py, tflite_ops/).
Importing the package loads every front end's lowerings."""
from . import onnx_ops  # noqa: F401  (registers the ONNX lowerings)
