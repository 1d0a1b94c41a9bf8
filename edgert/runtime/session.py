"""Python face of the C runtime: Session, as in onnxruntime.

Needs only numpy and cffi. The compiled module is edgert._edgert_c (cffi API mode);
on a board without a compiler, EDGERT_LIBRARY may name a cross-built libedgert.so,
loaded in cffi ABI mode instead.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import threading
from typing import Any, Iterable, Sequence

import numpy as np

from . import backends
from .. import dtypes
from ..errors import BackendError, EdgertError, InputError, ModelFormatError, NoBackendError, RuntimeFailure

_FORMAT_CODES = range(100, 200)
_lib = None
_ffi = None


def _load():
    global _lib, _ffi
    if _lib is not None:
        return _ffi, _lib
    path = os.environ.get("EDGERT_LIBRARY")
    if path:
        from ._abi import load_abi
        _ffi, _lib = load_abi(path)
    else:
        try:
            from .._edgert_c import ffi, lib
        except ImportError:
            from ._abi import find_library, load_abi
            found = find_library()
            if not found:
                raise
            ffi, lib = load_abi(found)
        _ffi, _lib = ffi, lib
    return _ffi, _lib


def _check(status: int, message: str) -> None:
    """The one place a C status becomes a Python exception."""
    if status == 0:
        return
    ffi, lib = _load()
    text = ffi.string(lib.edgert_status_str(status)).decode()
    msg = f"{text}: {message}" if message else text
    if status == 202:
        raise NoBackendError(msg, status)
    if status == 203:
        raise BackendError(msg, status)
    if status in _FORMAT_CODES or 200 <= status < 400:
        raise ModelFormatError(msg, status)
    if status in (500, 501):  # invalid argument; an input's index value out of range
        raise InputError(msg, status)
    raise RuntimeFailure(msg, status)


def _physical_memory() -> int | None:
    """Bytes of physical memory, or None where sysconf cannot tell."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def version() -> str:
    ffi, lib = _load()
    return ffi.string(lib.edgert_version()).decode()


def runtime_info() -> dict[str, Any]:
    """What is installed: the package and file-format versions, the C library that was
    loaded (its path, build and compiler flags) and the kernels it chose at start-up."""
    from .._version import __version__

    ffi, lib = _load()
    fmt = int(lib.edgert_format_version())
    where = os.environ.get("EDGERT_LIBRARY")
    if not where:
        try:
            from .. import _edgert_c
            where = _edgert_c.__file__
        except ImportError:
            from ._abi import find_library
            where = find_library()
    return {
        "version": __version__,
        "library_version": ffi.string(lib.edgert_version()).decode(),
        "format_version": f"{fmt >> 16}.{fmt & 0xFFFF}",
        "library": where,
        "build": ffi.string(lib.edgert_build_info()).decode(),
        "kernels": ffi.string(lib.edgert_kernels()).decode(),
    }


def alloc_count() -> int:
    """Heap allocations the C library has made since it was loaded."""
    return int(_load()[1].edgert_alloc_count())


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """shape: ints, and for a bounded dimension its symbol's name (as onnxruntime shows
    symbolic dimensions); bounds: None for a static tensor, else (lo, hi) per dimension
    (lo == hi when fixed); nbytes: at the upper bounds."""
    name: str
    shape: list
    dtype: np.dtype
    nbytes: int
    bounds: list[tuple[int, int]] | None = None
    steps: list[tuple[int, list[int]]] | None = None
    # per dim (step, residues): the model runs the sizes step * k + r, r in residues, only

    @property
    def constraints(self) -> list[str]:
        """The rules a bounded input's dims follow, as text ("H: a multiple of 32")."""
        out = []
        for d, (step, rs) in enumerate(self.steps or ()):
            if step > 1:
                sym = self.shape[d] if isinstance(self.shape[d], str) else f"dim {d}"
                out.append(f"{sym}: a multiple of {step}" if rs == [0] else
                           f"{sym}: {step}*k + r, r in {{{', '.join(map(str, rs))}}}")
        return out

    @property
    def type(self) -> str:
        """onnxruntime-style type string, e.g. tensor(float)."""
        names = {"float32": "float", "bool": "bool"}
        return f"tensor({names.get(self.dtype.name, self.dtype.name)})"


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    index: int
    name: str
    op: str
    num_inputs: int
    num_outputs: int
    scratch_bytes: int


