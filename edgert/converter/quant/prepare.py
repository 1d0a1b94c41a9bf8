"""Float-to-float rewrites that give the int8 rewrite its shapes, run before
calibration (so that every tensor the int8 graph quantizes is observed):

- a fused activation that int8 outputs cannot fold (anything but none, relu, clip)
  is split off conv2d, gemm, matmul and add into its own node (computed by table);
- a transposed convolution whose windows tile the output (kernel = strides, no pads or
  dilation, one group) becomes a 1x1 conv2d to b*b times the channels and a CRD
  depth_to_space (b the stride): the int8 convolution and a byte shuffle, where the
  transposed convolution has no int8 form;
- matmul with a constant 2-D B becomes gemm (between reshapes when A has rank > 2),
  with the bias add after it as the gemm's C.

Nodes named in `keep` are left alone.
"""
from __future__ import annotations

import numpy as np

from .. import ops as edgert_ops
from ..ir import Graph, Node
from ..ops.activation import act_kind

# fused activation kind -> (unary op, attrs from (a, b))
_ACT_OPS = {
    3: ("hard_sigmoid", lambda a, b: {"alpha": a, "beta": b}),
    4: ("hard_swish", lambda a, b: {}),
    5: ("sigmoid", lambda a, b: {}),
    6: ("silu", lambda a, b: {}),
    7: ("leaky_relu", lambda a, b: {"alpha": a}),
    8: ("tanh", lambda a, b: {}),
    9: ("gelu", lambda a, b: {"approximate": "none"}),
}


def _add(g: Graph, op: str, inputs: list[str], output: str, attrs: dict, name: str) -> Node:
    node = Node(op, inputs, [output], attrs, name)
    (shape, dt), = edgert_ops.get(op).infer(node, g)
    if output not in g.tensors:
        g.add_tensor(output, shape, dt)
    return node


def split_activations(g: Graph, keep=()) -> bool:
    out: list[Node] = []
    changed = False
    for node in g.nodes:
        kind = act_kind(node.attrs.get("act")) if node.op in ("conv2d", "gemm", "matmul", "add") else 0
        if kind in _ACT_OPS and node.name not in keep:
            op, attrs = _ACT_OPS[kind]
            y = node.outputs[0]
            pre = g.unique_name(f"{y}_preact")
            g.add_tensor(pre, g.tensors[y].shape, g.tensors[y].dtype)
            node.outputs = [pre]
            a, b = float(node.attrs.get("act_a") or 0.0), float(node.attrs.get("act_b") or 0.0)
            for k in ("act", "act_a", "act_b"):
                node.attrs.pop(k, None)
            out.append(node)
            out.append(Node(op, [pre], [y], attrs(a, b), f"{node.name}_{op}"))
            changed = True
        else:
            out.append(node)
    g.nodes = out
    return changed


def _bias_add(g: Graph, node: Node, consumers: dict, outputs: set, keep) -> tuple[Node, np.ndarray] | None:
    """The add that is the only reader of matmul `node`'s output and adds a constant
    vector along its last dim, and that vector ([N]); None when there is none."""
    y = node.outputs[0]
    readers = consumers.get(y, [])
    if len(readers) != 1 or y in outputs or act_kind(node.attrs.get("act")) != 0:
        return None
    add = readers[0]
    if add.op != "add" or add.name in keep or len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
        return None
    c = g.const(add.inputs[1] if add.inputs[0] == y else add.inputs[0])
    shape = g.tensors[y].shape
    n = shape[-1]
    if (c is None or c.dtype != np.float32 or c.size != n or c.ndim > len(shape) or (c.ndim and c.shape[-1] != n)
            or tuple(g.tensors[add.outputs[0]].shape) != tuple(shape)):
        return None
    return add, c.reshape(n)


