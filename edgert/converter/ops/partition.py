"""partition: a subgraph that another runtime computes (docs/partitions.md).

partition (inputs: the boundary inputs, any dtype, in the payload's input order, then
           LAST the payload: a constant uint8 1-D tensor [nbytes])
    attrs  backend: "onnxruntime" | "litert"; index: int (the partition's number, k in
           its node name partition_<k>); delegate: str or None (recorded for the
           runtime); nodes, ops: the original node names and op types it replaces;
           output_shapes, output_dtypes: the boundary outputs' static shapes and dtype
           names (in the payload's output order; without them, the shapes and dtypes
           of the output tensors the graph already declares)
    out    what the payload computes: for "onnxruntime" a serialized ONNX model whose
           graph inputs/outputs are the boundary tensors in order (same shapes and
           dtypes); for "litert" a .tflite flatbuffer whose subgraph 0 inputs/outputs
           are the boundary tensors in order (same NCHW shapes, same dtypes and
           quantization; layout changes are inside the flatbuffer)
    words  0 backend code (1 onnxruntime, 2 litert), 1 index, 2 boundary input count

The C runtime computes nothing itself: it hands the boundary buffers to the backend the
session registered for the kind (docs/runtime.md). The numpy meaning below runs the
payload with onnxruntime or LiteRT; the converter uses it for calibration and checks.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from .registry import OpUnsupported, register

BACKENDS = {"onnxruntime": 1, "litert": 2}

# Sessions built for a payload, by its digest: calibration evaluates the same node once
# per sample. Few partitions per model, so a handful is enough.
_SESSIONS: OrderedDict[bytes, object] = OrderedDict()
_MAX_SESSIONS = 16


def _infer(node, graph):
    a = node.attrs
    if a.get("backend") not in BACKENDS:
        raise OpUnsupported(f"partition: backend {a.get('backend')!r} is not one of {sorted(BACKENDS)}")
    if not node.inputs or not node.inputs[-1]:
        raise OpUnsupported("partition: the last input must be the payload")
    payload = graph.tensors[node.inputs[-1]]
    if not payload.is_const or payload.dtype != np.uint8 or len(payload.shape) != 1 or payload.shape[0] == 0:
        raise OpUnsupported("partition: the payload must be a non-empty constant uint8 vector")
    shapes, dts = a.get("output_shapes"), a.get("output_dtypes")
    if shapes is None and dts is None and all(o in graph.tensors for o in node.outputs):
        # a graph that already declares the boundary outputs (built by hand, or read back)
        return [(graph.tensors[o].shape, graph.tensors[o].dtype) for o in node.outputs]
    shapes, dts = shapes or [], dts or []
    if len(shapes) != len(node.outputs) or len(dts) != len(node.outputs):
        raise OpUnsupported(f"partition: {len(node.outputs)} outputs but {len(shapes)} shapes / {len(dts)} dtypes")
    return [(tuple(int(d) for d in s), np.dtype(t)) for s, t in zip(shapes, dts)]


def _pack(node, graph):
    return [BACKENDS[node.attrs["backend"]], int(node.attrs.get("index", 0)), len(node.inputs) - 1]


def payload_session(backend: str, payload: bytes):
    """A cached runner for a payload: run(list of arrays) -> list of arrays."""
    key = hashlib.sha256(backend.encode() + b"\0" + payload).digest()
    run = _SESSIONS.get(key)
    if run is None:
        run = _onnxruntime_runner(payload) if backend == "onnxruntime" else _litert_runner(payload)
        _SESSIONS[key] = run
        while len(_SESSIONS) > _MAX_SESSIONS:
            _SESSIONS.popitem(last=False)
    else:
        _SESSIONS.move_to_end(key)
    return run


def _onnxruntime_runner(payload: bytes):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(payload, opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]

    def run(inputs):
        return sess.run(None, dict(zip(names, inputs)))

    return run


def _litert_runner(payload: bytes):
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            from tflite_runtime.interpreter import Interpreter
        except ImportError:
            raise OpUnsupported("partition: evaluating a litert partition needs ai-edge-litert "
                                "(pip install 'edgert[litert]') or tflite-runtime") from None
    interp = Interpreter(model_content=bytes(payload))
    interp.allocate_tensors()
    ins = [d["index"] for d in interp.get_input_details()]
    outs = [d["index"] for d in interp.get_output_details()]

    def run(inputs):
        for i, x in zip(ins, inputs):
            interp.set_tensor(i, np.ascontiguousarray(x))
        interp.invoke()
        return [np.array(interp.get_tensor(o)) for o in outs]

    return run


def _reference(node, inputs):
    payload = np.ascontiguousarray(inputs[-1], np.uint8).tobytes()
    run = payload_session(node.attrs["backend"], payload)
    outs = run([np.ascontiguousarray(x) for x in inputs[:-1]])
    want = node.attrs["output_dtypes"]
    return [np.ascontiguousarray(np.asarray(y).astype(np.dtype(t), copy=False)) for y, t in zip(outs, want)]


register("partition", infer=_infer, pack=_pack, reference=_reference)
