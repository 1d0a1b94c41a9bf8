"""Python backends for fallback partitions (docs/partitions.md, "Runtime").

A partition node's payload is run by an external runtime: an ONNX payload by
onnxruntime, a .tflite payload by ai-edge-litert (or tflite-runtime where ai-edge-litert
has no wheel, armv7l). Session registers them with the C library as edgert_backend
structs whose function pointers are cffi callbacks; this module holds those callbacks
and the code that runs a payload.

Runtimes, named as in Session(fallback=...): "onnxruntime" (onnxruntime partitions),
"litert" (ai-edge-litert) and "tflite" (tflite-runtime), both for litert partitions.
EDGERT_DISABLE_BACKENDS (comma-separated runtime names) makes edgert treat those as not
installed, e.g. to check how a model behaves on a board without them.
"""
from __future__ import annotations

import importlib
import json
import os
import struct
import threading
import warnings
from typing import Any

import numpy as np

from .. import dtypes

KIND_CODES = {"onnxruntime": 1, "litert": 2}
KIND_NAMES = {v: k for k, v in KIND_CODES.items()}
# Runtimes that can run each kind, in order of preference.
RUNTIMES = {"onnxruntime": ("onnxruntime",), "litert": ("litert", "tflite")}
_DISTRIBUTIONS = {"onnxruntime": "onnxruntime", "litert": "ai-edge-litert", "tflite": "tflite-runtime"}
_MODULES = {"onnxruntime": "onnxruntime", "litert": "ai_edge_litert.interpreter", "tflite": "tflite_runtime.interpreter"}
# Shared-library names of the delegates known by name.
DELEGATES = {"edgetpu": "libedgetpu.so.1", "armnn": "libarmnnDelegate.so"}

STATUS_BACKEND = 203  # EDGERT_ERR_BACKEND


def pip_hint(kind: str) -> str:
    """The install command for a kind's runtime on this machine."""
    if kind == "onnxruntime":
        return "pip install 'edgert[ort]'"
    import platform
    return "pip install 'edgert[tflite]'" if platform.machine() == "armv7l" else "pip install 'edgert[litert]'"


def disabled() -> set[str]:
    return {s.strip() for s in os.environ.get("EDGERT_DISABLE_BACKENDS", "").split(",") if s.strip()}


def _import(runtime: str):
    """The runtime's module, or None when it is not installed (or disabled)."""
    if runtime in disabled():
        return None
    try:
        return importlib.import_module(_MODULES[runtime])
    except ImportError:
        return None


def runtime_label(runtime: str) -> str:
    """e.g. "ai-edge-litert 2.3.0"."""
    from importlib import metadata
    dist = _DISTRIBUTIONS[runtime]
    try:
        return f"{dist} {metadata.version(dist)}"
    except metadata.PackageNotFoundError:
        return dist


def choose_runtime(kind: str, fallback: str | None) -> str | None:
    """The runtime that will run partitions of `kind`, or None when none can."""
    for runtime in RUNTIMES[kind]:
        if fallback is not None and fallback != runtime:
            continue
        if _import(runtime) is not None:
            return runtime
    return None


# ---- running a payload ------------------------------------------------------------


class OrtRunner:
    """An onnxruntime InferenceSession on an ONNX payload. InferenceSession.run is
    thread-safe, so one runner serves every execution context of a Session."""

    def __init__(self, payload: bytes, threads: int | None = None):
        ort = _import("onnxruntime")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(payload, opts, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.input_names):
            raise ValueError(f"the ONNX payload has {len(self.input_names)} inputs, the node {len(inputs)}")
        return self.session.run(None, dict(zip(self.input_names, inputs)))


class LiteRtRunner:
    """A LiteRT (or TFLite) Interpreter on a .tflite payload, with the delegate when one
    loads. Interpreters are not thread-safe: one per execution context."""

    def __init__(self, runtime: str, payload: bytes, delegate: str | None = None,
                 delegate_options: dict | None = None, threads: int | None = None):
        mod = _import(runtime)
        self.delegate_loaded = False
        self.reason = None
        delegates = []
        if delegate:
            lib = DELEGATES.get(delegate, delegate)
            try:
                # Opened with ctypes first: load_delegate's object reports a failed open
                # again, noisily, when it is collected.
                import ctypes
                ctypes.CDLL(lib)
                delegates.append(mod.load_delegate(lib, {str(k): str(v) for k, v in (delegate_options or {}).items()}))
                self.delegate_loaded = True
            except Exception as e:  # OSError/ValueError from the loader: run on the CPU instead
                self.reason = f"delegate {delegate!r} ({lib}) could not be loaded: {e}"
        self.interpreter = mod.Interpreter(model_content=payload, experimental_delegates=delegates or None,
                                           num_threads=threads)
        self.interpreter.allocate_tensors()
        details = self.interpreter.get_input_details()
        self.inputs = [d["index"] for d in details]
        self.shapes = [tuple(int(v) for v in d["shape"]) for d in details]
        self.outputs = [d["index"] for d in self.interpreter.get_output_details()]

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.inputs):
            raise ValueError(f"the .tflite payload has {len(self.inputs)} inputs, the node {len(inputs)}")
        it = self.interpreter
        shapes = [tuple(x.shape) for x in inputs]
        if shapes != self.shapes:  # bounded dimensions: the run's sizes (docs/partitions.md)
            for idx, shape in zip(self.inputs, shapes):
                it.resize_tensor_input(idx, list(shape), strict=False)
            it.allocate_tensors()
            self.shapes = shapes
        for idx, x in zip(self.inputs, inputs):
            it.set_tensor(idx, x)
        it.invoke()
        return [it.get_tensor(idx) for idx in self.outputs]


