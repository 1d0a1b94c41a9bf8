"""Tiny .tflite models built in tests with ai-edge-litert's flatbuffer schema module.

`add_chain(shape, n)` is y = ((a + b) + b) + ... (n ADDs, float32), with a signature
"serving_default" whose inputs are a, b and output y, in that order.
"""
from __future__ import annotations

import flatbuffers
from ai_edge_litert import schema_py_generated as fb

ADD = 0  # BuiltinOperator.ADD


def add_chain(shape: tuple[int, ...], n: int = 1) -> bytes:
    """n float32 ADDs in a chain: t0 = a + b, t1 = t0 + b, ..., y = t(n-1)."""
    assert n >= 1
    m = fb.ModelT()
    m.version = 3
    code = fb.OperatorCodeT()
    code.builtinCode = ADD
    code.deprecatedBuiltinCode = ADD
    code.version = 1
    m.operatorCodes = [code]
    m.buffers = [fb.BufferT()]  # buffer 0: the empty sentinel
    tensors = []

    def tensor(name: str) -> int:
        t = fb.TensorT()
        t.shape = list(shape)
        t.type = fb.TensorType.FLOAT32
        t.buffer = 0
        t.name = name
        tensors.append(t)
        return len(tensors) - 1

    a, b = tensor("a"), tensor("b")
    ops, prev = [], a
    for k in range(n):
        out = tensor("y" if k == n - 1 else f"t{k}")
        op = fb.OperatorT()
        op.opcodeIndex = 0
        op.inputs, op.outputs = [prev, b], [out]
        op.builtinOptionsType = fb.BuiltinOptions.AddOptions
        op.builtinOptions = fb.AddOptionsT()
        ops.append(op)
        prev = out
    sg = fb.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, [a, b], [prev], ops, "main"
    m.subgraphs = [sg]
    sig = fb.SignatureDefT()
    sig.signatureKey = "serving_default"
    sig.subgraphIndex = 0

    def tmap(name: str, idx: int) -> fb.TensorMapT:
        t = fb.TensorMapT()
        t.name, t.tensorIndex = name, idx
        return t

    sig.inputs = [tmap("a", a), tmap("b", b)]
    sig.outputs = [tmap("y", prev)]
    m.signatureDefs = [sig]
    builder = flatbuffers.Builder(1024)
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
