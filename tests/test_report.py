"""edgert report and the per-node profile: the data behind the page (arena timeline
against the planner, profile against the runtime, composition against the file), and
the page itself rendered by headless Chromium as a person would see it."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

import edgert
from edgert.runtime import reader as fmt
from edgert.converter import planner
from edgert.cli import report
from edgert.cli.main import main
from edgert.converter.pipeline import build_graph
from edgert.errors import InputError
from edgert.runtime.session import Session

DATA = pathlib.Path(edgert.__file__).parent / "data"
DIGITS = DATA / "digits_cnn.onnx"
DIGITS_SPARSE = pathlib.Path(__file__).resolve().parent / "data" / "digits_sparse90.onnx"  # a test model
CALIB = DATA / "digits_calib.npz"
NODE_BLUE = (0x4C, 0x78, 0xA8)  # report.BACKEND_COLOURS["edgert"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("report")
    out = {"fp32": d / "digits.edgert", "int8": d / "digits_int8.edgert", "sparse": d / "digits_sparse.edgert"}
    edgert.convert(str(DIGITS), str(out["fp32"]))
    edgert.convert(str(DIGITS), str(out["int8"]), quantize="int8", calibration=str(CALIB))
    edgert.convert(str(DIGITS_SPARSE), str(out["sparse"]))
    return out


def feeds_of(sess: Session) -> dict[str, np.ndarray]:
    x = np.load(DATA / "digits_test.npz")["input"][:1]
    return {sess.get_inputs()[0].name: x.astype(np.float32)}


# ---- runtime: per-node profile --------------------------------------------------------

def test_node_info_matches_file(models):
    info = fmt.read(models["int8"].read_bytes())
    sess = Session(str(models["int8"]))
    nodes = sess.nodes()
    assert [n.name for n in nodes] == [n["name"] for n in info["nodes"]]
    assert [n.op for n in nodes] == [n["op"] for n in info["nodes"]]
    assert [n.num_outputs for n in nodes] == [len(n["outputs"]) for n in info["nodes"]]
    assert [n.scratch_bytes for n in nodes] == [int(n["scratch"][1]) for n in info["nodes"]]


def _ctx_with_inputs(sess: Session, feeds: dict):
    """One of the Session's C sessions (its execution contexts), with the inputs set."""
    ctx = sess._acquire()
    ffi, lib = sess._ffi, sess._lib
    for k, arr in enumerate(sess._input_arrays(feeds)):
        assert lib.edgert_session_set_input(ctx, k, ffi.from_buffer(arr), arr.nbytes) == 0
    return ctx


def test_profile_times_every_node_and_keeps_outputs(models):
    sess = Session(str(models["fp32"]))
    feeds = feeds_of(sess)
    want = sess.run(None, feeds)[0]
    prof = sess.profile(feeds, runs=5)
    assert len(prof) == len(sess.nodes()) == 7
    assert all(p.median_ms > 0 and p.min_ms <= p.median_ms for p in prof)
    assert sum(p.percent for p in prof) == pytest.approx(100.0)
    # The convolutions dominate this model; the flatten (a view) is nearly free.
    conv = sum(p.median_ms for p in prof if p.op == "conv2d")
    assert conv > 0.5 * sum(p.median_ms for p in prof)
    # A profiled run computes the same outputs as a plain one.
    ffi, lib = sess._ffi, sess._lib
    buf = ffi.new("uint64_t[]", 7)
    ctx = _ctx_with_inputs(sess, feeds)
    assert lib.edgert_session_run_profiled(ctx, buf, 7) == 0
    got = np.frombuffer(ffi.buffer(lib.edgert_session_output_data(ctx, 0), want.nbytes), np.float32)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_profiled_run_rejects_a_wrong_count(models):
    sess = Session(str(models["fp32"]))
    ffi, lib = sess._ffi, sess._lib
    buf = ffi.new("uint64_t[]", 8)
    ctx = sess._acquire()
    assert lib.edgert_session_run_profiled(ctx, buf, 6) == 500
    assert "7 node times" in ffi.string(lib.edgert_session_last_error(ctx)).decode()
    assert lib.edgert_session_run_profiled(ctx, ffi.NULL, 7) == 500
    with pytest.raises(InputError):
        sess.profile(feeds_of(sess), runs=0)


def test_run_profiled_allocates_nothing(models):
    sess = Session(str(models["int8"]))
    n = len(sess.nodes())
    ffi, lib = sess._ffi, sess._lib
    buf = ffi.new("uint64_t[]", n)
    ctx = _ctx_with_inputs(sess, feeds_of(sess))
    before = lib.edgert_alloc_count()
    for _ in range(3):
        assert lib.edgert_session_run_profiled(ctx, buf, n) == 0
    assert lib.edgert_alloc_count() == before


