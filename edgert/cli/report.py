"""`edgert report`: one self-contained HTML page describing a converted model.

`collect` gathers plain data (JSON-able) from the file and from runs of it; `render`
turns that data into HTML with inline SVG and CSS and no script or network access.
Everything about the file comes from edgert.runtime.reader.read; times come from the C
runtime's per-node profile (edgert_session_run_profiled).
"""
from __future__ import annotations

import html
import json
import math
import os
from typing import Any

import numpy as np

from ..runtime import reader as fmt
from ..errors import EdgertError

# Ops that stand for several ONNX nodes merged by the converter's fusion passes.
FUSED_OPS = {"gelu", "silu", "hard_swish", "layer_norm", "lut", "spmm"}
# Where conv2d and gemm keep their fused activation kind, how many words their float
# layout has, and where an int8 layout (longer) keeps its output clamp (docs/ops.md).
ACT_WORDS = {"conv2d": (12, 15, 16), "gemm": (4, 7, 9), "matmul": (0, 3, None)}
ACT_NAMES = ["", "relu", "clip", "hard_sigmoid", "hard_swish", "sigmoid", "silu", "leaky_relu", "tanh", "gelu"]
# Colours of the backends a node can be assigned to (partitions); unknown ones get grey.
BACKEND_COLOURS = {"edgert": "#4c78a8", "cpu": "#4c78a8", "npu": "#f58518", "gpu": "#54a24b", "dsp": "#b279a2"}


# ---- data ----------------------------------------------------------------------------

def read_model(path: str | os.PathLike) -> tuple[bytes, dict]:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise EdgertError(f"{path}: no such file")
    with open(path, "rb") as f:
        data = f.read()
    return data, fmt.read(data)


