#!/usr/bin/env bash
# The README's main job: install edgert from this checkout as users do (a regular, not
# editable, install with the converter and onnxruntime), then convert the shipped digits
# CNN, run it with the C runtime and compare with onnxruntime on the held-out digits.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check '.[convert,ort]'
mkdir -p out
# Run from out/ so that the installed package is used, not the checkout's edgert/.
cd out
$PY -m edgert.cli --version
$PY -m edgert.cli demo -o digits_cnn.edgert
