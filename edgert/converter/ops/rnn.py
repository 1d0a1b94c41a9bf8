"""Recurrent layers: lstm, gru, rnn (one layer each, ONNX semantics).

Inputs (positions; "" marks an absent optional input; all float32):

    lstm: X, WP, RP, B, initial_h, initial_c, P
    gru:  X, WP, RP, B, initial_h
    rnn:  X, WP, RP, B, initial_h

with G gates (lstm 4 in order i o f c, gru 3 in order z r h, rnn 1), H = hidden_size,
D directions (2 for bidirectional, else 1), S time steps, N batch, I input features,
and the hidden units in P = ceil(H / 16) panels of 16 (Hp = 16 P, zeros past H):

    X          [S, N, I] (layout 0) or [N, S, I] (layout 1)
    WP         [D, P*G, I, 16] input weights, ONNX's W in 16-column panels:
                               WP[d, p*G + g, i, u] = W[d, g*H + p*16 + u, i] (0 when
                               p*16 + u >= H)
    RP         [D, P*G, H, 16] recurrence weights, ONNX's R in the same panels:
                               RP[d, p*G + g, k, u] = R[d, g*H + p*16 + u, k]
    B          [D, 2*G*H]      Wb (first G*H) then Rb; absent means zeros
    initial_h  [D, N, H] (layout 0) or [N, D, H] (layout 1); absent means zeros
    initial_c  same as initial_h (lstm only)
    P          [D, 3*H]        peepholes in order i o f (lstm only); absent means zeros

The panels (pack_panels) serve both products. Column c = (p*G + g)*16 + u of a
direction's weight matrix is gate g of hidden unit p*16 + u, so WP's panels are the
16-column panels the SGEMM reads in place (sgemm.h, bpanels) for the input projection of
every time step at once, and RP's G panels of hidden-unit block p are the G*16
consecutive outputs one step's recurrent product reads in order (k-major, 64 bytes a
row), ending with all gates of 16 units in registers for their activations. The ONNX
lowering packs constant weights at convert time and emits reshape/pad/transpose nodes
for runtime ones. B and the states keep ONNX's layouts; the summed bias Wb + Rb is
formed per run into scratch in panel order. sequence_lens is not an input: the ONNX
lowering accepts it only when it is constant and equal to S everywhere, and drops it.

Outputs: lstm Y, Y_h, Y_c; gru and rnn Y, Y_h (always all of them):

    Y    [S, D, N, H] (layout 0) or [N, S, D, H] (layout 1)
    Y_h  [D, N, H]    (layout 0) or [N, D, H]    (layout 1): last hidden state
    Y_c  as Y_h: last cell state (lstm)

Attributes: direction ("forward" | "reverse" | "bidirectional"), hidden_size (int),
layout (0 | 1), clip (float > 0 or None), activations (list of D*A lowercase names, A =
3 for lstm (f g h), 2 for gru (f g), 1 for rnn (f), forward direction first),
activation_alpha / activation_beta (one float per activation, already resolved),
input_forget (lstm, 0 | 1), linear_before_reset (gru, 0 | 1).

Parameter words:

    0 direction (int: 0 forward, 1 reverse, 2 bidirectional)
    1 hidden_size (int)
    2 layout (int)
    3 has_clip (int 0 | 1)
    4 clip (float; used when has_clip)
    5 input_forget (lstm) | linear_before_reset (gru) | 0 (rnn) (int)
    6 + 3*k  activation k (k < D*A): kind (int, ACT_KINDS index), alpha (float), beta (float)

Scratch (float32 words; scratch_floats):

    proj [D][S*N][G*Hp]   X W' + bias of every row of X, per direction, panel order
    bias [D][G*Hp]        Wb + Rb (gru with linear_before_reset: without Rb of the h gate)
    extra [D][3*Hp]       gru: Rb of the h gate, padded; lstm: peepholes as [P][3][16]
    h [2][D][N*Hp]        the state, double-buffered (one step reads one, writes the other)
    aux [A][D][N*Hp]      lstm (A = 1): the cell state; gru (A = 2): r*h, then z; rnn: none

The projection's SGEMM reads A (X) and B (WP) in place and needs no scratch of its own.

Semantics (per direction; clip(x) = min(max(x, -clip), clip) when clip is set, applied
to each gate's whole pre-activation, after peepholes):

    lstm  i = f(Xi Wi' + h Ri' + Pi*c + Wbi + Rbi);  f_ = f(... Pf*c ...) or 1 - i when
          input_forget;  g_ = g(Xc Wc' + h Rc' + Wbc + Rbc);  c' = f_*c + i*g_;
          o = f(Xo Wo' + h Ro' + Po*c' + Wbo + Rbo);  h' = o*h(c')
    gru   z = f(Xz Wz' + h Rz' + Wbz + Rbz);  r = f(Xr Wr' + h Rr' + Wbr + Rbr);
          lbr 0: n = g(Xh Wh' + (r*h) Rh' + Rbh + Wbh);
          lbr 1: n = g(Xh Wh' + r*(h Rh' + Rbh) + Wbh);  h' = (1 - z)*n + z*h
    rnn   h' = f(X Wi' + h Ri' + Wbi + Rbi)
"""
from __future__ import annotations

