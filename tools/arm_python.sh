#!/usr/bin/env bash
# Assembles an emulated arm64 Python 3.11 root (no binfmt, no chroot, no root needed):
#
#   tools/arm_python.sh [ROOTFS]        default: ~/.cache/edgert/arm64-rootfs
#
# then runs it as
#
#   qemu-aarch64 -cpu cortex-a72 -L ROOTFS ROOTFS/usr/bin/python3.11 ...
#
# Debian's arm64 python3.11 packages are downloaded with a private apt configuration
# (APT::Architecture arm64, its own state and cache directories) and unpacked with
# dpkg -x; numpy and cffi come from aarch64 manylinux wheels. An ARM /proc/cpuinfo is
# planted at ROOTFS/proc/cpuinfo (QEMU shows the guest the host's otherwise), and the
# standard library is precompiled on the host, which is ~50x faster than under QEMU.
# ROOTFS/.complete marks a finished root; a rerun with it present does nothing.
set -euo pipefail
ROOTFS=${1:-${EDGERT_ARM64_ROOTFS:-$HOME/.cache/edgert/arm64-rootfs}}
if [ -f "$ROOTFS/.complete" ]; then
  echo "$ROOTFS ready"
  exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
rm -rf "$ROOTFS"
mkdir -p "$ROOTFS"

echo "== apt (arm64, private state in $WORK)"
mkdir -p "$WORK/state/lists/partial" "$WORK/cache/archives/partial" "$WORK/etc/preferences.d"
touch "$WORK/status"
cat >"$WORK/apt.conf" <<EOF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
APT::Install-Recommends "false";
Dir::State "$WORK/state";
Dir::State::status "$WORK/status";
Dir::Cache "$WORK/cache";
Dir::Etc::Preferences "$WORK/etc/preferences";
Dir::Etc::PreferencesParts "$WORK/etc/preferences.d";
Debug::NoLocking "true";
EOF
export APT_CONFIG="$WORK/apt.conf"
apt-get update -qq
# An empty status file makes apt resolve the whole dependency closure (libc6 included).
apt-get install -y -qq -d python3.11 libstdc++6 libgcc-s1 libffi8 >/dev/null
n=0
for deb in "$WORK"/cache/archives/*.deb; do
  dpkg -x "$deb" "$ROOTFS"
  n=$((n + 1))
done
echo "unpacked $n packages"
unset APT_CONFIG

echo "== aarch64 wheels (numpy, cffi)"
PYHOST=${PYTHON:-python3}
NUMPY_VER=$($PYHOST -c 'import numpy; print(numpy.__version__)')
SITE="$ROOTFS/usr/lib/python3/dist-packages"
mkdir -p "$SITE"
$PYHOST -m pip install -q --disable-pip-version-check --no-deps --target "$SITE" \
  --python-version 3.11 --implementation cp --abi cp311 \
  --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 \
  --platform manylinux2014_aarch64 --only-binary=:all: \
  "numpy==$NUMPY_VER" cffi pycparser

echo "== /proc/cpuinfo (Cortex-A72)"
mkdir -p "$ROOTFS/proc"
{
  for cpu in 0 1 2 3; do
    cat <<EOF
processor	: $cpu
BogoMIPS	: 108.00
Features	: fp asimd evtstrm crc32 cpuid
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd08
CPU revision	: 3

EOF
  done
} >"$ROOTFS/proc/cpuinfo"

echo "== precompiling .pyc on the host"
# Same magic number (both 3.11), so the host compiler's .pyc files are valid in the guest.
$PYHOST -m compileall -q -j 2 "$ROOTFS/usr/lib/python3.11" "$SITE" >/dev/null || true

touch "$ROOTFS/.complete"
du -sh "$ROOTFS"
