"""The ONNX lowerings, one module per family of ONNX ops; each registers its functions
with onnx_import.lower when imported. Importing this package imports them all."""
from . import conv, elementwise, norm, quant, rnn, shape_ops  # each registers its lowerings
