#!/usr/bin/env bash
# The README's main job: install edgert from this checkout as users do (a regular, not
# editable, install with the converter and onnxruntime), then convert the shipped digits
# CNN, run it with the C runtime and compare with onnxruntime on the held-out digits.
#
# The package goes into a virtual environment in the checkout, .venv/ (made with
# $PYTHON, default python3; reused when it is there and was made from the same Python):
# Debian 12, Ubuntu 23.04+ and Raspberry Pi OS refuse `pip install` into their own Python
# (PEP 668). The last line printed activates it, to go on with `edgert ...`.
set -euo pipefail
here=$(pwd -P)
cd "$(dirname "$0")/.."
top=$(pwd -P)
PY=${PYTHON:-python3}
VENV=.venv
PIP_FLAGS=(-q --disable-pip-version-check)

if ! command -v "$PY" >/dev/null; then
  echo "tools/demo.sh: no Python found: $PY (set PYTHON=/path/to/python3)" >&2
  exit 1
fi
# Which Python a venv belongs to: the installation it was made from, and its version.
base_of() { "$1" -c 'import sys; print(sys.base_prefix, *sys.version_info[:2])' 2>/dev/null; }
want=$(base_of "$PY")

if [ -x "$VENV/bin/python" ] && [ "$(base_of "$VENV/bin/python")" = "$want" ] \
   && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "== reusing the virtual environment $VENV ($("$VENV/bin/python" -V))"
else
  # Debian and Ubuntu ship venv's pip bootstrap (ensurepip) in a separate package;
  # without it `python3 -m venv` leaves a venv with no pip.
  if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    {
      echo "tools/demo.sh: $PY ($ver) cannot make a virtual environment: its venv/ensurepip"
      echo "modules are missing. On Debian, Ubuntu or Raspberry Pi OS install them with"
      echo "    sudo apt-get install python3-venv python3-pip"
      echo "(python$ver-venv if $PY is not the distribution's default python3),"
      echo "or run: bash tools/install_system_deps.sh"
    } >&2
    exit 1
  fi
  [ -e "$VENV" ] && echo "== $VENV is incomplete or from another Python: making it again"
  rm -rf "$VENV"
  echo "== a virtual environment in $VENV ($("$PY" -V) at $(command -v "$PY"))"
  "$PY" -m venv "$VENV"
fi
VPY=$top/$VENV/bin/python

# The install compiles the C runtime as a CPython extension: it needs a C compiler and
# Python.h (Debian: build-essential, python3-dev), which a stock system may lack.
missing=()
command -v cc >/dev/null || command -v gcc >/dev/null || missing+=("a C compiler (cc)")
"$VPY" -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || missing+=("Python.h for $PY ($("$PY" -V))")
if [ ${#missing[@]} -gt 0 ]; then
  {
    echo "tools/demo.sh: compiling edgert's C runtime needs:"
    printf '    %s\n' "${missing[@]}"
    echo "On Debian, Ubuntu or Raspberry Pi OS: sudo apt-get install build-essential python3-dev"
  } >&2
  exit 1
fi

echo "== pip install '.[convert,ort]' (compiles the C runtime for this machine)"
"$VPY" -m pip install "${PIP_FLAGS[@]}" '.[convert,ort]'

mkdir -p out
# Run from out/ so that the installed package is used, not the checkout's edgert/.
cd out
"$top/$VENV/bin/edgert" --version
"$top/$VENV/bin/edgert" demo -o digits_cnn.edgert

echo
echo "edgert is installed in $VENV; activate it to go on with \`edgert ...\`:"
if [ "$here" = "$top" ]; then
  echo ". $VENV/bin/activate"
else
  echo ". $top/$VENV/bin/activate"
fi
