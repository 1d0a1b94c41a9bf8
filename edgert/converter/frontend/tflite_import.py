""".tflite (subgraph 0, float32) -> edgert IR.

Contract (docs/tflite.md):
- the graph's inputs and outputs are the TFLite signature: the same tensor names, NHWC
  shapes and dtypes, so that a LiteRT user's pre- and post-processing fits unchanged;
- inside, ops with a layout (convolutions, pools, resizes) run in edgert's NCHW; every
  other op follows its inputs' layout (element-wise ops, pads, concatenations, softmax,
  reductions with remapped axes), and ops whose meaning is tied to the TFLite layout
  (reshape, fully connected) read it. Each TFLite tensor is converted between the two
  layouts at most once (one transpose node), only where a consumer needs it;
- fp16 or int8 constants behind DEQUANTIZE are folded to float32 constants;
- fused activations become separate activation nodes that the fusion pass merges back;
  Padding.SAME pads follow TFLite (total = max((ceil(n/s)-1)*s + eff_k - n, 0), the
  smaller half before);
- every op edgert cannot import (unsupported builtins, custom ops, integer-quantized
  tensors, variables) is listed in one ConversionError with its output tensor names.
"""
from __future__ import annotations

import math
import os
from typing import Callable

import numpy as np

from ...errors import ConversionError
from ..ir import Graph, check_shape
from ..ops import registry as edgert_ops
from ..ops.registry import OpUnsupported
from ..tflite.schema import BUILTIN_NAMES
from ..tflite.reader import TENSOR_DTYPES, Model, OperatorInfo, TensorInfo, is_tflite, read_model

F32 = np.dtype(np.float32)
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)
NHWC_AXIS_IN_NCHW = {0: 0, 1: 2, 2: 3, 3: 1}  # TFLite (NHWC) axis -> its position in NCHW

CUSTOM = 32
TRANSPOSE_CONV_BIAS = "Convolution2DTransposeBias"  # MediaPipe's custom op
VARIABLE_OPS = {142, 143, 144}
SUBGRAPH_OPS = {31, 118, 119, 129}

# enum ActivationFunctionType -> the activation node that follows (None: none)
_ACT = {0: None, 1: ("relu", {}), 2: ("clip", {"min": -1.0, "max": 1.0}), 3: ("clip", {"min": 0.0, "max": 6.0}),
        4: ("tanh", {})}


