#!/usr/bin/env bash
# Assembles an emulated ARM Python 3.11 root with pip (no binfmt, no chroot, no root needed):
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
# Debian's python3.11 and python3-pip packages of that architecture are downloaded with a
# private apt configuration (its own state and cache directories) and unpacked with
# dpkg -x. numpy, cffi and click: on arm64 from the aarch64 wheels on PyPI (numpy the
# host's version); on armhf from Debian's packages (PyPI has no armv7l numpy wheels).
# An ARM /proc/cpuinfo is planted at ROOTFS/proc/cpuinfo (QEMU shows the guest the host's
# otherwise), and the standard library is precompiled on the host, which is ~50x faster
# than under QEMU. ROOTFS/.complete marks a finished root; a rerun with it present does
# nothing.
set -euo pipefail
ARCH=arm64
case "${1:-}" in arm64|armhf) ARCH=$1; shift ;; esac
if [ "$ARCH" = arm64 ]; then
  ROOTFS=${1:-${EDGERT_ARM64_ROOTFS:-$HOME/.cache/edgert/arm64-rootfs}}
else
  ROOTFS=${1:-${EDGERT_ARMHF_ROOTFS:-$HOME/.cache/edgert/armhf-rootfs}}
fi
if [ -f "$ROOTFS/.complete" ]; then
  echo "$ROOTFS ready"
  exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
rm -rf "$ROOTFS"
mkdir -p "$ROOTFS"

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
# An empty status file makes apt resolve the whole dependency closure (libc6 included).
pkgs=(python3.11 python3-pip libstdc++6 libgcc-s1 libffi8)
[ "$ARCH" = armhf ] && pkgs+=(python3-numpy python3-cffi python3-click)
for try in 1 2 3; do
  timeout 600 apt-get install -y -qq -d "${pkgs[@]}" >/dev/null && break
  [ "$try" = 3 ] && { echo "apt-get install -d failed 3 times" >&2; exit 1; }
  echo "apt-get install -d failed or stalled (try $try)"
done
n=0
for deb in "$WORK"/cache/archives/*.deb; do
  dpkg -x "$deb" "$ROOTFS"
  n=$((n + 1))
done
echo "unpacked $n packages"
unset APT_CONFIG
# BLAS and LAPACK are reached through update-alternatives links that the packages' install
# scripts would make (dpkg -x runs none): make them, relative, inside the root.
for lib in "$ROOTFS"/usr/lib/*/blas/libblas.so.3 "$ROOTFS"/usr/lib/*/lapack/liblapack.so.3; do
  [ -e "$lib" ] || continue
  ln -sf "$(basename "$(dirname "$lib")")/$(basename "$lib")" "$(dirname "$(dirname "$lib")")/$(basename "$lib")"
done

PYHOST=${PYTHON:-python3}
SITE="$ROOTFS/usr/lib/python3/dist-packages"
mkdir -p "$SITE"
if [ "$ARCH" = arm64 ]; then
  echo "== aarch64 wheels (numpy, cffi, click)"
  NUMPY_VER=$($PYHOST -c 'import numpy; print(numpy.__version__)')
  $PYHOST -m pip install -q --disable-pip-version-check --no-deps --target "$SITE" \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 \
    --platform manylinux2014_aarch64 --only-binary=:all: \
    "numpy==$NUMPY_VER" cffi pycparser click
fi

mkdir -p "$ROOTFS/proc"
if [ "$ARCH" = arm64 ]; then
  echo "== /proc/cpuinfo (Cortex-A72)"
  for cpu in 0 1 2 3; do
    printf 'processor\t: %s\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n' "$cpu"
    printf 'CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n\n'
  done >"$ROOTFS/proc/cpuinfo"
else
  echo "== /proc/cpuinfo (Cortex-A7)"
  for cpu in 0 1 2 3; do
    printf 'processor\t: %s\nmodel name\t: ARMv7 Processor rev 5 (v7l)\nBogoMIPS\t: 38.40\n' "$cpu"
    printf 'Features\t: half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm\n'
    printf 'CPU implementer\t: 0x41\nCPU architecture: 7\nCPU variant\t: 0x0\nCPU part\t: 0xc07\nCPU revision\t: 5\n\n'
  done >"$ROOTFS/proc/cpuinfo"
fi

echo "== precompiling .pyc on the host"
# Same magic number (both 3.11), so the host compiler's .pyc files are valid in the guest.
$PYHOST -m compileall -q -j 2 "$ROOTFS/usr/lib/python3.11" "$SITE" >/dev/null || true

touch "$ROOTFS/.complete"
du -sh "$ROOTFS"
