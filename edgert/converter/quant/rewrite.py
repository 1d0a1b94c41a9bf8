"""Float graph -> int8 graph, given the quantization parameters of its tensors.

Walks the nodes in order and decides, per node, between its int8 form and float:

- conv2d and gemm (the ops that hold the weights) become int8 whenever they can:
  constant weights, an activation foldable into the output range (none, relu, clip)
  and quantization parameters for the input and the output;
- the other ops that have an int8 form (add, mul, pooling, concat, the unary ops by
  table, softmax, clip, data movement) become int8 only when one of their inputs is
  already int8, so that no quantize/dequantize pair is paid for them alone;
- everything else, and the nodes named in keep_fp32, stay float.

quantize_linear is inserted where an int8 node reads a float tensor, and
dequantize_linear where a float node or a graph output reads an int8 one (the float
tensor keeps its name; an int8 tensor is named after its float twin with "_q8"). int8
tensors carry their (scale, zero point) in Tensor.quant.

Weights are int8 symmetric per output channel; biases int32 in accumulator units; the
requantization multipliers and shifts are computed here (edgert/converter/quant/fixedpoint.py),
so the C kernels never convert floats to fixed point.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np

from .. import ops as edgert_ops
from ..ir import Graph, Node, Quant
from ..ops import OpUnsupported
from ..ops.activation import act_kind
from . import fixedpoint as fp

# Ops whose int8 form moves or selects values: the output has the input's quantization.
PASSTHROUGH = {"reshape", "transpose", "slice", "split", "gather", "pad", "depth_to_space", "space_to_depth",
               "resize", "expand", "tile", "copy", "max_pool2d", "global_max_pool"}
# Unary ops computed on int8 by a 256-entry table (every float-only op of the unary family).
LUT_OPS = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "reciprocal", "floor", "ceil", "round", "erf",
           "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "softplus",
           "softsign", "elu", "selu", "celu", "leaky_relu", "thresholded_relu", "hard_sigmoid", "hard_swish",
           "gelu", "silu", "mish", "shrink"}
ANCHORS = {"conv2d", "gemm"}


class Skip(Exception):
    """The node keeps its float form."""


@dataclasses.dataclass
class WeightOverride:
    """Already-quantized weights (QDQ import): int8 values in the float constant's
    layout, per-channel scales along `axis` (or one scale)."""

    q: np.ndarray
    scale: np.ndarray
    axis: int | None


@dataclasses.dataclass
class Result:
    graph: Graph
    int8_of: dict[str, str]        # float tensor -> its int8 twin
    qparams: dict[str, tuple[float, int]]
    int8_nodes: list[str]          # names of the nodes computed in int8
    float_nodes: list[str]         # names of the nodes that kept float


class _Rewriter:
    def __init__(self, g: Graph, qparams: dict[str, tuple[float, int]], keep_fp32, weights, biases,
                 fake_quant: bool, means: dict[str, np.ndarray] | None = None):
        self.src = g
        self.g = Graph()
        self.g.tensors = {k: dataclasses.replace(t) for k, t in g.tensors.items()}
        self.g.inputs = list(g.inputs)
        self.g.outputs = list(g.outputs)
        self.g.metadata = dict(g.metadata)
        self.qparams = dict(qparams)
        self.keep = set(keep_fp32 or ())
        self.weights = dict(weights or {})
        self.biases = dict(biases or {})
        self.nodes: list[Node] = []
        self.int8_of: dict[str, str] = {}
        self.float_ok: set[str] = set(g.inputs) | {k for k, t in g.tensors.items() if t.is_const}
        self.int8_nodes: list[str] = []
        self.float_nodes: list[str] = []
        self._pending: list[Node] = []
        self.fake_quant = fake_quant
        self.float_computed: set[str] = set(g.inputs)
        self.fake: dict[str, str] = {}
        self.consumers = g.consumers()
        self.means = dict(means or {})
        self.made_weights: dict[tuple, str] = {}

    # ---- helpers -------------------------------------------------------------------

    def qp(self, t: str) -> tuple[float, int]:
        v = self.qparams.get(t)
        if v is None:
            raise Skip(f"no quantization parameters for {t!r}")
        return v

    def const(self, arr: np.ndarray, hint: str) -> str:
        return self.g.add_const(np.ascontiguousarray(arr), hint)

    def weight_const(self, arr: np.ndarray, source: str) -> str:
        """The int8 form of weight `source`, one tensor per distinct content: nodes that
        share a weight (an unrolled recurrence) share its int8 form, and conversion
        keeps one copy."""
        arr = np.ascontiguousarray(arr)
        key = (arr.dtype.str, arr.shape, hashlib.sha256(arr.reshape(-1).view(np.uint8)).digest())
        name = self.made_weights.get(key)
        if name is None or not np.array_equal(self.g.tensors[name].data, arr):
            name = self.g.add_derived_const(arr, source, f"{source}_q8")
            self.made_weights[key] = name
        return name

    def qin(self, t: str) -> str:
        """The int8 twin of activation t, quantizing a float tensor (or constant) on first use."""
        if t in self.int8_of:
            return self.int8_of[t]
        src = self.g.tensors[t]
        if src.dtype != np.float32:
            raise Skip(f"{t!r} is not float32")
        if src.is_const:
            v = src.data.astype(np.float32)
            s, z = self.qparams.get(t) or fp.activation_qparams(float(v.min(initial=0)), float(v.max(initial=0)))
            self.qparams[t] = (s, z)
            name = self.const(fp.quantize_values(v, s, z), f"{t}_q8")
            self.g.tensors[name].quant = _quant(s, z)
            self.int8_of[t] = name
            return name
        s, z = self.qp(t)
        name = self._int8_tensor(t, s, z)
        n = Node("quantize_linear", [t], [name], {"scale": [s], "zero_point": [z]}, f"{t}_quantize")
        self._pending.append(n)
        self.int8_of[t] = name
        return name

    def _int8_tensor(self, t: str, s: float, z: int) -> str:
        name = self.g.unique_name(f"{t}_q8")
        self.g.add_tensor(name, self.g.tensors[t].shape, np.int8)
        self.g.tensors[name].quant = _quant(s, z)
        return name

    def fin(self, t: str) -> str:
        """The float tensor t, dequantizing its int8 twin when only that exists."""
        if t and t not in self.float_ok:
            q = self.int8_of[t]
            s, z = self.qparams[t]
            self.nodes.append(Node("dequantize_linear", [q], [t], {"scale": [s], "zero_point": [z]},
                                   f"{t}_dequantize"))
            self.float_ok.add(t)
        return t

    def fq(self, t: str) -> str:
        """For a float reader of float-computed t that the model quantizes (QDQ import):
        t quantized and dequantized again, as the model states."""
        if not (self.fake_quant and t in self.float_computed and t in self.qparams):
            return t
        if t not in self.fake:
            q = self.qin(t)
            self.nodes.extend(self._pending)
            self._pending = []
            s, z = self.qparams[t]
            name = self.g.unique_name(f"{t}_fq")
            self.g.add_tensor(name, self.g.tensors[t].shape, np.float32)
            self.nodes.append(Node("dequantize_linear", [q], [name], {"scale": [s], "zero_point": [z]},
                                   f"{t}_fake_quant"))
            self.fake[t] = name
        return self.fake[t]

    def emit(self, op: str, inputs: list[str], attrs: dict, node: Node, outs: list[tuple[str, float, int]]) -> None:
        """Adds the int8 node computing the float node's outputs `outs` (name, scale, zp)."""
        names = [self._int8_tensor(t, s, z) for t, s, z in outs]
        n = Node(op, inputs, names, attrs, node.name)
        try:
            got = edgert_ops.get(op).infer(n, self.g)
        except OpUnsupported as e:
            for name in names:
                del self.g.tensors[name]
            raise Skip(str(e)) from None
        for name, (shape, dt) in zip(names, got):
            if tuple(shape) != tuple(self.g.tensors[name].shape) or dt != np.int8:
                for nm in names:
                    del self.g.tensors[nm]
                raise Skip(f"int8 {op} gives {dt}{list(shape)}")
        self.nodes.extend(self._pending)
        self._pending = []
        self.nodes.append(n)
        for (t, s, z), name in zip(outs, names):
            self.int8_of[t] = name
            self.qparams[t] = (s, z)
        self.int8_nodes.append(node.name)

    def weight(self, name: str, w: np.ndarray, axis: int, layout=None) -> tuple[np.ndarray, np.ndarray]:
        """int8 weights and per-channel scales along `axis` of w. An override (QDQ import)
        is used when it dequantizes to w; layout(q) maps its array to w's layout."""
        ov = self.weights.get(name)
        if ov is not None:
            q = ov.q if layout is None else layout(ov.q)
            scale = np.asarray(ov.scale, np.float32).reshape(-1)
            if scale.size == 1:
                scale = np.full(w.shape[axis], scale[0], np.float32)
            shape = [1] * w.ndim
            shape[axis] = -1
            if q.shape == w.shape and scale.size == w.shape[axis] and np.allclose(
                    q.astype(np.float32) * scale.reshape(shape), w, rtol=1e-5, atol=1e-7):
                return q.astype(np.int8), scale
        return fp.weight_qparams(w, axis)

    def bias(self, name: str, b: np.ndarray | None, s_in: float, s_w: np.ndarray, n: int) -> np.ndarray:
        ov = self.biases.get(name) if name else None
        if ov is not None and b is not None and ov.shape == (n,):
            if np.allclose(ov.astype(np.float64) * s_in * s_w, b, rtol=1e-4, atol=1e-7):
                return ov.astype(np.int32)
        return fp.bias_values(b, s_in, s_w, n)

    def corrected_bias(self, b: np.ndarray | None, w: np.ndarray, wq: np.ndarray, sw: np.ndarray, x: str,
                       group: int) -> np.ndarray | None:
        """Bias correction: the float bias minus the mean shift that weight rounding
        causes, (w_q * s_w - w) . E[x] per output channel, E[x] the input's calibrated
        per-channel mean (a window's taps share their channel's mean)."""
        mean = self.means.get(x)
        if mean is None:
            return b
        m = w.shape[0]
        shape = (-1,) + (1,) * (w.ndim - 1)
        err = wq.astype(np.float64) * np.asarray(sw, np.float64).reshape(shape) - w.astype(np.float64)
        err = err.reshape(m, err.shape[1], -1).sum(axis=2)  # [M, C/group]
        cg = err.shape[1]
        if mean.size != cg * group:
            return b
        mg = m // group
        xm = np.asarray(mean, np.float64).reshape(group, cg)
        delta = np.einsum("gmc,gc->gm", err.reshape(group, mg, cg), xm).reshape(m)
        base = np.zeros(m) if b is None else np.asarray(b, np.float64).reshape(m)
        return (base - delta).astype(np.float32)

    def has_int8_input(self, node: Node, idx=None) -> bool:
        idx = range(len(node.inputs)) if idx is None else idx
        return any(node.inputs[i] in self.int8_of and not self.g.tensors[node.inputs[i]].is_const
                   for i in idx if node.inputs[i])

    # ---- per-op conversions ------------------------------------------------------------

    def conv2d(self, node: Node) -> None:
        ins = list(node.inputs) + [""] * (3 - len(node.inputs))
        x, w, b = ins[:3]
        W = self.g.const(w)
        B = self.g.const(b) if b else None
        if W is None or (b and B is None) or self.g.tensors[x].dtype != np.float32:
            raise Skip("conv2d needs constant weights")
        a = node.attrs
        act = act_kind(a.get("act"))
        if act not in (0, 1, 2):
            raise Skip("activation not foldable")
        y = node.outputs[0]
        (sx, zx), (sy, zy) = self.qp(x), self.qp(y)
        wq, sw = self.weight(w, W.astype(np.float32), 0)
        m = W.shape[0]
        B = self.corrected_bias(B, W, wq, sw, x, int(a.get("group", 1)))
        qp, shift = fp.channel_params(self.bias(b, B, sx, sw, m), sx, sw, sy)
        lo, hi = fp.clamp_range(zy, sy, act, a.get("act_a"), a.get("act_b"))
        attrs = {k: v for k, v in a.items() if k not in ("act", "act_a", "act_b")}
        attrs.update(x_zp=zx, y_zp=zy, out_min=lo, out_max=hi, shift=shift)
        self.emit("conv2d", [self.qin(x), self.weight_const(wq, w), self.const(qp, f"{node.name}_qp")], attrs,
                  node, [(y, sy, zy)])

    def gemm(self, node: Node) -> None:
        ins = list(node.inputs) + [""] * (3 - len(node.inputs))
        x, w, c = ins[:3]
        a = node.attrs
        W = self.g.const(w)
        C = self.g.const(c) if c else None
        if W is None or (c and C is None) or bool(a.get("trans_a", False)) or W.ndim != 2:
            raise Skip("gemm needs constant B and no trans_a")
        act = act_kind(a.get("act"))
        if act not in (0, 1, 2):
            raise Skip("activation not foldable")
        tb = bool(a.get("trans_b", False))
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        wnk = (W if tb else W.T).astype(np.float64) * alpha
        n = wnk.shape[0]
        bias = None
        if C is not None:
            cv = np.asarray(C, np.float64) * beta
            if cv.size == 1:
                bias = np.full(n, float(cv.reshape(-1)[0]))
            elif cv.shape in ((n,), (1, n)):
                bias = cv.reshape(n)
            else:
                raise Skip("gemm C must broadcast along rows")
        y = node.outputs[0]
        (sx, zx), (sy, zy) = self.qp(x), self.qp(y)
        layout = None if tb else (lambda q: q.T)
        wq, sw = self.weight(w, wnk.astype(np.float32), 0, layout if alpha == 1.0 else (lambda q: q[:0]))
        bias = self.corrected_bias(bias, wnk, wq, sw, x, 1)
        qp, shift = fp.channel_params(self.bias(c, bias, sx, sw, n), sx, sw, sy)
        lo, hi = fp.clamp_range(zy, sy, act, a.get("act_a"), a.get("act_b"))
        attrs = dict(trans_b=True, a_zp=zx, y_zp=zy, out_min=lo, out_max=hi, shift=shift)
        self.emit("gemm", [self.qin(x), self.weight_const(wq, w),
                           self.const(qp, f"{node.name}_qp")], attrs, node, [(y, sy, zy)])

    def add_mul(self, node: Node) -> None:
        a, b = node.inputs
        y = node.outputs[0]
        act = act_kind(node.attrs.get("act"))
        if act not in (0, 1, 2) or any(self.g.tensors[t].dtype != np.float32 for t in (a, b)):
            raise Skip("add/mul: float32 only, foldable activation")
        qa, qb = self.qin(a), self.qin(b)
        (sa, za), (sb, zb), (sy, zy) = self.qparams[a], self.qparams[b], self.qp(y)
        lo, hi = fp.clamp_range(zy, sy, act, node.attrs.get("act_a"), node.attrs.get("act_b"))
        try:
            if node.op == "add":
                (ma, mb), shift = fp.narrow_multipliers([sa / sy, sb / sy], 15)
                attrs = dict(a_zp=za, b_zp=zb, y_zp=zy, a_mult=ma, b_mult=mb, shift=shift, out_min=lo, out_max=hi)
            else:
                (mult,), shift = fp.narrow_multipliers([sa * sb / sy], 14)
                attrs = dict(a_zp=za, b_zp=zb, y_zp=zy, mult=mult, shift=shift, out_min=lo, out_max=hi)
        except ValueError as e:
            raise Skip(str(e)) from None
        self.emit(node.op, [qa, qb], attrs, node, [(y, sy, zy)])

    def avg_pool(self, node: Node) -> None:
        x = node.inputs[0]
        sx, zx = self.qp(x)
        attrs = dict(node.attrs, zp=zx)
        self.emit(node.op, [self.qin(x)], attrs, node, [(node.outputs[0], sx, zx)])

    def global_avg_pool(self, node: Node) -> None:
        x, y = node.inputs[0], node.outputs[0]
        (sx, zx), (sy, zy) = self.qp(x), self.qp(y)
        size = math.prod(self.g.tensors[x].shape[2:])
        mult, shift = fp.quantize_multiplier(sx / (sy * size))
        self.emit(node.op, [self.qin(x)], dict(x_zp=zx, y_zp=zy, mult=mult, shift=shift), node, [(y, sy, zy)])

    def concat(self, node: Node) -> None:
        y = node.outputs[0]
        sy, zy = self.qp(y)
        zps, mults, shifts, ins = [], [], [], []
        for t in node.inputs:
            if self.g.tensors[t].is_const and t not in self.qparams:
                self.qparams[t] = (sy, zy)
            ins.append(self.qin(t))
            s, z = self.qparams[t]
            if (s, z) == (sy, zy):
                zps.append(z), mults.append(0), shifts.append(0)
            else:
                m, sh = fp.quantize_multiplier(s / sy)
                zps.append(z), mults.append(m), shifts.append(sh)
        attrs = dict(node.attrs)
        if any(shifts):
            attrs.update(in_zp=zps, in_mult=mults, in_shift=shifts, y_zp=zy)
        self.emit("concat", ins, attrs, node, [(y, sy, zy)])

    def lut(self, node: Node) -> None:
        from ..ops.lut import build_table

        x, y = node.inputs[0], node.outputs[0]
        (sx, zx), (sy, zy) = self.qp(x), self.qp(y)
        table = build_table(node, sx, zx, sy, zy)
        self.emit(node.op, [self.qin(x), self.const(table, f"{node.name}_table")], dict(node.attrs), node,
                  [(y, sy, zy)])

    def softmax(self, node: Node) -> None:
        from ..ops.softmax_s8 import OUT_SCALE, OUT_ZP, exp_table

        x, y = node.inputs[0], node.outputs[0]
        readers = self.consumers.get(y, [])
        if y in self.g.outputs or not readers or any(r.op not in ANCHORS for r in readers):
            raise Skip("softmax stays float unless conv2d/gemm read it (1/256 steps lose detail)")
        sx, _ = self.qp(x)
        self.emit("softmax", [self.qin(x), self.const(exp_table(sx), f"{node.name}_exp")], dict(node.attrs), node,
                  [(y, OUT_SCALE, OUT_ZP)])

    def clip(self, node: Node) -> None:
        x = node.inputs[0]
        sx, zx = self.qp(x)
        lo, hi = fp.clamp_range(zx, sx, 2, node.attrs.get("min"), node.attrs.get("max"))
        self.emit("clip", [self.qin(x)], dict(min=lo, max=hi), node, [(node.outputs[0], sx, zx)])

    def passthrough(self, node: Node) -> None:
        x = node.inputs[0]
        sx, zx = self.qp(x)
        attrs = dict(node.attrs)
        if node.op == "pad":
            if attrs.get("mode", "constant") == "constant":
                v = float(attrs.get("value", 0.0) or 0.0)
                attrs["value"] = int(np.clip(round(v / sx) + zx, -128, 127))
        if node.op == "resize" and attrs.get("mode") != "nearest":
            raise Skip("only nearest resize moves int8 values")
        ins = [self.qin(x)] + list(node.inputs[1:])
        self.emit(node.op, ins, attrs, node, [(o, sx, zx) for o in node.outputs])

    # ---- driver ----------------------------------------------------------------------

    def convert(self, node: Node) -> None:
        if node.name in self.keep or any(o in self.keep for o in node.outputs):
            raise Skip("kept float")
        op = node.op
        if op not in ANCHORS:
            data_idx = [0] if op in PASSTHROUGH or op in LUT_OPS or op in ("clip", "softmax", "avg_pool2d",
                                                                          "global_avg_pool") else None
            if not self.has_int8_input(node, data_idx):
                raise Skip("no int8 input")
        if op == "conv2d":
            self.conv2d(node)
        elif op == "gemm":
            self.gemm(node)
        elif op in ("add", "mul") and len(node.inputs) == 2:
            self.add_mul(node)
        elif op == "avg_pool2d":
            self.avg_pool(node)
        elif op == "global_avg_pool":
            self.global_avg_pool(node)
        elif op == "concat":
            self.concat(node)
        elif op in LUT_OPS:
            self.lut(node)
        elif op == "softmax":
            self.softmax(node)
        elif op == "clip":
            self.clip(node)
        elif op in PASSTHROUGH:
            self.passthrough(node)
        else:
            raise Skip("no int8 form")

    def run(self) -> Result:
        for node in self.src.nodes:
            self._pending = []
            try:
                self.convert(node)
                continue
            except (Skip, fp.MultiplierRangeError):  # scales out of the fixed-point range: the node stays float
                self._pending = []
            self.nodes.append(Node(node.op, [self.fq(self.fin(i)) for i in node.inputs], list(node.outputs),
                                   dict(node.attrs), node.name))
            self.float_ok.update(node.outputs)
            self.float_computed.update(node.outputs)
            self.float_nodes.append(node.name)
        for t in self.g.outputs:
            self.fin(t)
        g = self.g
        g.nodes = self.nodes
        from ..passes import dce

        dce.run(g)
        g.toposort()
        used = {i for n in g.nodes for i in n.inputs} | {o for n in g.nodes for o in n.outputs}
        int8_of = {k: v for k, v in self.int8_of.items() if v in used}
        for t, q in list(int8_of.items()):  # int8 tensors take their float twin's free name
            if t not in g.tensors and not g.tensors[q].is_const:
                g.rename_tensor(q, t)
                int8_of[t] = t
        return Result(g, int8_of, self.qparams, self.int8_nodes, self.float_nodes)


def _quant(s: float, z: int) -> Quant:
    return Quant(np.array([s], np.float32), np.array([z], np.int32), None)


def quantize_int8(g: Graph, qparams: dict[str, tuple[float, int]], keep_fp32=(),
                  weights: dict[str, WeightOverride] | None = None,
                  biases: dict[str, np.ndarray] | None = None, fake_quant: bool = False,
                  means: dict[str, np.ndarray] | None = None) -> Result:
    """The int8 form of float graph g. qparams: {float tensor: (scale, zero point)};
    tensors without an entry stay float (and so do the nodes that need them).
    fake_quant (QDQ import): float nodes read the tensors the model quantizes through a
    quantize/dequantize pair, as the model's own semantics say. means: per-channel
    means of conv2d/gemm inputs, for bias correction."""
    return _Rewriter(g, qparams, keep_fp32, weights, biases, fake_quant, means).run()


def qparams_from_ranges(ranges: dict[str, tuple[float, float]]) -> dict[str, tuple[float, int]]:
    return {t: fp.activation_qparams(lo, hi) for t, (lo, hi) in ranges.items()}
