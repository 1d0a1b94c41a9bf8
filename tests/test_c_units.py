"""The C runtime's units and their include graph (csrc/src, csrc/kernels, csrc/include).

A unit is a .c file and the .h of the same name beside it (src/exec.c + src/exec.h), or
a header without a .c. The kernels (csrc/kernels/**) see the runtime through a few
headers only: internal.h (tensors, nodes, the kernel contract and its helpers), exec.h
(the worker pool and run-time errors, exec.c) and cpu.h (the micro-kernel table,
cpu.c), besides their own. What binds a model to a session (runtime.h: the loader, the
session, bounds, partitions, layout) is not theirs, so:

- no kernel includes, even through another header, a src/ header other than those;
- no kernel calls a function defined in a file that includes runtime.h;
- the units' include graph has no cycle.

Reads the checkout's sources only; compiles nothing.
"""
from __future__ import annotations

import pathlib
import re

CSRC = pathlib.Path(__file__).resolve().parents[1] / "csrc"
# The src/ and include/ headers a kernel may include (directly or through another).
KERNEL_HEADERS = {"src/internal.h", "src/exec.h", "src/cpu.h", "include/edgert.h", "include/edgert_ops.def"}
SESSION_HEADER = "src/runtime.h"

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# A function definition starting at column 0, not static: its name is the last word
# before the parameter list, and a body follows (not a ';').
DEFINITION = re.compile(r"^(?!static\b|typedef\b|extern\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M)


def rel(path: pathlib.Path) -> str:
    return path.relative_to(CSRC).as_posix()


def sources() -> list[pathlib.Path]:
    files = [p for d in ("src", "include") for p in (CSRC / d).iterdir() if p.suffix in (".c", ".h", ".def")]
    files += [p for p in (CSRC / "kernels").rglob("*") if p.suffix in (".c", ".h")]
    return sorted(files)


def includes() -> dict[str, list[str]]:
    """Each file (relative to csrc/) to the files it includes with quotes, resolved as the
    build does: beside the including file, then -Isrc, then -Iinclude."""
    graph = {}
    for f in sources():
        found = []
        for name in INCLUDE.findall(COMMENT.sub("", f.read_text())):
            for base in (f.parent, CSRC / "src", CSRC / "include"):
                target = (base / name).resolve()
                if target.is_file():
                    found.append(rel(target))
                    break
            else:
                raise AssertionError(f'{rel(f)}: #include "{name}" is not in csrc/')
        graph[rel(f)] = found
    return graph


def closure(graph: dict[str, list[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for t in graph.get(todo.pop(), []):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def unit(path: str) -> str:
    return path.rsplit(".", 1)[0]


def is_kernel(path: str) -> bool:
    return path.startswith("kernels/")


def test_kernels_include_only_the_kernel_headers():
    graph = includes()
    assert SESSION_HEADER in graph
    bad = []
    for f in filter(is_kernel, graph):
        outside = sorted(h for h in closure(graph, f) if not is_kernel(h) and h not in KERNEL_HEADERS)
        if outside:
            bad.append(f"{f} includes {', '.join(outside)}")
    assert not bad, "kernels may include only " + ", ".join(sorted(KERNEL_HEADERS)) + ":\n" + "\n".join(bad)


def test_kernel_headers_stay_below_the_session():
    graph = includes()
    for h in KERNEL_HEADERS:
        assert SESSION_HEADER not in closure(graph, h), f"{h} includes {SESSION_HEADER}"


def test_kernels_call_no_session_level_function():
    graph = includes()
    session_files = [f for f in graph if f.startswith("src/") and f.endswith(".c")
                     and SESSION_HEADER in closure(graph, f)]
    assert "src/session.c" in session_files
    defined = {}
    for f in session_files:
        for name in DEFINITION.findall(COMMENT.sub("", (CSRC / f).read_text())):
            defined[name] = f
    assert "edgert_session_run" in defined  # the pattern still finds definitions
    bad = []
    for f in filter(is_kernel, graph):
        text = COMMENT.sub("", (CSRC / f).read_text())
        for name, where in sorted(defined.items()):
            if re.search(rf"\b{name}\s*\(", text):
                bad.append(f"{f} calls {name} ({where})")
    assert not bad, "\n".join(bad)


def test_unit_include_graph_has_no_cycle():
    units: dict[str, set[str]] = {}
    for f, targets in includes().items():
        units.setdefault(unit(f), set()).update(unit(t) for t in targets if unit(t) != unit(f))
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(u: str) -> None:
        state[u] = 1
        path.append(u)
        for v in sorted(units.get(u, ())):
            if state.get(v) == 1:
                raise AssertionError("include cycle between units: " + " -> ".join(path[path.index(v):] + [v]))
            if v not in state:
                visit(v)
        path.pop()
        state[u] = 2

    for u in sorted(units):
        if u not in state:
            visit(u)
    assert "src/session" in units