@dataclasses.dataclass(frozen=True)
class NodeProfile:
    index: int
    name: str
    op: str
    median_ms: float
    min_ms: float
    mean_ms: float
    percent: float


class Session:
    """Runs an .edgert model. `model` is a path or the file's bytes (copied once into an
    aligned buffer that the model uses in place). `threads` >= 1 worker threads per run.

    Threads: `run` may be called from any number of threads at once, as with
    onnxruntime's InferenceSession. Each run takes an execution context (a C session
    with its own arena, on the one loaded model) for its whole duration, so
    concurrent runs never share memory. Contexts are created on demand, up to
    `max_contexts` (default: the number of CPUs); when all are busy, a run waits for
    one. The C call runs without the GIL, so runs in different threads use different
    cores. `max_contexts=1` serializes runs and keeps one arena. Memory: one arena
    (`arena_bytes`) per context ever created.

    Fallback partitions (docs/partitions.md): nodes of the file that edgert hands to
    onnxruntime or LiteRT run through Python backends. `fallback` picks the runtime
    ("onnxruntime", "litert" for ai-edge-litert, "tflite" for tflite-runtime; None:
    whichever is installed); `delegate` ("edgetpu", "armnn" or a library path; default:
    the one recorded at conversion) and `delegate_options` apply to LiteRT partitions.
    A delegate that cannot be loaded gives a RuntimeWarning and the CPU path;
    `partitions()` says where each partition runs. Each context has its own LiteRT
    interpreters; onnxruntime sessions are shared by the contexts (their run is
    thread-safe).

    State (docs/runtime.md, "State"): a model converted with `--state OUT=IN` keeps its
    state in the session; each run reads it and leaves the next one, in place.
    `get_states()` describes the states, `reset_state()` restores the initial values,
    `get_state()` / `set_state()` copy them out and in. Such a Session is one stream:
    it has one execution context, so runs from several threads take turns (first come,
    first served) on the one state and never run at once; `stream()` gives another,
    independent stream (its own context and state, the same loaded model).
    """

    def __init__(self, model: str | os.PathLike | bytes | bytearray | memoryview, threads: int = 1,
                 max_contexts: int | None = None, *, delegate: str | None = None,
                 delegate_options: dict | None = None, fallback: str | None = None):
        ffi, lib = _load()
        self._ffi, self._lib = ffi, lib
        self._model = ffi.NULL
        self._contexts: list[Any] = []  # every C session created
        self._io_slots: dict[Any, tuple] = {}  # context -> its input and output pointer arrays (run)
        self._streams = 0  # open streams (Session.stream) on this model
        self._idle: list[Any] = []      # those not running
        self._cond = threading.Condition(threading.Lock())  # never taken twice by one thread
        self._queue: collections.deque[int] = collections.deque()  # tickets of runs waiting, in order
        self._tickets = 0
        self._closed = False
        self._partitions: list = []
        self._backends = None
        self._fallback = fallback
        err = ffi.new("char[]", 1024)
        out = ffi.new("edgert_model **")
        if isinstance(model, (bytes, bytearray, memoryview)):
            raw = np.frombuffer(model, np.uint8)
            # 64-aligned copy the model keeps using (zero copy from here on).
            self._buffer = np.empty(raw.size + 64, np.uint8)
            start = (-self._buffer.ctypes.data) % 64
            self._buffer = self._buffer[start:start + raw.size]
            self._buffer[:] = raw
            status = lib.edgert_model_load_memory(ffi.cast("void *", self._buffer.ctypes.data), raw.size, out, err, 1024)
        else:
            path = os.fspath(model)
            if not os.path.exists(path):
                raise ModelFormatError(f"{path}: no such file")
            status = lib.edgert_model_load_file(os.fsencode(path), out, err, 1024)
        _check(status, ffi.string(err).decode(errors="replace"))
        self._model = out[0]
        if not isinstance(threads, int) or threads < 1:
            self.close()
            raise InputError(f"threads must be a positive integer, got {threads!r}")
        if max_contexts is None:
            max_contexts = os.cpu_count() or 1
        if not isinstance(max_contexts, int) or max_contexts < 1:
            self.close()
            raise InputError(f"max_contexts must be a positive integer, got {max_contexts!r}")
        self._threads = threads
        self._max_contexts = max_contexts
        self.arena_bytes = int(lib.edgert_model_arena_bytes(self._model))
        try:
            self._setup_partitions(model, delegate, delegate_options, fallback)
            self._idle.append(self._new_context())
        except EdgertError:
            self.close()
            raise
        for p in self._partitions:
            backends.warn_delegate(p)
        self._inputs = [self._input_info(k) for k in range(lib.edgert_model_num_inputs(self._model))]
        self._bounded = any(t.bounds is not None for t in self._inputs)
        self._outputs = [self._info(lib.edgert_model_output_info, k) for k in range(lib.edgert_model_num_outputs(self._model))]
        self._in_index = {t.name: k for k, t in enumerate(self._inputs)}
        self._out_index = {t.name: k for k, t in enumerate(self._outputs)}
        self._in_specs = [(t.dtype, tuple(t.shape)) for t in self._inputs]
        self._out_specs = [(tuple(t.shape), t.dtype) for t in self._outputs]
        self._states = [self._state_info(k) for k in range(int(lib.edgert_model_num_states(self._model)))]
        self._state_index = {t.name: k for k, t in enumerate(self._states)}
        if self._states:
            self._max_contexts = 1  # one stream: one state, runs take turns on it

    def _state_info(self, k: int) -> TensorInfo:
        info = self._ffi.new("edgert_tensor_info *")
        _check(self._lib.edgert_model_state_info(self._model, k, 0, info), "")
        return TensorInfo(self._ffi.string(info.name).decode(), [int(info.shape[d]) for d in range(info.ndim)],
                          dtypes.np_of(info.dtype), int(info.nbytes))

    # ---- state (docs/runtime.md, "State") -----------------------------------------------
    def get_states(self) -> list[TensorInfo]:
        """The model's states (named after their inputs); empty for a stateless model."""
        return list(self._states)

    def _state_call(self, fn) -> Any:
        """fn(context) on this stream's one context, and its status checked."""
        if self._closed:
            raise EdgertError("session is closed")
        ctx = self._acquire()
        try:
            status, result = fn(ctx)
            message = self._ffi.string(self._lib.edgert_session_last_error(ctx)).decode(errors="replace") \
                if status else ""
        finally:
            self._release(ctx)
        _check(status, message)
        return result

    def reset_state(self) -> None:
        """Restores every state's initial value (the file's, or zeros): a new stream."""
        self._state_call(lambda ctx: (self._lib.edgert_session_reset_state(ctx), None))

    def get_state(self, name: str | None = None):
        """A copy of state `name`, or of every state as {name: array} when name is None."""
        names = [name] if name is not None else list(self._state_index)
        for n in names:
            if n not in self._state_index:
                raise InputError(f"unknown state {n!r}; the model's states are {list(self._state_index)}")

        def get(ctx):
            out = {}
            for n in names:
                k = self._state_index[n]
                arr = np.empty(self._states[k].shape, self._states[k].dtype)
                st = self._lib.edgert_session_get_state(ctx, k, self._ffi.from_buffer(arr), arr.nbytes)
                if st:
                    return st, None
                out[n] = arr
            return 0, out
        got = self._state_call(get)
        return got[name] if name is not None else got

    def set_state(self, values: dict[str, Any] | str, value: Any = None) -> None:
        """Sets states from {name: array} (or one: set_state(name, array)); the arrays
        must have the states' shapes and dtypes. States not named keep their values."""
        if isinstance(values, str):
            values = {values: value}
        arrays = {}
        for n, v in values.items():
            if n not in self._state_index:
                raise InputError(f"unknown state {n!r}; the model's states are {list(self._state_index)}")
            info = self._states[self._state_index[n]]
            arr = np.asarray(v)
            if arr.dtype != info.dtype or list(arr.shape) != info.shape:
                raise InputError(f"state {n!r}: {arr.dtype}{list(arr.shape)}, expected {info.dtype}{info.shape}")
            arrays[n] = np.require(arr, requirements="C")

        def put(ctx):
            for n, arr in arrays.items():
                st = self._lib.edgert_session_set_state(ctx, self._state_index[n], self._ffi.from_buffer(arr),
                                                        arr.nbytes)
                if st:
                    return st, None
            return 0, None
        self._state_call(put)

    def stream(self) -> "Stream":
        """An independent stream on the same loaded model: its own execution context and
        state (starting from the initial values), used like a Session. Close it when done
        (or use it in a with block); the model is freed once the Session and every stream
        are closed."""
        return Stream(self)

    def _setup_partitions(self, model, delegate, delegate_options, fallback) -> None:
        """Finds the model's partition nodes and the runtime for each; builds the backends."""
        ffi, lib = self._ffi, self._lib
        if fallback not in (None, "onnxruntime", "litert", "tflite"):
            raise InputError(f"fallback must be None, 'onnxruntime', 'litert' or 'tflite', got {fallback!r}")
        if delegate is not None and not isinstance(delegate, (str, os.PathLike)):
            raise InputError(f"delegate must be a name or a library path, got {delegate!r}")
        count = int(lib.edgert_model_num_partitions(self._model))
        if count == 0:
            return
        is_bytes = isinstance(model, (bytes, bytearray, memoryview))
        meta = backends.partition_metadata(memoryview(self._buffer) if is_bytes else os.fspath(model))
        by_index = {m.get("index"): m for m in meta}
        info = ffi.new("edgert_partition_info *")
        tinfo = ffi.new("edgert_tensor_info *")
        for k in range(count):
            _check(lib.edgert_model_partition_info(self._model, k, info), "")
            specs = []
            for is_out, n in ((0, info.n_inputs), (1, info.n_outputs)):
                side = []
                for j in range(int(n)):
                    _check(lib.edgert_model_partition_tensor(self._model, k, is_out, j, tinfo), "")
                    side.append(backends.tensor_spec(ffi, tinfo))
                specs.append(side)
            kind = backends.KIND_NAMES[int(info.backend)]
            p = backends.Partition(k, int(info.node), kind, int(info.index), ffi.string(info.name).decode(errors="replace"),
                                   specs[0], specs[1], by_index.get(int(info.index), {}))
            p.runtime = backends.choose_runtime(kind, fallback)
            if kind == "litert":
                p.delegate = os.fspath(delegate) if delegate is not None else p.meta.get("delegate")
            elif delegate is not None:
                p.reason = "delegates apply to LiteRT partitions; this one runs on onnxruntime's CPU provider"
            self._partitions.append(p)
        bounded = self._has_bounds()
        self._backends = backends.Backends(ffi, self._partitions, delegate_options, self._threads,
                                           lib if bounded else None)
        for p in self._partitions:
            p.bounded = bounded

    def _has_bounds(self) -> bool:
        """True when an input of the model has a bounded dimension."""
        d = self._ffi.new("edgert_dim_info *")
        info = self._ffi.new("edgert_tensor_info *")
        for k in range(self._lib.edgert_model_num_inputs(self._model)):
            _check(self._lib.edgert_model_input_info(self._model, k, info), "")
            for i in range(info.ndim):
                _check(self._lib.edgert_model_input_dim(self._model, k, i, d), "")
                if d.lo != d.hi:
                    return True
        return False

    def _no_backend(self, c_message: str) -> NoBackendError:
        """The error for partitions no installed (or allowed) runtime can run."""
        lines = []
        for p in self._partitions:
            if p.runtime is not None:
                continue
            wanted = self._fallback
            if wanted is not None and wanted not in backends.RUNTIMES[p.kind]:
                choices = " or ".join(repr(r) for r in backends.RUNTIMES[p.kind])
                why = (f"fallback={wanted!r} cannot run {p.kind} partitions (use fallback=None or {choices}; "
                       f"the runtime installs with {backends.pip_hint(p.kind)})")
            else:
                names = " or ".join(backends._DISTRIBUTIONS[r] for r in backends.RUNTIMES[p.kind]
                                    if wanted is None or r == wanted)
                off = " (or disabled by EDGERT_DISABLE_BACKENDS)" if backends.disabled() else ""
                why = f"{names} is not installed{off}; install it with {backends.pip_hint(p.kind)}"
            nodes = ", ".join(p.nodes) or "?"
            ops = ", ".join(sorted(set(p.ops))) or "?"
            lines.append(f"partition {p.name} ({p.kind}: nodes {nodes}; ops {ops}): {why}")
        text = "no backend for a fallback partition: " + "; ".join(lines or [c_message])
        return NoBackendError(text + f" [{c_message}]" if lines else text, 202)

    def partitions(self) -> list[dict]:
        """Where each fallback partition runs: one dict per partition with "index",
        "node", "backend" ("onnxruntime" | "litert"), "runtime" (e.g. "ai-edge-litert
        2.3.0"), "delegate" (name or None), "delegate_loaded", "reason" (why not, or
        None) and "nodes" (the original nodes). Empty for models edgert runs alone."""
        return backends.describe(self._partitions)

    def _new_context(self):
        """Creates one C session (with its arena) on the model; raises RuntimeFailure."""
        ffi, lib = self._ffi, self._lib
        phys = _physical_memory()
        if phys is not None and self.arena_bytes > phys:
            raise RuntimeFailure(f"out of memory: the model needs an arena of {self.arena_bytes:,} bytes, more than "
                                 f"the {phys:,} bytes of physical memory of this machine", 400)
        opts = ffi.new("edgert_session_options *")
        lib.edgert_session_options_init(opts)
        opts.threads = self._threads
        if self._backends is not None:
            self._backends.install(opts)
        sout = ffi.new("edgert_session **")
        status = lib.edgert_session_create(self._model, opts, sout)
        if status != 0:
            message = ffi.string(lib.edgert_session_last_error(ffi.NULL)).decode(errors="replace")
            if status == 202:
                raise self._no_backend(message)
            _check(status, "cannot create a session: " + message)
        self._contexts.append(sout[0])
        n_in, n_out = int(lib.edgert_model_num_inputs(self._model)), int(lib.edgert_model_num_outputs(self._model))
        self._io_slots[sout[0]] = (ffi.new("void *[]", max(1, n_in)), ffi.new("void *[]", max(1, n_out)))
        return sout[0]

    def _acquire(self):
        """An idle context (a new one while fewer than max_contexts exist) for the calling
        run. Runs are served in the order they asked: a thread that releases a context and
        asks again at once queues behind the ones already waiting, so none of them waits
        for ever."""
        with self._cond:
            if self._idle and not self._queue and not self._closed:  # nobody waits: no ticket
                return self._idle.pop()
            ticket = self._tickets
            self._tickets += 1
            self._queue.append(ticket)
            try:
                while True:
                    if self._closed:
                        raise EdgertError("session is closed")
                    if self._queue[0] == ticket:
                        if self._idle:
                            return self._idle.pop()
                        if len(self._contexts) < self._max_contexts:
                            try:
                                return self._new_context()
                            except RuntimeFailure:
                                if not self._contexts:
                                    raise
                                self._max_contexts = len(self._contexts)  # memory is short: share the ones there are
                    self._cond.wait()
            finally:
                self._queue.remove(ticket)
                if self._queue:
                    self._cond.notify_all()  # the next in the queue may go

    def _release(self, ctx) -> None:
        with self._cond:
            self._idle.append(ctx)
            if self._closed:
                self._free_idle()
            if self._queue:
                self._cond.notify_all()  # the head of the queue must see it, whoever else waits

    def _destroy_idle(self) -> None:
        """Destroys the idle contexts (under _cond)."""
        for ctx in self._idle:
            self._lib.edgert_session_destroy(ctx)
            self._contexts.remove(ctx)
            self._io_slots.pop(ctx, None)
        self._idle.clear()

    def _free_idle(self) -> None:
        """Destroys idle contexts, and the model once no context is left (under _cond)."""
        self._destroy_idle()
        if not self._contexts and self._model and not self._streams:
            self._lib.edgert_model_free(self._model)
            self._model = self._ffi.NULL

    def _info(self, fn, k: int) -> TensorInfo:
        info = self._ffi.new("edgert_tensor_info *")
        _check(fn(self._model, k, info), "")
        return TensorInfo(self._ffi.string(info.name).decode(), [int(info.shape[d]) for d in range(info.ndim)],
                          dtypes.np_of(info.dtype), int(info.nbytes))

    def _input_info(self, k: int) -> TensorInfo:
        t = self._info(self._lib.edgert_model_input_info, k)
        d = self._ffi.new("edgert_dim_info *")
        shape, bounds, steps, bounded = [], [], [], False
        for i, n in enumerate(t.shape):
            _check(self._lib.edgert_model_input_dim(self._model, k, i, d), "")
            sym = self._ffi.string(d.symbol).decode(errors="replace")
            shape.append(sym if sym else n)
            bounds.append((int(d.lo), int(d.hi)))
            steps.append((int(d.step), [r for r in range(64) if int(d.residues) >> r & 1]))
            bounded = bounded or bool(sym)
        return dataclasses.replace(t, shape=shape, bounds=bounds, steps=steps) if bounded else t

    def _set_shape(self, ctx, k: int, shape: Sequence[int]) -> int:
        """edgert_session_set_input_shape of input k in context ctx; its status."""
        dims = self._ffi.new("int64_t[]", [int(n) for n in shape] or [0])
        return self._lib.edgert_session_set_input_shape(ctx, k, len(shape), dims)

    def shapes_at(self, input_shapes: dict[str, Sequence[int]]) -> dict[str, list[int]]:
        """The output shapes a run at these input shapes gives (bounded dimensions),
        without running: the runtime's shape pass and its nodes' prepare
        (edgert_session_prepare). InputError, as run() raises it, when a size is outside
        the bounds or breaks a constraint; another EdgertError when the model cannot run it."""
        ffi, lib = self._ffi, self._lib
        info = ffi.new("edgert_tensor_info *")
        names = [t.name for t in self._inputs]
        unknown = sorted(set(input_shapes) - set(names))
        if unknown:
            raise InputError(f"unknown inputs {unknown}; the model's inputs are {names}")
        ctx = self._acquire()
        try:
            status, shape_error = 0, False
            for k, name in enumerate(names):
                shp = [int(v) for v in input_shapes.get(name, self._inputs[k].shape if
                                                        self._inputs[k].bounds is None else
                                                        [hi for _, hi in self._inputs[k].bounds])]
                status = self._set_shape(ctx, k, shp)
                if status:
                    shape_error = True
                    break
            if status == 0:
                status = lib.edgert_session_prepare(ctx)
                shape_error = status == 300
            out = {}
            if status == 0:
                for k, t in enumerate(self._outputs):
                    _check(lib.edgert_session_output_info(ctx, k, info), "")
                    out[t.name] = [int(info.shape[d]) for d in range(info.ndim)]
            message = ffi.string(lib.edgert_session_last_error(ctx)).decode(errors="replace") if status else ""
        finally:
            self._release(ctx)
        if shape_error:
            raise InputError(f"{ffi.string(lib.edgert_status_str(status)).decode()}: {message}", status)
        _check(status, message)
        return out

    def _run_bounded(self, arrays: list[np.ndarray], wanted: list[int]) -> list[np.ndarray]:
        """run() for a file with bounded dimensions: sets each input's shape, runs, and
        returns the outputs at the shapes the run computed."""
        ffi, lib = self._ffi, self._lib
        info = ffi.new("edgert_tensor_info *")
        ctx = self._acquire()
        try:
            status, results, shape_error = 0, [], False
            for k, arr in enumerate(arrays):
                status = self._set_shape(ctx, k, arr.shape)
                shape_error = status != 0
                if status == 0:
                    status = lib.edgert_session_set_input(ctx, k, ffi.from_buffer(arr) if arr.nbytes else ffi.NULL,
                                                          arr.nbytes)
                if status:
                    break
            if status == 0:
                status = lib.edgert_session_run(ctx)
                shape_error = status == 300  # the inputs' shapes disagree (a shared dimension)
            if status == 0:
                for k in wanted:
                    _check(lib.edgert_session_output_info(ctx, k, info), "")
                    out = np.empty([int(info.shape[d]) for d in range(info.ndim)], self._outputs[k].dtype)
                    if out.nbytes:
                        ffi.memmove(ffi.from_buffer(out), lib.edgert_session_output_data(ctx, k), out.nbytes)
                    results.append(out)
            message = ffi.string(lib.edgert_session_last_error(ctx)).decode(errors="replace") if status else ""
        finally:
            self._release(ctx)
        if shape_error:  # an input outside its bounds: the caller's error, as a wrong shape is
            raise InputError(f"{ffi.string(lib.edgert_status_str(status)).decode()}: {message}", status)
        _check(status, message)
        return results

    def get_inputs(self) -> list[TensorInfo]:
        return list(self._inputs)

    def get_outputs(self) -> list[TensorInfo]:
        return list(self._outputs)

    def run(self, output_names: Sequence[str] | None, feeds: dict[str, Any]) -> list[np.ndarray]:
        """Runs the model on `feeds` ({input name: array}) and returns the requested outputs
        (all when output_names is None) as new arrays. Safe to call from several threads
        at once (see the class docstring)."""
        if self._closed:
            raise EdgertError("session is closed")
        ffi, lib = self._ffi, self._lib
        if feeds.keys() != self._in_index.keys():
            unknown = sorted(set(feeds) - set(self._in_index))
            missing = [t.name for t in self._inputs if t.name not in feeds]
            parts = []
            if unknown:
                parts.append(f"unknown input name(s) {unknown}")
            if missing:
                parts.append(f"missing input(s) {missing}")
            raise InputError("; ".join(parts) + f"; the model's inputs are {[t.name for t in self._inputs]}")
        if output_names is None:
            wanted = range(len(self._outputs))
        else:
            bad = [n for n in output_names if n not in self._out_index]
            if bad:
                raise InputError(f"unknown output name(s) {bad}; the model's outputs are {[t.name for t in self._outputs]}")
            wanted = [self._out_index[n] for n in output_names]
        if self._bounded:
            return self._run_bounded(self._input_arrays(feeds), list(wanted))
        # The common case checked in one comparison per input (a streaming loop calls
        # this per frame); anything else takes _input_arrays' conversions and messages.
        arrays = [feeds[name] for name in self._in_index]
        for arr, (dtype, shape) in zip(arrays, self._in_specs):
            if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != shape or not arr.flags.c_contiguous:
                arrays = self._input_arrays(feeds)
                break
        results = [np.empty(*self._out_specs[k]) for k in wanted]
        ctx = self._acquire()
        try:
            ins, outs = self._io_slots[ctx]  # the context's own pointer arrays: only its holder fills them
            for k, arr in enumerate(arrays):
                ins[k] = ffi.from_buffer(arr) if arr.nbytes else ffi.NULL
            for k in range(len(self._outputs)):
                outs[k] = ffi.NULL
            for k, arr in zip(wanted, results):
                if arr.nbytes:
                    outs[k] = ffi.from_buffer(arr)
            # Copy in, run, copy out: one C call, without the GIL.
            status = lib.edgert_session_run_io(ctx, ins, len(arrays), outs, len(self._outputs))
            message = ffi.string(lib.edgert_session_last_error(ctx)).decode(errors="replace") if status else ""
        finally:
            self._release(ctx)
        _check(status, message)
        return results

    def _input_arrays(self, feeds: dict[str, Any]) -> list[np.ndarray]:
        """The feeds in input order as C-contiguous arrays; InputError on a wrong dtype or shape."""
        arrays = []
        for info in self._inputs:
            arr = feeds[info.name]
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            if arr.dtype != info.dtype:
                raise InputError(f"input {info.name!r}: dtype {arr.dtype}, expected {info.dtype}")
            if info.bounds is not None:
                if arr.ndim != len(info.shape):
                    raise InputError(f"input {info.name!r}: shape {list(arr.shape)}, expected rank {len(info.shape)} "
                                     f"({info.shape})")
            elif list(arr.shape) != info.shape:
                raise InputError(f"input {info.name!r}: shape {list(arr.shape)}, expected {info.shape}")
            arrays.append(np.require(arr, requirements="C"))
        return arrays

    def nodes(self) -> list[NodeInfo]:
        """Every node in execution order (edgert_model_node_info)."""
        ffi, lib = self._ffi, self._lib
        out = []
        info = ffi.new("edgert_node_info *")
        for k in range(int(lib.edgert_model_num_nodes(self._model))):
            _check(lib.edgert_model_node_info(self._model, k, info), "")
            out.append(NodeInfo(k, ffi.string(info.name).decode(errors="replace"), ffi.string(info.op).decode(),
                                int(info.num_inputs), int(info.num_outputs), int(info.scratch_bytes)))
        return out

    def profile(self, feeds: dict[str, Any], runs: int = 10, warmup: int = 1) -> list[NodeProfile]:
        """Times every node over `runs` profiled runs (edgert_session_run_profiled) after
        `warmup` plain ones (at least one); returns one record per node in execution order, with the
        median, minimum and mean milliseconds over the runs and the median's share of
        the sum of medians."""
        if runs < 1:
            raise InputError(f"runs must be >= 1, got {runs}")
        ffi, lib = self._ffi, self._lib
        for _ in range(max(warmup, 1)):  # the first run also checks the feeds
            self.run(None, feeds)
        arrays = self._input_arrays(feeds)
        nodes = self.nodes()
        times = np.zeros((runs, len(nodes)), np.uint64)
        buf = ffi.new("uint64_t[]", max(len(nodes), 1))
        ctx = self._acquire()
        try:
            for r in range(runs):
                for k, arr in enumerate(arrays):
                    if self._bounded:
                        _check(self._set_shape(ctx, k, arr.shape), "")
                    _check(lib.edgert_session_set_input(ctx, k, ffi.from_buffer(arr), arr.nbytes), "")
                status = lib.edgert_session_run_profiled(ctx, buf, len(nodes))
                if status != 0:
                    _check(status, ffi.string(lib.edgert_session_last_error(ctx)).decode(errors="replace"))
                times[r] = np.frombuffer(ffi.buffer(buf, 8 * len(nodes)), np.uint64)
        finally:
            self._release(ctx)
        ms = times.astype(np.float64) / 1e6
        med = np.median(ms, axis=0)
        total = float(med.sum()) or 1.0
        return [NodeProfile(n.index, n.name, n.op, float(med[k]), float(ms[:, k].min()), float(ms[:, k].mean()),
                            100.0 * float(med[k]) / total) for k, n in enumerate(nodes)]

    def close(self) -> None:
        """Frees the model and every execution context (runs in progress finish first)."""
        cond = getattr(self, "_cond", None)
        if cond is None:
            return
        with cond:
            self._closed = True
            self._free_idle()
            cond.notify_all()  # waiting runs see it and fail

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Iterable[Any]) -> None:
        self.close()


