"""The `edgert` command line."""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

try:
    import click
except ImportError:  # a runtime-only install (numpy + cffi) has edgert.Session but no CLI
    sys.exit("error: the edgert command needs click: pip install click (a plain `pip install edgert` "
             "brings it)")

from ..errors import EdgertError
from .inputs import example_inputs


def _parse_shapes(items: tuple[str, ...]) -> dict[str, list[int]]:
    out = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r}: expected NAME=D0,D1,...", param_hint="--input-shape")
        from ..converter.bounds import parse_dim
        try:
            out[name] = [parse_dim(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise click.BadParameter(f"{item!r}: dimensions must be integers or bounds LO..HI",
                                     param_hint="--input-shape") from None
    return out


def _parse_values(items: tuple[str, ...]) -> dict[str, np.ndarray]:
    out = {}
    for item in items:
        name, sep, val = item.rpartition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE[,VALUE...]", param_hint="--input-value")
        try:
            nums = [float(v) for v in val.split(",")]
        except ValueError:
            raise click.BadParameter(f"{item!r}: values must be numbers", param_hint="--input-value") from None
        out[name] = np.array(nums[0] if len(nums) == 1 else nums)
    return out


def _parse_inputs(items: tuple[str, ...]) -> dict[str, np.ndarray]:
    feeds = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r}: expected NAME=FILE.npy", param_hint="--input")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise click.BadParameter(f"{path}: cannot read .npy: {e}", param_hint="--input") from None
    return feeds


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "output"


# Optional packages some commands need, and the extra that installs each.
_EXTRAS = {"onnx": "convert", "onnxruntime": "ort"}


class _Cli(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except EdgertError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except ModuleNotFoundError as e:
            top = (e.name or "").split(".")[0]
            if top not in _EXTRAS:
                raise
            cmd = ctx.invoked_subcommand or "this command"
            click.echo(f"error: `edgert {cmd}` needs the {top} package: pip install 'edgert[{_EXTRAS[top]}]'",
                       err=True)
            sys.exit(2)


def _print_version(ctx, param, value) -> None:
    if not value or ctx.resilient_parsing:
        return
    from ..runtime.session import runtime_info

    info = runtime_info()
    click.echo(f"edgert {info['version']} (file format {info['format_version']})")
    click.echo(f"C library: {info['library']}")
    click.echo(f"build: {info['build']}")
    click.echo(f"kernels: {info['kernels']}")
    ctx.exit()


@click.group(cls=_Cli)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the package, file-format and C library versions, the library's build and the "
                   "kernels chosen for this CPU.")
def main() -> None:
    """edgert: convert ONNX models into compact, statically planned files and run them."""


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Output .edgert file.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=D0,D1,...",
              help="Fix an input's shape (needed for symbolic dimensions); LO..HI for a dimension gives it "
                   "bounds (one file for every size within them), e.g. x=1,3,48,32..960.")
@click.option("--input-value", "input_values", multiple=True, metavar="NAME=VALUE",
              help="Freeze an input to a constant (removes it from the converted model's inputs).")
@click.option("--no-optimize", is_flag=True, help="Skip graph passes (for debugging).")
@click.option("--sparse", "sparse", type=click.Choice(["auto", "storage", "off"]), default="auto", show_default=True,
              help="Sparse weights: compressed storage and sparse kernels, storage only, or neither.")
@click.option("--prune", type=click.FloatRange(0.0, 1.0, max_open=True), default=None, metavar="SPARSITY",
              help="Prune this fraction of the weights (magnitude) or channels (channel).")
@click.option("--prune-method", type=click.Choice(["magnitude", "channel"]), default="magnitude", show_default=True)
@click.option("--prune-scope", type=click.Choice(["layer", "global"]), default="layer", show_default=True,
              help="Magnitude pruning: the same fraction per layer, or one threshold over all layers.")
@click.option("--prune-exclude", multiple=True, metavar="NODE",
              help="Never prune this node (repeatable; the first and last weighted layers are always kept).")
@click.option("--calibration", default=None, type=click.Path(), metavar="DATA",
              help="Sample inputs (.npz keyed by input name, samples on axis 0, or a folder of .npz): int8 "
                   "calibration; pruning picks per-layer sparsities by sensitivity.")