import numpy as np

from .registry import OpUnsupported, register

DIRECTIONS = ("forward", "reverse", "bidirectional")

# Activation kinds (parameter word values) and how many of (alpha, beta) each uses.
ACT_KINDS = ("sigmoid", "tanh", "relu", "hardsigmoid", "leakyrelu", "affine", "thresholdedrelu",
             "scaledtanh", "elu", "softsign", "softplus")
ACT_PARAMS = {"sigmoid": 0, "tanh": 0, "relu": 0, "hardsigmoid": 2, "leakyrelu": 1, "affine": 2,
              "thresholdedrelu": 1, "scaledtanh": 2, "elu": 1, "softsign": 0, "softplus": 0}
# Defaults of the matching ONNX operators; None: the value must be given explicitly.
ACT_DEFAULTS = {"hardsigmoid": (0.2, 0.5), "leakyrelu": (0.01, None), "elu": (1.0, None),
                "affine": (None, None), "thresholdedrelu": (None, None), "scaledtanh": (None, None)}

GATES = {"lstm": 4, "gru": 3, "rnn": 1}
N_ACT = {"lstm": 3, "gru": 2, "rnn": 1}
DEFAULT_ACTS = {"lstm": ["sigmoid", "tanh", "tanh"], "gru": ["sigmoid", "tanh"], "rnn": ["tanh"]}
N_INPUTS = {"lstm": 7, "gru": 5, "rnn": 5}
N_OUTPUTS = {"lstm": 3, "gru": 2, "rnn": 2}


def resolve_activations(op: str, direction: str, names: list[str] | None, alphas: list[float] | None,
                        betas: list[float] | None) -> tuple[list[str], list[float], list[float]]:
    """Normalizes ONNX activation attributes to one (name, alpha, beta) per activation slot.

    alpha and beta values are consumed in order by the activations that use them (as
    onnxruntime does); more values than users is rejected. Raises OpUnsupported."""
    dirs = 2 if direction == "bidirectional" else 1
    n = N_ACT[op]
    if not names:
        names = DEFAULT_ACTS[op] * dirs
    names = [s.lower() for s in names]
    if len(names) != n * dirs:
        raise OpUnsupported(f"{op}: expected {n * dirs} activations, got {len(names)}")
    unknown = [s for s in names if s not in ACT_PARAMS]
    if unknown:
        raise OpUnsupported(f"{op}: unsupported activation(s) {unknown}")
    alphas, betas = list(alphas or []), list(betas or [])
    a_users = sum(1 for s in names if ACT_PARAMS[s] >= 1)
    b_users = sum(1 for s in names if ACT_PARAMS[s] >= 2)
    if len(alphas) > a_users or len(betas) > b_users:
        raise OpUnsupported(f"{op}: activation_alpha/activation_beta have more values than the activations "
                            f"{names} use")
    ai, bi = iter(alphas), iter(betas)
    out_a, out_b = [], []
    for s in names:
        da, db = ACT_DEFAULTS.get(s, (0.0, 0.0))
        a = next(ai, None) if ACT_PARAMS[s] >= 1 else 0.0
        b = next(bi, None) if ACT_PARAMS[s] >= 2 else 0.0
        a = da if a is None else a
        b = db if b is None else b
        if a is None or b is None:
            raise OpUnsupported(f"{op}: activation {s} needs explicit activation_alpha/activation_beta values")
        out_a.append(float(a))
        out_b.append(float(b))
    return names, out_a, out_b