def run_payload(kind: str, payload: bytes, inputs: list[np.ndarray], fallback: str | None = None) -> list[np.ndarray]:
    """Runs a partition payload on numpy inputs with the runtime that Session would use
    (the numpy meaning of the partition op)."""
    runtime = choose_runtime(kind, fallback)
    if runtime is None:
        raise RuntimeError(f"no runtime for {kind} partitions is installed: {pip_hint(kind)}")
    runner = OrtRunner(payload) if runtime == "onnxruntime" else LiteRtRunner(runtime, payload)
    return runner.run(inputs)


# ---- the file's partition metadata --------------------------------------------------


def partition_metadata(source) -> list[dict]:
    """The METADATA section's "partitions" list of a file (empty when absent), from its
    bytes or its path (reading only the header, section table and METADATA). The file
    has been validated by the C loader already."""
    from .. import fileformat as fmt

    def read_at(f, off: int, n: int) -> bytes:
        if isinstance(f, (bytes, bytearray, memoryview)):
            return bytes(f[off:off + n])
        f.seek(off)
        return f.read(n)

    def scan(f) -> list[dict]:
        (_, _, _, _, _, _, nsec, toff, *_rest) = fmt._HEADER.unpack(read_at(f, 0, fmt.HEADER_SIZE))
        table = read_at(f, toff, nsec * fmt.ENTRY_SIZE)
        for k in range(nsec):
            kind, _, off, size, _, _ = fmt._ENTRY.unpack_from(table, k * fmt.ENTRY_SIZE)
            if kind == fmt.METADATA:
                meta = json.loads(read_at(f, off, size).decode("utf-8"))
                parts = meta.get("partitions") if isinstance(meta, dict) else None
                return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        return []

    try:
        if isinstance(source, (bytes, bytearray, memoryview)):
            return scan(source)
        with open(source, "rb") as f:
            return scan(f)
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return []


# ---- the C backends -----------------------------------------------------------------


def _write_msg(ffi, msg, size: int, text: str) -> None:
    if size <= 0 or msg == ffi.NULL:
        return
    data = text.encode("utf-8", "replace")[:size - 1]
    ffi.memmove(msg, data, len(data))
    msg[len(data)] = b"\0"


class Partition:
    """What a Session knows about one partition node: its C description, boundary
    tensors, metadata from the file and how it runs here."""

    def __init__(self, position: int, node: int, kind: str, index: int, name: str,
                 inputs: list[tuple[tuple[int, ...], np.dtype, int]],
                 outputs: list[tuple[tuple[int, ...], np.dtype, int]], meta: dict):
        self.position = position
        self.node = node
        self.kind = kind
        self.index = index
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.meta = meta
        self.runtime: str | None = None
        self.delegate: str | None = None
        self.delegate_loaded = False
        self.reason: str | None = None
        self.shared: OrtRunner | None = None  # onnxruntime: one runner for every context
        self.lock = threading.Lock()
        self.bounded = False  # the file has bounded dimensions: shapes follow each run

    @property
    def nodes(self) -> list[str]:
        return list(self.meta.get("nodes") or [])

    @property
    def ops(self) -> list[str]:
        return list(self.meta.get("ops") or [])