def _elems(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def node_macs(info: dict, node: dict) -> int | None:
    """Multiply-adds of conv / gemm / matmul nodes from the file's shapes; None for other
    ops (their cost is mostly bytes moved)."""
    t = info["tensors"]
    op = node["op"]
    if not node["outputs"]:
        return None
    out = _elems(t[node["outputs"][0]]["shape"])
    ins = [t[i] if i is not None else None for i in node["inputs"]]
    if op in ("conv2d", "conv2d_s8") and len(ins) > 1 and ins[1] is not None:
        return out * _elems(ins[1]["shape"][1:])
    if op in ("gemm", "gemm_s8", "matmul", "matmul_s8") and ins and ins[0] is not None and ins[0]["shape"]:
        k = ins[0]["shape"][-1]
        if op.startswith("gemm") and node["params"].size and node["params"][0]:  # trans_a
            k = ins[0]["shape"][0]
        return out * int(k)
    return None


def fused_label(node: dict) -> str:
    """What the converter folded into this node ("" when nothing): a fused activation
    or an op that replaces a pattern of ONNX nodes."""
    op, p = node["op"], node["params"]
    if op in ACT_WORDS:
        act, n_float, lo = ACT_WORDS[op]
        if p.size == n_float and 0 < int(p[act]) < len(ACT_NAMES):
            return "+" + ACT_NAMES[int(p[act])]
        if lo is not None and p.size > lo + 1:
            if int(np.int32(p[lo])) > -128 or int(np.int32(p[lo + 1])) < 127:
                return "+clamp"
    if op in FUSED_OPS:
        return "fused"
    return ""


def layers(info: dict) -> list[int]:
    """Topological layer of every node: 0 for nodes reading only graph inputs and
    constants, else one more than the deepest producer of an input."""
    producer: dict[int, int] = {}
    depth = []
    for k, n in enumerate(info["nodes"]):
        d = 0
        for i in n["inputs"]:
            if i is not None and i in producer:
                d = max(d, depth[producer[i]] + 1)
        depth.append(d)
        for o in n["outputs"]:
            producer[o] = k
    return depth


def arena_timeline(info: dict) -> dict:
    """The arena plan read back from the file: one buffer per group of tensors sharing
    bytes on purpose (a node's first input and output at the same offset: view or
    in-place alias) and one per node scratch, each with its inclusive [first, last]
    step (node k runs at step k, graph outputs live to step len(nodes)), plus the live
    bytes at each step. max(live) is the planner's lower bound on the arena."""
    tensors, nodes = info["tensors"], info["nodes"]
    n = len(nodes)
    life: dict[int, list[int]] = {}
    for i in info["inputs"]:
        if tensors[i]["storage"] == "arena":
            life[i] = [0, 0]
    for k, node in enumerate(nodes):
        for i in node["inputs"]:
            if i is not None and tensors[i]["storage"] == "arena" and i in life:
                life[i][1] = max(life[i][1], k)
        for o in node["outputs"]:
            life[o] = [k, k]
    for o in info["outputs"]:
        if o in life:
            life[o][1] = max(life[o][1], n)
    parent = {t: t for t in life}

    def root(t: int) -> int:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    for node in nodes:
        if not node["inputs"] or node["inputs"][0] is None or len(node["outputs"]) != 1:
            continue
        src, dst = node["inputs"][0], node["outputs"][0]
        if src in life and dst in life and tensors[src]["offset"] == tensors[dst]["offset"] \
                and tensors[src]["nbytes"] == tensors[dst]["nbytes"] and tensors[src]["nbytes"] > 0:
            parent[root(dst)] = root(src)
    groups: dict[int, list[int]] = {}
    for t in life:
        groups.setdefault(root(t), []).append(t)
    buffers = []
    for r, members in groups.items():
        size = max(tensors[m]["nbytes"] for m in members)
        first = min(life[m][0] for m in members)
        last = max(life[m][1] for m in members)
        names = [tensors[m]["name"] for m in sorted(members, key=lambda m: life[m][0])]
        buffers.append({"kind": "tensor", "names": names, "offset": tensors[r]["offset"], "bytes": size,
                        "first": first, "last": last})
    for k, node in enumerate(nodes):
        off, size = node["scratch"]
        if size:
            buffers.append({"kind": "scratch", "names": [f"scratch of {node['name']}"], "offset": int(off),
                            "bytes": int(size), "first": k, "last": k})
    live = np.zeros(n + 1, np.int64)
    for b in buffers:
        live[b["first"]:b["last"] + 1] += b["bytes"]
    buffers.sort(key=lambda b: (b["first"], b["offset"]))
    return {"buffers": buffers, "live": [int(v) for v in live], "steps": n + 1,
            "lower_bound": int(live.max()) if len(live) else 0,
            "arena_bytes": int(info["arena_bytes"]),
            "file_lower_bound": int(info["arena_lower_bound_bytes"])}


def composition(info: dict) -> dict:
    """Weights per node and what int8 and sparse storage saved. A constant's stored
    bytes are its dense bytes, or for sparse storage its bitmap plus nonzero values
    (docs/sparse.md); its float32 bytes are 4 per element (what an fp32 file holds)."""
    tensors = info["tensors"]
    sparse_bytes = _sparse_stored(info)
    rows = []
    seen: set[int] = set()
    tot = {"fp32_bytes": 0, "dense_bytes": 0, "stored_bytes": 0}
    for node in info["nodes"]:
        r = {"node": node["name"], "op": node["op"], "tensors": [], "fp32_bytes": 0, "dense_bytes": 0,
             "stored_bytes": 0}
        for i in node["inputs"]:
            if i is None or i in seen or tensors[i]["storage"] == "arena":
                continue
            seen.add(i)
            t = tensors[i]
            el = _elems(t["shape"])
            stored = sparse_bytes.get(i, t["nbytes"])
            floaty = t["dtype"] in ("float32", "float16", "int8", "uint8")
            fp32 = 4 * el if floaty else t["nbytes"]
            r["tensors"].append({"name": t["name"], "dtype": t["dtype"], "shape": t["shape"],
                                 "storage": t["storage"], "bytes": t["nbytes"], "stored_bytes": stored})
            r["fp32_bytes"] += fp32
            r["dense_bytes"] += t["nbytes"]
            r["stored_bytes"] += stored
        for k in tot:
            tot[k] += r[k]
        if r["tensors"]:
            rows.append(r)
    tot["int8_saved"] = tot["fp32_bytes"] - tot["dense_bytes"]
    tot["sparse_saved"] = tot["dense_bytes"] - tot["stored_bytes"]
    tot["file_bytes"] = info["file_bytes"]
    return {"rows": rows, "totals": tot}


def _sparse_stored(info: dict) -> dict[int, int]:
    """Stored bytes of every sparse constant: ceil(elements / 8) bitmap bytes plus one
    element per nonzero (the count is in the tensor's sparse record)."""
    if "sparse" not in info["sections"]:
        return {}
    from ..fileformat import _RECORD, RECORD_SIZE

    raw = info.get("_raw")
    if raw is None:
        return {}
    sec = info["sections"]["sparse"]
    out = {}
    for k in range(sec["bytes"] // RECORD_SIZE):
        ti, _, _, _, nnz = _RECORD.unpack_from(raw, sec["offset"] + k * RECORD_SIZE)
        t = info["tensors"][ti]
        el = _elems(t["shape"])
        out[ti] = (el + 7) // 8 + int(nnz) * (t["nbytes"] // max(el, 1))
    return out


def profile_rows(model: str, sess=None, feeds: dict | None = None, runs: int = 20, warmup: int = 3) -> list[dict]:
    """The per-node table of `edgert bench --profile`: name, op, output shape, median ms
    over `runs`, share of the total, MACs (conv/gemm/matmul) and output bytes."""
    from .inputs import example_inputs
    from ..runtime.session import Session

    raw, info = read_model(model)
    sess = sess or Session(raw)
    feeds = feeds if feeds is not None else example_inputs(sess)
    prof = sess.profile(feeds, runs=runs, warmup=warmup)
    rows = []
    for p, node in zip(prof, info["nodes"]):
        out = info["tensors"][node["outputs"][0]] if node["outputs"] else None
        rows.append({"index": p.index, "name": p.name, "op": p.op,
                     "output_shape": out["shape"] if out else [], "output_dtype": out["dtype"] if out else "",
                     "median_ms": p.median_ms, "min_ms": p.min_ms, "percent": p.percent,
                     "macs": node_macs(info, node), "output_bytes": int(out["nbytes"]) if out else 0})
    return rows


def collect(model: str, reference: str | None = None, calibration: Any = None, target: str | None = None,
            runs: int = 20, progress: bool | None = None) -> dict:
    """Everything the page shows, as plain data."""
    raw, info = read_model(model)
    info["_raw"] = raw
    nodes = info["nodes"]
    meta = info.get("metadata") or {}
    partitions = meta.get("partitions") or {}
    depth = layers(info)
    graph_nodes = []
    for k, n in enumerate(nodes):
        out = info["tensors"][n["outputs"][0]] if n["outputs"] else None
        graph_nodes.append({"index": k, "name": n["name"], "op": n["op"], "layer": depth[k],
                            "fused": fused_label(n), "backend": partitions.get(n["name"], "edgert"),
                            "inputs": [i for i in n["inputs"] if i is not None], "outputs": n["outputs"],
                            "shape": out["shape"] if out else [], "dtype": out["dtype"] if out else ""})
    data: dict[str, Any] = {
        "model": os.path.basename(os.fspath(model)),
        "file_bytes": info["file_bytes"],
        "format_version": info["version"],
        "metadata": {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))},
        "inputs": [_tinfo(info, i) for i in info["inputs"]],
        "outputs": [_tinfo(info, i) for i in info["outputs"]],
        "nodes": graph_nodes,
        "timeline": arena_timeline(info),
        "composition": composition(info),
    }
    data["profile"] = profile_rows(model, runs=runs)
    data["sqnr"] = sqnr_data(model, info, reference, calibration, progress)
    if target:
        data["target"] = target_counts(model, target, progress)
    return data


