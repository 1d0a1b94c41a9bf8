"""Post-training quantization: int8 (integer-only kernels), fp16 and dynamic (int8
weights) conversion, calibration, QDQ import and accuracy reports.

The scheme and its arithmetic are specified in docs/quantization.md. Entry point for the
converter: `quantize_graph` (edgert/converter/quant/pipeline.py); submodules are imported lazily
so that the op modules can use `edgert.converter.quant.fixedpoint` without cycles.
"""
from __future__ import annotations

MODES = ("int8", "fp16", "dynamic")
METHODS = ("minmax", "percentile", "entropy", "mse")