@click.option("--report", default=None, type=click.Path(dir_okay=False), metavar="FILE.json",
              help="Write the pruning summary (size, MACs, SQNR) and/or int8 per-tensor SQNR.")
@click.option("--quantize", type=click.Choice(["int8", "fp16", "dynamic"]), default=None,
              help="int8: integer kernels (needs --calibration); fp16: float16 weights; dynamic: int8 weights.")
@click.option("--calibration-method", type=click.Choice(["minmax", "percentile", "entropy", "mse"]),
              default="percentile", show_default=True)
@click.option("--keep-fp32", multiple=True, metavar="NODE", help="Keep this node float in int8 (repeatable).")
@click.option("--sqnr-target", type=float, default=None, metavar="DB",
              help="Keep the worst int8 layers float until every output reaches this SQNR.")
@click.option("--fallback", type=click.Choice(["off", "onnxruntime", "litert"]), default="off", show_default=True,
              help="Run nodes edgert cannot run (and --fallback-ops) in partitions computed by onnxruntime or "
                   "LiteRT (docs/partitions.md); off: such nodes are an error.")
@click.option("--fallback-ops", "fallback_ops", multiple=True, metavar="OPTYPE|NODE|all",
              help="Hand these nodes to the fallback runtime (an ONNX op type, a node name, or all; repeatable).")
@click.option("--delegate", default=None, metavar="NAME|PATH",
              help="Delegate the fallback runtime should use (edgetpu, armnn or a library path); recorded in the "
                   "file for the runtime.")
@click.option("--max-partitions", type=click.IntRange(1, None), default=8, show_default=True,
              help="Refuse a model that needs more fallback partitions than this.")
@click.option("--state", "state", multiple=True, metavar="OUT=IN",
              help="Keep a streaming model's state in the session: output OUT is read back as input IN by the "
                   "next run (repeatable); the pair leaves the model's inputs and outputs (docs/runtime.md, State).")
def convert(model, output, input_shapes, input_values, no_optimize, sparse, prune, prune_method, prune_scope,
            prune_exclude, calibration, report, quantize, calibration_method, keep_fp32, sqnr_target, fallback,
            fallback_ops, delegate, max_partitions, state) -> None:
    """Convert an ONNX or .tflite MODEL into an .edgert file."""
    from ..converter.options import ConvertOptions
    from ..converter.pipeline import convert as _convert

    t0 = time.perf_counter()
    options = ConvertOptions(
        input_shapes=_parse_shapes(input_shapes), input_values=_parse_values(input_values), optimize=not no_optimize,
        sparse={"auto": True, "storage": "storage", "off": False}[sparse], prune=prune, prune_method=prune_method,
        prune_scope=prune_scope, prune_exclude=prune_exclude, calibration=calibration, report=report,
        quantize=quantize, calibration_method=calibration_method, keep_fp32=keep_fp32, sqnr_target=sqnr_target,
        progress=None, fallback=fallback, fallback_ops=fallback_ops, delegate=delegate, max_partitions=max_partitions,
        state=state)
    data = _convert(model, output, options)
    if report and prune:
        _print_prune_report(report)
    from ..runtime import reader as fmt

    info = fmt.read(data)
    from ..converter.partitioner import summary_lines
    parts = (info.get("metadata") or {}).get("partitions") or []
    if parts:
        shapes = {t["name"]: (t["shape"], t["dtype"]) for t in info["tensors"]}
        click.echo(f"fallback partitions: {len(parts)}", err=True)
        for line in summary_lines(parts, shapes):
            click.echo("  " + line, err=True)
    click.echo(f"wrote {output}: {len(data):,} bytes, {len(info['nodes'])} nodes, arena {info['arena_bytes']:,} bytes "
               f"(lower bound {info['arena_lower_bound_bytes']:,}) in {time.perf_counter() - t0:.2f} s")
    st = info.get("state")
    if st:
        click.echo("state in the session: " + ", ".join(f"{p['output']} -> {p['input']} ({p['initial']})"
                                                        for p in st["pairs"]))
    hints = (info.get("metadata") or {}).get("state_suggestions")
    if hints:
        click.echo("hint: a streaming model? outputs that look like state, to keep in the session: "
                   + "; ".join(f"--state {h['output']}={h['input']} ({h['why']})" for h in hints), err=True)