def _tinfo(info: dict, i: int) -> dict:
    t = info["tensors"][i]
    return {"name": t["name"], "dtype": t["dtype"], "shape": t["shape"]}


def sqnr_data(model: str, info: dict, reference: str | None, calibration: Any,
              progress: bool | None = None) -> dict:
    """Per-layer SQNR; filled in by edgert.cli.report_sqnr when the reference and samples
    are given (see there), else only what the file's metadata recorded."""
    meta = info.get("metadata") or {}
    q = meta.get("quantization") if isinstance(meta.get("quantization"), dict) else {}
    out: dict[str, Any] = {"recorded_outputs_db": q.get("outputs_sqnr_db") or meta.get("outputs_sqnr_db"),
                           "layers": [], "note": ""}
    if reference is None or calibration is None:
        out["note"] = ("per-layer SQNR needs --reference MODEL.onnx and --calibration DATA")
        return out
    from .report_sqnr import per_layer

    out.update(per_layer(model, info, reference, calibration, progress=progress))
    return out


def target_counts(model: str, target: str, progress: bool | None = None) -> dict:
    from .report_qemu import count

    return count(model, target, progress)


# ---- rendering -------------------------------------------------------------------------

def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _kb(n: float) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{int(n)} B"


def _tdesc(t: dict) -> str:
    return f"{t['name']}: {t['dtype']}[{_shape(t['shape'])}]"