def test_bench_profile_table_and_json(models):
    r = CliRunner().invoke(main, ["bench", str(models["fp32"]), "--profile", "--runs", "3"])
    assert r.exit_code == 0, r.output
    assert "/3/Conv" in r.output and "conv2d" in r.output and "294,912" in r.output
    r = CliRunner().invoke(main, ["bench", str(models["fp32"]), "--profile", "--runs", "3", "--json"])
    import json

    rows = json.loads(r.output)["nodes"]
    assert [x["name"] for x in rows][:2] == ["/0/Conv", "/3/Conv"]
    assert rows[1]["output_shape"] == [1, 32, 8, 8] and rows[1]["macs"] == 32 * 8 * 8 * 16 * 9


# ---- report data ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fp32", "int8", "sparse"])
def test_timeline_lower_bound_is_the_planners(models, kind):
    raw = models[kind].read_bytes()
    info = fmt.read(raw)
    tl = report.arena_timeline(info)
    assert tl["lower_bound"] == info["arena_lower_bound_bytes"]
    if kind == "fp32":  # the planner on the same graph
        assert tl["lower_bound"] == planner.plan(build_graph(str(DIGITS))).lower_bound
    assert tl["lower_bound"] == max(tl["live"]) <= tl["arena_bytes"]
    # Buffers alive at a common step never share bytes; all fit in the arena.
    bufs = tl["buffers"]
    for b in bufs:
        assert 0 <= b["offset"] and b["offset"] + b["bytes"] <= tl["arena_bytes"]
    for i, a in enumerate(bufs):
        for b in bufs[i + 1:]:
            if a["first"] <= b["last"] and b["first"] <= a["last"]:
                assert a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"], (a, b)


def test_layers_and_fusion(models):
    info = fmt.read(models["fp32"].read_bytes())
    depth = report.layers(info)
    assert depth == list(range(7))  # a chain
    fused = [report.fused_label(n) for n in info["nodes"]]
    assert fused[:2] == ["+relu", "+relu"] and fused[2] == ""


def test_composition(models):
    fp32 = report.composition(fmt.read(models["fp32"].read_bytes()))["totals"]
    assert fp32["int8_saved"] == 0 and fp32["sparse_saved"] == 0
    assert fp32["stored_bytes"] == fp32["fp32_bytes"]
    int8 = report.composition(fmt.read(models["int8"].read_bytes()))["totals"]
    # int8 weights: a quarter of the float bytes (int32 biases and per-channel words aside).
    assert int8["stored_bytes"] < 0.35 * fp32["stored_bytes"]
    assert int8["int8_saved"] > 0.6 * fp32["fp32_bytes"]
    raw = models["sparse"].read_bytes()
    info = fmt.read(raw)
    info["_raw"] = raw
    sp = report.composition(info)["totals"]
    assert any(t["storage"] == "sparse" for t in info["tensors"])
    assert sp["sparse_saved"] > 0.5 * sp["dense_bytes"]


def test_sqnr_per_layer_against_onnxruntime(models):
    raw = models["int8"].read_bytes()
    info = fmt.read(raw)
    d = report.sqnr_data(str(models["int8"]), info, str(DIGITS), str(CALIB))
    rows = {r["node"]: r for r in d["layers"]}
    assert "/3/Conv" in rows
    # edgert fp32 agrees with onnxruntime to float rounding; int8 costs 20-60 dB.
    assert all(r["fp32_vs_ort"] > 80 for r in rows.values() if r["fp32_vs_ort"] is not None)
    assert sum(r["fp32_vs_ort"] is not None for r in rows.values()) >= 5
    assert all(15 < r["int8_vs_fp32"] < 70 for r in rows.values() if r["int8_vs_fp32"] is not None)
    (out_db,) = d["outputs_vs_ort_db"].values()
    assert 15 < out_db < 70


# ---- the page ---------------------------------------------------------------------------

def write_report(model: pathlib.Path, out: pathlib.Path, *extra: str) -> str:
    r = CliRunner().invoke(main, ["report", str(model), "-o", str(out), "--runs", "3", *extra])
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