def _print_prune_report(path: str) -> None:
    with open(path) as f:
        r = json.load(f)
    b, a = r["before"], r["after"]
    click.echo(f"pruned ({r['method']}, {r['scope']}): file {b['file_bytes']:,} -> {a['file_bytes']:,} bytes, "
               f"MACs {b['macs']:,} -> {a['macs']:,} (nonzero {a['macs_nonzero']:,}), weights "
               f"{b['weights_nonzero']:,} -> {a['weights_nonzero']:,} nonzero, output SQNR {r['sqnr_db']:.1f} dB "
               f"({r['sqnr_inputs']} inputs)")


def constant_usage(info: dict) -> dict:
    """How the constants of a read file are stored and used: `blobs` distinct stored
    ranges and their `unique_bytes` (dense bytes, once per range), `bytes_by_use` (each
    constant counted once per node input that reads it: what storing a copy per use
    would take), `stored_bytes` (the CONSTANTS section), and `multiple_forms`: source
    initializers stored in more than one packed form (a transposed, int8 or CSR copy
    that a kernel needs beside the original), with the bytes of each form."""
    tensors = info["tensors"]

    def blob(t: dict):
        if t["storage"] == "constant":
            return ("constant", t["offset"])
        sp = t.get("sparse") or {}
        return ("sparse", sp.get("bitmap_offset"), sp.get("values_offset"), t["dtype"], t["nbytes"])

    consts = [k for k, t in enumerate(tensors) if t["storage"] in ("constant", "sparse")]
    uses = {k: 0 for k in consts}
    for n in info["nodes"]:
        for i in n["inputs"]:
            if i is not None and i in uses:
                uses[i] += 1
    blobs: dict[tuple, int] = {}
    for k in consts:
        blobs.setdefault(blob(tensors[k]), tensors[k]["nbytes"])
    sources = (info.get("metadata") or {}).get("constant_sources") or {}
    forms: dict[str, dict[tuple, dict]] = {}
    for k in consts:
        t = tensors[k]
        src = sources.get(t["name"], t["name"])
        forms.setdefault(src, {}).setdefault(blob(t), {"tensor": t["name"], "dtype": t["dtype"], "shape": t["shape"],
                                                       "storage": t["storage"], "bytes": t["nbytes"]})
    multiple = [{"source": src, "forms": list(f.values()), "bytes": sum(v["bytes"] for v in f.values())}
                for src, f in sorted(forms.items()) if len(f) > 1]
    return {
        "tensors": len(consts),
        "blobs": len(blobs),
        "unique_bytes": sum(blobs.values()),
        "bytes_by_use": sum(tensors[k]["nbytes"] * uses[k] for k in consts),
        "stored_bytes": info["constants_bytes"],
        "multiple_forms": multiple,
    }


def info_tensors(path: str) -> list[dict]:
    from ..runtime import reader as fmt
    with open(path, "rb") as f:
        return fmt.read(f.read())["tensors"]


