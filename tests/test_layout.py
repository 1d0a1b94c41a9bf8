"""The package's layout (docs/design.md, "Layout"): the board side imports nothing of the
workstation side, the subpackages import only in the allowed directions, and no module
imports itself back through others, function-level imports included.

Read from the installed package (the one conftest.py imported), by parsing every module:
an import anywhere in a file, at module level or inside a function, is an edge.
"""
from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

import edgert

PKG = pathlib.Path(edgert.__file__).resolve().parent

# The base modules: what every side may import. The compiled library (_edgert_c) is one.
BASE = {"edgert._version", "edgert.errors", "edgert.dtypes", "edgert._oplist", "edgert.fileformat",
        "edgert._edgert_c", "edgert._ffi_build"}
# What each part may import (besides itself): its own modules and these parts.
ALLOWED = {
    "base": {"base"},
    "runtime": {"base"},
    "converter": {"base", "runtime"},
    "cli": {"base", "runtime", "converter"},
    "top": {"base", "runtime", "converter"},
}
# Third-party packages a board-side module may import at module level.
BOARD_THIRD_PARTY = {"numpy", "cffi"}


def part(mod: str) -> str:
    if mod == "edgert":
        return "top"
    if mod in BASE:
        return "base"
    sub = mod.split(".")[1]
    return sub if sub in ("runtime", "converter", "cli") else "unplaced"


def modules() -> dict[str, tuple[pathlib.Path, bool]]:
    found = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if "_src" in parts:
            continue
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        found[".".join(parts)] = (p, is_pkg)
    return found


def imports_of(mod: str, path: pathlib.Path, is_pkg: bool, known: set[str]):
    """(target module, line, at module level) for every edgert import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = mod if is_pkg else mod.rsplit(".", 1)[0]
    top_level = {id(n) for n in tree.body} | {id(n) for s in tree.body if isinstance(s, (ast.If, ast.Try))
                                               for n in ast.walk(s)}

    def resolve(name: str) -> str:
        while name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - (node.level - 1)]
                full = ".".join(base) + (f".{node.module}" if node.module else "")
            else:
                full = node.module or ""
            if full != "edgert" and not full.startswith("edgert."):
                continue
            for a in node.names:
                sub = f"{full}.{a.name}"
                targets.append(sub if sub in known else resolve(full))
        elif isinstance(node, ast.Import):
            targets = [resolve(a.name) for a in node.names if a.name == "edgert" or a.name.startswith("edgert.")]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("edgert"):
                targets = [resolve(node.args[0].value)]
            elif node.args:  # a computed name: the checker cannot follow it
                targets = ["<dynamic>"]
        for t in targets:
            if t != mod:
                yield t, node.lineno, id(node) in top_level


@pytest.fixture(scope="module")
def graph():
    mods = modules()
    known = set(mods) | {"edgert._edgert_c"}
    edges = {m: [] for m in mods}
    for m, (path, is_pkg) in mods.items():
        edges[m] = list(imports_of(m, path, is_pkg, known))
    return mods, edges


def test_every_module_has_a_place(graph):
    mods, _ = graph
    assert not [m for m in mods if part(m) == "unplaced"], "modules outside runtime/, converter/, cli/ and the base"


# Modules that import by computed name, and what they import that way.
DYNAMIC_OK = {"edgert.runtime.backends": "the fallback runtimes (onnxruntime, LiteRT, tflite-runtime) by name"}


def test_no_dynamic_imports(graph):
    _, edges = graph
    bad = [f"{m}:{line}" for m, es in edges.items() for t, line, _ in es if t == "<dynamic>" and m not in DYNAMIC_OK]
    assert not bad, f"imports by computed name hide the import graph: {bad}"


def test_imports_go_in_the_allowed_directions(graph):
    _, edges = graph
    bad = []
    for m, es in edges.items():
        for t, line, _ in es:
            if t == "<dynamic>":
                continue
            src, dst = part(m), part(t)
            if src != dst and dst not in ALLOWED[src]:
                bad.append(f"{m}:{line} ({src}) imports {t} ({dst})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles(graph):
    mods, edges = graph
    succ = {m: sorted({t for t, _, _ in es if t in mods}) for m, es in edges.items()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(mods)))
    for m in succ:
        if m not in index:
            visit(m)
    assert not cycles, f"import cycles: {cycles}"


def test_board_side_imports_only_numpy_and_cffi(graph):
    """At module level, the runtime and the base modules import the standard library,
    numpy and cffi; other packages (a fallback runtime) only where a file needs them."""
    mods, _ = graph
    stdlib = getattr(sys, "stdlib_module_names", None)
    if stdlib is None:
        pytest.skip("sys.stdlib_module_names needs Python 3.10")
    bad = []
    for m, (path, _) in mods.items():
        if part(m) not in ("runtime", "base") or m == "edgert._ffi_build":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level else []
            for n in names:
                top = n.split(".")[0]
                if top not in stdlib and top not in BOARD_THIRD_PARTY and top != "edgert" and top != "__future__":
                    bad.append(f"{m}:{node.lineno} imports {n}")
    assert not bad, "\n".join(bad)


def test_registering_packages_import_every_module():
    """ops/ and frontend/onnx_ops/ list their modules by hand; a module left out of the
    list would silently lose its ops."""
    import importlib

    for pkg in ("edgert.converter.ops", "edgert.converter.frontend.onnx_ops"):
        mod = importlib.import_module(pkg)
        folder = pathlib.Path(mod.__file__).parent
        missing = [p.stem for p in folder.glob("*.py")
                   if p.stem != "__init__" and f"{pkg}.{p.stem}" not in sys.modules]
        assert not missing, f"{pkg} does not import {missing}"


_BOARD_SCRIPT = r"""
import importlib.abc, json, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("onnx", "onnxruntime") or name.startswith(("edgert.converter", "edgert.cli")):
            raise ImportError(f"{name} is not on the board")
        return None

sys.meta_path.insert(0, Refuse())
import numpy as np
import edgert
from edgert.runtime import reader
sess = edgert.Session(sys.argv[1])
x = np.load(sys.argv[2])
y, = sess.run(None, {sess.get_inputs()[0].name: x})
info = reader.read(open(sys.argv[1], "rb").read())
print(json.dumps({"y": y.tolist(), "nodes": len(info["nodes"]), "version": edgert.runtime_info()["version"],
                  "loaded": sorted(m for m in sys.modules if m.startswith("edgert"))}))
"""


def test_board_side_runs_without_the_converter(tmp_path):
    """The runtime, the reader and the public API run a converted file with the
    converter's modules and onnx made unimportable, as on a board with the runtime-only
    install, and load none of them."""
    import numpy as np

    model = PKG / "data" / "digits_cnn.onnx"
    out = tmp_path / "digits.edgert"
    edgert.convert(str(model), str(out))
    x = np.load(PKG / "data" / "digits_test.npz")["input"][:1].astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    want, = edgert.Session(str(out)).run(None, {edgert.Session(str(out)).get_inputs()[0].name: x})
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-c", _BOARD_SCRIPT, str(out), str(tmp_path / "x.npy")], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.asarray(got["y"], np.float32), want)
    assert got["nodes"] > 0 and got["version"] == edgert.__version__
    assert not [m for m in got["loaded"] if m.startswith(("edgert.converter", "edgert.cli"))], got["loaded"]