def _colour(backend: str) -> str:
    return BACKEND_COLOURS.get(backend, "#888888")


def svg_graph(nodes: list[dict], overview: bool = False) -> str:
    """Nodes in columns by topological layer, edges from producer to consumer. The
    overview is the same drawing scaled to the page's width, without text."""
    if not nodes:
        return "<p>(no nodes)</p>"
    bw, bh, gx, gy = 150, 40, 30, 14
    cols: dict[int, list[dict]] = {}
    for n in nodes:
        cols.setdefault(n["layer"], []).append(n)
    rows = max(len(m) for m in cols.values())
    pos = {}
    for layer, members in cols.items():
        top = (rows - len(members)) * (bh + gy) / 2  # each layer centred vertically
        for r, n in enumerate(members):
            pos[n["index"]] = (10 + layer * (bw + gx), 10 + top + r * (bh + gy))
    width = 20 + (max(cols) + 1) * (bw + gx)
    height = 20 + rows * (bh + gy)
    producer = {o: n["index"] for n in nodes for o in n["outputs"]}
    if overview:  # the page's width, 24 px per row of nodes (boxes stretched, no text)
        size = f'width="100%" height="{min(24 * rows + 16, 260)}" preserveAspectRatio="none"'
    else:
        size = f'width="{width}" height="{height}"'

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" {size} viewBox="0 0 {width} {height}" '
             f'class="{"graph overview" if overview else "graph"}">']
    for n in nodes:
        x1, y1 = pos[n["index"]]
        for i in n["inputs"]:
            if i in producer:
                x0, y0 = pos[producer[i]]
                ax, ay, bx, by = x0 + bw, y0 + bh / 2, x1, y1 + bh / 2
                mx = (ax + bx) / 2
                parts.append(f'<path d="M{ax},{ay} C{mx},{ay} {mx},{by} {bx},{by}" class="edge"/>')
    for n in nodes:
        x, y = pos[n["index"]]
        fused = n["fused"]
        if overview:
            parts.append(f'<rect x="{x}" y="{y}" width="{bw}" height="{bh}" rx="5" fill="{_colour(n["backend"])}" '
                         f'class="{"node fused" if fused else "node"}"/>')
            continue
        label = n["op"] + (" " + fused if fused else "")
        title = f'{n["index"]}: {n["name"]} ({n["op"]}{" " + fused if fused else ""}) -> {n["dtype"]}{n["shape"]}'
        parts.append(f'<g><title>{_esc(title)}</title>'
                     f'<rect x="{x}" y="{y}" width="{bw}" height="{bh}" rx="5" fill="{_colour(n["backend"])}" '
                     f'class="{"node fused" if fused else "node"}"/>'
                     f'<text x="{x + 6}" y="{y + 16}" class="op">{_esc(_short(label, 21))}</text>'
                     f'<text x="{x + 6}" y="{y + 31}" class="shape">{_esc(_short(_shape(n["shape"]), 22))}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _graph_wide(nodes: list[dict]) -> bool:
    """True when the detailed graph is wider than the page (about 1340 px: 7 layers)."""
    return 1 + max((n["layer"] for n in nodes), default=0) > 7


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "\u2026"


def _shape(shape) -> str:
    return "\u00d7".join(str(d) for d in shape) if shape else "scalar"


def svg_timeline(tl: dict, nodes: list[dict]) -> str:
    """Arena offset (down) against step (right): one rectangle per buffer, the live
    bytes per step as a step curve on a second panel, the lower bound dashed."""
    W, H, L, T = 960, 320, 70, 10
    steps = max(tl["steps"], 1)
    arena = max(tl["arena_bytes"], tl["lower_bound"], 1)
    sx = (W - L - 10) / steps
    sy = (H - T - 30) / arena
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 150}" viewBox="0 0 {W} {H + 150}" '
           f'class="timeline">']
    out.append(f'<rect x="{L}" y="{T}" width="{W - L - 10}" height="{arena * sy:.1f}" class="arena"/>')
    palette = ["#4c78a8", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac", "#f58518"]
    for k, b in enumerate(tl["buffers"]):
        x = L + b["first"] * sx
        w = (b["last"] - b["first"] + 1) * sx
        y = T + b["offset"] * sy
        h = max(b["bytes"] * sy, 2.0)
        fill = "#e45756" if b["kind"] == "scratch" else palette[k % len(palette)]
        names = ", ".join(b["names"][:4]) + (" ..." if len(b["names"]) > 4 else "")
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}" class="buf">'
                   f'<title>{_esc(names)}: {_kb(b["bytes"])} at offset {b["offset"]:,}, steps {b["first"]}..{b["last"]}'
                   f'</title></rect>')
    # axes
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        y = T + frac * arena * sy
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" class="axis" text-anchor="end">{_kb(frac * arena)}</text>')
    every = max(1, math.ceil(steps / 40))
    for s in range(0, steps, every):
        out.append(f'<text x="{L + (s + 0.5) * sx:.1f}" y="{T + arena * sy + 14:.1f}" class="axis" '
                   f'text-anchor="middle">{s}</text>')
    out.append(f'<text x="{L}" y="{T + arena * sy + 28:.1f}" class="axis">step (node index); the last step '
               f'keeps the graph outputs</text>')
    # live bytes panel
    top2, h2 = H + 26, 110
    scale2 = h2 / arena
    pts = []
    for s, v in enumerate(tl["live"]):
        y = top2 + h2 - v * scale2
        pts.append(f"{L + s * sx:.1f},{y:.1f} {L + (s + 1) * sx:.1f},{y:.1f}")
    out.append(f'<rect x="{L}" y="{top2}" width="{W - L - 10}" height="{h2}" class="arena"/>')
    out.append(f'<polyline points="{" ".join(pts)}" class="live"/>')
    ylb = top2 + h2 - tl["lower_bound"] * scale2
    yar = top2 + h2 - tl["arena_bytes"] * scale2
    out.append(f'<line x1="{L}" x2="{W - 10}" y1="{ylb:.1f}" y2="{ylb:.1f}" class="lb"/>')
    out.append(f'<text x="{L - 6}" y="{ylb + 4:.1f}" class="axis" text-anchor="end">{_kb(tl["lower_bound"])}</text>')
    out.append(f'<text x="{L + 6}" y="{ylb - 4:.1f}" class="axis lbtext">lower bound (peak live bytes)</text>')
    if abs(yar - ylb) > 12:
        out.append(f'<text x="{L - 6}" y="{yar + 4:.1f}" class="axis" text-anchor="end">{_kb(tl["arena_bytes"])}</text>')
    out.append(f'<text x="{L - 6}" y="{top2 + h2 + 4}" class="axis" text-anchor="end">0</text>')
    out.append("</svg>")
    return "".join(out)