def inspect_dict(path: str) -> dict:
    from ..runtime import reader as fmt

    if not os.path.exists(path):
        raise EdgertError(f"{path}: no such file")
    with open(path, "rb") as f:
        data = f.read()
    info = fmt.read(data)
    tensors = info["tensors"]
    ops: dict[str, int] = {}
    for n in info["nodes"]:
        ops[n["op"]] = ops.get(n["op"], 0) + 1

    def io(idx):
        t = tensors[idx]
        return {"name": t["name"], "shape": t["shape"], "dtype": t["dtype"]}

    consts = constant_usage(info)
    return {
        "format_version": info["version"],
        "file_bytes": info["file_bytes"],
        "weights_bytes": consts["unique_bytes"],
        "constants": consts,
        "arena_bytes": info["arena_bytes"],
        "arena_lower_bound_bytes": info["arena_lower_bound_bytes"],
        "nodes": len(info["nodes"]),
        "ops": dict(sorted(ops.items())),
        "inputs": [io(i) for i in info["inputs"]],
        "outputs": [io(i) for i in info["outputs"]],
        "metadata": info["metadata"],
        "partitions": list((info["metadata"] or {}).get("partitions") or []),
        "bounds": info.get("bounds"),
        "state": info.get("state"),
    }


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def inspect(model, as_json) -> None:
    """Show what an .edgert file holds."""
    d = inspect_dict(model)
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(f"{model}: format {d['format_version']}, {d['file_bytes']:,} bytes "
               f"({d['weights_bytes']:,} of weights)")
    c = d["constants"]
    click.echo(f"constants: {c['blobs']} stored ({c['unique_bytes']:,} bytes; {c['bytes_by_use']:,} counted per use), "
               f"{c['stored_bytes']:,} bytes in the file")
    for m in c["multiple_forms"]:
        click.echo(f"  {m['source']} is stored in {len(m['forms'])} forms ({m['bytes']:,} bytes): "
                   + ", ".join(f"{f['tensor']} {f['dtype']}{f['shape']} {f['bytes']:,}" for f in m["forms"]))
    b = d.get("bounds")
    planned = ""
    if b:
        planned = ", planned for the upper bounds " + ", ".join(f"{s['name']}={s['lo']}..{s['hi']}"
                                                                for s in b["symbols"])
    click.echo(f"arena: {d['arena_bytes']:,} bytes (lower bound {d['arena_lower_bound_bytes']:,}){planned}")
    for s in (b["symbols"] if b else []):
        if s.get("step"):
            step, rs = s["step"]
            rule = f"a multiple of {step}" if rs == [0] else f"{step}*k + r, r in {{{', '.join(map(str, rs))}}}"
            click.echo(f"constraint: {s['name']} must be {rule} (the model runs no other size)")
    bound_dims = {(x["input"], x["dim"]): x["symbol"] for x in (b["binds"] if b else [])}
    # outputs: their dims as the expressions the converter derived from the ops (ceil(H/32))
    for name, dims in ((d["metadata"] or {}).get("output_dims") or {}).items():
        for k, text in enumerate(dims or ()):
            if not text.lstrip("-").isdigit():
                bound_dims[(name, k)] = text
    for kind in ("inputs", "outputs"):
        for t in d[kind]:
            shape = [f"{bound_dims[(t['name'], k)]}<={v}" if (t["name"], k) in bound_dims else v
                     for k, v in enumerate(t["shape"])]
            click.echo(f"{kind[:-1]:7s} {t['name']}: {t['dtype']}[{', '.join(str(v) for v in shape)}]")
    names = {t["name"]: t for t in info_tensors(model)} if d.get("state") else {}
    for p in (d.get("state") or {}).get("pairs", []):
        t = names.get(p["input"], {})
        click.echo(f"state   {p['input']}: {t.get('dtype')}{t.get('shape')} <- {p['output']} after each run "
                   f"(initially {p['initial']})")
    click.echo(f"{d['nodes']} nodes: " + ", ".join(f"{k} x{v}" for k, v in d["ops"].items()))
    for p in d["partitions"]:
        delegate = f", delegate {p['delegate']}" if p.get("delegate") else ""
        click.echo(f"partition {p.get('node')}: {p.get('backend')}{delegate}, {p.get('bytes', 0):,} bytes, "
                   f"{len(p.get('nodes') or [])} nodes ({', '.join(sorted(set(p.get('ops') or [])))})")
        click.echo(f"  in: {', '.join(p.get('inputs') or [])}; out: {', '.join(p.get('outputs') or [])}")
        own = p.get("backend_bytes")
        click.echo(f"  {p.get('backend')}'s own memory, outside edgert's arena: "
                   + (f"~{own:,} bytes of intermediate tensors, plus the runtime's overhead" if own is not None
                      else "not known at conversion"))


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy", help="An input tensor.")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None, help="Write outputs as .npy here.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1, 256))
@click.option("--fallback", type=click.Choice(["onnxruntime", "litert", "tflite"]), default=None,
              help="Runtime for fallback partitions (default: whichever is installed).")
@click.option("--delegate", default=None, metavar="NAME|PATH",
              help="LiteRT delegate for litert partitions (edgetpu, armnn or a library path; default: "
                   "the one recorded at conversion).")