class Stream(Session):
    """One more stream of a Session's model (Session.stream): its own execution context
    (a C session) and state; runs on it take turns. Everything else is the Session's."""

    _SHARED = ("_ffi", "_lib", "_model", "_buffer", "_threads", "arena_bytes", "_partitions", "_backends",
               "_fallback", "_inputs", "_outputs", "_in_index", "_out_index", "_bounded", "_states", "_state_index",
               "_in_specs", "_out_specs")

    def __init__(self, parent: Session):  # noqa: D107 - not Session's constructor
        owner = getattr(parent, "_owner", parent)
        self._cond = threading.Condition(threading.Lock())
        self._contexts, self._idle = [], []
        self._io_slots = {}
        self._queue = collections.deque()
        self._tickets = 0
        self._closed = False
        self._max_contexts = 1
        self._streams = 0
        for name in self._SHARED:
            if hasattr(owner, name):
                setattr(self, name, getattr(owner, name))
        with owner._cond:
            if owner._closed or not owner._model:
                self._owner = None
                self._closed = True
                raise EdgertError("session is closed")
            owner._streams += 1
        self._owner = owner
        try:
            self._idle.append(self._new_context())
        except BaseException:
            self.close()
            raise

    def stream(self) -> "Stream":
        return Stream(self._owner) if self._owner is not None else Stream(self)

    def _free_idle(self) -> None:
        """Destroys idle contexts; once none is left, lets go of the owner's model (under _cond)."""
        self._destroy_idle()
        owner = self._owner
        if not self._contexts and owner is not None:
            self._owner = None
            with owner._cond:
                owner._streams -= 1
                if owner._closed:
                    owner._free_idle()