def test_page_is_self_contained(models, tmp_path):
    page = write_report(models["int8"], tmp_path / "r.html", "--reference", str(DIGITS), "--calibration", str(CALIB))
    assert page.startswith("<!DOCTYPE html>")
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+[^\s\"'<>]*", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert "<link" not in page and "src=" not in page and "@import" not in page
    for section in ("graph", "arena", "time", "sqnr", "weights"):
        assert f'id="{section}"' in page
    assert "int8 vs fp32" in page and "/3/Conv" in page


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        msg = "chromium is not installed (Debian package chromium; tools/install_system_deps.sh)"
        if os.environ.get("EDGERT_REQUIRE_BROWSER"):
            pytest.fail(msg + " and EDGERT_REQUIRE_BROWSER is set")
        pytest.skip(msg)
    return exe


def render(page: pathlib.Path, png: pathlib.Path, width: int = 1400, height: int = 1800) -> str:
    """Screenshots `page` in headless Chromium; returns the browser's console messages."""
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--enable-logging=stderr", "--v=0", f"--user-data-dir={png.parent / 'chromium-profile'}",
                        f"--screenshot={png}", f"--window-size={width},{height}", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert png.exists(), r.stderr[-3000:]
    return "\n".join(line for line in r.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line)


def pixels(png: pathlib.Path) -> np.ndarray:
    from PIL import Image

    with Image.open(png) as im:
        return np.asarray(im.convert("RGB"), np.int16)


def test_console_check_sees_errors(tmp_path):
    """The check below can fail: a page with a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>notDefined();</script></body></html>")
    assert "notDefined" in render(bad, tmp_path / "bad.png", 400, 300)


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_page_renders_in_chromium(models, tmp_path, kind):
    extra = ["--reference", str(DIGITS), "--calibration", str(CALIB)] if kind == "int8" else []
    html = tmp_path / f"{kind}.html"
    write_report(models[kind], html, *extra)
    png = tmp_path / f"{kind}.png"
    console = render(html, png)
    assert console == "", console
    px = pixels(png)
    assert px.shape[:2] == (1800, 1400)
    non_white = np.any(px < 235, axis=2)
    assert non_white.mean() > 0.05, f"only {non_white.mean():.3f} of the page is drawn"
    # The graph's node boxes are drawn (the SVG rendered, in the backend's colour).
    blue = np.all(np.abs(px - np.array(NODE_BLUE)) <= 6, axis=2)
    assert blue.sum() > 2000, blue.sum()
    # The dark header band is at the top.
    assert px[:40].mean() < 80


# ---- graph prefixes and instructions per node under QEMU ------------------------------

def test_prefix_model_computes_the_layer(models):
    """A prefix of the file computes exactly the value the whole graph had at that node."""
    from edgert.cli.subgraph import prefix

    raw = models["fp32"].read_bytes()
    info = fmt.read(raw)
    full = Session(raw)
    feeds = feeds_of(full)
    for k in (0, 3, len(info["nodes"]) - 1):
        p = Session(prefix(raw, k))
        assert len(p.nodes()) == k + 1
        (out,) = p.get_outputs()
        assert out.name == info["tensors"][info["nodes"][k]["outputs"][0]]["name"]
        (got,) = p.run(None, feeds)
        if k == len(info["nodes"]) - 1:
            np.testing.assert_array_equal(got, full.run(None, feeds)[0])
        else:
            assert got.shape == tuple(out.shape) and np.isfinite(got).all() and got.any()
    with pytest.raises(edgert.errors.ModelFormatError):
        prefix(raw, len(info["nodes"]))


def _qemu_ready() -> bool:
    from edgert.cli import targets

    return shutil.which("gcc") is not None and targets.load("rpi4").available()


def test_plugin_rebuilt_when_its_source_changes(tmp_path, monkeypatch):
    """The plugin library's name carries a hash of its source: an edited source (even with
    an older time, as a wheel's files can have) builds a new library; the same one none."""
    from edgert.cli import report_qemu

    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    monkeypatch.delenv("EDGERT_ICOUNT_DIR", raising=False)
    monkeypatch.setenv("EDGERT_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "qemu_icount.c"
    src.write_bytes(report_qemu.PLUGIN_SOURCE.read_bytes())
    monkeypatch.setattr(report_qemu, "PLUGIN_SOURCE", src)
    first = report_qemu.plugin()
    assert first.parent == tmp_path / "cache" / "icount" and first.is_file()
    built = first.stat().st_mtime_ns
    assert report_qemu.plugin() == first and first.stat().st_mtime_ns == built
    src.write_text(src.read_text() + "\n/* edited */\n")
    os.utime(src, (1_000_000_000, 1_000_000_000))  # older than the library
    second = report_qemu.plugin()
    assert second != first and second.is_file()
    # An override folder without icount.c is an error naming the variable.
    monkeypatch.setenv("EDGERT_ICOUNT_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(edgert.errors.EdgertError, match="EDGERT_ICOUNT_DIR"):
        report_qemu.plugin()


def test_instructions_per_node_under_qemu(models):
    if not _qemu_ready():
        msg = "gcc, qemu-aarch64 or aarch64-linux-gnu-gcc missing (apt-get install gcc qemu-user gcc-aarch64-linux-gnu)"
        if os.environ.get("EDGERT_REQUIRE_ARM"):
            pytest.fail(msg)
        pytest.skip(msg)
    from edgert.cli import build, report_qemu, targets

    r = report_qemu.count(str(models["int8"]), "rpi4", progress=False)
    per = r["per_node"]
    info = fmt.read(models["int8"].read_bytes())
    assert list(per) == [n["name"] for n in info["nodes"]]
    assert sum(per.values()) == r["instructions_per_inference"]
    # Convolutions are 80+ % of the work (counts of tiny nodes such as a view are noise).
    assert sum(v for k, v in per.items() if k.endswith("Conv")) > 0.8 * r["instructions_per_inference"]
    # The two big convolutions (294,912 and 147,456 MACs) cost the most, in that order.
    ranked = sorted(per, key=per.get, reverse=True)
    assert ranked[:2] == ["/3/Conv", "/7/Conv"]
    # The last prefix is the whole model: counted directly, the file gives the same number.
    t = targets.load("rpi4")
    run = build.compile_target(t) / "bin" / "edgert-run"
    x = np.load(DATA / "digits_test.npz")["input"][:1].astype(np.float32)
    work = pathlib.Path(os.path.dirname(models["int8"]))
    np.save(work / "x.npy", np.random.default_rng(0).standard_normal(x.shape).astype(np.float32))
    qemu = t.qemu_command() + ["-plugin", str(report_qemu.plugin()), "-d", "plugin"]

    def cmd(n: int) -> list[str]:
        return qemu + [str(run), str(models["int8"]), "--input", f"input={work / 'x.npy'}", "--output-dir",
                       str(work), "--repeat", str(n), "--threads", "1"]

    whole = report_qemu._insns(cmd(2), str(work)) - report_qemu._insns(cmd(1), str(work))
    assert abs(whole - r["instructions_per_inference"]) <= 0.01 * whole


def test_bench_busiest_thread_under_qemu(models):
    """`edgert bench --threads N --target rpi4`: per-thread counts from edgert's own plugin.
    One thread gives the whole-model count of the single-thread plugin (within 1 %: the
    inputs and file differ slightly). With two threads, how the work is shared depends on
    the host's scheduling (on a busy host, a worker that sleeps joins no job of a small
    model, and on a model this small the caller's polling for a worker outweighs the work),
    so only the shape of the report is checked."""
    if not _qemu_ready():
        msg = "gcc, qemu-aarch64 or aarch64-linux-gnu-gcc missing (apt-get install gcc qemu-user gcc-aarch64-linux-gnu)"
        if os.environ.get("EDGERT_REQUIRE_ARM"):
            pytest.fail(msg)
        pytest.skip(msg)
    import json

    from edgert.cli import report_qemu

    assert report_qemu.plugin(per_thread=True) != report_qemu.plugin()
    docs = {}
    for threads in (1, 2):
        r = CliRunner().invoke(main, ["bench", str(models["int8"]), "--threads", str(threads), "--target", "rpi4",
                                      "--runs", "1", "--warmup", "0", "--json"])
        assert r.exit_code == 0, r.output
        docs[threads] = json.loads(r.output)
        per = docs[threads]["thread_instructions"]
        assert len(per) == threads and max(per) > 0
        assert docs[threads]["busiest_thread_instructions"] == max(per)
    one = docs[1]["busiest_thread_instructions"]
    whole = report_qemu.count(str(models["int8"]), "rpi4", progress=False)["instructions_per_inference"]
    assert abs(one - whole) <= 0.01 * whole
    two = docs[2]["thread_instructions"]
    assert max(two) >= 0.5 * sum(two) and max(two) > 0.5 * one
    # The text report names the figure.
    r = CliRunner().invoke(main, ["bench", str(models["int8"]), "--threads", "2", "--target", "rpi4", "--runs", "1"])
    assert r.exit_code == 0 and "busiest thread" in r.output, r.output
    # A board that runs natively has nothing to count.
    r = CliRunner().invoke(main, ["bench", str(models["int8"]), "--target", "host", "--runs", "1"])
    assert r.exit_code == 1 and "error:" in r.output


def test_progress_bar_only_when_asked_or_on_a_terminal():
    import io

    from edgert.converter.progress import Progress

    quiet = io.StringIO()  # not a terminal
    with Progress("work", 4, stream=quiet) as bar:
        for _ in range(4):
            bar.step()
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    bar = Progress("work", 4, enabled=True, stream=loud)
    for k in range(1, 5):
        bar.update(k)
    text = loud.getvalue()
    assert text.startswith("\rwork [") and "4/4" in text and text.endswith("\n")
    assert "#" * 30 in text