def run(model, inputs, output_dir, threads, fallback, delegate) -> None:
    """Run an .edgert model on .npy inputs. Where each fallback partition runs is
    printed on stderr."""
    from ..runtime.session import Session

    sess = Session(model, threads=threads, fallback=fallback, delegate=delegate)
    for p in sess.partitions():
        if p["delegate"]:
            where = f"delegate {p['delegate']}" if p["delegate_loaded"] else f"CPU (delegate {p['delegate']} not loaded)"
        else:
            where = "CPU"
        click.echo(f"partition {p['node']} ({len(p['nodes'])} nodes): {p['backend']} on {p['runtime']}, {where}",
                   err=True)
    outs = sess.run(None, _parse_inputs(inputs))
    for info, arr in zip(sess.get_outputs(), outs):
        if output_dir:
            os.makedirs(output_dir, exist_ok=True)
            p = os.path.join(output_dir, _safe_name(info.name) + ".npy")
            np.save(p, arr)
            click.echo(f"{info.name}: {arr.dtype}{list(arr.shape)} -> {p}")
        else:
            flat = arr.reshape(-1)
            click.echo(f"{info.name}: {arr.dtype}{list(arr.shape)} {np.array2string(flat[:8], precision=5)}"
                       + (" ..." if flat.size > 8 else ""))


def compare(onnx_model, edgert_file, feeds, input_shapes=None, input_values=None):
    """Runs both models; returns [(name, max_abs_err, max_abs_ref, ok)]."""
    import onnxruntime as ort

    from ..runtime.session import Session

    sess = Session(edgert_file)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(os.fspath(onnx_model), so, providers=["CPUExecutionProvider"])
    ort_feeds = dict(feeds)
    for k, v in (input_values or {}).items():
        want = {i.name: i.type for i in ref.get_inputs()}.get(k, "")
        ort_feeds[k] = np.asarray(v).astype(np.int64 if "int64" in want else np.float32)
    want = ref.run(None, ort_feeds)
    got = sess.run(None, feeds)
    rows = []
    for info, g, w in zip(sess.get_outputs(), got, want):
        w = np.asarray(w)
        if g.shape != w.shape:
            rows.append((info.name, float("inf"), 0.0, False))
            continue
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if g.size else 0.0
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        rows.append((info.name, err, scale, err <= 1e-3 * max(1.0, scale)))
    return rows


@main.command()
@click.argument("onnx_model", type=click.Path(dir_okay=False))
@click.argument("edgert_file", type=click.Path(dir_okay=False))
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy", help="Inputs (random when omitted).")
@click.option("--input-value", "input_values", multiple=True, metavar="NAME=VALUE",
              help="Values of inputs frozen at conversion (fed to onnxruntime only).")
def verify(onnx_model, edgert_file, inputs, input_values) -> None:
    """Run ONNX_MODEL in onnxruntime and EDGERT_FILE in edgert on the same inputs and
    compare; exits non-zero on a mismatch (max error > 1e-3 * max(1, max |ort|))."""
    from ..runtime.session import Session

    feeds = _parse_inputs(inputs) or example_inputs(Session(edgert_file))
    rows = compare(onnx_model, edgert_file, feeds, input_values=_parse_values(input_values))
    ok = True
    for name, err, scale, good in rows:
        ok &= good
        click.echo(f"{'ok ' if good else 'BAD'} {name}: max |edgert - ort| = {err:.3g} (max |ort| = {scale:.3g})")
    if not ok:
        sys.exit(1)


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1, 256))
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 100000))
@click.option("--warmup", default=3, show_default=True, type=click.IntRange(0, 1000))
@click.option("--json", "as_json", is_flag=True)
@click.option("--profile", is_flag=True, help="Time every node (median over the runs) and print a per-node table.")
@click.option("--target", default=None, help="Also count guest instructions on this board under QEMU: per node "
              "with --profile (one thread; docs/report.md), else per thread with --threads, reporting the busiest "
              "thread per inference (docs/arm.md, \"Threads\").")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=D0,D1,...",
              help="A file with bounded dimensions: run at this size (default: the upper bounds); also times a "
                   "size change (the shape pass and prepare).")