def matmul_to_gemm(g: Graph, keep=()) -> bool:
    """Also folds a bias add after the matmul into the gemm's C (the int8 gemm adds it
    in its int32 accumulator instead of a requantizing int8 add)."""
    out: list[Node] = []
    changed = False
    consumers = g.consumers()
    outputs = set(g.outputs)
    folded: set[int] = set()
    for node in g.nodes:
        if id(node) in folded:
            continue
        b = g.const(node.inputs[1]) if node.op == "matmul" and len(node.inputs) == 2 else None
        a_shape = g.tensors[node.inputs[0]].shape if node.op == "matmul" else ()
        if b is None or b.ndim != 2 or len(a_shape) < 2 or node.name in keep or b.dtype != np.float32:
            out.append(node)
            continue
        k, n = b.shape
        attrs = {k2: v for k2, v in node.attrs.items() if k2 in ("act", "act_a", "act_b")}
        ins = list(node.inputs)
        y = node.outputs[0]
        bias = _bias_add(g, node, consumers, outputs, keep)
        if bias is not None:
            add, c = bias
            folded.add(id(add))
            ins.append(g.add_const(c, f"{node.name}_bias"))
            attrs = {k2: v for k2, v in add.attrs.items() if k2 in ("act", "act_a", "act_b")}
            y = add.outputs[0]
        if len(a_shape) == 2:
            out.append(Node("gemm", ins, [y], attrs, node.name))
        else:
            rows = int(np.prod(a_shape[:-1]))
            a2 = g.unique_name(f"{node.inputs[0]}_2d")
            y2 = g.unique_name(f"{y}_2d")
            out.append(_add(g, "reshape", [node.inputs[0]], a2, {"shape": [rows, k]}, f"{node.name}_flatten"))
            g.add_tensor(y2, (rows, n), np.float32)
            out.append(Node("gemm", [a2, *ins[1:]], [y2], attrs, node.name))
            out.append(Node("reshape", [y2], [y], {"shape": list(g.tensors[y].shape)}, f"{node.name}_unflatten"))
        changed = True
    g.nodes = out
    return changed


def tiling_transposed_to_conv(g: Graph, keep=()) -> bool:
    """Y[n, m, b*i + p, b*j + q] = B[m] + sum over c of X[n, c, i, j] W[c, m, p, q] is
    the 1x1 convolution with weights W'[m*b*b + p*b + q, c] = W[c, m, p, q] (bias B[m]
    repeated), then depth_to_space in CRD order."""
    out: list[Node] = []
    changed = False
    for node in g.nodes:
        a = node.attrs
        w = g.const(node.inputs[1]) if node.op == "conv_transpose2d" and len(node.inputs) >= 2 else None
        bias = g.const(node.inputs[2]) if w is not None and len(node.inputs) > 2 and node.inputs[2] else None
        kh, kw = (int(v) for v in a.get("kernel", (0, 0)))
        if (w is None or w.ndim != 4 or w.dtype != np.float32 or node.name in keep or a.get("rank1d")
                or int(a.get("group", 1)) != 1 or kh != kw or kh < 2
                or [int(v) for v in a.get("strides", (1, 1))] != [kh, kw]
                or any(int(v) != 1 for v in a.get("dilations", (1, 1)))
                or any(int(v) for v in a.get("pads", (0, 0, 0, 0)))
                or any(int(v) for v in a.get("output_padding", (0, 0)))
                or (len(node.inputs) > 2 and node.inputs[2] and bias is None)):
            out.append(node)
            continue
        c, m = w.shape[:2]
        w1 = np.ascontiguousarray(w.transpose(1, 2, 3, 0).reshape(m * kh * kw, c, 1, 1))
        ins = [node.inputs[0], g.add_derived_const(w1, node.inputs[1], f"{node.inputs[1]}_1x1")]
        if bias is not None:
            ins.append(g.add_const(np.repeat(bias.astype(np.float32), kh * kw), f"{node.name}_bias"))
        attrs = {"group": 1, "kernel": [1, 1], "strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
        attrs.update({k: v for k, v in a.items() if k in ("act", "act_a", "act_b")})
        y = node.outputs[0]
        t = g.unique_name(f"{y}_blocks")
        out.append(_add(g, "conv2d", ins, t, attrs, node.name))
        out.append(_add(g, "depth_to_space", [t], y, {"blocksize": kh, "mode": "CRD"}, f"{node.name}_shuffle"))
        changed = True
    g.nodes = out
    return changed


def prepare_for_int8(g: Graph, keep=()) -> None:
    tiling_transposed_to_conv(g, keep)
    split_activations(g, keep)
    matmul_to_gemm(g, keep)
    g.toposort()