# ---- shapes -----------------------------------------------------------------------

def _dims(node, graph):
    """(S, N, I, D, H) after checking every input's dtype and shape; OpUnsupported otherwise."""
    op = node.op
    G = GATES[op]
    a = node.attrs
    if a.get("direction", "forward") not in DIRECTIONS:
        raise OpUnsupported(f"{op}: direction {a.get('direction')!r}")
    if a.get("layout", 0) not in (0, 1):
        raise OpUnsupported(f"{op}: layout {a.get('layout')!r}")
    D = 2 if a.get("direction", "forward") == "bidirectional" else 1
    H = int(a["hidden_size"])
    if H <= 0:
        raise OpUnsupported(f"{op}: hidden_size must be positive, got {H}")
    clip = a.get("clip")
    if clip is not None and not (np.isfinite(clip) and clip > 0):
        raise OpUnsupported(f"{op}: clip must be a positive finite number, got {clip}")
    flag = a.get("input_forget", 0) if op == "lstm" else a.get("linear_before_reset", 0) if op == "gru" else 0
    if flag not in (0, 1):
        raise OpUnsupported(f"{op}: input_forget/linear_before_reset must be 0 or 1, got {flag}")
    acts = a.get("activations") or []
    n_act = N_ACT[op] * D
    if len(acts) != n_act or any(s not in ACT_KINDS for s in acts):
        raise OpUnsupported(f"{op}: activations {acts} (need {n_act} of {ACT_KINDS})")
    for key in ("activation_alpha", "activation_beta"):
        if len(a.get(key) or []) != n_act:
            raise OpUnsupported(f"{op}: {key} needs {n_act} values")
    ins = list(node.inputs) + [""] * (N_INPUTS[op] - len(node.inputs))
    if len(ins) != N_INPUTS[op]:
        raise OpUnsupported(f"{op}: takes {N_INPUTS[op]} inputs, got {len(ins)}")
    for k, name in enumerate(ins):
        if name and graph.tensors[name].dtype != np.float32:
            raise OpUnsupported(f"{op}: input {k} has dtype {graph.tensors[name].dtype}, only float32 is supported")
    for k in range(3):
        if not ins[k]:
            raise OpUnsupported(f"{op}: input {k} (X, WT, RT) is required")
    xs = graph.tensors[ins[0]].shape
    if len(xs) != 3:
        raise OpUnsupported(f"{op}: X must have rank 3, got shape {xs}")
    layout = a.get("layout", 0)
    S, N, I = (xs[0], xs[1], xs[2]) if layout == 0 else (xs[1], xs[0], xs[2])
    if min(S, N, I) <= 0:
        raise OpUnsupported(f"{op}: empty X {xs}")
    hshape = (D, N, H) if layout == 0 else (N, D, H)
    PG = padded(H) // PANEL * G
    want = {1: (D, PG, I, PANEL), 2: (D, PG, H, PANEL), 3: (D, 2 * G * H), 4: hshape}
    if op == "lstm":
        want.update({5: hshape, 6: (D, 3 * H)})
    for k, shape in want.items():
        if ins[k] and graph.tensors[ins[k]].shape != shape:
            raise OpUnsupported(f"{op}: input {k} has shape {graph.tensors[ins[k]].shape}, expected {shape}")
    return S, N, I, D, H


