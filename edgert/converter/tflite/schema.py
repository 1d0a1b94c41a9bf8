"""The part of TFLite's flatbuffer schema (tensorflow/lite/schema/schema.fbs, file
identifier "TFL3", schema version 3) that the writer emits, as numbers, and a small
serializer over the `flatbuffers` package's Builder.

Nothing here is generated: the enum values, union indices and field ids below are the
schema's public facts (a field id is the field's position in its table, a union field
taking two ids: its type, then its value). The serializer writes tables bottom-up as
FlatBuffers requires: every child (vector, string, sub-table) before its parent.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

SCHEMA_VERSION = 3
FILE_IDENTIFIER = b"TFL3"

# enum TensorType
TENSOR_TYPE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2, np.dtype(np.uint8): 3,
               np.dtype(np.int64): 4, np.dtype(np.bool_): 6, np.dtype(np.int16): 7, np.dtype(np.int8): 9}

# enum BuiltinOperator: every code's name (the importer's messages) and, below, the
# codes the writer emits, by name
BUILTIN_NAMES = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 5: "DEPTH_TO_SPACE",
    6: "DEQUANTIZE", 7: "EMBEDDING_LOOKUP", 8: "FLOOR", 9: "FULLY_CONNECTED", 10: "HASHTABLE_LOOKUP",
    11: "L2_NORMALIZATION", 12: "L2_POOL_2D", 13: "LOCAL_RESPONSE_NORMALIZATION", 14: "LOGISTIC", 15: "LSH_PROJECTION",
    16: "LSTM", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU", 20: "RELU_N1_TO_1", 21: "RELU6", 22: "RESHAPE",
    23: "RESIZE_BILINEAR", 24: "RNN", 25: "SOFTMAX", 26: "SPACE_TO_DEPTH", 27: "SVDF", 28: "TANH",
    29: "CONCAT_EMBEDDINGS", 30: "SKIP_GRAM", 31: "CALL", 32: "CUSTOM", 33: "EMBEDDING_LOOKUP_SPARSE", 34: "PAD",
    35: "UNIDIRECTIONAL_SEQUENCE_RNN", 36: "GATHER", 37: "BATCH_TO_SPACE_ND", 38: "SPACE_TO_BATCH_ND",
    39: "TRANSPOSE", 40: "MEAN", 41: "SUB", 42: "DIV", 43: "SQUEEZE", 44: "UNIDIRECTIONAL_SEQUENCE_LSTM",
    45: "STRIDED_SLICE", 46: "BIDIRECTIONAL_SEQUENCE_RNN", 47: "EXP", 48: "TOPK_V2", 49: "SPLIT",
    50: "LOG_SOFTMAX", 51: "DELEGATE", 52: "BIDIRECTIONAL_SEQUENCE_LSTM", 53: "CAST", 54: "PRELU", 55: "MAXIMUM",
    56: "ARG_MAX", 57: "MINIMUM", 58: "LESS", 59: "NEG", 60: "PADV2", 61: "GREATER", 62: "GREATER_EQUAL",
    63: "LESS_EQUAL", 64: "SELECT", 65: "SLICE", 66: "SIN", 67: "TRANSPOSE_CONV", 68: "SPARSE_TO_DENSE",
    69: "TILE", 70: "EXPAND_DIMS", 71: "EQUAL", 72: "NOT_EQUAL", 73: "LOG", 74: "SUM", 75: "SQRT", 76: "RSQRT",
    77: "SHAPE", 78: "POW", 79: "ARG_MIN", 80: "FAKE_QUANT", 81: "REDUCE_PROD", 82: "REDUCE_MAX", 83: "PACK",
    84: "LOGICAL_OR", 85: "ONE_HOT", 86: "LOGICAL_AND", 87: "LOGICAL_NOT", 88: "UNPACK", 89: "REDUCE_MIN",
    90: "FLOOR_DIV", 91: "REDUCE_ANY", 92: "SQUARE", 93: "ZEROS_LIKE", 94: "FILL", 95: "FLOOR_MOD", 96: "RANGE",
    97: "RESIZE_NEAREST_NEIGHBOR", 98: "LEAKY_RELU", 99: "SQUARED_DIFFERENCE", 100: "MIRROR_PAD", 101: "ABS",
    102: "SPLIT_V", 103: "UNIQUE", 104: "CEIL", 105: "REVERSE_V2", 106: "ADD_N", 107: "GATHER_ND", 108: "COS",
    109: "WHERE", 110: "RANK", 111: "ELU", 112: "REVERSE_SEQUENCE", 113: "MATRIX_DIAG", 114: "QUANTIZE",
    115: "MATRIX_SET_DIAG", 116: "ROUND", 117: "HARD_SWISH", 118: "IF", 119: "WHILE", 120: "NON_MAX_SUPPRESSION_V4",
    121: "NON_MAX_SUPPRESSION_V5", 122: "SCATTER_ND", 123: "SELECT_V2", 124: "DENSIFY", 125: "SEGMENT_SUM",
    126: "BATCH_MATMUL", 127: "PLACEHOLDER_FOR_GREATER_OP_CODES", 128: "CUMSUM", 129: "CALL_ONCE",
    130: "BROADCAST_TO", 131: "RFFT2D", 132: "CONV_3D", 133: "IMAG", 134: "REAL", 135: "COMPLEX_ABS",
    136: "HASHTABLE", 137: "HASHTABLE_FIND", 138: "HASHTABLE_IMPORT", 139: "HASHTABLE_SIZE", 140: "REDUCE_ALL",
    141: "CONV_3D_TRANSPOSE", 142: "VAR_HANDLE", 143: "READ_VARIABLE", 144: "ASSIGN_VARIABLE",
    145: "BROADCAST_ARGS", 146: "RANDOM_STANDARD_NORMAL", 147: "BUCKETIZE", 148: "RANDOM_UNIFORM",
    149: "MULTINOMIAL", 150: "GELU",
}
_CODE = {name: code for code, name in BUILTIN_NAMES.items()}


def _codes(names: str) -> tuple[int, ...]:
    return tuple(_CODE[n] for n in names.split())


ADD, AVERAGE_POOL_2D, CONCATENATION, CONV_2D = _codes("ADD AVERAGE_POOL_2D CONCATENATION CONV_2D")
DEPTHWISE_CONV_2D, = _codes("DEPTHWISE_CONV_2D")
DEQUANTIZE, FULLY_CONNECTED, LOGISTIC, MAX_POOL_2D = _codes("DEQUANTIZE FULLY_CONNECTED LOGISTIC MAX_POOL_2D")
MUL, = _codes("MUL")
RELU, RELU_N1_TO_1, RELU6, RESHAPE, RESIZE_BILINEAR = _codes("RELU RELU_N1_TO_1 RELU6 RESHAPE RESIZE_BILINEAR")
SOFTMAX, TANH = _codes("SOFTMAX TANH")
PAD, GATHER, TRANSPOSE, MEAN, SUB, DIV, STRIDED_SLICE = _codes("PAD GATHER TRANSPOSE MEAN SUB DIV STRIDED_SLICE")
EXP, SPLIT = _codes("EXP SPLIT")
CAST, PRELU, MAXIMUM, MINIMUM, PADV2, SUM, SQRT, RSQRT = _codes("CAST PRELU MAXIMUM MINIMUM PADV2 SUM SQRT RSQRT")
REDUCE_MAX, REDUCE_MIN, RESIZE_NEAREST_NEIGHBOR = _codes("REDUCE_MAX REDUCE_MIN RESIZE_NEAREST_NEIGHBOR")
LEAKY_RELU, MIRROR_PAD, ABS = _codes("LEAKY_RELU MIRROR_PAD ABS")
TRANSPOSE_CONV, QUANTIZE, HARD_SWISH, BATCH_MATMUL = _codes("TRANSPOSE_CONV QUANTIZE HARD_SWISH BATCH_MATMUL")
GELU, = _codes("GELU")

# union BuiltinOptions: index of each options table (0 is NONE)
OPT_CONV2D, OPT_DEPTHWISE, OPT_POOL2D, OPT_FULLY_CONNECTED, OPT_SOFTMAX, OPT_CONCAT = 1, 2, 5, 8, 9, 10
OPT_ADD, OPT_RESIZE_BILINEAR, OPT_RESHAPE, OPT_MUL, OPT_REDUCER, OPT_SUB, OPT_DIV = 11, 15, 17, 21, 27, 28, 29
OPT_STRIDED_SLICE, OPT_SPLIT, OPT_CAST, OPT_GATHER = 32, 35, 37, 23
OPT_TRANSPOSE_CONV, OPT_RESIZE_NEAREST, OPT_LEAKY_RELU, OPT_MIRROR_PAD, OPT_BATCH_MATMUL = 49, 74, 75, 77, 101

# enum Padding, enum ActivationFunctionType
PADDING_SAME, PADDING_VALID = 0, 1
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6 = 0, 1, 2, 3

# An options table is a list of (field id, kind, value); kind is one of
# "i8" (byte/bool/enum), "i32", "f32", "vec_i32".
Options = list


@dataclasses.dataclass
class TensorDef:
    shape: tuple[int, ...]
    type: int
    buffer: int
    name: str
    scale: np.ndarray | None = None  # float32 [n]
    zero_point: np.ndarray | None = None  # int64 [n]
    quantized_dimension: int = 0


@dataclasses.dataclass
class OperatorDef:
    opcode_index: int
    inputs: list[int]
    outputs: list[int]
    options_type: int = 0
    options: Options | None = None


def _vec_bytes(b, data: bytes, alignment: int) -> int:
    """A [ubyte] vector holding `data`, its start aligned to `alignment`."""
    b.StartVector(1, len(data), alignment)
    b.head = b.head - len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def _vec_offsets(b, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _vec_np(b, values, dtype) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype).reshape(-1))


def _options_table(b, fields: Options) -> int:
    vecs = {fid: _vec_np(b, v, np.int32) for fid, kind, v in fields if kind == "vec_i32"}
    b.StartObject(max(f[0] for f in fields) + 1 if fields else 0)
    for fid, kind, v in fields:
        if kind == "i8":
            b.PrependInt8Slot(fid, int(v), 0)
        elif kind == "i32":
            b.PrependInt32Slot(fid, int(v), 0)
        elif kind == "f32":
            b.PrependFloat32Slot(fid, float(v), 0.0)
        elif kind == "vec_i32":
            b.PrependUOffsetTRelativeSlot(fid, vecs[fid], 0)
        else:  # pragma: no cover - the writer uses the kinds above
            raise ValueError(kind)
    return b.EndObject()


def serialize(opcodes: list[int], tensors: list[TensorDef], operators: list[OperatorDef], inputs: list[int],
              outputs: list[int], buffers: list[bytes], description: str = "edgert") -> bytes:
    """The .tflite bytes of a one-subgraph model."""
    import flatbuffers

    total = sum(len(x) for x in buffers)
    b = flatbuffers.Builder(total + 4096 + 256 * len(tensors) + 128 * len(operators))

    # Buffer { data:[ubyte] (force_align: 16) = field 0 }; buffer 0 is the empty sentinel.
    buf_offs = []
    for data in buffers:
        d = _vec_bytes(b, bytes(data), 16) if len(data) else None
        b.StartObject(1)
        if d is not None:
            b.PrependUOffsetTRelativeSlot(0, d, 0)
        buf_offs.append(b.EndObject())

    # Tensor { shape 0, type 1, buffer 2, name 3, quantization 4 }
    # QuantizationParameters { min 0, max 1, scale 2, zero_point 3, details_type 4,
    #                          details 5, quantized_dimension 6 }
    t_offs = []
    for t in tensors:
        q = None
        if t.scale is not None:
            sc = _vec_np(b, t.scale, np.float32)
            zp = _vec_np(b, t.zero_point, np.int64)
            b.StartObject(7)
            b.PrependUOffsetTRelativeSlot(2, sc, 0)
            b.PrependUOffsetTRelativeSlot(3, zp, 0)
            b.PrependInt32Slot(6, int(t.quantized_dimension), 0)
            q = b.EndObject()
        name = b.CreateString(t.name)
        shape = _vec_np(b, t.shape, np.int32)
        b.StartObject(5)
        b.PrependUOffsetTRelativeSlot(0, shape, 0)
        b.PrependInt8Slot(1, t.type, 0)
        b.PrependUint32Slot(2, t.buffer, 0)
        b.PrependUOffsetTRelativeSlot(3, name, 0)
        if q is not None:
            b.PrependUOffsetTRelativeSlot(4, q, 0)
        t_offs.append(b.EndObject())

    # Operator { opcode_index 0, inputs 1, outputs 2, builtin_options_type 3,
    #            builtin_options 4 }
    op_offs = []
    for op in operators:
        ins = _vec_np(b, op.inputs, np.int32)
        outs = _vec_np(b, op.outputs, np.int32)
        opt = _options_table(b, op.options) if op.options_type else None
        b.StartObject(5)
        b.PrependUint32Slot(0, op.opcode_index, 0)
        b.PrependUOffsetTRelativeSlot(1, ins, 0)
        b.PrependUOffsetTRelativeSlot(2, outs, 0)
        if opt is not None:
            b.PrependUint8Slot(3, op.options_type, 0)
            b.PrependUOffsetTRelativeSlot(4, opt, 0)
        op_offs.append(b.EndObject())

    # SubGraph { tensors 0, inputs 1, outputs 2, operators 3, name 4 }
    tv = _vec_offsets(b, t_offs)
    iv = _vec_np(b, inputs, np.int32)
    ov = _vec_np(b, outputs, np.int32)
    opv = _vec_offsets(b, op_offs)
    sg_name = b.CreateString("main")
    b.StartObject(5)
    b.PrependUOffsetTRelativeSlot(0, tv, 0)
    b.PrependUOffsetTRelativeSlot(1, iv, 0)
    b.PrependUOffsetTRelativeSlot(2, ov, 0)
    b.PrependUOffsetTRelativeSlot(3, opv, 0)
    b.PrependUOffsetTRelativeSlot(4, sg_name, 0)
    sg = b.EndObject()

    # OperatorCode { deprecated_builtin_code:byte 0, custom_code 1, version 2,
    #                builtin_code:int 3 }; codes above 127 keep 127 (the schema's
    # PLACEHOLDER_FOR_GREATER_OP_CODES) in the byte field.
    oc_offs = []
    for code in opcodes:
        b.StartObject(4)
        b.PrependInt8Slot(0, min(code, 127), 0)
        b.PrependInt32Slot(2, 1, 1)
        b.PrependInt32Slot(3, code, 0)
        oc_offs.append(b.EndObject())

    # Model { version 0, operator_codes 1, subgraphs 2, description 3, buffers 4 }
    ocv = _vec_offsets(b, oc_offs)
    sgv = _vec_offsets(b, [sg])
    desc = b.CreateString(description)
    bv = _vec_offsets(b, buf_offs)
    b.StartObject(5)
    b.PrependUint32Slot(0, SCHEMA_VERSION, 0)
    b.PrependUOffsetTRelativeSlot(1, ocv, 0)
    b.PrependUOffsetTRelativeSlot(2, sgv, 0)
    b.PrependUOffsetTRelativeSlot(3, desc, 0)
    b.PrependUOffsetTRelativeSlot(4, bv, 0)
    model = b.EndObject()
    b.Finish(model, file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def opt(*fields: tuple[int, str, Any]) -> Options:
    return list(fields)
