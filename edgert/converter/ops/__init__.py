"""Registry of edgert ops on the Python side.

Each op (named as in csrc/include/edgert_ops.def) registers, in its module here, four
things: `infer` (output shapes and dtypes, and the place that rejects unsupported
dtypes or attribute values with OpUnsupported), `pack` (the op's parameter words in
the file, in the order its docstring documents and its C prepare reads), `reference`
(its numpy meaning: the specification the C kernels are tested against), and
optionally `scratch` (arena bytes the C kernel needs while it runs; must match the C
prepare's requirement) and `inplace` (the output may share the first input's buffer).

The registry itself is registry.py; importing this package imports every op module
below, which registers its ops (the list is checked against the files by
tests/test_layout.py).
"""
from __future__ import annotations

from . import (binary, binary_s8, cast, concat_s8, conv2d, conv2d_s8, conv_transpose2d, gather, gemm,
              gemm_s8, lut, matmul, misc, norm, partition, pool, pool_s8, quantize, range, reduce, resize, rnn,
              shape, shape_ops, softmax, softmax_s8, spmm, unary)  # each registers its ops
from .registry import REGISTRY, OpDef, OpUnsupported, Shape, get, in_dtypes, in_shapes, register, require_dtype

__all__ = ["REGISTRY", "OpDef", "OpUnsupported", "Shape", "get", "in_dtypes", "in_shapes", "register", "require_dtype"]
