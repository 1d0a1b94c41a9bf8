"""edgert IR graph -> .tflite flatbuffer (one subgraph).

Contract (docs/partitions.md, "TFLite writer"):
- subgraph 0's inputs and outputs are the graph's, in order, with the IR's shapes (edgert's
  NCHW), dtypes and quantization; TRANSPOSE ops inside the model convert between NCHW at
  the edges and NHWC inside, so a caller copies bytes in and out;
- the interior runs NHWC wherever an op has a layout (convolutions, pools, resizes) and
  stays there through element-wise ops, concat, slice, pad, softmax and reductions (their
  axes remapped); ops with NCHW meaning (reshape across layouts, gemm, matmul, transpose)
  get their input transposed back first. A tensor is converted at most once per layout;
- float32 graphs, and graphs quantized by edgert (int8 activations per tensor, int8
  weights symmetric per output channel, int32 biases in units of in_scale * w_scale);
  edgert's requantization (multiplier, shift) becomes the weight scales TFLite expects:
  w_scale[m] = mult[m] * 2**-shift * y_scale / x_scale; int8 table ops map to TFLite's
  own int8 ops, or reproduce edgert exactly with write_tflite(..., exact=True).

`unsupported(g)` lists the nodes with no mapping; `write_tflite(g)` raises a
ConversionError naming all of them.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import ConversionError
from ..ir import Graph, Node
from . import schema as S

F32 = np.dtype(np.float32)
S8 = np.dtype(np.int8)
I32 = np.dtype(np.int32)
NHWC = (0, 2, 3, 1)  # tflite dim k holds IR (NCHW) dim NHWC[k]
NCHW_OF_NHWC = (0, 3, 1, 2)
AXIS_TO_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # IR axis -> tflite axis in NHWC


class _Unsupported(Exception):
    pass


def unsupported(g: Graph) -> list[Node]:
    """The nodes of `g` that have no TFLite mapping (in graph order)."""
    w = _Writer(g)
    w.run()
    return [n for n, _ in w.failed]


def write_tflite(g: Graph, exact: bool = False, resizable: bool = False) -> bytes:
    """The .tflite bytes of standalone graph `g` (see the module docstring).

    int8 table ops (edgert/converter/ops/lut.py): by default TFLite's own int8 op where one
    computes the same table up to a step (HARD_SWISH; LOGISTIC for a 1/256, -128 output),
    which is much faster under LiteRT; exact=True writes a GATHER from edgert's table
    instead, so that the file reproduces edgert bit for bit (docs/partitions.md).
    resizable: the file is run at other input sizes too (bounded dimensions), so a
    strided window's padding is an explicit PAD rather than TFLite's SAME, whose pads
    follow the size."""
    w = _Writer(g)
    w.exact = exact
    w.resizable = resizable
    w.run()
    if w.failed:
        lines = "\n".join(f"  {n.name or '<unnamed>'} ({n.op}): {why}" for n, why in w.failed)
        raise ConversionError(f"{len(w.failed)} node(s) have no TFLite mapping:\n{lines}\n"
                              "convert with `--fallback onnxruntime` to run them with onnxruntime instead")
    return w.finish()


def _perm(seq, p):
    return tuple(seq[i] for i in p)


def _same_pads(n_in: int, k_eff: int, s: int) -> tuple[int, int, int]:
    """TFLite SAME: (output size, pad before, pad after)."""
    out = -(-n_in // s)
    total = max((out - 1) * s + k_eff - n_in, 0)
    return out, total // 2, total - total // 2


class _Writer:
    def __init__(self, g: Graph):
        self.g = g
        self.tensors: list[S.TensorDef] = []
        self.buffers: list[bytes] = [b""]
        self.ops: list[S.OperatorDef] = []
        self.opcodes: dict[int, int] = {}
        self.tfl: dict[tuple[str, str], int] = {}  # (IR tensor, "nchw" | "nhwc") -> tflite tensor
        self.failed: list[tuple[Node, str]] = []
        self.exact = False
        self.resizable = False
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    # ---- tensors ----------------------------------------------------------------
    def _quant(self, name: str):
        t = self.g.tensors[name]
        if t.dtype == S8:
            if t.quant is None:
                raise _Unsupported(f"int8 tensor {name!r} has no quantization record")
            return np.asarray(t.quant.scale, np.float32), np.asarray(t.quant.zero_point, np.int64)
        return None

    def new_tensor(self, shape, dtype, name: str, quant=None, data: np.ndarray | None = None, qdim: int = 0) -> int:
        dtype = np.dtype(dtype)
        if dtype not in S.TENSOR_TYPE:
            raise _Unsupported(f"dtype {dtype} has no TFLite tensor type")
        buf = 0
        if data is not None:
            self.buffers.append(np.ascontiguousarray(data, dtype).tobytes())
            buf = len(self.buffers) - 1
        sc = zp = None
        if quant is not None:
            sc, zp = (np.asarray(quant[0], np.float32).reshape(-1), np.asarray(quant[1], np.int64).reshape(-1))
        self.tensors.append(S.TensorDef(tuple(int(d) for d in shape), S.TENSOR_TYPE[dtype], buf,
                                        f"{name}#{len(self.tensors)}" if data is not None else name,
                                        sc, zp, qdim))
        return len(self.tensors) - 1

    def const(self, data, hint: str, quant=None, qdim: int = 0) -> int:
        data = np.asarray(data)
        return self.new_tensor(data.shape, data.dtype, hint, quant, data, qdim)

    def i32(self, values, hint: str = "shape") -> int:
        return self.const(np.asarray(values, np.int32), hint)

    def tmp(self, shape, dtype, hint: str, quant=None) -> int:
        return self.new_tensor(shape, dtype, f"{hint}/tmp", quant)

    def shape_of(self, idx: int) -> tuple[int, ...]:
        return self.tensors[idx].shape

    def has(self, name: str, layout: str) -> bool:
        return (name, layout) in self.tfl

    def get(self, name: str, layout: str = "nchw") -> int:
        """The tflite tensor of IR tensor `name` in `layout` (constants are stored in it,
        activations converted once by a TRANSPOSE)."""
        t = self.g.tensors[name]
        if len(t.shape) != 4:
            layout = "nchw"
        key = (name, layout)
        if key in self.tfl:
            return self.tfl[key]
        if t.is_const:
            data = t.data if layout == "nchw" else np.transpose(t.data, NHWC)
            idx = self.const(data, name, self._quant(name))
        else:
            other = "nhwc" if layout == "nchw" else "nchw"
            if (name, other) not in self.tfl:
                raise _Unsupported(f"tensor {name!r} is not available")
            src = self.tfl[(name, other)]
            shape = t.shape if layout == "nchw" else _perm(t.shape, NHWC)
            idx = self.new_tensor(shape, t.dtype, name if layout == "nchw" else f"{name}/nhwc", self._quant(name))
            self.op(S.TRANSPOSE, [src, self.i32(NCHW_OF_NHWC if layout == "nchw" else NHWC, "perm")], [idx])
        self.tfl[key] = idx
        return idx

    def out(self, name: str, layout: str = "nchw") -> int:
        t = self.g.tensors[name]
        if len(t.shape) != 4:
            layout = "nchw"
        shape = t.shape if layout == "nchw" else _perm(t.shape, NHWC)
        idx = self.new_tensor(shape, t.dtype, name if layout == "nchw" else f"{name}/nhwc", self._quant(name))
        self.tfl[(name, layout)] = idx
        return idx

    def layout_of(self, name: str) -> str:
        """The layout a non-constant tensor is available in (NHWC preferred)."""
        return "nhwc" if self.has(name, "nhwc") else "nchw"

    def op(self, code: int, inputs: list[int], outputs: list[int], options_type: int = 0, options=None) -> None:
        if code not in self.opcodes:
            self.opcodes[code] = len(self.opcodes)
        self.ops.append(S.OperatorDef(self.opcodes[code], list(inputs), list(outputs), options_type,
                                      options if options_type else None))

    # ---- driver -----------------------------------------------------------------
    def run(self) -> None:
        g = self.g
        for name in g.inputs:
            t = g.tensors[name]
            try:
                idx = self.new_tensor(t.shape, t.dtype, name, self._quant(name))
            except _Unsupported as e:
                raise ConversionError(f"graph input {name!r}: {e}") from None
            self.tfl[(name, "nchw")] = idx
            self.inputs.append(idx)
        for node in g.nodes:
            n_ops, n_tensors, n_buffers, keys = len(self.ops), len(self.tensors), len(self.buffers), set(self.tfl)
            try:
                handler = getattr(self, "op_" + node.op, None)
                if handler is None:
                    raise _Unsupported("no TFLite mapping for this op")
                for o in node.outputs:
                    dt = g.tensors[o].dtype
                    if dt not in (F32, S8):
                        raise _Unsupported(f"output dtype {dt} (the writer takes float32 and int8)")
                handler(node)
            except (_Unsupported, ConversionError) as e:
                del self.ops[n_ops:], self.tensors[n_tensors:], self.buffers[n_buffers:]
                for k in set(self.tfl) - keys:
                    del self.tfl[k]
                self.failed.append((node, str(e)))
                for o in node.outputs:  # placeholders, so later nodes are still checked
                    t = g.tensors[o]
                    if t.dtype in S.TENSOR_TYPE:
                        self.tfl[(o, "nchw")] = self.new_tensor(t.shape, t.dtype, o)
        for name in g.outputs:
            if self.failed:
                break
            self.outputs.append(self._graph_output(name))

    def _graph_output(self, name: str) -> int:
        t = self.g.tensors[name]
        if self.has(name, "nchw"):
            idx = self.tfl[(name, "nchw")]
            if idx in self.inputs or t.is_const:  # a pass-through output needs its own tensor
                out = self.new_tensor(t.shape, t.dtype, f"{name}/out", self._quant(name))
                self.op(S.RESHAPE, [idx, self.i32(t.shape)], [out], S.OPT_RESHAPE,
                        [(0, "vec_i32", list(t.shape))])
                return out
            return idx
        if t.is_const:
            raise ConversionError(f"graph output {name!r} is a constant")
        return self.get(name, "nchw")

    def finish(self) -> bytes:
        codes = sorted(self.opcodes, key=self.opcodes.get)
        return S.serialize(codes, self.tensors, self.ops, self.inputs, self.outputs, self.buffers)

    # ---- activations ------------------------------------------------------------
    @staticmethod
    def _fusable(kind: int, a: float, b: float) -> int | None:
        if kind == 0:
            return S.ACT_NONE
        if kind == 1 or (kind == 2 and a == 0.0 and b == math.inf):
            return S.ACT_RELU
        if kind == 2 and (a, b) == (0.0, 6.0):
            return S.ACT_RELU6
        if kind == 2 and (a, b) == (-1.0, 1.0):
            return S.ACT_RELU_N1_TO_1
        return None

    @staticmethod
    def _act_of(attrs: dict) -> tuple[int, float, float]:
        from ..ops.activation import act_words
        kind, a, b = act_words(attrs)
        if kind == 2:
            a = -math.inf if attrs.get("act_a") is None else float(attrs["act_a"])
            b = math.inf if attrs.get("act_b") is None else float(attrs["act_b"])
        return kind, a, b

    def float_act(self, kind: int, a: float, b: float, x: int, y: int) -> None:
        """y = activation(x) as separate ops (float32)."""
        shape = self.shape_of(x)
        code = self._fusable(kind, a, b)
        if code == S.ACT_RELU:
            self.op(S.RELU, [x], [y])
        elif code == S.ACT_RELU6:
            self.op(S.RELU6, [x], [y])
        elif code == S.ACT_RELU_N1_TO_1:
            self.op(S.RELU_N1_TO_1, [x], [y])
        elif kind == 2:
            self.clamp(x, y, a, b)
        elif kind == 3:  # hard_sigmoid: clamp(a*x + b, 0, 1)
            t1, t2 = self.tmp(shape, F32, "hs"), self.tmp(shape, F32, "hs")
            self.op(S.MUL, [x, self.const(np.float32(a), "alpha")], [t1], S.OPT_MUL, [])
            self.op(S.ADD, [t1, self.const(np.float32(b), "beta")], [t2], S.OPT_ADD, [])
            self.clamp(t2, y, 0.0, 1.0)
        elif kind == 4:
            self.op(S.HARD_SWISH, [x], [y])
        elif kind == 5:
            self.op(S.LOGISTIC, [x], [y])
        elif kind == 6:  # silu: x * sigmoid(x)
            t1 = self.tmp(shape, F32, "silu")
            self.op(S.LOGISTIC, [x], [t1])
            self.op(S.MUL, [x, t1], [y], S.OPT_MUL, [])
        elif kind == 7:
            self.op(S.LEAKY_RELU, [x], [y], S.OPT_LEAKY_RELU, [(0, "f32", a)])
        elif kind == 8:
            self.op(S.TANH, [x], [y])
        elif kind == 9:
            self.op(S.GELU, [x], [y])
        else:
            raise _Unsupported(f"fused activation kind {kind}")

    def clamp(self, x: int, y: int, lo: float, hi: float, quant=None) -> None:
        t = self.tensors[x]
        dt = S8 if t.type == S.TENSOR_TYPE[S8] else F32
        cur = x
        steps = [(S.MAXIMUM, lo) if lo > -math.inf else None, (S.MINIMUM, hi) if hi < math.inf else None]
        steps = [s for s in steps if s is not None]
        if not steps:
            self.op(S.RESHAPE, [x, self.i32(t.shape)], [y], S.OPT_RESHAPE, [(0, "vec_i32", list(t.shape))])
            return
        for i, (code, v) in enumerate(steps):
            dst = y if i == len(steps) - 1 else self.tmp(t.shape, dt, "clamp", quant)
            self.op(code, [cur, self.const(np.asarray(v, dt), "bound", quant)], [dst])
            cur = dst

    def with_act(self, kind, a, b, y: int, emit) -> None:
        """Emits a float op through emit(output, fused_code) and its activation."""
        code = self._fusable(kind, a, b)
        if code is not None:
            emit(y, code)
            return
        t = self.tmp(self.shape_of(y), F32, "preact")
        emit(t, S.ACT_NONE)
        self.float_act(kind, a, b, t, y)

    def int8_range(self, attrs: dict, out_name: str, y: int, emit) -> None:
        """Emits an int8 op through emit(output, fused_code), its output range
        [out_min, out_max] fused when TFLite computes the same range, else clamped
        (edgert's relu6 top is often one step below TFLite's: MINIMUM keeps edgert's)."""
        lo, hi = int(attrs.get("out_min", -128)), int(attrs.get("out_max", 127))
        sc, zp = self._quant(out_name)
        s, z = float(sc[0]), int(zp[0])
        tfl_lo = max(-128, z)
        relu6_hi = min(127, z + int(math.floor(6.0 / s + 0.5)))
        if (lo, hi) == (-128, 127):
            emit(y, S.ACT_NONE)
        elif lo == tfl_lo and hi == relu6_hi:
            emit(y, S.ACT_RELU6)
        elif lo == tfl_lo and hi == 127:
            emit(y, S.ACT_RELU)
        else:
            t = self.tmp(self.shape_of(y), S8, "prerange", (sc, zp))
            emit(t, S.ACT_NONE)
            self.clamp(t, y, lo if lo > -128 else -math.inf, hi if hi < 127 else math.inf, (sc, zp))

    # ---- layout choice for element-wise ops ----------------------------------------
    def elementwise_layout(self, node: Node, names) -> str:
        out = self.g.tensors[node.outputs[0]]
        if len(out.shape) != 4:
            return "nchw"
        dyn = [n for n in names if n and not self.g.tensors[n].is_const]
        if any(len(self.g.tensors[n].shape) != 4 for n in dyn):
            return "nchw"
        return "nhwc" if any(self.has(n, "nhwc") for n in dyn) else "nchw"

    def operand(self, name: str, layout: str, rank: int) -> int:
        """Input `name` of an element-wise op in `layout`; a constant of lower rank is
        given the output's rank first (numpy broadcasting)."""
        t = self.g.tensors[name]
        if t.is_const and len(t.shape) != rank:
            data = t.data.reshape((1,) * (rank - len(t.shape)) + tuple(t.shape))
            if layout == "nhwc" and rank == 4:
                data = np.transpose(data, NHWC)
            return self.const(data, name, self._quant(name))
        return self.get(name, layout)

    # ---- element-wise -----------------------------------------------------------
    def _binary(self, node: Node, code: int, opt_type: int) -> None:
        g = self.g
        if len(node.inputs) != 2 or not all(node.inputs):
            raise _Unsupported("needs two inputs")
        a, b = (g.tensors[i] for i in node.inputs)
        y = g.tensors[node.outputs[0]]
        if a.dtype != b.dtype or a.dtype not in (F32, S8):
            raise _Unsupported(f"operand dtypes {a.dtype}, {b.dtype}")
        if a.dtype == S8 and not (node.op in ("add", "mul") and "y_zp" in node.attrs):
            raise _Unsupported("int8 arithmetic without quantization")
        layout = self.elementwise_layout(node, node.inputs)
        xa = self.operand(node.inputs[0], layout, len(y.shape))
        xb = self.operand(node.inputs[1], layout, len(y.shape))
        out = self.out(node.outputs[0], layout)
        with_opts = opt_type != 0

        def emit(dst, fused):
            self.op(code, [xa, xb], [dst], opt_type, [(0, "i8", fused)] if with_opts else None)
        if a.dtype == S8:
            self.int8_range(node.attrs, node.outputs[0], out, emit)
        elif with_opts:
            self.with_act(*self._act_of(node.attrs), out, emit)
        else:
            emit(out, 0)

    def op_add(self, node):
        self._binary(node, S.ADD, S.OPT_ADD)

    def op_sub(self, node):
        self._binary(node, S.SUB, S.OPT_SUB)

    def op_mul(self, node):
        self._binary(node, S.MUL, S.OPT_MUL)

    def op_div(self, node):
        self._binary(node, S.DIV, S.OPT_DIV)

    def op_max(self, node):
        self._binary(node, S.MAXIMUM, 0)

    def op_min(self, node):
        self._binary(node, S.MINIMUM, 0)

    def op_prelu(self, node):
        x, slope = (self.g.tensors[i] for i in node.inputs)
        if x.dtype != F32:
            raise _Unsupported("prelu takes float32")
        layout = self.elementwise_layout(node, node.inputs[:1])
        xi = self.get(node.inputs[0], layout)
        si = self.operand(node.inputs[1], layout, len(x.shape))
        self.op(S.PRELU, [xi, si], [self.out(node.outputs[0], layout)])

    def _unary_float(self, node: Node, kind: int, a: float = 0.0, b: float = 0.0) -> None:
        if len(node.inputs) > 1 and node.inputs[1]:
            return self._lut(node)
        x = self.g.tensors[node.inputs[0]]
        if x.dtype != F32:
            raise _Unsupported(f"{node.op} on {x.dtype}")
        layout = self.elementwise_layout(node, node.inputs)
        xi = self.get(node.inputs[0], layout)
        self.float_act(kind, a, b, xi, self.out(node.outputs[0], layout))

    def op_relu(self, node):
        if self.g.tensors[node.inputs[0]].dtype == S8 and len(node.inputs) == 1:
            raise _Unsupported("int8 relu without a table")
        self._unary_float(node, 1)

    def op_clip(self, node):
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
        if self.g.tensors[node.inputs[0]].dtype == S8 and len(node.inputs) == 1:
            # int8 clip: bounds in quantized units, output quantized as the input
            layout = self.elementwise_layout(node, node.inputs)
            q = self._quant(node.inputs[0])
            self.clamp(self.get(node.inputs[0], layout), self.out(node.outputs[0], layout),
                       -math.inf if lo is None or int(lo) <= -128 else int(lo),
                       math.inf if hi is None or int(hi) >= 127 else int(hi), q)
            return
        self._unary_float(node, 2, -math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))

    def op_hard_sigmoid(self, node):
        self._unary_float(node, 3, float(node.attrs.get("alpha", 0.2)), float(node.attrs.get("beta", 0.5)))

    def op_hard_swish(self, node):
        self._unary_float(node, 4)

    def op_sigmoid(self, node):
        self._unary_float(node, 5)

    def op_silu(self, node):
        self._unary_float(node, 6)

    def op_leaky_relu(self, node):
        self._unary_float(node, 7, float(node.attrs.get("alpha", 0.01)))

    def op_tanh(self, node):
        self._unary_float(node, 8)

    def op_gelu(self, node):
        if node.attrs.get("approximate", "none") != "none":
            raise _Unsupported("gelu with the tanh approximation")
        self._unary_float(node, 9)

    def _simple_unary(self, node, code):
        x = self.g.tensors[node.inputs[0]]
        if x.dtype != F32 or len(node.inputs) != 1:
            raise _Unsupported(f"{node.op} on {x.dtype}")
        layout = self.elementwise_layout(node, node.inputs)
        self.op(code, [self.get(node.inputs[0], layout)], [self.out(node.outputs[0], layout)])

    def op_exp(self, node):
        self._simple_unary(node, S.EXP)

    def op_sqrt(self, node):
        self._simple_unary(node, S.SQRT)

    def op_abs(self, node):
        self._simple_unary(node, S.ABS)

    def _lut(self, node: Node) -> None:
        """An int8 table op (edgert/converter/ops/lut.py): the matching TFLite int8 op where one
        exists with edgert's output quantization, else a GATHER from the table."""
        x = self.g.tensors[node.inputs[0]]
        if x.dtype != S8:
            raise _Unsupported("table ops take int8")
        layout = self.elementwise_layout(node, node.inputs[:1])
        xi = self.get(node.inputs[0], layout)
        out = self.out(node.outputs[0], layout)
        sc, zp = self._quant(node.outputs[0])
        table = self.g.tensors[node.inputs[1]]
        if not table.is_const or tuple(table.shape) != (256,):
            raise _Unsupported("the table must be a constant [256]")
        # exact: a GATHER reproduces the table. Otherwise TFLite's own int8 op where the
        # exact table from the tensors' quantization is edgert's to within one step.
        native = {"hard_swish": S.HARD_SWISH}
        if abs(float(sc[0]) * 256 - 1) < 1e-6 and int(zp[0]) == -128:
            native["sigmoid"] = S.LOGISTIC
        if node.op in native and not self.exact:
            from ..ops.lut import build_table
            xs, xz = self._quant(node.inputs[0])
            expect = build_table(node, float(xs[0]), int(xz[0]), float(sc[0]), int(zp[0]))
            if int(np.abs(expect.astype(np.int32) - table.data.astype(np.int32)).max()) <= 1:
                self.op(native[node.op], [xi], [out])
                return
        shape = self.shape_of(xi)
        wide, idx = self.tmp(shape, I32, "lut"), self.tmp(shape, I32, "lut")
        self.op(S.CAST, [xi], [wide], S.OPT_CAST, [(0, "i8", S.TENSOR_TYPE[S8]), (1, "i8", S.TENSOR_TYPE[I32])])
        self.op(S.ADD, [wide, self.const(np.int32(128), "offset")], [idx], S.OPT_ADD, [])
        tab = self.const(table.data.astype(np.int8), "table", (sc, zp))
        self.op(S.GATHER, [tab, idx], [out], S.OPT_GATHER, [(0, "i32", 0)])

    # ---- quantize / dequantize ------------------------------------------------------
    def op_quantize_linear(self, node):
        if node.attrs.get("dtype", "int8") != "int8" or len(node.attrs.get("scale", [])) != 1:
            raise _Unsupported("only per-tensor int8 quantization")
        layout = self.elementwise_layout(node, node.inputs)
        self.op(S.QUANTIZE, [self.get(node.inputs[0], layout)], [self.out(node.outputs[0], layout)])

    def op_dequantize_linear(self, node):
        if self.g.tensors[node.inputs[0]].dtype != S8 or len(node.attrs.get("scale", [])) != 1:
            raise _Unsupported("only per-tensor int8 dequantization")
        layout = self.elementwise_layout(node, node.inputs)
        self.op(S.DEQUANTIZE, [self.get(node.inputs[0], layout)], [self.out(node.outputs[0], layout)])

    # ---- convolution ------------------------------------------------------------
    def _window_padding(self, h, w, kh, kw, sh, sw, dh, dw, pads, oh, ow):
        """"same" / "valid", or None when explicit padding is needed."""
        if not any(pads) and (h - (dh * (kh - 1) + 1)) // sh + 1 == oh and (w - (dw * (kw - 1) + 1)) // sw + 1 == ow:
            return S.PADDING_VALID
        o1, t, b = _same_pads(h, dh * (kh - 1) + 1, sh)
        o2, left, r = _same_pads(w, dw * (kw - 1) + 1, sw)
        if (o1, o2) == (oh, ow) and tuple(pads) == (t, left, b, r) and (not self.resizable or (sh, sw) == (1, 1)):
            return S.PADDING_SAME
        return None

    def _pad_nhwc(self, xi: int, pads, value, dtype, quant, hint: str) -> int:
        n, h, w, c = self.shape_of(xi)
        t, left, b, r = pads
        y = self.tmp((n, h + t + b, w + left + r, c), dtype, hint, quant)
        paddings = self.i32([[0, 0], [t, b], [left, r], [0, 0]], "paddings")
        if value is None:
            self.op(S.PAD, [xi, paddings], [y])
        else:
            self.op(S.PADV2, [xi, paddings, self.const(np.asarray(value, dtype), "pad_value", quant)], [y])
        return y

    def _via_rank4(self, node, handler):
        """A 1-D (rank1d) conv or pool as its height-1 2-D form: [N, C, W] is
        transposed to [N, W, C] and viewed as NHWC [N, 1, W, C], and back."""
        from ..ir import Tensor
        g = self.g
        x, y = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
        if x.dtype == S8:
            raise _Unsupported("int8 1-D convolution or pooling")
        n, c, w = x.shape
        m, ow = y.shape[1], y.shape[2]
        nwc = self.tmp((n, w, c), x.dtype, "nwc")
        self.op(S.TRANSPOSE, [self.get(node.inputs[0]), self.i32([0, 2, 1], "perm")], [nwc])
        x4 = self.tmp((n, 1, w, c), x.dtype, "nhwc")
        self.op(S.RESHAPE, [nwc, self.i32((n, 1, w, c))], [x4], S.OPT_RESHAPE, [(0, "vec_i32", [n, 1, w, c])])
        # a rank-4 twin of the node over private IR tensors, written with the 2-D handler
        a = dict(node.attrs, rank1d=False)
        names = []
        for name, shape in ((node.inputs[0], (n, c, 1, w)), (node.outputs[0], (n, m, 1, ow))):
            twin = f"{name}/as4d"
            g.tensors[twin] = Tensor(twin, shape, x.dtype)
            names.append(twin)
        extra = []
        if node.op == "conv2d":
            wt = g.tensors[node.inputs[1]]
            if not wt.is_const:
                raise _Unsupported("non-constant weights")
            w4 = f"{node.inputs[1]}/as4d"
            g.tensors[w4] = Tensor(w4, wt.shape[:2] + (1, wt.shape[2]), wt.dtype, wt.data[:, :, None, :])
            extra = [w4] + list(node.inputs[2:])
            kernel = a.get("kernel", (1, wt.shape[2]))
            a["kernel"] = [1, int(kernel[-1])]
        try:
            self.tfl[(names[0], "nhwc")] = x4
            handler(Node(node.op, [names[0]] + extra, [names[1]], a, node.name))
            y4 = self.tfl[(names[1], "nhwc")]
        finally:
            for t in names + extra[:1]:
                g.tensors.pop(t, None)
        nwm = self.tmp((n, ow, m), y.dtype, "nwc")
        self.op(S.RESHAPE, [y4, self.i32((n, ow, m))], [nwm], S.OPT_RESHAPE, [(0, "vec_i32", [n, ow, m])])
        self.op(S.TRANSPOSE, [nwm, self.i32([0, 2, 1], "perm")], [self.out(node.outputs[0])])

    def op_conv2d(self, node):
        g = self.g
        a = node.attrs
        if a.get("rank1d", False):
            return self._via_rank4(node, self.op_conv2d)
        x, w = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]]
        if not w.is_const:
            raise _Unsupported("non-constant weights")
        y = g.tensors[node.outputs[0]]
        int8 = x.dtype == S8
        n, c, h, wd = x.shape
        m, cg, kh, kw = w.shape
        group = int(a.get("group", 1))
        sh, sw = (int(v) for v in a.get("strides", (1, 1)))
        dh, dw = (int(v) for v in a.get("dilations", (1, 1)))
        pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
        oh, ow = y.shape[2], y.shape[3]
        xi = self.get(node.inputs[0], "nhwc")
        xq = self._quant(node.inputs[0]) if int8 else None
        if int8:
            qp = g.tensors[node.inputs[2]].data.astype(np.int64)
            sy = float(self._quant(node.outputs[0])[0][0])
            ratio = qp[:, 1].astype(np.float64) * 2.0 ** -int(a["shift"])
            wscale = np.maximum(ratio * sy / float(xq[0][0]), 1e-30).astype(np.float32)
            bias = qp[:, 0].astype(np.int32)
        else:
            wscale = None
            bias = (g.tensors[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2]
                    else np.zeros(m, np.float32)).astype(np.float32)
        padding = self._window_padding(h, wd, kh, kw, sh, sw, dh, dw, pads, oh, ow)
        if padding is None:
            xi = self._pad_nhwc(xi, pads, None, x.dtype, xq, "conv_pad")
            padding = S.PADDING_VALID
        out = self.out(node.outputs[0], "nhwc")
        wdata = w.data

        def conv_one(src, dst, fused, wsl, bsl, ws, depthwise, mult):
            if depthwise:
                filt = np.transpose(wsl.reshape(wsl.shape[0], kh, kw), (1, 2, 0))[None]
                qdim = 3
            else:
                filt = np.transpose(wsl, NHWC)
                qdim = 0
            if int8:
                fi = self.const(filt.astype(np.int8), "filter", (ws, np.zeros(len(ws), np.int64)), qdim)
                bi = self.const(bsl, "bias", (xq[0][0] * ws.astype(np.float64), np.zeros(len(ws), np.int64)), 0)
            else:
                fi, bi = self.const(filt.astype(np.float32), "filter"), self.const(bsl, "bias")
            if depthwise:
                self.op(S.DEPTHWISE_CONV_2D, [src, fi, bi], [dst], S.OPT_DEPTHWISE,
                        [(0, "i8", padding), (1, "i32", sw), (2, "i32", sh), (3, "i32", mult), (4, "i8", fused),
                         (5, "i32", dw), (6, "i32", dh)])
            else:
                self.op(S.CONV_2D, [src, fi, bi], [dst], S.OPT_CONV2D,
                        [(0, "i8", padding), (1, "i32", sw), (2, "i32", sh), (3, "i8", fused), (4, "i32", dw),
                         (5, "i32", dh)])

        def emit(dst, fused):
            if group == 1:
                conv_one(xi, dst, fused, wdata, bias, wscale, False, 1)
            elif cg == 1:
                conv_one(xi, dst, fused, wdata, bias, wscale, True, m // c)
            else:  # grouped: split the channels, one convolution per group, concat
                parts_in = [self.tmp((n,) + self.shape_of(xi)[1:3] + (cg,), x.dtype, "group_in", xq)
                            for _ in range(group)]
                self.op(S.SPLIT, [self.const(np.int32(3), "axis"), xi], parts_in, S.OPT_SPLIT,
                        [(0, "i32", group)])
                mg = m // group
                yq = self._quant(node.outputs[0]) if int8 else None
                parts_out = []
                for k in range(group):
                    po = self.tmp((n, oh, ow, mg), y.dtype, "group_out", yq)
                    sl = slice(k * mg, (k + 1) * mg)
                    conv_one(parts_in[k], po, fused, wdata[sl], bias[sl], None if wscale is None else wscale[sl],
                             False, 1)
                    parts_out.append(po)
                self.op(S.CONCATENATION, parts_out, [dst], S.OPT_CONCAT, [(0, "i32", 3), (1, "i8", S.ACT_NONE)])
        if int8:
            self.int8_range(a, node.outputs[0], out, emit)
        else:
            self.with_act(*self._act_of(a), out, emit)

    # ---- fully connected --------------------------------------------------------
    def _fc(self, ai: int, weights: np.ndarray, bias, out_shape, y: int, fused: int, keep: bool, int8=None) -> None:
        """FULLY_CONNECTED with constant weights [N, K]."""
        if int8 is not None:
            ws, xs = int8
            fi = self.const(weights.astype(np.int8), "weights", (ws, np.zeros(len(ws), np.int64)), 0)
            bi = self.const(bias.astype(np.int32), "bias", (xs * ws.astype(np.float64), np.zeros(len(ws), np.int64)))
        else:
            fi = self.const(weights.astype(np.float32), "weights")
            bi = -1 if bias is None else self.const(np.asarray(bias, np.float32), "bias")
        self.op(S.FULLY_CONNECTED, [ai, fi, bi], [y], S.OPT_FULLY_CONNECTED,
                [(0, "i8", fused), (2, "i8", int(keep))])

    def op_gemm(self, node):
        g = self.g
        a = node.attrs
        A, B = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]]
        y = g.tensors[node.outputs[0]]
        ta, tb = bool(a.get("trans_a", False)), bool(a.get("trans_b", False))
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        ai = self.get(node.inputs[0], "nchw")
        if ta:
            t = self.tmp(A.shape[::-1], A.dtype, "trans_a", self._quant(node.inputs[0]) if A.dtype == S8 else None)
            self.op(S.TRANSPOSE, [ai, self.i32([1, 0], "perm")], [t])
            ai = t
        out = self.out(node.outputs[0])
        if A.dtype == S8:
            qp = g.tensors[node.inputs[2]].data.astype(np.int64)
            sa = float(self._quant(node.inputs[0])[0][0])
            sy = float(self._quant(node.outputs[0])[0][0])
            ws = np.maximum(qp[:, 1] * 2.0 ** -int(a["shift"]) * sy / sa, 1e-30).astype(np.float32)
            wmat = B.data if tb else B.data.T
            self.int8_range(a, node.outputs[0], out,
                            lambda dst, fused: self._fc(ai, wmat, qp[:, 0], y.shape, dst, fused, False, (ws, sa)))
            return
        c = g.tensors[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else None
        n_out = y.shape[1]
        bias_vec = None
        if c is not None and c.is_const and c.data.size in (1, n_out) and (len(c.shape) < 2 or c.shape[0] == 1):
            bias_vec = np.broadcast_to(beta * c.data.reshape(-1).astype(np.float64), (n_out,)).astype(np.float32)
            c = None
        act = self._act_of(a)
        if B.is_const:
            wmat = (B.data if tb else B.data.T) * np.float32(alpha)

            def main(dst, fused):
                self._fc(ai, wmat, bias_vec, y.shape, dst, fused, False)
        else:
            if alpha != 1.0:
                raise _Unsupported("alpha with a non-constant B")
            bi = self.get(node.inputs[1], "nchw")

            def main(dst, fused):
                pre = dst if bias_vec is None and fused == S.ACT_NONE else self.tmp(y.shape, F32, "matmul")
                self.op(S.BATCH_MATMUL, [ai, bi], [pre], S.OPT_BATCH_MATMUL, [(0, "i8", 0), (1, "i8", int(tb))])
                if pre != dst:
                    bv = self.const(np.zeros(n_out, np.float32) if bias_vec is None else bias_vec, "bias")
                    self.op(S.ADD, [pre, bv], [dst], S.OPT_ADD, [(0, "i8", fused)])
        if c is None:
            self.with_act(*act, out, main)
            return
        pre = self.tmp(y.shape, F32, "gemm")
        main(pre, S.ACT_NONE)
        cdata = c.data * np.float32(beta) if c.is_const else None
        ci = self.const(cdata.astype(np.float32), "c") if cdata is not None else self.get(node.inputs[2], "nchw")
        if not c.is_const and beta != 1.0:
            raise _Unsupported("beta with a non-constant C")
        self.with_act(*act, out, lambda dst, fused: self.op(S.ADD, [pre, ci], [dst], S.OPT_ADD, [(0, "i8", fused)]))

    def op_matmul(self, node):
        g = self.g
        A, B = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]]
        y = g.tensors[node.outputs[0]]
        if A.dtype != F32 or B.dtype != F32:
            raise _Unsupported("matmul takes float32")
        if len(A.shape) < 2 or len(B.shape) < 2:
            raise _Unsupported("rank-1 operands")
        ai = self.get(node.inputs[0], "nchw")
        out = self.out(node.outputs[0])
        if B.is_const and len(B.shape) == 2:
            wmat = np.ascontiguousarray(B.data.T)
            emit = lambda dst, fused: self._fc(ai, wmat, None, y.shape, dst, fused, True)  # noqa: E731
        else:
            bi = self.get(node.inputs[1], "nchw")

            def emit(dst, fused):
                pre = dst if fused == S.ACT_NONE else self.tmp(y.shape, F32, "matmul")
                self.op(S.BATCH_MATMUL, [ai, bi], [pre], S.OPT_BATCH_MATMUL, [(0, "i8", 0), (1, "i8", 0)])
                if pre != dst:
                    self.float_act({S.ACT_RELU: 1, S.ACT_RELU6: 2, S.ACT_RELU_N1_TO_1: 2}[fused],
                                   *((0.0, 6.0) if fused == S.ACT_RELU6 else (-1.0, 1.0)), pre, dst)
        self.with_act(*self._act_of(node.attrs), out, emit)

    # ---- pools ------------------------------------------------------------------
    def _pool(self, node, code):
        g = self.g
        a = node.attrs
        if a.get("rank1d", False):
            return self._via_rank4(node, lambda n4: self._pool(n4, code))
        x, y = g.tensors[node.inputs[0]], g.tensors[node.outputs[0]]
        kh, kw = (int(v) for v in a["kernel"])
        sh, sw = (int(v) for v in a.get("strides", (1, 1)))
        if tuple(int(v) for v in a.get("dilations", (1, 1))) != (1, 1):
            raise _Unsupported("dilated pooling")
        pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
        n, c, h, w = x.shape
        oh, ow = y.shape[2], y.shape[3]
        xi = self.get(node.inputs[0], "nhwc")
        quant = self._quant(node.inputs[0]) if x.dtype == S8 else None
        padding = self._window_padding(h, w, kh, kw, sh, sw, 1, 1, pads, oh, ow)
        incl = code == S.AVERAGE_POOL_2D and bool(a.get("count_include_pad", False)) and any(pads)
        if padding is None or incl:
            # explicit padding; max pooling extends it to the last window ceil_mode starts
            eh = (oh - 1) * sh + kh - h - pads[0]
            ew = (ow - 1) * sw + kw - w - pads[1]
            if code == S.AVERAGE_POOL_2D:
                if not incl or eh > pads[2] or ew > pads[3]:
                    raise _Unsupported("average pooling with padding TFLite's SAME does not express")
                full = pads
                xi = self._pad_nhwc(xi, full, None, x.dtype, quant, "pool_pad")
            else:
                full = (pads[0], pads[1], max(eh, pads[2]), max(ew, pads[3]))
                low = -128 if x.dtype == S8 else -np.inf
                xi = self._pad_nhwc(xi, full, low, x.dtype, quant, "pool_pad")
            ph, pw = self.shape_of(xi)[1:3]
            if ((ph - kh) // sh + 1, (pw - kw) // sw + 1) != (oh, ow):
                raise _Unsupported("pooling window geometry TFLite does not express")
            padding = S.PADDING_VALID
        self.op(code, [xi], [self.out(node.outputs[0], "nhwc")], S.OPT_POOL2D,
                [(0, "i8", padding), (1, "i32", sw), (2, "i32", sh), (3, "i32", kw), (4, "i32", kh),
                 (5, "i8", S.ACT_NONE)])

    def op_max_pool2d(self, node):
        self._pool(node, S.MAX_POOL_2D)

    def op_avg_pool2d(self, node):
        self._pool(node, S.AVERAGE_POOL_2D)

    def _global(self, node, code):
        x = self.g.tensors[node.inputs[0]]
        if len(x.shape) == 4:
            xi, axes, layout = self.get(node.inputs[0], "nhwc"), [1, 2], "nhwc"
        else:
            xi, axes, layout = self.get(node.inputs[0], "nchw"), list(range(2, len(x.shape))), "nchw"
        self.op(code, [xi, self.i32(axes, "axes")], [self.out(node.outputs[0], layout)], S.OPT_REDUCER,
                [(0, "i8", 1)])

    def op_global_avg_pool(self, node):
        self._global(node, S.MEAN)

    def op_global_max_pool(self, node):
        self._global(node, S.REDUCE_MAX)

    # ---- reductions -------------------------------------------------------------
    def _reduce(self, node, code):
        x = self.g.tensors[node.inputs[0]]
        r = len(x.shape)
        axes = sorted(int(v) % r for v in node.attrs.get("axes", []))
        if not axes:
            raise _Unsupported("an empty axes list")
        keep = bool(node.attrs.get("keepdims", True))
        layout = self.layout_of(node.inputs[0]) if r == 4 else "nchw"
        if layout == "nhwc" and not keep:
            kept = [d for d in range(4) if d not in axes]
            if [d for d in NHWC if d in kept] != kept:
                layout = "nchw"
        tax = [AXIS_TO_NHWC[d] for d in axes] if layout == "nhwc" else axes
        xi = self.get(node.inputs[0], layout)
        out = self.out(node.outputs[0], layout if keep else "nchw")
        self.op(code, [xi, self.i32(sorted(tax), "axes")], [out], S.OPT_REDUCER, [(0, "i8", int(keep))])

    def op_reduce_mean(self, node):
        self._reduce(node, S.MEAN)

    def op_reduce_sum(self, node):
        self._reduce(node, S.SUM)

    def op_reduce_max(self, node):
        self._reduce(node, S.REDUCE_MAX)

    def op_reduce_min(self, node):
        self._reduce(node, S.REDUCE_MIN)

    # ---- data movement ------------------------------------------------------------
    def op_reshape(self, node):
        x = self.g.tensors[node.inputs[0]]
        y = self.g.tensors[node.outputs[0]]
        layout = "nchw"
        if len(x.shape) == 4 and not self.has(node.inputs[0], "nchw") and self.has(node.inputs[0], "nhwc"):
            n, c, h, w = x.shape
            if c == 1 or h * w == 1:  # NHWC and NCHW hold the elements in the same order
                layout = "nhwc"
        xi = self.get(node.inputs[0], layout)
        self.op(S.RESHAPE, [xi, self.i32(y.shape)], [self.out(node.outputs[0])], S.OPT_RESHAPE,
                [(0, "vec_i32", list(y.shape))])

    def op_transpose(self, node):
        perm = [int(p) for p in node.attrs["perm"]]
        x = self.g.tensors[node.inputs[0]]
        layout = self.layout_of(node.inputs[0]) if len(x.shape) == 4 else "nchw"
        if layout == "nhwc":
            perm = [NCHW_OF_NHWC[p] for p in perm]
        xi = self.get(node.inputs[0], layout)
        self.op(S.TRANSPOSE, [xi, self.i32(perm, "perm")], [self.out(node.outputs[0])])

    def op_depth_to_space(self, node):
        """In NHWC: channel (i, j, c) of DCR or (c, i, j) of CRD to row i, column j of the
        pixel's b x b block, by a RESHAPE to 6-D, a TRANSPOSE and a RESHAPE (TFLite's
        DEPTH_TO_SPACE has DCR's order only)."""
        x = self.g.tensors[node.inputs[0]]
        n, c, h, w = x.shape
        b = int(node.attrs["blocksize"])
        cb = c // (b * b)
        if node.attrs.get("mode", "DCR") == "DCR":
            shape6, perm = [n, h, w, b, b, cb], [0, 1, 3, 2, 4, 5]
        else:
            shape6, perm = [n, h, w, cb, b, b], [0, 1, 4, 2, 5, 3]
        q = self._quant(node.inputs[0])
        t6 = self.tmp(shape6, x.dtype, "d2s", q)
        self.op(S.RESHAPE, [self.get(node.inputs[0], "nhwc"), self.i32(shape6)], [t6], S.OPT_RESHAPE,
                [(0, "vec_i32", shape6)])
        tt = self.tmp([shape6[k] for k in perm], x.dtype, "d2s", q)
        self.op(S.TRANSPOSE, [t6, self.i32(perm, "perm")], [tt])
        oshape = [n, h * b, w * b, cb]
        self.op(S.RESHAPE, [tt, self.i32(oshape)], [self.out(node.outputs[0], "nhwc")], S.OPT_RESHAPE,
                [(0, "vec_i32", oshape)])

    def op_concat(self, node):
        g = self.g
        y = g.tensors[node.outputs[0]]
        r = len(y.shape)
        axis = int(node.attrs["axis"]) % r
        dyn = [i for i in node.inputs if not g.tensors[i].is_const]
        layout = "nhwc" if r == 4 and any(self.has(i, "nhwc") for i in dyn) else "nchw"
        ins = [self.get(i, layout) for i in node.inputs]
        if y.dtype == S8:  # TFLite's int8 concat wants one quantization: requantize the others
            yq = self._quant(node.outputs[0])
            for k, name in enumerate(node.inputs):
                q = self._quant(name)
                if not (np.array_equal(q[0], yq[0]) and np.array_equal(q[1], yq[1])):
                    t = self.tmp(self.shape_of(ins[k]), S8, "requant", yq)
                    self.op(S.QUANTIZE, [ins[k]], [t])
                    ins[k] = t
        tax = AXIS_TO_NHWC[axis] if layout == "nhwc" else axis
        self.op(S.CONCATENATION, ins, [self.out(node.outputs[0], layout)], S.OPT_CONCAT,
                [(0, "i32", tax), (1, "i8", S.ACT_NONE)])

    def op_split(self, node):
        x = self.g.tensors[node.inputs[0]]
        r = len(x.shape)
        axis = int(node.attrs["axis"]) % r
        sizes = [int(s) for s in node.attrs["sizes"]]
        layout = self.layout_of(node.inputs[0]) if r == 4 else "nchw"
        tax = AXIS_TO_NHWC[axis] if layout == "nhwc" else axis
        xi = self.get(node.inputs[0], layout)
        outs = [self.out(o, layout) for o in node.outputs]
        if len(set(sizes)) == 1:
            self.op(S.SPLIT, [self.const(np.int32(tax), "axis"), xi], outs, S.OPT_SPLIT, [(0, "i32", len(sizes))])
            return
        start = 0
        for o, size in zip(outs, sizes):
            begin = [0] * r
            end = list(self.shape_of(xi))
            begin[tax], end[tax] = start, start + size
            self.op(S.STRIDED_SLICE, [xi, self.i32(begin, "begin"), self.i32(end, "end"), self.i32([1] * r, "strides")],
                    [o], S.OPT_STRIDED_SLICE, [])
            start += size

    def op_slice(self, node):
        x = self.g.tensors[node.inputs[0]]
        r = len(x.shape)
        starts = [int(v) for v in node.attrs["starts"]]
        steps = [int(v) for v in node.attrs["steps"]]
        sizes = [int(v) for v in node.attrs["sizes"]]
        if any(s == 0 for s in sizes):
            raise _Unsupported("an empty slice")
        layout = self.layout_of(node.inputs[0]) if r == 4 else "nchw"
        if layout == "nhwc":
            starts, steps, sizes = (_perm(v, NHWC) for v in (starts, steps, sizes))
        begin, end, end_mask = [], [], 0
        for d, (st, sp, sz) in enumerate(zip(starts, steps, sizes)):
            last = st + sp * (sz - 1)
            begin.append(st)
            e = last + (1 if sp > 0 else -1)
            if e < 0:
                end_mask |= 1 << d
                e = 0
            end.append(e)
        xi = self.get(node.inputs[0], layout)
        self.op(S.STRIDED_SLICE, [xi, self.i32(begin, "begin"), self.i32(end, "end"), self.i32(steps, "strides")],
                [self.out(node.outputs[0], layout)], S.OPT_STRIDED_SLICE, [(1, "i32", end_mask)])

    def op_pad(self, node):
        x = self.g.tensors[node.inputs[0]]
        r = len(x.shape)
        pads = [int(v) for v in node.attrs["pads"]]
        if min(pads) < 0:
            raise _Unsupported("negative pads")
        begins, ends = pads[:r], pads[r:]
        layout = self.layout_of(node.inputs[0]) if r == 4 else "nchw"
        if layout == "nhwc":
            begins, ends = _perm(begins, NHWC), _perm(ends, NHWC)
        xi = self.get(node.inputs[0], layout)
        paddings = self.i32(list(zip(begins, ends)), "paddings")
        out = self.out(node.outputs[0], layout)
        mode = node.attrs.get("mode", "constant")
        if mode == "reflect":
            self.op(S.MIRROR_PAD, [xi, paddings], [out], S.OPT_MIRROR_PAD, [(0, "i8", 0)])
            return
        if mode != "constant":
            raise _Unsupported(f"pad mode {mode!r}")
        value = node.attrs.get("value", 0)
        q = self._quant(node.inputs[0])
        zero = int(q[1][0]) if q is not None else 0
        if float(value) == zero:
            self.op(S.PAD, [xi, paddings], [out])
        else:
            self.op(S.PADV2, [xi, paddings, self.const(np.asarray(value, x.dtype), "pad_value", q)], [out])

    def op_softmax(self, node):
        x = self.g.tensors[node.inputs[0]]
        if x.dtype == S8 and len(node.inputs) < 2:
            raise _Unsupported("int8 softmax without its table")
        r = len(x.shape)
        axis = int(node.attrs.get("axis", -1)) % r
        flatten = bool(node.attrs.get("flatten", False)) and axis != r - 1
        quant = self._quant(node.inputs[0])
        yq = self._quant(node.outputs[0])
        if flatten:
            xi = self.get(node.inputs[0], "nchw")
            two = (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
            t1, t2 = self.tmp(two, x.dtype, "sm", quant), self.tmp(two, x.dtype, "sm", yq)
            self.op(S.RESHAPE, [xi, self.i32(two)], [t1], S.OPT_RESHAPE, [(0, "vec_i32", list(two))])
            self.op(S.SOFTMAX, [t1], [t2], S.OPT_SOFTMAX, [(0, "f32", 1.0)])
            self.op(S.RESHAPE, [t2, self.i32(x.shape)], [self.out(node.outputs[0])], S.OPT_RESHAPE,
                    [(0, "vec_i32", list(x.shape))])
            return
        layout = self.layout_of(node.inputs[0]) if r == 4 else "nchw"
        tax = AXIS_TO_NHWC[axis] if layout == "nhwc" else axis
        xi = self.get(node.inputs[0], layout)
        out = self.out(node.outputs[0], layout)
        if tax == r - 1:
            self.op(S.SOFTMAX, [xi], [out], S.OPT_SOFTMAX, [(0, "f32", 1.0)])
            return
        perm = [d for d in range(r) if d != tax] + [tax]
        inv = list(np.argsort(perm))
        shp = _perm(self.shape_of(xi), perm)
        t1, t2 = self.tmp(shp, x.dtype, "sm", quant), self.tmp(shp, x.dtype, "sm", yq)
        self.op(S.TRANSPOSE, [xi, self.i32(perm, "perm")], [t1])
        self.op(S.SOFTMAX, [t1], [t2], S.OPT_SOFTMAX, [(0, "f32", 1.0)])
        self.op(S.TRANSPOSE, [t2, self.i32(inv, "perm")], [out])

    def op_layer_norm(self, node):
        g = self.g
        x = g.tensors[node.inputs[0]]
        if x.dtype != F32 or len(node.outputs) != 1:
            raise _Unsupported("float32 layer_norm with one output")
        r = len(x.shape)
        axis = int(node.attrs.get("axis", -1)) % r
        eps = float(node.attrs.get("epsilon", 1e-5))
        axes = self.i32(list(range(axis, r)), "axes")
        xi = self.get(node.inputs[0], "nchw")
        stat = tuple(x.shape[:axis]) + (1,) * (r - axis)
        shp = tuple(x.shape)
        mean, d, d2, var, ve, inv, nrm = (self.tmp(s, F32, "ln") for s in (stat, shp, shp, stat, stat, stat, shp))
        self.op(S.MEAN, [xi, axes], [mean], S.OPT_REDUCER, [(0, "i8", 1)])
        self.op(S.SUB, [xi, mean], [d], S.OPT_SUB, [])
        self.op(S.MUL, [d, d], [d2], S.OPT_MUL, [])
        self.op(S.MEAN, [d2, axes], [var], S.OPT_REDUCER, [(0, "i8", 1)])
        self.op(S.ADD, [var, self.const(np.float32(eps), "eps")], [ve], S.OPT_ADD, [])
        self.op(S.RSQRT, [ve], [inv])
        self.op(S.MUL, [d, inv], [nrm], S.OPT_MUL, [])
        norm_shape = x.shape[axis:]

        def vec(i):
            t = g.tensors[node.inputs[i]]
            if t.is_const:
                return self.const(t.data.reshape(norm_shape).astype(np.float32), node.inputs[i])
            raise _Unsupported("non-constant scale or bias")
        has_bias = len(node.inputs) > 2 and node.inputs[2]
        out = self.out(node.outputs[0])
        scaled = self.tmp(shp, F32, "ln") if has_bias else out
        self.op(S.MUL, [nrm, vec(1)], [scaled], S.OPT_MUL, [])
        if has_bias:
            self.op(S.ADD, [scaled, vec(2)], [out], S.OPT_ADD, [])

    def op_spmm(self, node):
        """edgert's sparse form of a 1x1 conv2d, gemm or matmul (edgert/converter/ops/spmm.py), with
        its CSR weights expanded to the dense layer."""
        g = self.g
        x = g.tensors[node.inputs[0]]
        vals, cols, rows = (g.tensors[i].data for i in node.inputs[1:4])
        k, p = int(node.attrs["k"]), int(node.attrs["p"])
        r = len(rows) - 1
        dense = np.zeros((r, k), np.float32)
        for i in range(r):
            dense[i, cols[rows[i]:rows[i + 1]]] = vals[rows[i]:rows[i + 1]]
        bias = (g.tensors[node.inputs[4]].data.astype(np.float32) if len(node.inputs) > 4 and node.inputs[4]
                else np.zeros(r, np.float32))
        y = g.tensors[node.outputs[0]]
        act = self._act_of(node.attrs)
        if p > 1:  # 1x1 convolution on NCHW X [N, K, H, W]
            if len(x.shape) != 4 or x.shape[1] != k or x.shape[2] * x.shape[3] != p or len(y.shape) != 4:
                raise _Unsupported("a spatial spmm that is not a 1x1 convolution")
            xi = self.get(node.inputs[0], "nhwc")
            fi, bi = self.const(dense.reshape(r, 1, 1, k), "filter"), self.const(bias, "bias")
            self.with_act(*act, self.out(node.outputs[0], "nhwc"), lambda dst, fused: self.op(
                S.CONV_2D, [xi, fi, bi], [dst], S.OPT_CONV2D,
                [(0, "i8", S.PADDING_VALID), (1, "i32", 1), (2, "i32", 1), (3, "i8", fused), (4, "i32", 1),
                 (5, "i32", 1)]))
            return
        rows_n = x.numel // k
        xi = self.get(node.inputs[0], "nchw")
        if tuple(x.shape) != (rows_n, k):
            x2 = self.tmp((rows_n, k), F32, "spmm_in")
            self.op(S.RESHAPE, [xi, self.i32((rows_n, k))], [x2], S.OPT_RESHAPE, [(0, "vec_i32", [rows_n, k])])
            xi = x2
        out = self.out(node.outputs[0])
        if tuple(y.shape) == (rows_n, r):
            self.with_act(*act, out, lambda dst, fused: self._fc(xi, dense, bias, (rows_n, r), dst, fused, False))
            return
        y2 = self.tmp((rows_n, r), F32, "spmm_out")
        self.with_act(*act, y2, lambda dst, fused: self._fc(xi, dense, bias, (rows_n, r), dst, fused, False))
        self.op(S.RESHAPE, [y2, self.i32(y.shape)], [out], S.OPT_RESHAPE, [(0, "vec_i32", list(y.shape))])

    def op_copy(self, node):
        x = self.g.tensors[node.inputs[0]]
        layout = self.layout_of(node.inputs[0]) if len(x.shape) == 4 else "nchw"
        xi = self.get(node.inputs[0], layout)
        shape = list(self.shape_of(xi))
        self.op(S.RESHAPE, [xi, self.i32(shape)], [self.out(node.outputs[0], layout)], S.OPT_RESHAPE,
                [(0, "vec_i32", shape)])

    def op_batch_norm(self, node):
        g = self.g
        x = g.tensors[node.inputs[0]]
        if x.dtype != F32 or not all(g.tensors[i].is_const for i in node.inputs[1:5]):
            raise _Unsupported("float32 batch_norm with constant statistics")
        scale, bias, mean, var = (g.tensors[i].data.astype(np.float64) for i in node.inputs[1:5])
        k = scale / np.sqrt(var + float(node.attrs.get("epsilon", 1e-5)))
        b = bias - mean * k
        r = len(x.shape)
        layout = self.layout_of(node.inputs[0]) if r == 4 else "nchw"
        shape = (1, 1, 1, -1) if layout == "nhwc" else (1, -1) + (1,) * (r - 2)
        xi = self.get(node.inputs[0], layout)
        t = self.tmp(self.shape_of(xi), F32, "bn")
        self.op(S.MUL, [xi, self.const(k.astype(np.float32).reshape(shape), "bn_scale")], [t], S.OPT_MUL, [])
        self.op(S.ADD, [t, self.const(b.astype(np.float32).reshape(shape), "bn_shift")],
                [self.out(node.outputs[0], layout)], S.OPT_ADD, [])

    def op_gather(self, node):
        g = self.g
        data, idx = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]]
        if not idx.is_const:
            raise _Unsupported("non-constant indices")
        axis = int(node.attrs.get("axis", 0)) % len(data.shape)
        ind = idx.data.astype(np.int64)
        ind = np.where(ind < 0, ind + data.shape[axis], ind).astype(np.int32)
        self.op(S.GATHER, [self.get(node.inputs[0], "nchw"), self.const(ind, "indices")],
                [self.out(node.outputs[0])], S.OPT_GATHER, [(0, "i32", axis)])

    def op_conv_transpose2d(self, node):
        g = self.g
        a = node.attrs
        x, w = g.tensors[node.inputs[0]], g.tensors[node.inputs[1]]
        y = g.tensors[node.outputs[0]]
        if x.dtype != F32 or not w.is_const or a.get("rank1d", False):
            raise _Unsupported("float32 2-D transposed convolution with constant weights")
        if int(a.get("group", 1)) != 1 or tuple(int(v) for v in a.get("dilations", (1, 1))) != (1, 1):
            raise _Unsupported("grouped or dilated transposed convolution")
        n, c, h, wd = x.shape
        _, m, kh, kw = w.shape
        sh, sw = (int(v) for v in a.get("strides", (1, 1)))
        top, left, bottom, right = (int(v) for v in a.get("pads", (0, 0, 0, 0)))
        oph, opw = (int(v) for v in a.get("output_padding", (0, 0)))
        if oph > bottom or opw > right:
            raise _Unsupported("output_padding beyond the end pads")
        fh, fw = sh * (h - 1) + kh, sw * (wd - 1) + kw  # the uncropped (VALID) output
        xi = self.get(node.inputs[0], "nhwc")
        filt = np.ascontiguousarray(np.transpose(w.data, (1, 2, 3, 0)), np.float32)  # [M, kH, kW, C]
        full = (n, fh, fw, m)
        out = self.out(node.outputs[0], "nhwc")
        b = (g.tensors[node.inputs[2]].data.astype(np.float32) if len(node.inputs) > 2 and node.inputs[2]
             else np.zeros(m, np.float32))
        crop = (top, left, bottom - oph, right - opw) != (0, 0, 0, 0)

        def emit(dst, fused):
            t = self.tmp(full, F32, "deconv")
            self.op(S.TRANSPOSE_CONV, [self.i32(full, "output_shape"), self.const(filt, "filter"), xi], [t],
                    S.OPT_TRANSPOSE_CONV, [(0, "i8", S.PADDING_VALID), (1, "i32", sw), (2, "i32", sh)])
            if crop:
                c2 = self.tmp((n, y.shape[2], y.shape[3], m), F32, "deconv")
                self.op(S.STRIDED_SLICE, [t, self.i32([0, top, left, 0], "begin"),
                                          self.i32([n, top + y.shape[2], left + y.shape[3], m], "end"),
                                          self.i32([1, 1, 1, 1], "strides")], [c2], S.OPT_STRIDED_SLICE, [])
                t = c2
            self.op(S.ADD, [t, self.const(b.reshape(1, 1, 1, m), "bias")], [dst], S.OPT_ADD, [(0, "i8", fused)])
        self.with_act(*self._act_of(a), out, emit)

    def op_resize(self, node):
        from ..ops.resize import axis_table
        a = node.attrs
        x = self.g.tensors[node.inputs[0]]
        y = self.g.tensors[node.outputs[0]]
        if len(x.shape) != 4 or a.get("antialias", 0):
            raise _Unsupported("resize of rank-4 tensors without antialias only")
        for d in (0, 1):
            if axis_table(a, d, x.shape[d]) is not None:
                raise _Unsupported("resize of the batch or channel axis")
        mode = a["mode"]
        if mode not in ("nearest", "linear") or (mode == "linear" and x.dtype != F32):
            raise _Unsupported(f"resize mode {mode!r} on {x.dtype}")
        choice = None
        for align, hpc in ((False, False), (False, True), (True, False)):
            if all(self._tfl_resize_matches(mode, align, hpc, x.shape[d], y.shape[d], axis_table(a, d, x.shape[d]))
                   for d in (2, 3)):
                choice = (align, hpc)
                break
        if choice is None:
            raise _Unsupported(f"resize ({mode}, {a.get('coord')}, {a.get('nearest_mode')}) has no TFLite equivalent")
        xi = self.get(node.inputs[0], "nhwc")
        size = self.i32([y.shape[2], y.shape[3]], "size")
        if mode == "nearest":
            self.op(S.RESIZE_NEAREST_NEIGHBOR, [xi, size], [self.out(node.outputs[0], "nhwc")], S.OPT_RESIZE_NEAREST,
                    [(0, "i8", int(choice[0])), (1, "i8", int(choice[1]))])
        else:
            self.op(S.RESIZE_BILINEAR, [xi, size], [self.out(node.outputs[0], "nhwc")], S.OPT_RESIZE_BILINEAR,
                    [(2, "i8", int(choice[0])), (3, "i8", int(choice[1]))])

    @staticmethod
    def _tfl_resize_matches(mode, align, hpc, n_in, n_out, table) -> bool:
        """Whether TFLite's resize (align_corners, half_pixel_centers) reads the same
        input indices with the same weights as edgert's table along one axis."""
        o = np.arange(n_out, dtype=np.float64)
        scale = (n_in - 1) / (n_out - 1) if align and n_out > 1 else n_in / n_out
        if mode == "nearest":
            v = (o + 0.5) * scale if hpc else o * scale
            idx = np.minimum(np.round(v) if align else np.floor(v), n_in - 1).astype(np.int64)
            idx = np.maximum(idx, 0)
            ref = np.arange(n_in) if table is None else table[0][:, 0]
            return table is None and n_in == n_out and np.array_equal(idx, ref) or (
                table is not None and np.array_equal(idx, ref))
        v = (o + 0.5) * scale - 0.5 if hpc else o * scale
        v = np.maximum(v, 0.0) if hpc else v
        lo = np.floor(v).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        w_hi = v - lo
        dense = np.zeros((n_out, n_in))
        np.add.at(dense, (np.arange(n_out), np.minimum(lo, n_in - 1)), 1.0 - w_hi)
        np.add.at(dense, (np.arange(n_out), hi), w_hi)
        if table is None:
            return n_in == n_out and np.allclose(dense, np.eye(n_in), atol=1e-6)
        idx, w = table
        ref = np.zeros((n_out, n_in))
        np.add.at(ref, (np.repeat(np.arange(n_out), idx.shape[1]), idx.reshape(-1)), w.reshape(-1))
        return bool(np.allclose(dense, ref, atol=1e-6))