def bench(model, threads, runs, warmup, as_json, profile, target, input_shapes) -> None:
    """Measure inference latency of an .edgert model on random inputs."""
    from ..runtime.session import Session

    sess = Session(model, threads=threads)
    shapes = {}
    for item in input_shapes:
        name, _, dims = item.rpartition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            raise click.BadParameter(f"{item!r}: expected NAME=D0,D1,... (integers)", param_hint="--input-shape") \
                from None
    try:
        feeds = example_inputs(sess, shapes=shapes)
        resize_us = _size_change_us(sess, shapes) if shapes else None
    except EdgertError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    if profile:
        from .report import profile_rows

        rows = profile_rows(model, sess, feeds, runs, warmup)
        counts = None
        if target:
            from .report_qemu import count

            counts = count(model, target)
            for r in rows:
                r["instructions"] = counts["per_node"].get(r["name"])
        if as_json:
            doc = {"model": model, "threads": threads, "runs": runs, "nodes": rows}
            if counts:
                doc.update(target=target, instructions_per_inference=counts["instructions_per_inference"])
            click.echo(json.dumps(doc, indent=2))
            return
        w = max([len(r["name"]) for r in rows] + [4])
        extra = f" {'instructions':>13s}" if counts else ""
        click.echo(f"{'node':{w}s}  {'op':18s} {'output shape':20s} {'ms':>9s} {'%':>6s} {'MACs':>12s} "
                   f"{'out bytes':>10s}{extra}")
        for r in rows:
            extra = f" {r['instructions']:>13,}" if counts else ""
            click.echo(f"{r['name']:{w}s}  {r['op']:18s} {str(r['output_shape']):20s} {r['median_ms']:9.4f} "
                       f"{r['percent']:6.2f} {'-' if r['macs'] is None else format(r['macs'], ','):>12} "
                       f"{r['output_bytes']:>10,}{extra}")
        total = sum(r["median_ms"] for r in rows)
        click.echo(f"total {total:.4f} ms (sum of per-node medians over {runs} runs, {threads} thread(s))")
        if counts:
            click.echo(f"{counts['instructions_per_inference']:,} instructions per inference on {target} "
                       f"({counts['cpu']}, QEMU)")
        return
    counts = None
    if target:
        from .report_qemu import busiest_thread

        try:
            counts = busiest_thread(model, target, threads)
        except EdgertError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    t = np.array(times)
    res = {"model": model, "threads": threads, "runs": runs, "median_ms": float(np.median(t)),
           "mean_ms": float(t.mean()), "min_ms": float(t.min()), "arena_bytes": sess.arena_bytes}
    if shapes:
        res.update(input_shapes=shapes, size_change_us=resize_us)
    if counts:
        res.update(target=target, cpu=counts["cpu"], busiest_thread_instructions=counts["busiest"],
                   thread_instructions=counts["per_thread"])
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        click.echo(f"{model}: median {res['median_ms']:.3f} ms, min {res['min_ms']:.3f} ms over {runs} runs, "
                   f"{threads} thread(s)")
        if resize_us is not None:
            click.echo(f"size change (shape pass and prepare, from Python): median {resize_us:.1f} us")
        if counts:
            per = ", ".join(f"{c / 1e6:.2f}" for c in counts["per_thread"])
            click.echo(f"on {target} ({counts['cpu']}, QEMU), {threads} thread(s): busiest thread "
                       f"{counts['busiest'] / 1e6:,.2f} M instructions per inference (per thread: {per} M)")


def _size_change_us(sess, shapes: dict[str, list[int]], rounds: int = 200) -> float:
    """Median microseconds of a size change: Session.shapes_at alternating between
    `shapes` and the upper bounds (each call sets the shapes and runs the shape pass and
    the prepare of every node that follows them)."""
    top = {t.name: [hi for _, hi in t.bounds] for t in sess.get_inputs() if t.bounds}
    times = []
    for k in range(rounds):
        t0 = time.perf_counter()
        sess.shapes_at(shapes if k % 2 else top)
        times.append((time.perf_counter() - t0) * 1e6)
    return float(np.median(times))


@main.command()
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Output .html file.")
@click.option("--reference", default=None, type=click.Path(dir_okay=False), metavar="MODEL.onnx",
              help="The ONNX model the file was converted from: per-layer error against it.")
