"""ONNX LSTM, GRU and RNN lower to edgert's lstm, gru and rnn (edgert/converter/ops/rnn.py).

The edgert ops take W and R transposed (WT [D, I, G*H], RT [D, H, G*H]): constant
weights are transposed here, runtime ones through a transpose node. B, initial states
and peepholes keep ONNX's layouts. The lowering also normalizes attributes (activation
names and their alpha/beta per slot), drops a sequence_lens that is constant and equal
to the sequence length everywhere (anything else is rejected), and names absent ONNX
outputs freshly.
"""
from __future__ import annotations

import numpy as np

from ...ops.rnn import N_INPUTS, N_OUTPUTS, resolve_activations
from ..onnx_import import LowerCtx, lower

_OPS = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}


@lower("LSTM", "GRU", "RNN")
def _rnn(ctx: LowerCtx) -> None:
    op = _OPS[ctx.op_type]
    common = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")
    extra = {"lstm": ("input_forget",), "gru": ("linear_before_reset",), "rnn": ()}[op]
    ctx.only_attrs(*common, *extra)
    if not ctx.has_attr("hidden_size"):
        ctx.fail("hidden_size attribute is required")
    direction = ctx.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        ctx.fail(f"direction {direction!r} is not supported")
    layout = ctx.attr("layout", 0)
    if layout not in (0, 1):
        ctx.fail(f"layout {layout} is not supported")
    names, alphas, betas = resolve_activations(op, direction, ctx.attr("activations"),
                                               ctx.attr("activation_alpha"), ctx.attr("activation_beta"))
    attrs = {"direction": direction, "hidden_size": int(ctx.attr("hidden_size")), "layout": layout,
             "clip": ctx.attr("clip"), "activations": names, "activation_alpha": alphas,
             "activation_beta": betas}
    if op == "lstm":
        attrs["input_forget"] = ctx.attr("input_forget", 0)
    if op == "gru":
        attrs["linear_before_reset"] = ctx.attr("linear_before_reset", 0)
    if attrs["clip"] is not None and not (np.isfinite(attrs["clip"]) and attrs["clip"] > 0):
        ctx.fail(f"clip must be a positive number, got {attrs['clip']}")

    if ctx.n_inputs > N_INPUTS[op] + 1:
        ctx.fail(f"too many inputs ({ctx.n_inputs})")
    if ctx.has(4):  # sequence_lens
        lens = ctx.const(4)
        if lens is None:
            ctx.fail("sequence_lens depends on runtime data; only constant lengths equal to the sequence length "
                     "are supported")
        x = ctx.shape(0)
        if len(x) != 3:
            ctx.fail(f"X must have rank 3, got shape {x}")
        seq = x[0] if layout == 0 else x[1]
        if not np.all(np.asarray(lens) == seq):
            ctx.fail(f"sequence_lens {np.asarray(lens).tolist()} differ from the sequence length {seq}; "
                     "variable lengths are not supported")
        xd = ctx.sym_dims(0) if ctx.bounded else None
        if ctx.bounded:
            sym_seq = xd[0 if layout == 0 else 1] if xd is not None else None
            lens_sym = ctx.sym_const(4)
            if lens_sym is not None and sym_seq is not None and all(e == sym_seq for e in lens_sym.reshape(-1)):
                pass  # the sequence length at every size (computed from Shape): dropped
            elif not ctx.from_size(4) and sym_seq is not None and not sym_seq.is_const:
                ctx.fail(f"sequence_lens {np.asarray(lens).tolist()} is the sequence length at the upper bound "
                         f"only; bounded dimensions need lengths computed from the input's shape")
            elif sym_seq is None or not sym_seq.is_const:
                ctx.size_read = True  # not shown to hold at every size: the sample conversions decide
    # ONNX order: X W R B sequence_lens initial_h [initial_c P]; edgert drops sequence_lens.
    onnx_pos = [0, 1, 2, 3, 5, 6, 7][:N_INPUTS[op]]
    inputs = [ctx.input(k) for k in onnx_pos]
    for k in (1, 2):
        if len(ctx.shape(k)) != 3:
            ctx.fail(f"{'WR'[k - 1]} must have rank 3, got shape {ctx.shape(k)}")
        value = ctx.const(k)
        if value is not None:
            inputs[k] = ctx.derived_const(onnx_pos[k], "T021", lambda v: np.ascontiguousarray(v.transpose(0, 2, 1)),
                                          f"{inputs[k]}_T")
        else:
            inputs[k] = ctx.emit("transpose", [inputs[k]], {"perm": [0, 2, 1]})[0]
    # Absent ONNX outputs get fresh names (distinct from each other).
    outputs = list(ctx.outputs[:N_OUTPUTS[op]])
    outputs += [""] * (N_OUTPUTS[op] - len(outputs))
    outputs = [o or ctx.graph.unique_name(f"{ctx.name}_{op}_{label}_unused")
               for o, label in zip(outputs, ("y", "y_h", "y_c"))]
    ctx.emit(op, inputs, attrs, outputs=outputs)
