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

# enum BuiltinOperator (the ones the writer emits)
ADD, AVERAGE_POOL_2D, CONCATENATION, CONV_2D, DEPTHWISE_CONV_2D = 0, 1, 2, 3, 4
DEQUANTIZE, FULLY_CONNECTED, LOGISTIC, MAX_POOL_2D, MUL = 6, 9, 14, 17, 18
RELU, RELU_N1_TO_1, RELU6, RESHAPE, RESIZE_BILINEAR, SOFTMAX, TANH = 19, 20, 21, 22, 23, 25, 28
PAD, GATHER, TRANSPOSE, MEAN, SUB, DIV, STRIDED_SLICE, EXP, SPLIT = 34, 36, 39, 40, 41, 42, 45, 47, 49
CAST, PRELU, MAXIMUM, MINIMUM, PADV2, SUM, SQRT, RSQRT = 53, 54, 55, 57, 60, 74, 75, 76
REDUCE_MAX, REDUCE_MIN, RESIZE_NEAREST_NEIGHBOR, LEAKY_RELU, MIRROR_PAD, ABS = 82, 89, 97, 98, 100, 101
TRANSPOSE_CONV, QUANTIZE, HARD_SWISH, BATCH_MATMUL, GELU = 67, 114, 117, 126, 150

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
