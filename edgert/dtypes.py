"""Element types: edgert codes are ONNX's TensorProto.DataType numbers."""
from __future__ import annotations

import numpy as np

CODE_TO_NP = {
    1: np.dtype(np.float32),
    2: np.dtype(np.uint8),
    3: np.dtype(np.int8),
    5: np.dtype(np.int16),
    6: np.dtype(np.int32),
    7: np.dtype(np.int64),
    9: np.dtype(np.bool_),
    10: np.dtype(np.float16),
}
NP_TO_CODE = {v: k for k, v in CODE_TO_NP.items()}
NAMES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16"}


def code_of(dtype) -> int:
    """edgert code of a numpy dtype; KeyError when edgert has no such type."""
    return NP_TO_CODE[np.dtype(dtype)]


def np_of(code: int) -> np.dtype:
    return CODE_TO_NP[code]


def supported(dtype) -> bool:
    return np.dtype(dtype) in NP_TO_CODE