def load_tflite(model) -> Model:
    """The checked Model of a path or bytes holding a .tflite file."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ConversionError(f"cannot read {os.fspath(model)!r}: {e}") from None
    else:
        data = bytes(model)
    return read_model(data)


def sniff_tflite(model) -> bool:
    """True when `model` (a path or bytes) is a .tflite file (identifier "TFL3")."""
    if isinstance(model, Model):
        return True
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f:
                return is_tflite(f.read(8))
        except OSError:
            return False
    if isinstance(model, (bytes, bytearray, memoryview)):
        return is_tflite(bytes(model[:8]))
    return False


def op_name(m: Model, op: OperatorInfo) -> str:
    c = m.opcodes[op.opcode]
    if c.builtin == CUSTOM:
        return f"CUSTOM {c.custom!r}"
    return BUILTIN_NAMES.get(c.builtin, f"builtin {c.builtin}")


class _Fail(ConversionError):
    """One operator cannot be imported (collected with the others)."""


class TfliteImporter:
    def __init__(self, model: Model, input_shapes: dict | None = None):
        self.m = model
        self.g = Graph()
        if len(model.subgraphs) > 1:
            raise ConversionError(f"the .tflite model has {len(model.subgraphs)} subgraphs; edgert imports "
                                  "one-subgraph models only (several subgraphs are not supported yet)")
        self.sg = model.subgraphs[0]
        for t in self.sg.tensors:  # the converter's limits (docs/design.md), before any work
            dt = TENSOR_DTYPES.get(t.type)
            check_shape(t.name, t.shape, dt if dt is not None else np.uint8)
        self.input_shapes = dict(input_shapes or {})
        self.vals: dict[int, dict[str, str]] = {}  # tensor -> {"tfl" | "nchw": IR name}
        self.consts: dict[int, np.ndarray] = {}  # tensor -> value (TFLite layout, float32 folded)
        self.problems: list[str] = []

    # ---- tensors ----------------------------------------------------------------
    def t(self, i: int) -> TensorInfo:
        return self.sg.tensors[i]

    def dtype(self, i: int) -> np.dtype:
        t = self.t(i)
        dt = TENSOR_DTYPES.get(t.type)
        if dt is None:
            raise _Fail(f"tensor {t.name!r} has type {t.type_name}, which edgert does not read")
        return np.dtype(dt)

    def const_value(self, i: int) -> np.ndarray | None:
        if i in self.consts:
            return self.consts[i]
        t = self.t(i)
        raw = self.m.buffers[t.buffer] if t.buffer < len(self.m.buffers) else None
        if raw is None:
            return None
        if t.is_variable:
            return None
        dt = self.dtype(i)
        n = math.prod(t.shape)
        if len(raw) != n * dt.itemsize:
            raise ConversionError(f"invalid .tflite file: tensor {t.name!r} of shape {list(t.shape)} "
                                  f"({t.type_name}) has a buffer of {len(raw)} bytes, expected {n * dt.itemsize}")
        v = np.frombuffer(raw, dt.newbyteorder("<"), n).astype(dt).reshape(t.shape)
        self.consts[i] = v
        return v

    def is_const(self, i: int) -> bool:
        return self.const_value(i) is not None

    def layout(self, i: int) -> str:
        v = self.vals.get(i, {})
        return "nchw" if "nchw" in v and "tfl" not in v else "tfl"

    def tfl(self, i: int) -> str:
        """IR name of tensor i in its TFLite layout."""
        v = self.vals.setdefault(i, {})
        if "tfl" in v:
            return v["tfl"]
        c = self.const_value(i)
        if c is not None:
            v["tfl"] = self.g.add_const(np.ascontiguousarray(c), self.t(i).name)
        elif "nchw" in v:
            v["tfl"] = self._relayout(v["nchw"], TO_NHWC, self.t(i).name + "/nhwc")
        else:
            raise _Fail(f"tensor {self.t(i).name!r} is read before it is computed")
        return v["tfl"]

    def nchw(self, i: int) -> str:
        """IR name of rank-4 tensor i in NCHW."""
        v = self.vals.setdefault(i, {})
        if "nchw" in v:
            return v["nchw"]
        if len(self.t(i).shape) != 4:
            raise _Fail(f"tensor {self.t(i).name!r} has rank {len(self.t(i).shape)}, expected 4")
        c = self.const_value(i)
        if c is not None:
            v["nchw"] = self.g.add_const(np.ascontiguousarray(np.transpose(c, TO_NCHW)), self.t(i).name + "/nchw")
        else:
            v["nchw"] = self._relayout(self.tfl(i), TO_NCHW, self.t(i).name + "/nchw")
        return v["nchw"]

    def _relayout(self, name: str, perm: tuple[int, ...], hint: str) -> str:
        """A layout change: a transpose, or a reshape when only size-1 dims move (a
        [1, 1, 1, C] tensor is the same bytes in both layouts)."""
        shape = self.g.tensors[name].shape
        out = [shape[p] for p in perm]
        if [d for d in shape if d != 1] == [d for d in out if d != 1] and \
                [p for p in perm if shape[p] != 1] == sorted(p for p in perm if shape[p] != 1):
            return self._emit("reshape", [name], {"shape": out}, hint)
        return self._emit("transpose", [name], {"perm": list(perm)}, hint)

    def get(self, i: int, layout: str) -> str:
        return self.nchw(i) if layout == "nchw" else self.tfl(i)

    def const_in(self, i: int, layout: str) -> str:
        """Constant i, broadcast against a rank-4 tensor, in `layout`."""
        c = self.const_value(i)
        if layout == "tfl" or c.ndim == 0:
            return self.tfl(i)
        if c.ndim > 4:
            raise _Fail(f"constant {self.t(i).name!r} of rank {c.ndim} broadcast against rank 4")
        c4 = c.reshape((1,) * (4 - c.ndim) + c.shape)
        return self.g.add_const(np.ascontiguousarray(np.transpose(c4, TO_NCHW)), self.t(i).name + "/nchw")

    # ---- nodes ------------------------------------------------------------------
    def _emit(self, op: str, inputs: list[str], attrs: dict, hint: str) -> str:
        g = self.g
        out = g.unique_name(hint)
        node = g.add_node(op, inputs, [out], attrs, name=out)
        try:
            ((shape, dt),) = edgert_ops.get(op).infer(node, g)[:1]
        except Exception:
            g.nodes.pop()
            raise
        g.add_tensor(out, shape, dt)
        return out

    def define(self, i: int, op: str, inputs: list[str], attrs: dict, layout: str = "tfl",
               act: int = 0) -> None:
        """Output tensor i = op(inputs) in `layout`, followed by fused activation `act`."""
        t = self.t(i)
        if act not in _ACT:
            raise _Fail(f"fused activation {act} is not supported")
        a = _ACT[act]
        name = self._emit(op, inputs, attrs, t.name if a is None else t.name + "/pre_act")
        if a is not None:
            name = self._emit(a[0], [name], a[1], t.name)
        if layout == "nchw" and len(t.shape) != 4:
            raise _Fail(f"output {t.name!r} has shape {list(t.shape)}, expected rank 4")
        want = tuple(t.shape) if layout == "tfl" else tuple(t.shape[p] for p in TO_NCHW)
        got = self.g.tensors[name].shape
        if self.g.tensors[name].dtype != self.dtype(i):
            raise _Fail(f"edgert computes dtype {self.g.tensors[name].dtype} for {t.name!r}, the file declares "
                        f"{t.type_name}")
        if got != want:
            raise _Fail(f"edgert computes shape {list(got)} for {t.name!r}, the file declares {list(t.shape)}"
                        + (" (in NCHW: %s)" % list(want) if layout == "nchw" else ""))
        self.vals[i] = {layout: name}

    def define_many(self, outs: list[int], op: str, inputs: list[str], attrs: dict) -> None:
        """Outputs `outs` (TFLite layout) = op(inputs), an op of several outputs."""
        g = self.g
        names = [g.unique_name(self.t(i).name) for i in outs]
        node = g.add_node(op, inputs, names, attrs, name=names[0])
        try:
            results = edgert_ops.get(op).infer(node, g)
        except Exception:
            g.nodes.pop()
            raise
        if len(results) != len(outs):
            g.nodes.pop()
            raise _Fail(f"{op} gives {len(results)} outputs, the operator has {len(outs)}")
        for i, (shape, _dt) in zip(outs, results):
            if tuple(shape) != tuple(self.t(i).shape):
                g.nodes.pop()
                raise _Fail(f"edgert computes shape {list(shape)} for {self.t(i).name!r}, the file declares "
                            f"{list(self.t(i).shape)}")
        for i, name, (shape, dt) in zip(outs, names, results):
            g.add_tensor(name, shape, dt)
            self.vals[i] = {"tfl": name}

    # ---- driver -----------------------------------------------------------------
    def run(self) -> Graph:
        g, sg = self.g, self.sg
        self._check_ops()
        for i in sg.inputs:
            t = self.t(i)
            dt = self.dtype(i)
            if t.quant is not None and dt != F32:
                raise ConversionError(f"input {t.name!r} is {t.type_name} with quantization: integer-quantized "
                                      "models are not supported yet")
            shape = tuple(t.shape)
            want = self.input_shapes.get(t.name)
            if want is not None and tuple(int(d) for d in want) != shape:
                raise ConversionError(f"input {t.name!r}: input_shapes {list(want)} differs from the model's "
                                      f"{list(shape)}; .tflite inputs keep the model's shape (other sizes are not "
                                      "supported yet)")
            unknown = set(self.input_shapes) - {self.t(k).name for k in sg.inputs}
            if unknown:
                raise ConversionError(f"input_shapes names {sorted(unknown)}, not inputs of the model")
            g.add_tensor(t.name, shape, dt)
            g.inputs.append(t.name)
            self.vals[i] = {"tfl": t.name}
        poisoned: set[int] = set()
        for op in sg.operators:
            if any(k in poisoned for k in op.inputs if k >= 0):
                poisoned.update(op.outputs)
                continue
            try:
                self._lower(op)
            except (_Fail, OpUnsupported) as e:
                outs = ", ".join(repr(self.t(k).name) for k in op.outputs)
                self.problems.append(f"  {op_name(self.m, op)} (operator {op.index}, outputs {outs}): {e}")
                poisoned.update(op.outputs)
        if self.problems:
            raise ConversionError(f"{len(self.problems)} TFLite operator(s) cannot be imported:\n"
                                  + "\n".join(self.problems))
        for i in sg.outputs:
            self._output(i)
        g.metadata["output_names"] = [self.t(i).name for i in sg.outputs]
        g.metadata["source_format"] = "tflite"
        return g

    def _check_ops(self) -> None:
        """Unsupported operators and tensors, all listed in one error."""
        bad = []
        for op in self.sg.operators:
            c = self.m.opcodes[op.opcode]
            outs = ", ".join(repr(self.t(k).name) for k in op.outputs)
            if c.builtin == CUSTOM and c.custom == TRANSPOSE_CONV_BIAS:
                continue
            why = None
            if c.builtin in VARIABLE_OPS:
                why = "resource variables are not supported yet (they will be the session's streaming state)"
            elif c.builtin in SUBGRAPH_OPS:
                why = "operators that call subgraphs are not supported yet"
            elif c.builtin == CUSTOM:
                why = "custom operator edgert does not implement"
            elif c.builtin not in LOWERINGS:
                why = "builtin edgert does not import yet"
            if why:
                bad.append(f"  {op_name(self.m, op)} (operator {op.index}, outputs {outs}): {why}")
        for t in self.sg.tensors:
            if t.is_variable:
                bad.append(f"  tensor {t.name!r} is a variable: resource variables are not supported yet")
            if t.sparse:
                bad.append(f"  tensor {t.name!r} is stored sparse (TFLite sparsity), not supported yet")
        if bad:
            raise ConversionError(f"the .tflite model uses {len(bad)} thing(s) edgert cannot import:\n"
                                  + "\n".join(bad))

    def _output(self, i: int) -> None:
        g = self.g
        t = self.t(i)
        if i not in self.vals and not self.is_const(i):
            raise ConversionError(f"output {t.name!r} of the .tflite model is never computed")
        name = self.tfl(i)
        if name != t.name:
            if t.name in g.tensors:  # another form (NCHW) took the name: it gives it up
                new = g.unique_name(t.name + "/nchw")
                g.rename_tensor(t.name, new)
                self.vals[i] = {k: (new if v == t.name else v) for k, v in self.vals[i].items()}
            if name in g.inputs or g.tensors[name].is_const or name in g.outputs:
                name = self._emit("copy", [name], {}, t.name)
            else:
                g.rename_tensor(name, t.name)
                name = t.name
        elif name in g.outputs or name in g.inputs:
            name = self._emit("copy", [name], {}, t.name + "/out")
        g.outputs.append(name)

    def _lower(self, op: OperatorInfo) -> None:
        code = self.m.opcodes[op.opcode]
        key = TRANSPOSE_CONV_BIAS if code.builtin == CUSTOM else code.builtin
        for k in op.outputs:
            dt = self.dtype(k)
            if dt != F32 and (self.t(k).quant is not None or dt.kind == "f" or key not in INDEX_OUTPUTS):
                t = self.t(k)
                raise _Fail(f"output {t.name!r} is {t.type_name}"
                            + ("; integer-quantized models are not supported yet" if t.quant else ""))
        LOWERINGS[key](self, op)

    # helpers for lowerings
    def opt(self, op: OperatorInfo, fid: int, fmt: str, default):
        return default if op.options is None else op.options.scalar(fid, fmt, default)

    def need_inputs(self, op: OperatorInfo, lo: int, hi: int | None = None) -> None:
        n = len(op.inputs)
        if n < lo or n > (hi if hi is not None else lo) or not op.outputs:
            raise _Fail(f"{n} inputs, {len(op.outputs)} outputs")

    def need_const(self, i: int, what: str) -> np.ndarray:
        if i < 0 or not self.is_const(i):
            raise _Fail(f"{what} must be a constant")
        return self.const_value(i)

    def need_ints(self, i: int, what: str) -> np.ndarray:
        """Constant integer tensor i (sizes, axes, paddings) as int64."""
        v = self.need_const(i, what)
        if v.dtype.kind not in "iu":
            raise _Fail(f"{what} must be an integer constant, not {self.t(i).type_name}")
        return v.astype(np.int64)


# ---- lowerings ----------------------------------------------------------------------

LOWERINGS: dict[object, Callable[[TfliteImporter, OperatorInfo], None]] = {}
INDEX_OUTPUTS = {56, 36, 22, 43, 70, 45, 49, 102}  # ops whose outputs may be integer (indices, shapes)


def _lowering(*keys):
    def deco(fn):
        for k in keys:
            LOWERINGS[k] = fn
        return fn
    return deco


def same_pads(n: int, k_eff: int, s: int) -> tuple[int, int]:
    """TFLite Padding.SAME: (before, after) for input size n, effective kernel k_eff, stride s."""
    out = -(-n // s)
    total = max((out - 1) * s + k_eff - n, 0)
    return total // 2, total - total // 2


def _window(imp, op, x_shape, kh, kw, sh, sw, dh=1, dw=1) -> dict:
    padding = imp.opt(op, 0, "b", 0)
    if min(sh, sw, dh, dw, kh, kw) < 1:
        raise _Fail(f"strides {sh}x{sw}, dilations {dh}x{dw}, kernel {kh}x{kw} must be >= 1")
    if padding == 0:  # SAME
        t, b = same_pads(x_shape[1], dh * (kh - 1) + 1, sh)
        l, r = same_pads(x_shape[2], dw * (kw - 1) + 1, sw)
        pads = [t, l, b, r]
    elif padding == 1:
        pads = [0, 0, 0, 0]
    else:
        raise _Fail(f"padding {padding} is not SAME or VALID")
    return {"kernel": [kh, kw], "strides": [sh, sw], "dilations": [dh, dw], "pads": pads}


def _bias(imp, op, k: int) -> list[str]:
    if len(op.inputs) > k and op.inputs[k] >= 0:
        return [imp.tfl(op.inputs[k])]
    return []


@_lowering(3, 4)
def _conv(imp: TfliteImporter, op: OperatorInfo) -> None:
    depthwise = imp.m.opcodes[op.opcode].builtin == 4
    imp.need_inputs(op, 2, 3)
    x, w = op.inputs[0], op.inputs[1]
    xs = imp.t(x).shape
    wv = imp.need_const(w, "the filter")
    if len(xs) != 4 or wv.ndim != 4 or imp.dtype(w) != F32:
        raise _Fail(f"input rank {len(xs)}, filter {list(wv.shape)} {wv.dtype}: expected rank 4 float32")
    if depthwise:
        # options: padding 0, stride_w 1, stride_h 2, depth_multiplier 3, act 4, dilation_w 5, dilation_h 6
        sw, sh, act = imp.opt(op, 1, "i", 1), imp.opt(op, 2, "i", 1), imp.opt(op, 4, "b", 0)
        dw, dh = imp.opt(op, 5, "i", 1), imp.opt(op, 6, "i", 1)
        _, kh, kw, m = wv.shape
        if wv.shape[0] != 1 or m % xs[3]:
            raise _Fail(f"depthwise filter {list(wv.shape)} does not fit {xs[3]} input channels")
        wt = np.transpose(wv, (3, 0, 1, 2))  # [M, 1, kH, kW]
        group = xs[3]
    else:
        # options: padding 0, stride_w 1, stride_h 2, act 3, dilation_w 4, dilation_h 5
        sw, sh, act = imp.opt(op, 1, "i", 1), imp.opt(op, 2, "i", 1), imp.opt(op, 3, "b", 0)
        dw, dh = imp.opt(op, 4, "i", 1), imp.opt(op, 5, "i", 1)
        m, kh, kw, ci = wv.shape
        if ci < 1 or xs[3] % ci or m % (xs[3] // ci):
            raise _Fail(f"filter {list(wv.shape)} does not fit {xs[3]} input channels")
        wt = np.transpose(wv, (0, 3, 1, 2))  # [M, C/group, kH, kW]
        group = xs[3] // ci
    attrs = {"group": int(group), **_window(imp, op, xs, kh, kw, sh, sw, dh, dw)}
    wname = imp.g.add_const(np.ascontiguousarray(wt, np.float32), imp.t(w).name + "/oihw")
    imp.define(op.outputs[0], "conv2d", [imp.nchw(x), wname] + _bias(imp, op, 2), attrs, "nchw", act)


def _transpose_conv(imp, op, x, w, bias: list[str], padding: int, sh: int, sw: int, act: int) -> None:
    xs = imp.t(x).shape
    ys = imp.t(op.outputs[0]).shape
    wv = imp.need_const(w, "the filter")
    if len(xs) != 4 or wv.ndim != 4 or len(ys) != 4 or imp.dtype(w) != F32:
        raise _Fail("expected rank-4 input, output and float32 filter")
    m, kh, kw, ci = wv.shape
    if ci != xs[3] or m != ys[3] or min(sh, sw) < 1:
        raise _Fail(f"filter {list(wv.shape)} does not fit input {list(xs)} and output {list(ys)}")
    pads, out_pad = [], []
    for n_in, n_out, k, s in ((xs[1], ys[1], kh, sh), (xs[2], ys[2], kw, sw)):
        if padding == "same":
            o = -(-n_out // s)
        else:
            o = (n_out - k + s) // s
        before = max((o - 1) * s + k - n_out, 0) // 2
        after = s * (n_in - 1) + k - before - n_out
        pads.append((before, max(after, 0)))
        out_pad.append(max(-after, 0))
    wt = np.transpose(wv, (3, 0, 1, 2))  # [C, M, kH, kW]
    wname = imp.g.add_const(np.ascontiguousarray(wt, np.float32), imp.t(w).name + "/iohw")
    attrs = {"group": 1, "kernel": [kh, kw], "strides": [sh, sw], "dilations": [1, 1],
             "pads": [pads[0][0], pads[1][0], pads[0][1], pads[1][1]], "output_padding": out_pad}
    imp.define(op.outputs[0], "conv_transpose2d", [imp.nchw(x), wname] + bias, attrs, "nchw", act)


@_lowering(67)
def _transpose_conv_builtin(imp, op) -> None:
    # inputs: output_shape, weights, input, bias (optional);
    # options: padding 0, stride_w 1, stride_h 2, fused_activation_function 3
    imp.need_inputs(op, 3, 4)
    shape = imp.need_ints(op.inputs[0], "the output shape")
    if [int(d) for d in shape.reshape(-1)] != list(imp.t(op.outputs[0]).shape):
        raise _Fail(f"output_shape {shape.tolist()} differs from the output tensor's {list(imp.t(op.outputs[0]).shape)}")
    p = imp.opt(op, 0, "b", 0)
    if p not in (0, 1):
        raise _Fail(f"padding {p}")
    _transpose_conv(imp, op, op.inputs[2], op.inputs[1], _bias(imp, op, 3), "same" if p == 0 else "valid",
                    imp.opt(op, 2, "i", 1), imp.opt(op, 1, "i", 1), imp.opt(op, 3, "b", 0))


@_lowering(TRANSPOSE_CONV_BIAS)
def _transpose_conv_bias(imp, op) -> None:
    # MediaPipe: inputs input, weights [O, kH, kW, I], bias; custom options are the raw
    # struct { int32 padding (1 SAME, 2 VALID), int32 stride_width, int32 stride_height }.
    imp.need_inputs(op, 3)
    raw = op.custom_options or b""
    if len(raw) < 12:
        raise _Fail(f"custom options of {len(raw)} bytes, expected 12 (padding, stride_width, stride_height)")
    padding, sw, sh = np.frombuffer(raw[:12], "<i4").tolist()
    if padding not in (1, 2):
        raise _Fail(f"padding {padding} is not SAME (1) or VALID (2)")
    _transpose_conv(imp, op, op.inputs[0], op.inputs[1], _bias(imp, op, 2), "same" if padding == 1 else "valid",
                    sh, sw, 0)


@_lowering(1, 17)
def _pool(imp, op) -> None:
    # Pool2DOptions: padding 0, stride_w 1, stride_h 2, filter_width 3, filter_height 4, act 5
    imp.need_inputs(op, 1)
    x = op.inputs[0]
    xs = imp.t(x).shape
    if len(xs) != 4:
        raise _Fail(f"input rank {len(xs)}, expected 4")
    attrs = _window(imp, op, xs, imp.opt(op, 4, "i", 0), imp.opt(op, 3, "i", 0), imp.opt(op, 2, "i", 0),
                    imp.opt(op, 1, "i", 0))
    attrs["ceil_mode"] = False
    avg = imp.m.opcodes[op.opcode].builtin == 1
    if avg:
        attrs["count_include_pad"] = False  # TFLite averages the taps inside the image
    imp.define(op.outputs[0], "avg_pool2d" if avg else "max_pool2d", [imp.nchw(x)], attrs, "nchw",
               imp.opt(op, 5, "b", 0))


def _common_layout(imp, ins: list[int]) -> str:
    """NCHW when a rank-4 computed input is already NCHW and every input is rank 4 or a
    constant that broadcasts against rank 4; else the TFLite layout."""
    nchw = False
    for i in ins:
        r = len(imp.t(i).shape)
        if imp.is_const(i):
            if r > 4:
                return "tfl"
            continue
        if r != 4:
            return "tfl"
        nchw |= imp.layout(i) == "nchw"
    return "nchw" if nchw else "tfl"


def _operand(imp, i: int, layout: str) -> str:
    return imp.const_in(i, layout) if imp.is_const(i) else imp.get(i, layout)


_BINARY = {0: "add", 41: "sub", 18: "mul", 42: "div", 55: "max", 57: "min"}


@_lowering(*_BINARY)
def _binary(imp, op) -> None:
    # Add/Sub/Mul/DivOptions: fused_activation_function 0 (MAXIMUM/MINIMUM: none)
    imp.need_inputs(op, 2)
    code = imp.m.opcodes[op.opcode].builtin
    lay = _common_layout(imp, op.inputs)
    act = imp.opt(op, 0, "b", 0) if code in (0, 41, 18, 42) else 0
    imp.define(op.outputs[0], _BINARY[code], [_operand(imp, i, lay) for i in op.inputs], {}, lay, act)


@_lowering(76)
def _rsqrt(imp, op) -> None:
    imp.need_inputs(op, 1)
    x = op.inputs[0]
    lay = imp.layout(x)
    r = imp._emit("sqrt", [imp.get(x, lay)], {}, imp.t(op.outputs[0]).name + "/sqrt")
    imp.define(op.outputs[0], "reciprocal", [r], {}, lay)


_UNARY = {14: ("sigmoid", {}), 28: ("tanh", {}), 19: ("relu", {}), 21: ("clip", {"min": 0.0, "max": 6.0}),
          20: ("clip", {"min": -1.0, "max": 1.0}), 117: ("hard_swish", {}), 47: ("exp", {}), 73: ("log", {}),
          75: ("sqrt", {}), 101: ("abs", {}), 59: ("neg", {})}


@_lowering(*_UNARY)
def _unary(imp, op) -> None:
    imp.need_inputs(op, 1)
    name, attrs = _UNARY[imp.m.opcodes[op.opcode].builtin]
    x = op.inputs[0]
    lay = imp.layout(x)
    imp.define(op.outputs[0], name, [imp.get(x, lay)], dict(attrs), lay)


@_lowering(98)
def _leaky_relu(imp, op) -> None:
    imp.need_inputs(op, 1)
    x = op.inputs[0]
    lay = imp.layout(x)
    imp.define(op.outputs[0], "leaky_relu", [imp.get(x, lay)], {"alpha": float(imp.opt(op, 0, "f", 0.0))}, lay)


@_lowering(54)
def _prelu(imp, op) -> None:
    imp.need_inputs(op, 2)
    lay = _common_layout(imp, op.inputs)
    imp.define(op.outputs[0], "prelu", [_operand(imp, i, lay) for i in op.inputs], {}, lay)


@_lowering(6)
def _dequantize(imp, op) -> None:
    imp.need_inputs(op, 1)
    x = op.inputs[0]
    v = imp.const_value(x)
    t = imp.t(x)
    if v is None:
        raise _Fail(f"input {t.name!r} is computed: only constant weights are dequantized (folded) so far")
    if v.dtype == np.float16:
        f = v.astype(np.float32)
    elif v.dtype in (np.int8, np.uint8, np.int16) and t.quant is not None:
        q = t.quant
        shape = [1] * v.ndim
        if len(q.scale) > 1:
            if not 0 <= q.axis < v.ndim or v.shape[q.axis] != len(q.scale):
                raise _Fail(f"{len(q.scale)} scales along axis {q.axis} of {list(v.shape)}")
            shape[q.axis] = len(q.scale)
        zp = np.zeros(len(q.scale), np.int64) if q.zero_point is None or not len(q.zero_point) else q.zero_point
        if len(zp) not in (1, len(q.scale)):
            raise _Fail(f"{len(zp)} zero points for {len(q.scale)} scales")
        f = ((v.astype(np.float64) - zp.reshape(shape if len(zp) > 1 else [1] * v.ndim))
             * q.scale.astype(np.float64).reshape(shape if len(q.scale) > 1 else [1] * v.ndim)).astype(np.float32)
    else:
        raise _Fail(f"constant {t.name!r} of type {t.type_name} cannot be dequantized")
    out = op.outputs[0]
    if imp.dtype(out) != F32 or tuple(imp.t(out).shape) != v.shape:
        raise _Fail(f"output {imp.t(out).name!r} is not float32 of shape {list(v.shape)}")
    imp.consts[out] = np.ascontiguousarray(f)


@_lowering(9)
def _fully_connected(imp, op) -> None:
    # FullyConnectedOptions: act 0, weights_format 1, keep_num_dims 2
    imp.need_inputs(op, 2, 3)
    if imp.opt(op, 1, "b", 0) != 0:
        raise _Fail("shuffled weights format is not supported")
    x, w = op.inputs[0], op.inputs[1]
    ws = imp.t(w).shape
    if len(ws) != 2:
        raise _Fail(f"weights of rank {len(ws)}")
    n, k = ws
    xs = imp.t(x).shape
    total = math.prod(xs)
    if k == 0 or total % k:
        raise _Fail(f"input {list(xs)} does not flatten to rows of {k}")
    a = imp.tfl(x)
    if len(xs) != 2 or xs[1] != k:
        a = imp._emit("reshape", [a], {"shape": [total // k, k]}, imp.t(x).name + "/rows")
    wv = imp.const_value(w)
    if wv is not None and imp.dtype(w) == F32:
        b = imp.g.add_const(np.ascontiguousarray(wv.T), imp.t(w).name + "/kn")
        attrs = {}
    else:
        b, attrs = imp.tfl(w), {"trans_b": True}
    ins = [a, b] + _bias(imp, op, 2)
    ys = imp.t(op.outputs[0]).shape
    if tuple(ys) == (total // k, n):
        imp.define(op.outputs[0], "gemm", ins, attrs, "tfl", imp.opt(op, 0, "b", 0))
        return
    y = imp._emit("gemm", ins, attrs, imp.t(op.outputs[0]).name + "/rows")
    act = _ACT.get(imp.opt(op, 0, "b", 0))
    if act is None and imp.opt(op, 0, "b", 0) != 0:
        raise _Fail("unsupported fused activation")
    if act is not None:
        y = imp._emit(act[0], [y], act[1], imp.t(op.outputs[0]).name + "/act")
    imp.define(op.outputs[0], "reshape", [y], {"shape": list(ys)}, "tfl")


@_lowering(22)
def _reshape(imp, op) -> None:
    imp.need_inputs(op, 1, 2)
    ys = list(imp.t(op.outputs[0]).shape)
    if math.prod(ys) != math.prod(imp.t(op.inputs[0]).shape):
        raise _Fail(f"output shape {ys} does not hold the input's {list(imp.t(op.inputs[0]).shape)}")
    imp.define(op.outputs[0], "reshape", [imp.tfl(op.inputs[0])], {"shape": ys}, "tfl")


@_lowering(2)
def _concat(imp, op) -> None:
    # ConcatenationOptions: axis 0, fused_activation_function 1
    if not op.inputs or not op.outputs:
        raise _Fail("no inputs")
    r = len(imp.t(op.outputs[0]).shape)
    axis = imp.opt(op, 0, "i", 0)
    if not -r <= axis < r:
        raise _Fail(f"axis {axis} for rank {r}")
    axis %= r
    lay = _common_layout(imp, op.inputs) if r == 4 else "tfl"
    ir_axis = NHWC_AXIS_IN_NCHW[axis] if lay == "nchw" else axis
    imp.define(op.outputs[0], "concat", [_operand(imp, i, lay) if lay == "tfl" else imp.get(i, lay)
                                         for i in op.inputs], {"axis": ir_axis}, lay, imp.opt(op, 1, "b", 0))


@_lowering(34, 60)
def _pad(imp, op) -> None:
    imp.need_inputs(op, 2, 3)
    x = op.inputs[0]
    r = len(imp.t(x).shape)
    p = imp.need_ints(op.inputs[1], "the paddings").astype(np.int64)
    if p.shape != (r, 2) or p.min(initial=0) < 0:
        raise _Fail(f"paddings {p.tolist()} for rank {r}")
    value = 0.0
    if len(op.inputs) == 3 and op.inputs[2] >= 0:
        pv = imp.need_const(op.inputs[2], "the pad value").reshape(-1)
        if pv.size != 1:
            raise _Fail(f"the pad value has {pv.size} elements")
        value = float(pv[0])
    lay = imp.layout(x) if r == 4 else "tfl"
    if lay == "nchw":
        p = p[list(TO_NCHW)]
    imp.define(op.outputs[0], "pad", [imp.get(x, lay)],
               {"pads": [int(v) for v in p[:, 0]] + [int(v) for v in p[:, 1]], "mode": "constant", "value": value},
               lay)


@_lowering(40, 74)
def _reduce(imp, op) -> None:
    # ReducerOptions: keep_dims 0
    imp.need_inputs(op, 2)
    x = op.inputs[0]
    r = len(imp.t(x).shape)
    axes = sorted({int(a) % r if -r <= int(a) < r else -1
                   for a in imp.need_ints(op.inputs[1], "the axes").reshape(-1)})
    if -1 in axes or not axes:
        raise _Fail(f"axes {imp.const_value(op.inputs[1]).tolist()} for rank {r}")
    keep = bool(imp.opt(op, 0, "B", 0))
    lay = imp.layout(x) if r == 4 else "tfl"
    if lay == "nchw" and not keep:
        # without keep_dims the result is in TFLite order only when NCHW keeps the same order
        if [a for a in range(4) if a not in axes] != [a for a in TO_NCHW if a not in axes]:
            lay = "tfl"
    ir_axes = [NHWC_AXIS_IN_NCHW[a] for a in axes] if lay == "nchw" else axes
    out_lay = lay if keep else "tfl"
    name = "reduce_mean" if imp.m.opcodes[op.opcode].builtin == 40 else "reduce_sum"
    imp.define(op.outputs[0], name, [imp.get(x, lay)], {"axes": sorted(ir_axes), "keepdims": keep}, out_lay)


@_lowering(25)
def _softmax(imp, op) -> None:
    # SoftmaxOptions: beta 0
    imp.need_inputs(op, 1)
    x = op.inputs[0]
    r = len(imp.t(x).shape)
    lay = imp.layout(x) if r == 4 else "tfl"
    a = imp.get(x, lay)
    beta = float(imp.opt(op, 0, "f", 1.0))
    if beta != 1.0:
        a = imp._emit("mul", [a, imp.g.add_const(np.array(beta, np.float32), "beta")], {}, imp.t(x).name + "/beta")
    imp.define(op.outputs[0], "softmax", [a], {"axis": 1 if lay == "nchw" else r - 1}, lay)


@_lowering(23, 97)
def _resize(imp, op) -> None:
    # ResizeBilinearOptions: align_corners 2, half_pixel_centers 3;
    # ResizeNearestNeighborOptions: align_corners 0, half_pixel_centers 1
    imp.need_inputs(op, 2)
    x = op.inputs[0]
    xs, ys = imp.t(x).shape, imp.t(op.outputs[0]).shape
    if len(xs) != 4 or len(ys) != 4 or min(xs) < 1 or min(ys) < 1:
        raise _Fail(f"input {list(xs)} and output {list(ys)}: expected rank 4, no empty dimension")
    if (xs[0], xs[3]) != (ys[0], ys[3]):
        raise _Fail(f"output {list(ys)} differs from the input {list(xs)} outside height and width")
    size = imp.need_ints(op.inputs[1], "the size").reshape(-1)
    if [int(v) for v in size] != [ys[1], ys[2]]:
        raise _Fail(f"size {size.tolist()} differs from the output {list(ys)}")
    bilinear = imp.m.opcodes[op.opcode].builtin == 23
    align, half = (imp.opt(op, 2, "B", 0), imp.opt(op, 3, "B", 0)) if bilinear else \
        (imp.opt(op, 0, "B", 0), imp.opt(op, 1, "B", 0))
    scales = [1.0, 1.0, ys[1] / xs[1], ys[2] / xs[2]]
    attrs = {"scales": scales, "shape": [ys[0], ys[3], ys[1], ys[2]]}
    if bilinear:
        attrs.update(mode="linear", coord="align_corners" if align else ("half_pixel" if half else "asymmetric"))
    else:
        # TFLite: in = floor(out * in/out), or floor((out + 0.5) * in/out) with half-pixel
        # centres, or round-half-up(out * (in-1)/(out-1)) with align_corners
        if align:
            attrs.update(mode="nearest", coord="align_corners", nearest_mode="round_prefer_ceil")
        else:
            attrs.update(mode="nearest", coord="tf_half_pixel_for_nn" if half else "asymmetric",
                         nearest_mode="floor")
    imp.define(op.outputs[0], "resize", [imp.nchw(x)], attrs, "nchw")


@_lowering(39)
def _transpose(imp, op) -> None:
    # A layout change between NCHW and NHWC (as at the edges of files written from NCHW
    # graphs) is no node: the output is another layout of the input.
    imp.need_inputs(op, 2)
    x, y = op.inputs[0], op.outputs[0]
    r = len(imp.t(x).shape)
    perm = [int(p) for p in imp.need_ints(op.inputs[1], "the permutation").reshape(-1)]
    if sorted(perm) != list(range(r)):
        raise _Fail(f"perm {perm} for rank {r}")
    want = tuple(imp.t(x).shape[p] for p in perm)
    if want != tuple(imp.t(y).shape):
        raise _Fail(f"output shape {list(imp.t(y).shape)}, the permutation gives {list(want)}")
    if not imp.is_const(x) and r == 4 and tuple(perm) == TO_NHWC:
        imp.vals[y] = {"nchw": imp.tfl(x)}
    elif not imp.is_const(x) and r == 4 and tuple(perm) == TO_NCHW and imp.layout(x) == "nchw":
        imp.vals[y] = {"tfl": imp.nchw(x)}
    else:
        imp.define(y, "transpose", [imp.tfl(x)], {"perm": perm}, "tfl")


@_lowering(43, 70)
def _squeeze(imp, op) -> None:
    # SQUEEZE, EXPAND_DIMS: the output tensor's shape holds the answer
    imp.need_inputs(op, 1, 2)
    _reshape(imp, op)


@_lowering(100)
def _mirror_pad(imp, op) -> None:
    # MirrorPadOptions: mode 0 (0 REFLECT, 1 SYMMETRIC)
    if imp.opt(op, 0, "b", 0) != 0:
        raise _Fail("SYMMETRIC mode is not supported (REFLECT is)")
    imp.need_inputs(op, 2)
    x = op.inputs[0]
    r = len(imp.t(x).shape)
    p = imp.need_ints(op.inputs[1], "the paddings").astype(np.int64)
    if p.shape != (r, 2) or p.min(initial=0) < 0:
        raise _Fail(f"paddings {p.tolist()} for rank {r}")
    lay = imp.layout(x) if r == 4 else "tfl"
    if lay == "nchw":
        p = p[list(TO_NCHW)]
    imp.define(op.outputs[0], "pad", [imp.get(x, lay)],
               {"pads": [int(v) for v in p[:, 0]] + [int(v) for v in p[:, 1]], "mode": "reflect"}, lay)


@_lowering(5, 26)
def _depth_space(imp, op) -> None:
    # DepthToSpace/SpaceToDepthOptions: block_size 0. TFLite's channel order (block row,
    # block column, channel) is the DCR order of edgert's NCHW ops.
    imp.need_inputs(op, 1)
    b = imp.opt(op, 0, "i", 0)
    if b < 1:
        raise _Fail(f"block size {b}")
    name = "depth_to_space" if imp.m.opcodes[op.opcode].builtin == 5 else "space_to_depth"
    imp.define(op.outputs[0], name, [imp.nchw(op.inputs[0])], {"blocksize": int(b), "mode": "DCR"}, "nchw")


def _axis_of(imp, i: int, rank: int) -> int:
    a = imp.need_ints(i, "the axis").reshape(-1)
    if a.size != 1 or not -rank <= int(a[0]) < rank:
        raise _Fail(f"axis {a.tolist()} for rank {rank}")
    return int(a[0]) % rank


@_lowering(49, 102)
def _split(imp, op) -> None:
    # SPLIT: inputs axis, x (SplitOptions num_splits 0); SPLIT_V: inputs x, size_splits, axis
    split_v = imp.m.opcodes[op.opcode].builtin == 102
    imp.need_inputs(op, 3 if split_v else 2)
    x = op.inputs[0] if split_v else op.inputs[1]
    xs = imp.t(x).shape
    axis = _axis_of(imp, op.inputs[2] if split_v else op.inputs[0], len(xs))
    n = len(op.outputs)
    if split_v:
        sizes = [int(v) for v in imp.need_ints(op.inputs[1], "the sizes").reshape(-1)]
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = xs[axis] - (sum(sizes) + 1)
    else:
        if n < 1 or xs[axis] % n:
            raise _Fail(f"{xs[axis]} does not split into {n}")
        sizes = [xs[axis] // n] * n
    if len(sizes) != n or sum(sizes) != xs[axis] or min(sizes) < 0:
        raise _Fail(f"sizes {sizes} do not split {xs[axis]} into {n} outputs")
    imp.define_many(op.outputs, "split", [imp.tfl(x)], {"axis": axis, "sizes": sizes})


@_lowering(45)
def _strided_slice(imp, op) -> None:
    # inputs x, begin, end, strides; StridedSliceOptions: begin_mask 0, end_mask 1,
    # ellipsis_mask 2, new_axis_mask 3, shrink_axis_mask 4, offset 5
    imp.need_inputs(op, 4)
    x = op.inputs[0]
    xs = imp.t(x).shape
    r = len(xs)
    begin, end, strides = (imp.need_ints(op.inputs[k], n).astype(np.int64).reshape(-1)
                           for k, n in ((1, "begin"), (2, "end"), (3, "strides")))
    if not len(begin) == len(end) == len(strides) == r:
        raise _Fail(f"begin/end/strides of {len(begin)}/{len(end)}/{len(strides)} values for rank {r}")
    bm, em, ell, new, shrink = (imp.opt(op, k, "i", 0) for k in range(5))
    if ell or new or imp.opt(op, 5, "B", 0):
        raise _Fail("ellipsis_mask, new_axis_mask and offset are not supported")
    starts, steps, sizes = [], [], []
    for d in range(r):
        s = int(strides[d])
        if s == 0:
            raise _Fail("stride 0")
        if shrink >> d & 1:
            b = int(begin[d])
            b = b + xs[d] if b < 0 else b
            if not 0 <= b < xs[d]:
                raise _Fail(f"index {int(begin[d])} out of range for dim {d} of size {xs[d]}")
            rng = range(b, b + 1)
        else:
            b = None if bm >> d & 1 else int(begin[d])
            e = None if em >> d & 1 else int(end[d])
            rng = range(*slice(b, e, s).indices(xs[d]))
        starts.append(rng.start if len(rng) else 0)
        steps.append(rng.step)
        sizes.append(len(rng))
    y = op.outputs[0]
    sliced = imp._emit("slice", [imp.tfl(x)], {"starts": starts, "steps": steps, "sizes": sizes},
                       imp.t(y).name + ("/slice" if shrink else ""))
    if shrink:
        imp.define(y, "reshape", [sliced], {"shape": list(imp.t(y).shape)}, "tfl")
    else:
        if tuple(imp.g.tensors[sliced].shape) != tuple(imp.t(y).shape):
            raise _Fail(f"edgert computes shape {list(imp.g.tensors[sliced].shape)}, the file declares "
                        f"{list(imp.t(y).shape)}")
        imp.vals[y] = {"tfl": sliced}


@_lowering(36)
def _gather(imp, op) -> None:
    # GatherOptions: axis 0, batch_dims 1
    imp.need_inputs(op, 2)
    if imp.opt(op, 1, "i", 0) != 0:
        raise _Fail("batch_dims is not supported")
    x = op.inputs[0]
    r = len(imp.t(x).shape)
    axis = imp.opt(op, 0, "i", 0)
    if not -r <= axis < r:
        raise _Fail(f"axis {axis} for rank {r}")
    imp.define(op.outputs[0], "gather", [imp.tfl(x), imp.tfl(op.inputs[1])], {"axis": axis % r}, "tfl")


@_lowering(56)
def _arg_max(imp, op) -> None:
    # inputs x, axis; ArgMaxOptions: output_type 0 (int64 or int32)
    imp.need_inputs(op, 2)
    x, y = op.inputs[0], op.outputs[0]
    axis = _axis_of(imp, op.inputs[1], len(imp.t(x).shape))
    want = imp.dtype(y)
    if want not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise _Fail(f"output type {imp.t(y).type_name}")
    if want == np.int64:
        imp.define(y, "argmax", [imp.tfl(x)], {"axis": axis, "keepdims": False}, "tfl")
        return
    a = imp._emit("argmax", [imp.tfl(x)], {"axis": axis, "keepdims": False}, imp.t(y).name + "/i64")
    imp.define(y, "cast", [a], {"to": "int32"}, "tfl")


def import_tflite(model, input_shapes: dict | None = None) -> Graph:
    """The edgert graph of a .tflite model (path, bytes or reader.Model); see the module
    docstring for what it keeps and refuses."""
    return TfliteImporter(load_tflite(model), input_shapes).run()
