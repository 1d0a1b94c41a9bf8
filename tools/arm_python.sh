#!/usr/bin/env bash
# Assembles an emulated ARM Python 3.11 root with pip and venv (no binfmt, no chroot, no
# root needed):
#
#   tools/arm_python.sh [arm64|armhf] [ROOTFS]
#       arm64 (default): ~/.cache/edgert/arm64-rootfs  ($EDGERT_ARM64_ROOTFS)
#       armhf:           ~/.cache/edgert/armhf-rootfs  ($EDGERT_ARMHF_ROOTFS)
#
# then runs it as
#
#   qemu-aarch64 -cpu cortex-a72 -L ROOTFS ROOTFS/usr/bin/python3.11 ...
#   qemu-arm     -cpu cortex-a7  -L ROOTFS ROOTFS/usr/bin/python3.11 ...
#
# Debian's python3.11, python3-pip and python3-venv packages of that architecture are
# downloaded with a private apt configuration (its own state and cache directories) and
# unpacked with dpkg -x. numpy, cffi and click, in the system site (as apt's packages are
# on a board): on arm64 from the aarch64 wheels on PyPI (numpy the host's version), with
# Pillow for the examples (tests/test_examples.py); on armhf from Debian's packages (PyPI
# has no armv7l numpy wheels). Board wheels are
# installed into a venv made there with `python3 -m venv --system-site-packages`
# (tests/test_arm.py), as on Raspberry Pi OS, whose Python refuses `pip install` outside
# a venv.
# An ARM /proc/cpuinfo is planted at ROOTFS/proc/cpuinfo (QEMU shows the guest the host's
# otherwise), and the standard library is precompiled on the host, which is ~50x faster
# than under QEMU. ROOTFS/.complete marks a finished root and names what it holds: a rerun
# with the same contents does nothing; a root made from another package list is made
# again (beside it, then swapped in).
set -euo pipefail
ARCH=arm64
case "${1:-}" in arm64|armhf) ARCH=$1; shift ;; esac
if [ "$ARCH" = arm64 ]; then
  ROOTFS=${1:-${EDGERT_ARM64_ROOTFS:-$HOME/.cache/edgert/arm64-rootfs}}
else
  ROOTFS=${1:-${EDGERT_ARMHF_ROOTFS:-$HOME/.cache/edgert/armhf-rootfs}}
fi
ROOTFS=${ROOTFS%/}
# An empty status file makes apt resolve the whole dependency closure (libc6 included).
pkgs=(python3.11 python3-pip python3-venv libstdc++6 libgcc-s1 libffi8)
[ "$ARCH" = armhf ] && pkgs+=(python3-numpy python3-cffi python3-click)
STAMP="$ARCH: ${pkgs[*]}; sitecustomize EDGERT_GUEST_EXEC"
[ "$ARCH" = arm64 ] && STAMP="$STAMP; pillow"
if [ -f "$ROOTFS/.complete" ] && [ "$(cat "$ROOTFS/.complete")" = "$STAMP" ]; then
  echo "$ROOTFS ready"
  exit 0
fi
mkdir -p "$(dirname "$ROOTFS")"
# The root is assembled in BUILD and moved to ROOTFS when finished, so a run that stops
# halfway leaves nothing behind that looks usable, and a stale root stays usable until
# the new one replaces it. The .pyc files name their sources at ROOTFS.
BUILD=$(mktemp -d "$ROOTFS.partial.XXXXXX")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK" "$BUILD"' EXIT
echo "== apt ($ARCH, private state in $WORK)"
mkdir -p "$WORK/state/lists/partial" "$WORK/cache/archives/partial" "$WORK/etc/preferences.d"
touch "$WORK/status"
cat >"$WORK/apt.conf" <<EOF2
APT::Architecture "$ARCH";
APT::Architectures { "$ARCH"; };
APT::Install-Recommends "false";
Dir::State "$WORK/state";
Dir::State::status "$WORK/status";
Dir::Cache "$WORK/cache";
Dir::Etc::Preferences "$WORK/etc/preferences";
Dir::Etc::PreferencesParts "$WORK/etc/preferences.d";
Debug::NoLocking "true";
Acquire::Retries "3";
Acquire::http::Timeout "30";
EOF2
export APT_CONFIG="$WORK/apt.conf"
# A mirror caught mid-sync fails one index now and then, and a download can stall on an
# open connection: each try has a time limit; retry, then go on with what was fetched (the
# install below fails clearly if a package is really missing).
for try in 1 2 3; do
  timeout 180 apt-get update -qq 2>"$WORK/update.err" && break
  echo "apt-get update failed (try $try): $(tail -n 2 "$WORK/update.err")"
  sleep 5
done
for try in 1 2 3; do
  timeout 600 apt-get install -y -qq -d "${pkgs[@]}" >/dev/null && break
  [ "$try" = 3 ] && { echo "apt-get install -d failed 3 times" >&2; exit 1; }
  echo "apt-get install -d failed or stalled (try $try)"