def _infer(node, graph):
    S, N, _I, D, H = _dims(node, graph)
    layout = node.attrs.get("layout", 0)
    y = (S, D, N, H) if layout == 0 else (N, S, D, H)
    yh = (D, N, H) if layout == 0 else (N, D, H)
    f32 = np.dtype(np.float32)
    return [(y, f32)] + [(yh, f32)] * (N_OUTPUTS[node.op] - 1)


def _pack(node, graph):
    a = node.attrs
    words: list = [DIRECTIONS.index(a.get("direction", "forward")), int(a["hidden_size"]), int(a.get("layout", 0))]
    clip = a.get("clip")
    words += [0 if clip is None else 1, float(0.0 if clip is None else clip)]
    words.append(int(a.get("input_forget", 0) if node.op == "lstm" else a.get("linear_before_reset", 0)
                     if node.op == "gru" else 0))
    for s, al, be in zip(a["activations"], a["activation_alpha"], a["activation_beta"]):
        words += [ACT_KINDS.index(s), float(al), float(be)]
    return words


PANEL = 16  # hidden units per weight panel (rnn_common.h, ERT_RNN_PANEL)
AUX = {"lstm": 1, "gru": 2, "rnn": 0}


def padded(H: int) -> int:
    """Hp: H rounded up to whole panels."""
    return -(-H // PANEL) * PANEL


def pack_panels(v: np.ndarray, G: int, H: int) -> np.ndarray:
    """ONNX's W [D, G*H, K] or R [D, G*H, H] as panels [D, P*G, K, 16] (zeros past H)."""
    D, _, K = v.shape
    Hp = padded(H)
    a = np.zeros((D, G, Hp, K), v.dtype)
    a[:, :, :H] = v.reshape(D, G, H, K)
    a = a.reshape(D, G, Hp // PANEL, PANEL, K).transpose(0, 2, 1, 4, 3)
    return np.ascontiguousarray(a.reshape(D, (Hp // PANEL) * G, K, PANEL))


def unpack_panels(a: np.ndarray, G: int, H: int) -> np.ndarray:
    """pack_panels' inverse: [D, P*G, K, 16] -> [D, G*H, K]."""
    D, PG, K, _ = a.shape
    P = PG // G
    v = a.reshape(D, P, G, K, PANEL).transpose(0, 2, 1, 4, 3).reshape(D, G, P * PANEL, K)[:, :, :H]
    return np.ascontiguousarray(v.reshape(D, G * H, K))


def scratch_floats(op: str, S: int, N: int, H: int, D: int = 1) -> int:
    G, Hp = GATES[op], padded(H)
    return D * (S * N * G * Hp + (G + 3) * Hp + N * Hp * (2 + AUX[op]))


def _scratch(node, graph):
    S, N, _I, D, H = _dims(node, graph)
    return 4 * scratch_floats(node.op, S, N, H, D)


# ---- numpy meaning ------------------------------------------------------------------

def act_apply(name: str, alpha: float, beta: float, x: np.ndarray) -> np.ndarray:
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "tanh":
        return np.tanh(x)
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "hardsigmoid":
        return np.clip(alpha * x + beta, 0.0, 1.0)
    if name == "leakyrelu":
        return np.where(x >= 0, x, alpha * x)
    if name == "affine":
        return alpha * x + beta
    if name == "thresholdedrelu":
        return np.where(x > alpha, x, 0.0)
    if name == "scaledtanh":
        return alpha * np.tanh(beta * x)
    if name == "elu":
        return np.where(x >= 0, x, alpha * (np.exp(x) - 1.0))
    if name == "softsign":
        return x / (1.0 + np.abs(x))
    if name == "softplus":
        return np.logaddexp(0.0, x)
    raise OpUnsupported(f"activation {name!r}")


def _reference(node, inputs):
    op = node.op
    a = node.attrs
    G = GATES[op]
    H = int(a["hidden_size"])
    layout = a.get("layout", 0)
    direction = a.get("direction", "forward")
    D = 2 if direction == "bidirectional" else 1
    clip = a.get("clip")
    acts = list(zip(a["activations"], a["activation_alpha"], a["activation_beta"]))
    nA = N_ACT[op]
    ins = list(inputs) + [None] * (N_INPUTS[op] - len(inputs))
    X = np.asarray(ins[0], np.float64)
    if layout == 1:
        X = X.transpose(1, 0, 2)
    S, N, _ = X.shape
    W = unpack_panels(np.asarray(ins[1], np.float64), G, H)  # ONNX layouts [D, G*H, *]
    R = unpack_panels(np.asarray(ins[2], np.float64), G, H)
    B = np.zeros((D, 2 * G * H)) if ins[3] is None else np.asarray(ins[3], np.float64)

    def state(v):
        if v is None:
            return np.zeros((D, N, H))
        v = np.asarray(v, np.float64)
        return v.transpose(1, 0, 2) if layout == 1 else v

    h0 = state(ins[4])
    c0 = state(ins[5]) if op == "lstm" else None
    P = (np.zeros((D, 3 * H)) if op != "lstm" or ins[6] is None else np.asarray(ins[6], np.float64))

    def cl(x):
        return x if clip is None else np.clip(x, -clip, clip)

    Y = np.zeros((S, D, N, H))
    Yh = np.zeros((D, N, H))
    Yc = np.zeros((D, N, H))
    for d in range(D):
        f, g, hh = (acts[d * nA + k] if k < nA else None for k in range(3))
        Wb, Rb = B[d, :G * H], B[d, G * H:]
        h = h0[d].copy()
        c = c0[d].copy() if c0 is not None else None
        steps = range(S) if (direction == "forward" or (direction == "bidirectional" and d == 0)) \
            else range(S - 1, -1, -1)
        for t in steps:
            xw = X[t] @ W[d].T + Wb
            hr = h @ R[d].T
            if op == "lstm":
                pre = xw + hr + Rb
                gi, go, gf, gc = (pre[:, k * H:(k + 1) * H] for k in range(4))
                pi, po, pf = (P[d, k * H:(k + 1) * H] for k in range(3))
                i = act_apply(*f, cl(gi + pi * c))
                fg = 1.0 - i if a.get("input_forget", 0) else act_apply(*f, cl(gf + pf * c))
                c = fg * c + i * act_apply(*g, cl(gc))
                o = act_apply(*f, cl(go + po * c))
                h = o * act_apply(*hh, c)
            elif op == "gru":
                z = act_apply(*f, cl(xw[:, :H] + hr[:, :H] + Rb[:H]))
                r = act_apply(*f, cl(xw[:, H:2 * H] + hr[:, H:2 * H] + Rb[H:2 * H]))
                Rh, Rbh = R[d, 2 * H:], Rb[2 * H:]
                if a.get("linear_before_reset", 0):
                    n = act_apply(*g, cl(xw[:, 2 * H:] + r * (h @ Rh.T + Rbh)))
                else:
                    n = act_apply(*g, cl(xw[:, 2 * H:] + (r * h) @ Rh.T + Rbh))
                h = (1.0 - z) * n + z * h
            else:
                h = act_apply(*f, cl(xw + hr + Rb))
            Y[t, d] = h
        Yh[d] = h
        if c is not None:
            Yc[d] = c
    outs = [Y, Yh, Yc][:N_OUTPUTS[op]]
    if layout == 1:
        outs = [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]
    return [np.ascontiguousarray(o, dtype=np.float32) for o in outs]


for _op in ("lstm", "gru", "rnn"):
    register(_op, infer=_infer, pack=_pack, reference=_reference, scratch=_scratch)
