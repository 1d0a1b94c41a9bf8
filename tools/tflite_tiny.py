"""Tiny .tflite models, and .edgert files holding them as litert partitions, for tests
and tools/bench_partition.py. Built with ai-edge-litert's flatbuffer schema module.

`add_chain(shape, n)` is y = ((a + b) + b) + ... (n ADDs, float32), with a signature
"serving_default" whose inputs are a, b and output y, in that order; `chain(shape, ops)`
the same with ADD and MUL ops in the order given.
`partition_model(shape, n, around)` is an .edgert file whose partition_0 runs add_chain.
`plain_model(shape)` is the same graph as partition_model(shape, 1, False) in edgert alone.
`aarch64_wheel(version)` is ai-edge-litert's aarch64 cp311 wheel from the board wheel
cache of tools/fetch_backend_wheels.py ($EDGERT_WHEEL_CACHE or ~/.cache/edgert/wheels,
folder aarch64/), downloaded there when missing (EDGERT_LITERT_AARCH64_WHEEL names a
local copy instead).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb

# op name -> (BuiltinOperator, BuiltinOptions type, options class)
OPS = {"add": (fb.BuiltinOperator.ADD, fb.BuiltinOptions.AddOptions, fb.AddOptionsT),
       "mul": (fb.BuiltinOperator.MUL, fb.BuiltinOptions.MulOptions, fb.MulOptionsT)}


def add_chain(shape: tuple[int, ...], n: int = 1) -> bytes:
    """n float32 ADDs in a chain: t0 = a + b, t1 = t0 + b, ..., y = t(n-1)."""
    return chain(shape, ["add"] * n)


def chain(shape: tuple[int, ...], ops: list[str], int8_scale: float | None = None) -> bytes:
    """float32 binary ops in a chain, each with b: t0 = a op0 b, t1 = t0 op1 b, ..., y.
    With int8_scale: every tensor int8 with that scale and zero point 0."""
    assert ops
    n = len(ops)
    m = fb.ModelT()
    m.version = 3
    kinds = sorted(set(ops))
    m.operatorCodes = []
    for kind in kinds:
        code = fb.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = OPS[kind][0]
        code.version = 1
        m.operatorCodes.append(code)
    m.buffers = [fb.BufferT()]  # buffer 0: the empty sentinel
    tensors = []

    def tensor(name: str) -> int:
        t = fb.TensorT()
        t.shape = list(shape)
        t.type = fb.TensorType.FLOAT32 if int8_scale is None else fb.TensorType.INT8
        if int8_scale is not None:
            q = fb.QuantizationParametersT()
            q.scale, q.zeroPoint = [float(int8_scale)], [0]
            t.quantization = q
        t.buffer = 0
        t.name = name
        tensors.append(t)
        return len(tensors) - 1

    a, b = tensor("a"), tensor("b")
    operators, prev = [], a
    for k, kind in enumerate(ops):
        out = tensor("y" if k == n - 1 else f"t{k}")
        op = fb.OperatorT()
        op.opcodeIndex = kinds.index(kind)
        op.inputs, op.outputs = [prev, b], [out]
        op.builtinOptionsType = OPS[kind][1]
        op.builtinOptions = OPS[kind][2]()
        operators.append(op)
        prev = out
    sg = fb.SubGraphT()
    sg.tensors, sg.inputs, sg.outputs, sg.operators, sg.name = tensors, [a, b], [prev], operators, "main"
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


def _partition_meta(payload: bytes, inputs: list[str]) -> dict:
    return {"partitions": [{"index": 0, "backend": "litert", "delegate": None, "node": "partition_0",
                            "nodes": ["add_0"], "ops": ["Add"], "inputs": inputs, "outputs": ["u"],
                            "bytes": len(payload)}]}


def partition_model(shape: tuple[int, ...], n: int = 1, around: bool = True) -> bytes:
    """around: y = sigmoid(partition_0(-a, b)) (edgert nodes on both sides of the
    partition); else y = partition_0(a, b). partition_0 = add_chain(shape, n)."""
    from edgert.converter.pipeline import serialize
    from edgert.converter.ir import Graph

    payload = add_chain(shape, n)
    g = Graph()
    for name in ("a", "b", "t", "u", "y") if around else ("a", "b", "u"):
        g.add_tensor(name, shape, np.float32)
    g.inputs, g.outputs = ["a", "b"], ["y" if around else "u"]
    first = "a"
    if around:
        g.add_node("neg", ["a"], ["t"], name="neg")
        first = "t"
    pl = g.add_const(np.frombuffer(payload, np.uint8).copy(), "partition_0_payload")
    g.add_node("partition", [first, "b", pl], ["u"], {"backend": "litert", "index": 0, "delegate": None,
                                                      "nodes": ["add_0"], "ops": ["Add"]}, name="partition_0")
    if around:
        g.add_node("sigmoid", ["u"], ["y"], name="sigmoid")
    return serialize(g, _partition_meta(payload, [first, "b"]))


def plain_model(shape: tuple[int, ...]) -> bytes:
    """u = a + b with edgert's own add."""
    from edgert.converter.pipeline import serialize
    from edgert.converter.ir import Graph

    g = Graph()
    for name in ("a", "b", "u"):
        g.add_tensor(name, shape, np.float32)
    g.inputs, g.outputs = ["a", "b"], ["u"]
    g.add_node("add", ["a", "b"], ["u"], {"act": 0}, name="add")
    return serialize(g)


def aarch64_wheel(version: str) -> pathlib.Path:
    if os.environ.get("EDGERT_LITERT_AARCH64_WHEEL"):
        return pathlib.Path(os.environ["EDGERT_LITERT_AARCH64_WHEEL"])
    cache = pathlib.Path(os.environ.get("EDGERT_WHEEL_CACHE", pathlib.Path.home() / ".cache" / "edgert" / "wheels"))
    cache = cache / "aarch64"
    pattern = f"ai_edge_litert-{version}-cp311-cp311-*aarch64.whl"
    found = sorted(cache.glob(pattern))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        plat = [a for p in ("manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux_2_17_aarch64")
                for a in ("--platform", p)]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", f"ai-edge-litert=={version}", "--no-deps",
                        *plat, "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                        "--abi", "cp311", "-d", str(cache)], check=True)
        found = sorted(cache.glob(pattern))
    if not found:
        raise FileNotFoundError(f"no {pattern} in {cache} after pip download")
    return found[-1]