done
n=0
for deb in "$WORK"/cache/archives/*.deb; do
  dpkg -x "$deb" "$BUILD"
  n=$((n + 1))
done
echo "unpacked $n packages"
unset APT_CONFIG
# BLAS and LAPACK are reached through update-alternatives links that the packages' install
# scripts would make (dpkg -x runs none): make them, relative, inside the root.
for lib in "$BUILD"/usr/lib/*/blas/libblas.so.3 "$BUILD"/usr/lib/*/lapack/liblapack.so.3; do
  [ -e "$lib" ] || continue
  ln -sf "$(basename "$(dirname "$lib")")/$(basename "$lib")" "$(dirname "$(dirname "$lib")")/$(basename "$lib")"
done

PYHOST=${PYTHON:-python3}
SITE="$BUILD/usr/lib/python3/dist-packages"
mkdir -p "$SITE"
if [ "$ARCH" = arm64 ]; then
  echo "== aarch64 wheels (numpy, cffi, click; Pillow for examples/)"
  NUMPY_VER=$($PYHOST -c 'import numpy; print(numpy.__version__)')
  $PYHOST -m pip install -q --disable-pip-version-check --no-deps --target "$SITE" \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 \
    --platform manylinux2014_aarch64 --only-binary=:all: \
    "numpy==$NUMPY_VER" cffi pycparser click pillow
fi

mkdir -p "$BUILD/proc"
if [ "$ARCH" = arm64 ]; then
  echo "== /proc/cpuinfo (Cortex-A72)"
  for cpu in 0 1 2 3; do
    printf 'processor\t: %s\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n' "$cpu"
    printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n\n'
  done >"$BUILD/proc/cpuinfo"
else
  echo "== /proc/cpuinfo (Cortex-A7)"
  for cpu in 0 1 2 3; do
    printf 'processor\t: %s\nmodel name\t: ARMv7 Processor rev 5 (v7l)\nBogoMIPS\t: 38.40\n' "$cpu"
    printf 'Features\t: half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm\n'
    printf 'CPU implementer\t: 0x41\nCPU architecture: 7\nCPU variant\t: 0x0\nCPU part\t: 0xc07\nCPU revision\t: 5\n\n'
  done >"$BUILD/proc/cpuinfo"
fi

echo "== sitecustomize: child ARM programs through QEMU (EDGERT_GUEST_EXEC)"
# QEMU user mode runs one ARM program; an ARM program it starts (`python3 -m venv` runs the
# new venv's python for ensurepip, which runs python again) reaches the host kernel, which
# refuses it (ENOEXEC) unless binfmt_misc hands it to QEMU, and that needs root and is not
# assumed here. With EDGERT_GUEST_EXEC set to the QEMU command ("qemu-aarch64 -cpu
# cortex-a72 -L ROOTFS", as tests/test_arm.py sets it), this root's Python starts such
# children through it; unset, nothing changes. It replaces Debian's sitecustomize, whose
# only job is apport's hook (apport is not in the root).
rm -f "$BUILD/usr/lib/python3.11/sitecustomize.py"
cat >"$BUILD/usr/lib/python3.11/sitecustomize.py" <<'EOF2'
# Planted by edgert's tools/arm_python.sh: with EDGERT_GUEST_EXEC set to a QEMU user-mode
# command, a child process whose executable is an ELF file for this machine is started
# through that command, as binfmt_misc would (QEMU user mode cannot start one itself).
import os

if os.environ.get("EDGERT_GUEST_EXEC"):
    import shlex
    import shutil
    import subprocess
    import sys

    def _elf_machine(path):
        try:
            with open(path, "rb") as f:
                head = f.read(20)
        except OSError:
            return None
        return head[18:20] if head[:4] == b"\x7fELF" else None

    _GUEST = _elf_machine(sys.executable)
    _QEMU = shlex.split(os.environ["EDGERT_GUEST_EXEC"])
    _execute_child = subprocess.Popen._execute_child

    # Python 3.11's signature: (args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
    # startupinfo, creationflags, shell, ...).
    def _through_qemu(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                      creationflags, shell, *rest):
        if not shell and _GUEST is not None:
            argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
            exe = os.fsdecode(executable if executable is not None else argv[0])
            if os.sep not in exe:
                exe = shutil.which(exe, path=(env or os.environ).get("PATH")) or exe
            if _elf_machine(exe) == _GUEST:
                args, executable = [*_QEMU, exe, *argv[1:]], None
        return _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                              creationflags, shell, *rest)

    subprocess.Popen._execute_child = _through_qemu
EOF2

echo "== precompiling .pyc on the host"
# Same magic number (both 3.11), so the host compiler's .pyc files are valid in the guest.
$PYHOST -m compileall -q -j 2 -s "$BUILD" -p "$ROOTFS" "$BUILD/usr/lib/python3.11" "$SITE" >/dev/null || true

echo "$STAMP" >"$BUILD/.complete"
chmod 755 "$BUILD"
if [ -e "$ROOTFS" ]; then
  OLD=$(mktemp -d "$ROOTFS.old.XXXXXX")
  mv "$ROOTFS" "$OLD/"
  mv -T "$BUILD" "$ROOTFS"
  rm -rf "$OLD"
else
  mv -T "$BUILD" "$ROOTFS"
fi
du -sh "$ROOTFS"