@click.option("--calibration", default=None, type=click.Path(), metavar="DATA",
              help="Sample inputs (.npz or folder of .npz) for the per-layer error.")
@click.option("--target", default=None, help="Board (targets/): count instructions under QEMU.")
@click.option("--runs", default=20, show_default=True, type=click.IntRange(1, 100000),
              help="Profiled runs on the host (the median is shown).")
def report(model, output, reference, calibration, target, runs) -> None:
    """Write one self-contained HTML page describing MODEL: graph, arena timeline, time
    per node, error per layer and file composition."""
    from .report import write

    if calibration is not None and reference is None:
        raise click.UsageError("--calibration needs --reference (the ONNX model to compare with)")
    write(model, output, reference, calibration, target, runs)
    click.echo(f"wrote {output}: {os.path.getsize(output):,} bytes")


@main.command()
@click.option("--model", type=click.Path(dir_okay=False), default=None,
              help="ONNX model (default: the digits CNN shipped with edgert).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None)
def demo(model, output) -> None:
    """The main job on the shipped default: convert, run natively, compare with onnxruntime."""
    from ..converter.pipeline import convert as _convert
    from ..runtime.session import Session

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package folder
    model = model or os.path.join(here, "data", "digits_cnn.onnx")
    output = output or os.path.splitext(os.path.basename(model))[0] + ".edgert"
    data = _convert(model, output)
    click.echo(f"converted {model} -> {output} ({len(data):,} bytes; ONNX {os.path.getsize(model):,} bytes)")
    sess = Session(output)
    samples = os.path.join(here, "data", "digits_test.npz")
    if os.path.basename(model) == "digits_cnn.onnx" and os.path.exists(samples):
        import onnxruntime as ort

        d = np.load(samples)
        x, labels = d["input"], d["label"]
        ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        ours = np.stack([sess.run(None, {name: x[k:k + 1]})[0][0] for k in range(len(x))])
        theirs = np.stack([ref.run(None, {name: x[k:k + 1]})[0][0] for k in range(len(x))])
        err = float(np.abs(ours - theirs).max())
        acc_e = float((ours.argmax(1) == labels).mean())
        acc_o = float((theirs.argmax(1) == labels).mean())
        click.echo(f"{len(x)} held-out digits: edgert accuracy {acc_e:.4f}, onnxruntime {acc_o:.4f}, "
                   f"max |edgert - ort| = {err:.2e}")
        if err > 1e-3 * max(1.0, float(np.abs(theirs).max())):
            sys.exit(1)
    else:
        rows = compare(model, output, example_inputs(sess))
        for name, err, scale, good in rows:
            click.echo(f"{'ok ' if good else 'BAD'} {name}: max |edgert - ort| = {err:.3g} (max |ort| = {scale:.3g})")


@main.command()
@click.option("--target", "target", required=True, help="Board: a name from targets/ (rpi0 ... rpi5, host).")
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False),
              help="Output directory: lib/, include/, bin/, wheel/, toolchain.cmake.")
@click.option("--no-wheel", is_flag=True, help="Skip the board's Python wheel.")
@click.option("--deb", is_flag=True,
              help="Also write edgert_<version>_<arch>.deb (dpkg-deb): library, header, edgert-run, "
                   "pkg-config and CMake files under /usr.")
def build(target, output, no_wheel, deb) -> None:
    """Cross-builds the C runtime (and the board's Python wheel) for one target, with the
    pkg-config file, the CMake package and a CMake toolchain file for building against it."""
    from .build import build as _build

    try:
        r = _build(target, output, wheel=not no_wheel, deb=deb)
    except EdgertError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{r['target']}: {r['lib']} ({r['lib_bytes']:,} bytes stripped), {r['static']}, "
               f"{r['edgert_run']}, {r['header']}")
    click.echo(f"pkg-config: {r['pkgconfig']}, CMake: {r['cmake']}"
               + (f", toolchain: {r['toolchain']}" if "toolchain" in r else ""))
    if "wheel" in r:
        click.echo(f"wheel: {r['wheel']}")
    if "deb" in r:
        click.echo(f"deb: {r['deb']}")


if __name__ == "__main__":
    main()