def _bar(frac: float, colour: str = "#4c78a8") -> str:
    frac = 0.0 if not math.isfinite(frac) else min(max(frac, 0.0), 1.0)
    return f'<div class="bar"><div style="width:{100 * frac:.1f}%;background:{colour}"></div></div>'


def _num(v, digits: int = 1) -> str:
    if v is None:
        return "\u2013"
    if isinstance(v, float) and not math.isfinite(v):
        return "\u221e" if v > 0 else "-\u221e"
    return f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;background:#fff}
header{background:#1f2d3d;color:#fff;padding:16px 28px}
header h1{margin:0;font-size:22px;font-weight:600}
header .sub{color:#c9d3de;font-size:13px;margin-top:4px}
main{padding:8px 28px 40px;max-width:1400px}
section{margin-top:26px}
h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin:0 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-top:16px}
.card{border:1px solid #e2e6ea;border-radius:6px;padding:8px 14px;min-width:130px;background:#f8fafc}
.card .v{font-size:18px;font-weight:600}.card .k{font-size:12px;color:#667}
.overview{border:1px solid #eee;border-radius:6px;padding:4px;margin-bottom:8px}
svg.overview{display:block}svg.overview .node.fused{stroke-width:1.5}
svg.overview .edge,svg.overview .node{vector-effect:non-scaling-stroke}
.scroll{overflow-x:auto;border:1px solid #eee;border-radius:6px;padding:4px}
svg.graph .edge{fill:none;stroke:#9aa5b1;stroke-width:1.2}
svg.graph .node{stroke:#1f2d3d;stroke-width:.6}
svg.graph .node.fused{stroke:#111;stroke-width:2.4;stroke-dasharray:5 2}
svg.graph text{fill:#fff;font:11px system-ui,sans-serif}svg.graph text.op{font-weight:600}
svg .arena{fill:#f6f7f9;stroke:#ccd}svg .buf{stroke:#fff;stroke-width:.4;opacity:.9}
svg .axis{font:11px system-ui,sans-serif;fill:#555}svg .live{fill:none;stroke:#4c78a8;stroke-width:1.5}
svg .lb{stroke:#e45756;stroke-width:1.5;stroke-dasharray:6 3}svg .lbtext{fill:#e45756}
.legend{display:flex;gap:16px;flex-wrap:wrap;font-size:13px;margin:6px 0}
.legend span.sw{display:inline-block;width:14px;height:14px;border-radius:3px;vertical-align:-2px;margin-right:5px}
table{border-collapse:collapse;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}
th{background:#f3f5f7;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{width:120px;height:10px;background:#eef1f4;border-radius:2px}.bar div{height:10px;border-radius:2px}
.note{color:#666;font-size:13px;margin:4px 0 8px}
.tablewrap{max-height:520px;overflow:auto;border:1px solid #eee;border-radius:6px}
"""


def render(data: dict) -> str:
    nodes = data["nodes"]
    tl = data["timeline"]
    comp = data["composition"]["totals"]
    prof = data.get("profile") or []
    total_ms = sum(r["median_ms"] for r in prof)
    macs = sum(r["macs"] or 0 for r in prof)
    h = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
         f"<title>edgert report: {_esc(data['model'])}</title><style>{CSS}</style></head><body>"]
    h.append(f"<header><h1>{_esc(data['model'])}</h1><div class=\"sub\">edgert format {_esc(data['format_version'])}"
             f" &middot; inputs {_esc(', '.join(_tdesc(t) for t in data['inputs']))}"
             f" &middot; outputs {_esc(', '.join(_tdesc(t) for t in data['outputs']))}"
             "</div></header><main>")
    cards = [("file", _kb(data["file_bytes"])), ("nodes", str(len(nodes))),
             ("arena", _kb(tl["arena_bytes"])), ("arena lower bound", _kb(tl["lower_bound"])),
             ("host time", f"{total_ms:.3f} ms"), ("MACs", f"{macs / 1e6:,.2f} M"),
             ("weights stored", _kb(comp["stored_bytes"]))]
    if data.get("target") and data["target"].get("instructions_per_inference"):
        cards.append((f"instructions ({data['target']['target']})",
                      f"{data['target']['instructions_per_inference'] / 1e6:,.1f} M"))
    h.append('<div class="cards">' + "".join(f'<div class="card"><div class="v">{_esc(v)}</div>'
                                            f'<div class="k">{_esc(k)}</div></div>' for k, v in cards) + "</div>")

    # graph
    backends = sorted({n["backend"] for n in nodes})
    legend = "".join(f'<span><span class="sw" style="background:{_colour(b)}"></span>{_esc(b)}</span>' for b in backends)
    legend += ('<span><span class="sw" style="background:#fff;border:2px dashed #111"></span>'
               'fused (activation folded in, or a pattern merged into one op)</span>')
    h.append(f'<section id="graph"><h2>Graph</h2><div class="note">Nodes in topological layers (left to right), '
             f'coloured by backend; hover a node for its name.</div><div class="legend">{legend}</div>'
             + (f'<div class="note">The whole graph ({len(nodes)} nodes, '
                f'{1 + max((n["layer"] for n in nodes), default=0)} layers):</div>'
                f'<div class="overview">{svg_graph(nodes, overview=True)}</div>'
                '<div class="note">In detail (scroll sideways):</div>' if _graph_wide(nodes) else "")
             + f'<div class="scroll">{svg_graph(nodes)}</div></section>')

    # timeline
    h.append('<section id="arena"><h2>Arena timeline</h2><div class="note">Each rectangle is one planned buffer: '
             'x = the steps it is alive (node index), y = its bytes in the arena (offset down). Red: node scratch. '
             f'Below: live bytes per step; the dashed line is the lower bound on any plan ({_kb(tl["lower_bound"])}); '
             f'the plan uses {_kb(tl["arena_bytes"])} '
             f'({100.0 * tl["arena_bytes"] / max(tl["lower_bound"], 1):.1f} % of the bound).</div>'
             f'<div class="scroll">{svg_timeline(tl, nodes)}</div></section>')

    # time per node
    tgt = data.get("target") or {}
    per_node_insns = tgt.get("per_node") or {}
    h.append('<section id="time"><h2>Time per node</h2>')
    h.append(f'<div class="note">Host: median of {_esc(data.get("runs", ""))} profiled runs '
             f'(edgert_session_run_profiled, one thread), sum {total_ms:.3f} ms.')
    if tgt:
        h.append(" " + _esc(tgt.get("note", "")))
    h.append("</div>")
    maxms = max((r["median_ms"] for r in prof), default=0.0) or 1.0
    hdr = ["#", "node", "op", "output", "ms", "%", "", "MACs"]
    if per_node_insns:
        hdr.append(f"instructions ({tgt['target']})")
    h.append('<div class="tablewrap"><table><tr>' + "".join(f"<th>{_esc(c)}</th>" for c in hdr) + "</tr>")
    for r in prof:
        row = [f'<td class="n">{r["index"]}</td>', f"<td>{_esc(_short(r['name'], 48))}</td>",
               f"<td>{_esc(r['op'])}</td>", f"<td>{_esc(r['output_dtype'])} {_esc(_shape(r['output_shape']))}</td>",
               f'<td class="n">{r["median_ms"]:.4f}</td>', f'<td class="n">{r["percent"]:.1f}</td>',
               f"<td>{_bar(r['median_ms'] / maxms)}</td>",
               f'<td class="n">{_num(r["macs"])}</td>']
        if per_node_insns:
            row.append(f'<td class="n">{_num(per_node_insns.get(r["name"]))}</td>')
        h.append("<tr>" + "".join(row) + "</tr>")
    h.append("</table></div></section>")

    # sqnr
    sqd = data.get("sqnr") or {}
    h.append('<section id="sqnr"><h2>Error per layer (SQNR)</h2>')
    if sqd.get("note"):
        h.append(f'<div class="note">{_esc(sqd["note"])}</div>')
    if sqd.get("recorded_outputs_db"):
        h.append('<div class="note">Recorded at conversion (graph outputs, int8 vs fp32): ' +
                 _esc(", ".join(f"{k}: {_num(v)} dB" for k, v in sqd["recorded_outputs_db"].items())) + "</div>")
    if sqd.get("layers"):
        cols = sqd.get("columns", [])
        h.append('<div class="tablewrap"><table><tr><th>node</th><th>op</th><th>tensor</th>' +
                 "".join(f"<th>{_esc(c['label'])} (dB)</th><th></th>" for c in cols) + "</tr>")
        for r in sqd["layers"]:
            cells = ""
            for c in cols:
                v = r.get(c["key"])
                frac = 0.0 if v is None else (1.0 if not math.isfinite(v) else v / 60.0)
                colour = "#54a24b" if v is None or v >= 30 else "#eeca3b" if v >= 20 else "#e45756"
                cells += f'<td class="n">{_num(v)}</td><td>{_bar(frac, colour)}</td>'
            h.append(f"<tr><td>{_esc(_short(r['node'], 48))}</td><td>{_esc(r['op'])}</td>"
                     f"<td>{_esc(_short(r['tensor'], 40))}</td>{cells}</tr>")
        h.append("</table></div>")
    h.append("</section>")

    # composition
    rows = data["composition"]["rows"]
    maxb = max((r["stored_bytes"] for r in rows), default=0) or 1
    h.append('<section id="weights"><h2>File composition</h2>')
    h.append(f'<div class="note">File {_kb(comp["file_bytes"])}; weights and other constants stored: '
             f'{_kb(comp["stored_bytes"])}. As float32 they would take {_kb(comp["fp32_bytes"])}: '
             f'int8 / fp16 storage saves {_kb(comp["int8_saved"])}, sparse storage saves {_kb(comp["sparse_saved"])}.'
             '</div>')
    h.append('<div class="tablewrap"><table><tr><th>node</th><th>op</th><th>constants</th><th>stored</th><th></th>'
             '<th>as fp32</th></tr>')
    for r in rows:
        desc = "; ".join(f"{t['dtype']} {_shape(t['shape'])}{' sparse' if t['storage'] == 'sparse' else ''}"
                         for t in r["tensors"])
        h.append(f"<tr><td>{_esc(_short(r['node'], 48))}</td><td>{_esc(r['op'])}</td><td>{_esc(_short(desc, 60))}</td>"
                 f'<td class="n">{_kb(r["stored_bytes"])}</td><td>{_bar(r["stored_bytes"] / maxb)}</td>'
                 f'<td class="n">{_kb(r["fp32_bytes"])}</td></tr>')
    h.append("</table></div></section>")
    h.append(f'<script type="application/json" id="report-data">{_json_for_html(_summary(data))}</script>')
    h.append("</main></body></html>")
    return "".join(h)


def _summary(data: dict) -> dict:
    tl = data["timeline"]
    return {"model": data["model"], "nodes": len(data["nodes"]), "arena_bytes": tl["arena_bytes"],
            "lower_bound": tl["lower_bound"], "file_bytes": data["file_bytes"]}


def _json_for_html(obj: Any) -> str:
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def write(model: str, output: str, reference: str | None = None, calibration: Any = None,
          target: str | None = None, runs: int = 20, progress: bool | None = None) -> dict:
    """Collects and renders the report of `model` into `output`; returns the data."""
    data = collect(model, reference, calibration, target, runs, progress)
    data["runs"] = runs
    page = render(data)
    with open(output, "w", encoding="utf-8") as f:
        f.write(page)
    return data
