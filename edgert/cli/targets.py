"""Build targets (boards) described by targets/<name>.toml (shipped in the package, see
edgert/cli/sources.py).

Each file names the cross compiler triple, the C flags that select the CPU, whether the
NEON (and dot-product) kernels are built, and how the tests run the result under QEMU.
Fields (all present in every file):

    description     one line for humans
    arch            "armv6", "armv7", "aarch64" or "native"
    triple          compiler prefix, e.g. "aarch64-linux-gnu" ("" for the host compiler)
    cflags          list of extra C flags (-mcpu, -mfpu, -mfloat-abi, ...)
    neon, dotprod   booleans: build csrc/kernels/neon, and the sdot kernels
    qemu, qemu_cpu  QEMU user-mode binary and its -cpu ("" for the host)
    sysroot         the -L directory QEMU needs to find the target's libc
    wheel_platform  wheel platform tag; "{glibc}" becomes e.g. "2_34" from the library's
                    symbol versions, "native" the build machine's tag
"""
from __future__ import annotations

import dataclasses
import shutil

from . import sources
from ..errors import EdgertError


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    description: str
    arch: str
    triple: str
    cflags: tuple[str, ...]
    neon: bool
    dotprod: bool
    qemu: str
    qemu_cpu: str
    sysroot: str
    wheel_platform: str

    def tool(self, name: str) -> str:
        """The toolchain program `name` ("gcc", "ar", "strip", "objdump", ...) for this target."""
        if not self.triple:
            return {"gcc": "cc"}.get(name, name)
        return f"{self.triple}-{name}"

    @property
    def is_cross(self) -> bool:
        return bool(self.triple)

    def qemu_command(self, cpu: str | None = None) -> list[str]:
        """The prefix that runs one of this target's programs on the build machine."""
        if not self.qemu:
            return []
        return [self.qemu, "-L", self.sysroot, "-cpu", cpu or self.qemu_cpu]

    def install_hint(self) -> str:
        """What to install for this target's builds (and emulation), as words for a user."""
        packages = [f"gcc-{self.triple}" if self.triple else "gcc"]
        if self.qemu:
            packages.insert(0, "qemu-user")
        if shutil.which("make") is None:
            packages.append("make")
        return "on Debian or Ubuntu: sudo apt-get install " + " ".join(packages)

    def available(self) -> bool:
        """True when the compiler (and QEMU, for cross targets) are installed."""
        if shutil.which(self.tool("gcc")) is None:
            return False
        return not self.qemu or shutil.which(self.qemu) is not None


def _parse_value(text: str, where: str):
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_parse_value(v, where) for v in inner.split(",") if v.strip()] if inner else []
    try:
        return int(text)
    except ValueError:
        raise EdgertError(f"{where}: cannot read value {text!r}") from None


def parse_toml(text: str, where: str = "<toml>") -> dict:
    """Reads the flat TOML subset the target files use (tomllib when available)."""
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        tomllib = None
    if tomllib is not None:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise EdgertError(f"{where}: {e}") from None
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise EdgertError(f"{where}:{n}: expected key = value")
        if "#" in value and not value.strip().startswith('"'):
            value = value.split("#", 1)[0]
        out[key.strip()] = _parse_value(value, f"{where}:{n}")
    return out


_FIELDS = [f.name for f in dataclasses.fields(Target) if f.name != "name"]


def load(name: str) -> Target:
    """The target targets/<name>.toml; EdgertError naming the known ones otherwise."""
    path = sources.targets_dir() / f"{name}.toml"
    if not path.is_file():
        raise EdgertError(f"unknown target {name!r}; known: {', '.join(names())}")
    data = parse_toml(path.read_text(encoding="utf-8"), str(path))
    missing = [f for f in _FIELDS if f not in data]
    if missing:
        raise EdgertError(f"{path}: missing {', '.join(missing)}")
    data["cflags"] = tuple(data["cflags"])
    return Target(name=name, **{f: data[f] for f in _FIELDS})


def names() -> list[str]:
    """Every target with a file in targets/."""
    return sorted(p.stem for p in sources.targets_dir().glob("*.toml"))


def all_targets() -> list[Target]:
    return [load(n) for n in names()]
