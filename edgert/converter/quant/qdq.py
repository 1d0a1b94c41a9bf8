"""Import of already-quantized ONNX models (no recalibration).

`strip(model)` reads the quantization an ONNX graph states and returns the float model
underneath plus those parameters (QdqParams), which the int8 rewrite then uses instead
of calibrated ranges:

- QOperator nodes (QLinearConv, QLinearMatMul) are first rewritten to their QDQ form:
  DequantizeLinear on the inputs, the float op, QuantizeLinear on the output;
- DequantizeLinear of a constant becomes the float constant; int8 weights (zero point
  0) and int32 biases are remembered, so the int8 graph uses exactly those values;
- a QuantizeLinear -> DequantizeLinear pair on an activation x is removed and gives x
  its (scale, zero point); uint8 quantization becomes the equivalent int8 one
  (q - 128, zero point - 128).

Pairs that do not fit (per-axis activations, a QuantizeLinear read by other nodes, a
quantized graph input or output) are left in the model: the importer lowers them to
quantize_linear / dequantize_linear and they run as such.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from ...errors import ConversionError

from .rewrite import WeightOverride

QOPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul"}


@dataclasses.dataclass
class QdqParams:
    qparams: dict[str, tuple[float, int]]
    weights: dict[str, WeightOverride]
    biases: dict[str, np.ndarray]


# Passes that merge an op with the activation after it: a QDQ model states the
# quantization of the tensor between them, which the merged op would lose.
_FUSIONS = {"fuse_activation", "fuse_hard_swish", "fuse_silu", "fuse_gelu"}


def optimize(g, max_rounds: int = 8) -> list[str]:
    """The converter's pass pipeline without the activation fusions, for a stripped QDQ
    model: each tensor the model quantizes stays a tensor."""
    from ..passes import PIPELINE

    applied: list[str] = []
    for _ in range(max_rounds):
        changed = False
        for p in PIPELINE:
            name = p.__name__.rsplit(".", 1)[-1]
            if name not in _FUSIONS and p.run(g):
                changed = True
                applied.append(name)
        if not changed:
            break
    g.toposort()
    return applied


def _load(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model, False
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model)), True
    return onnx.load(os.fspath(model)), True


def strip(model) -> tuple[Any, QdqParams | None]:
    """(float model, parameters) for a quantized model; (model, None) when the model
    holds no quantization ops (the argument is then returned unchanged)."""
    import onnx

    try:
        m, _ = _load(model)
    except Exception:
        return model, None  # the importer reports unreadable models
    if not any(n.op_type in QOPS and n.domain in ("", "ai.onnx") for n in m.graph.node):
        return model, None
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    return _Stripper(m2).run()


def _to_s8(q: np.ndarray, zp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if q.dtype == np.uint8:
        return (q.astype(np.int16) - 128).astype(np.int8), zp.astype(np.int32) - 128
    return q, zp.astype(np.int32)


class _Stripper:
    def __init__(self, m):

        from ..frontend.onnx_import import tensor_to_array

        self.m = m
        self.g = m.graph
        self.consts: dict[str, np.ndarray] = {i.name: tensor_to_array(i, f"initializer {i.name!r}")
                                              for i in self.g.initializer}
        for n in self.g.node:
            if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value" and n.output:
                self.consts[n.output[0]] = tensor_to_array(n.attribute[0].t, f"node {n.name!r}")
        self.qparams: dict[str, tuple[float, int]] = {}
        self.weights: dict[str, WeightOverride] = {}
        self.biases: dict[str, np.ndarray] = {}

    def _const(self, name: str):
        return self.consts.get(name) if name else None

    def _attr(self, node, name, default):
        for a in node.attribute:
            if a.name == name:
                return a.i
        return default

    def _qparams(self, node):
        """(scale array, zero point array or None, axis, block) of a Q/DQ node's
        constant parameters, or None when they are not constant."""
        s = self._const(node.input[1]) if len(node.input) > 1 else None
        z = self._const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if s is None or (len(node.input) > 2 and node.input[2] and z is None):
            return None
        s = np.asarray(s)
        if s.dtype.kind != "f" or s.ndim > 1 or s.size == 0 or (z is not None and (np.ndim(z) > 1 or np.size(z) != s.size)):
            raise ConversionError(f"{node.name or node.output[0]} ({node.op_type}): scale of shape {list(s.shape)} "
                                  f"and zero point of shape {list(np.shape(z))} do not match")
        return (s.astype(np.float32), None if z is None else np.asarray(z), self._attr(node, "axis", 1),
                self._attr(node, "block_size", 0))

    # ---- QOperator -> QDQ ------------------------------------------------------------

    def _qoperator_to_qdq(self) -> None:
        from onnx import helper

        out = []
        for n in self.g.node:
            if n.domain not in ("", "ai.onnx") or n.op_type not in ("QLinearConv", "QLinearMatMul"):
                out.append(n)
                continue
            ins = list(n.input) + [""] * 9
            if n.op_type == "QLinearConv":
                x, xs, xz, w, ws, wz, ys, yz, b = ins[:9]
            else:
                x, xs, xz, w, ws, wz, ys, yz = ins[:8]
                b = ""
            base = n.name or n.output[0]
            xd, wd, yf = f"{base}__x_f", f"{base}__w_f", f"{base}__y_f"
            w_axis = 0 if n.op_type == "QLinearConv" else 1
            out.append(helper.make_node("DequantizeLinear", [x, xs, xz], [xd], name=f"{base}__dqx"))
            out.append(helper.make_node("DequantizeLinear", [w, ws, wz], [wd], name=f"{base}__dqw", axis=w_axis))
            fins = [xd, wd]
            if b:
                bd = f"{base}__b_f"
                bs = self._const(xs)
                wsv = self._const(ws)
                if bs is None or wsv is None:
                    out.append(n)
                    continue
                bscale = f"{base}__b_scale"
                self.consts[bscale] = (np.float32(bs) * np.asarray(wsv, np.float32)).astype(np.float32).reshape(-1)
                self.g.initializer.append(_init(self.consts[bscale], bscale))
                out.append(helper.make_node("DequantizeLinear", [b, bscale], [bd], name=f"{base}__dqb", axis=0))
                fins.append(bd)
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            op = "Conv" if n.op_type == "QLinearConv" else "MatMul"
            out.append(helper.make_node(op, fins, [yf], name=base, **attrs))
            out.append(helper.make_node("QuantizeLinear", [yf, ys, yz], list(n.output), name=f"{base}__qy"))
        del self.g.node[:]
        self.g.node.extend(out)

    # ---- stripping -------------------------------------------------------------------

    def run(self):
        from onnx import helper

        self._qoperator_to_qdq()
        g = self.g
        outputs = {o.name for o in g.output}
        consumers: dict[str, list] = {}
        for n in g.node:
            for i in n.input:
                if i:
                    consumers.setdefault(i, []).append(n)
        rename: dict[str, str] = {}
        drop: set[int] = set()
        new_inits = []

        # DequantizeLinear of constants -> float constants (weights, biases)
        for n in g.node:
            if n.op_type != "DequantizeLinear" or n.domain not in ("", "ai.onnx"):
                continue
            q = self._const(n.input[0])
            p = self._qparams(n)
            if q is None or p is None or p[3]:
                continue
            s, z, axis, _ = p
            zz = np.zeros_like(s, dtype=np.int64) if z is None else z.astype(np.int64)
            shape = [1] * q.ndim
            if s.size > 1:
                if not -q.ndim <= axis < q.ndim or q.shape[axis] != s.size:
                    raise ConversionError(f"{n.name or n.output[0]} (DequantizeLinear): {s.size} scales do not "
                                          f"match axis {axis} of a tensor of shape {list(q.shape)}")
                axis %= q.ndim
                shape[axis] = -1
            real = ((q.astype(np.float32) - zz.astype(np.float32).reshape(shape)) *
                    s.reshape(shape)).astype(np.float32)
            name = n.output[0]
            if q.dtype == np.int8 and not np.any(zz):
                self.weights[name] = WeightOverride(q, s.reshape(-1), axis if s.size > 1 else None)
            elif q.dtype == np.int32 and not np.any(zz) and q.ndim == 1:
                self.biases[name] = q
            new_inits.append(_init(real, name))
            drop.add(id(n))

        # Q -> DQ pairs on activations
        for n in g.node:
            if n.op_type != "QuantizeLinear" or id(n) in drop or n.domain not in ("", "ai.onnx"):
                continue
            p = self._qparams(n)
            users = consumers.get(n.output[0], [])
            if p is None or p[3] or p[0].size != 1 or n.output[0] in outputs or not users:
                continue
            if any(u.op_type != "DequantizeLinear" for u in users):
                continue
            dps = [self._qparams(u) for u in users]
            if any(d is None or d[0].size != 1 for d in dps):
                continue
            s, z = float(p[0].reshape(-1)[0]), p[1]
            zq = np.zeros((), np.uint8) if z is None else z.reshape(-1)[:1]
            if zq.dtype not in (np.uint8, np.int8):
                continue
            zp = int(zq.reshape(-1)[0]) - (128 if zq.dtype == np.uint8 else 0)
            x = n.input[0]
            self.qparams.setdefault(x, (s, zp))
            drop.add(id(n))
            for u in users:
                drop.add(id(u))
                rename[u.output[0]] = x
                self.qparams.setdefault(u.output[0], (s, zp))

        # graph outputs that were DQ outputs: an Identity keeps the name
        extra = []
        for o in g.output:
            if o.name in rename:
                src = _resolve(rename, o.name)
                extra.append(helper.make_node("Identity", [src], [o.name], name=f"{o.name}__qdq_identity"))
                rename.pop(o.name)
        kept = []
        for n in g.node:
            if id(n) in drop:
                continue
            for k, i in enumerate(n.input):
                if i in rename:
                    n.input[k] = _resolve(rename, i)
            kept.append(n)
        del g.node[:]
        g.node.extend(kept + extra)
        done = {i.name for i in new_inits}
        keep_inits = [i for i in g.initializer if i.name not in done]
        del g.initializer[:]
        g.initializer.extend(keep_inits + new_inits)
        _topo(g)
        return self.m, QdqParams(self.qparams, self.weights, self.biases)


def _resolve(rename: dict[str, str], name: str) -> str:
    seen = set()
    while name in rename and name not in seen:
        seen.add(name)
        name = rename[name]
    return name


def _init(arr: np.ndarray, name: str):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.ascontiguousarray(arr), name)


def _topo(g) -> None:
    """Orders the nodes so each follows its inputs' producers (stable)."""
    ready = {i.name for i in g.initializer} | {i.name for i in g.input} | {""}
    pending = list(g.node)
    order = []
    while pending:
        rest = []
        for n in pending:
            if all(i in ready for i in n.input):
                order.append(n)
                ready.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            order.extend(rest)
            break
        pending = rest
    del g.node[:]
    g.node.extend(order)