class Backends:
    """The edgert_backend structs (one per kind that has a runtime here) of one Session,
    with the cffi callbacks they point at. Keep this object alive as long as any C
    session created with it."""

    def __init__(self, ffi, partitions: list[Partition], delegate_options: dict | None, threads: int | None,
                 lib=None):
        """lib: the C library, for a file with bounded dimensions, whose boundary shapes
        follow each run's input sizes (asked with edgert_partition_call_tensor)."""
        self.ffi = ffi
        self.lib = lib
        self.by_node = {p.node: p for p in partitions}
        self.delegate_options = delegate_options
        self.threads = threads
        self.states: dict[int, Any] = {}
        self._next = 1
        self._lock = threading.Lock()
        self.structs: dict[int, Any] = {}
        kinds = {p.kind for p in partitions if p.runtime is not None}
        self._prepare = ffi.callback(
            "edgert_status(void *, const edgert_model *, const edgert_partition_info *, void **, char *, size_t)",
            self._on_prepare, error=STATUS_BACKEND)
        self._invoke = ffi.callback(
            "edgert_status(void *, void *, const void *const *, void *const *, char *, size_t)",
            self._on_invoke, error=STATUS_BACKEND)
        self._release = ffi.callback("void(void *, void *)", self._on_release)
        for kind in kinds:
            b = ffi.new("edgert_backend *")
            b.user = ffi.NULL
            b.prepare = self._prepare
            b.invoke = self._invoke
            b.release = self._release
            self.structs[KIND_CODES[kind]] = b

    def install(self, opts) -> None:
        """Points opts->backends at these structs."""
        for code, b in self.structs.items():
            opts.backends[code] = b

    # The callbacks run on the thread that called into C; no exception may escape.
    def _on_prepare(self, user, model, info, state, msg, msg_size):
        try:
            p = self.by_node[int(info.node)]
            payload = bytes(self.ffi.buffer(info.payload, info.payload_bytes))
            with p.lock:
                if p.runtime == "onnxruntime":
                    if p.shared is None:
                        p.shared = OrtRunner(payload, self.threads)
                    runner = p.shared
                else:
                    runner = LiteRtRunner(p.runtime, payload, p.delegate, self.delegate_options, self.threads)
                    p.delegate_loaded = runner.delegate_loaded
                    p.reason = runner.reason
            with self._lock:
                handle = self._next
                self._next += 1
                self.states[handle] = (p, runner)
            state[0] = self.ffi.cast("void *", handle)
            return 0
        except BaseException as e:  # noqa: BLE001 - reported to C as a status and a message
            _write_msg(self.ffi, msg, int(msg_size), f"cannot load the payload with {p_runtime(self, info)}: "
                                                     f"{type(e).__name__}: {e}")
            return STATUS_BACKEND

    def _on_invoke(self, user, state, inputs, outputs, msg, msg_size):
        ffi = self.ffi
        try:
            p, runner = self.states[int(ffi.cast("uintptr_t", state))]
            ins, outs = (self._call_specs(p) if self.lib is not None else (p.inputs, p.outputs))
            xs = []
            for k, (shape, dt, nbytes) in enumerate(ins):
                xs.append(np.frombuffer(ffi.buffer(inputs[k], nbytes), dt).reshape(shape) if nbytes
                          else np.zeros(shape, dt))
            ys = runner.run(xs)
            if len(ys) != len(outs):
                raise ValueError(f"the payload gave {len(ys)} outputs, the node has {len(outs)}")
            for k, (shape, dt, nbytes) in enumerate(outs):
                y = np.asarray(ys[k])
                if y.dtype != dt or tuple(y.shape) != tuple(shape):
                    raise ValueError(f"payload output {k} is {y.dtype}{list(y.shape)}, the node's is {dt}{list(shape)}")
                if nbytes:
                    ffi.memmove(outputs[k], np.ascontiguousarray(y), nbytes)
            return 0
        except BaseException as e:  # noqa: BLE001
            _write_msg(ffi, msg, int(msg_size), f"{type(e).__name__}: {e}")
            return STATUS_BACKEND

    def _call_specs(self, p: Partition) -> tuple[list, list]:
        """The boundary tensors' (shape, dtype, nbytes) for the run under way."""
        info = self.ffi.new("edgert_tensor_info *")
        specs = []
        for is_out, side in ((0, p.inputs), (1, p.outputs)):
            got = []
            for k in range(len(side)):
                if self.lib.edgert_partition_call_tensor(is_out, k, info) != 0:
                    raise RuntimeError("edgert_partition_call_tensor failed outside an invoke")
                got.append(tensor_spec(self.ffi, info))
            specs.append(got)
        return specs[0], specs[1]

    def _on_release(self, user, state):
        try:
            with self._lock:
                self.states.pop(int(self.ffi.cast("uintptr_t", state)), None)
        except BaseException:  # noqa: BLE001 - nothing to report to
            pass


def p_runtime(backends: Backends, info) -> str:
    try:
        return runtime_label(backends.by_node[int(info.node)].runtime)
    except Exception:  # noqa: BLE001
        return "the backend"


def describe(partitions: list[Partition]) -> list[dict]:
    """Session.partitions(): where each partition runs."""
    return [{"index": p.index, "node": p.name, "backend": p.kind,
             "runtime": runtime_label(p.runtime) if p.runtime else None,
             "delegate": p.delegate, "delegate_loaded": p.delegate_loaded, "reason": p.reason,
             "nodes": p.nodes} for p in partitions]


def warn_delegate(p: Partition) -> None:
    """A RuntimeWarning when a requested or recorded delegate does not run partition p."""
    if p.delegate and not p.delegate_loaded:
        warnings.warn(f"partition {p.name}: {p.reason or 'delegate not loaded'}; it runs on the {p.runtime} CPU path",
                      RuntimeWarning, stacklevel=3)
    elif p.kind == "onnxruntime" and p.reason:
        warnings.warn(f"partition {p.name}: {p.reason}", RuntimeWarning, stacklevel=3)


def tensor_spec(ffi, info) -> tuple[tuple[int, ...], np.dtype, int]:
    return (tuple(int(info.shape[d]) for d in range(info.ndim)), dtypes.np_of(info.dtype), int(info.nbytes))
