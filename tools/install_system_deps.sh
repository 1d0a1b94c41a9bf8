#!/usr/bin/env bash
# Debian packages the build and tests use. Installs only what is missing.
# The fonts render the labelled text images of edgert/evaldata.py (int8 accuracy sets):
# DejaVu for Latin text, WenQuanYi Micro Hei (about 5 MB installed) for Chinese.
set -euo pipefail
need=()
command -v clang >/dev/null || need+=(clang)
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || need+=(libclang-rt-14-dev)
command -v make >/dev/null || need+=(make)
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
dpkg -s fonts-wqy-microhei >/dev/null 2>&1 || need+=(fonts-wqy-microhei)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
