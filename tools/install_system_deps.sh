#!/usr/bin/env bash
# Debian packages the build and tests use. Installs only what is missing.
# - python3-venv, python3-pip, python3-dev: Debian's Python refuses `pip install` outside
#   a venv (PEP 668), and its venv module gives a venv pip only with python3-venv
#   (tools/demo.sh's .venv, tools/test.sh's build/venv); python3-pip is pip for that
#   Python itself (`python3 -m pip wheel` in tools/test.sh); python3-dev has Python.h, for
#   the cffi extension that `pip install .` compiles;
# - clang and its sanitizer runtimes, valgrind: the loader fuzzer, the ASan/UBSan build
#   and memcheck (tools/sanitize.sh);
# - Debian's cross toolchains and QEMU user-mode emulation: the board builds and the ARM
#   suite (tests/test_arm.py), which CI requires (EDGERT_REQUIRE_ARM=1);
# - cmake and pkg-config (pkgconf): the C example built through the CMake package and the
#   pkg-config file that `edgert build` writes (tests/test_c_example.py; dpkg-deb, which
#   makes and tests the .deb, comes with every Debian system);
# - chromium renders `edgert report` pages in the report test (tests/test_report.py);
# - the fonts render the labelled text images of tools/evaldata.py (int8 accuracy sets):
#   DejaVu for Latin text, WenQuanYi Micro Hei (about 5 MB installed) for Chinese.
set -euo pipefail
need=()
command -v clang >/dev/null || need+=(clang)
command -v make >/dev/null || need+=(make)
command -v cmake >/dev/null || need+=(cmake)
command -v pkg-config >/dev/null || need+=(pkgconf)
for pkg in python3-venv python3-pip python3-dev libclang-rt-14-dev fonts-dejavu-core fonts-wqy-microhei \
           gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross \
           gcc-arm-linux-gnueabihf binutils-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user chromium valgrind; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "installing: ${need[*]}"
  # a stalled connection is dropped after 30 s and the download retried
  net=(-o Acquire::Retries=3 -o Acquire::http::Timeout=30)
  $SUDO apt-get "${net[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${net[@]}" install -y -qq "${need[@]}" >/dev/null
fi
