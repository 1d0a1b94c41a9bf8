#!/usr/bin/env bash
# The README's main job: set up, convert the shipped digits CNN, run it with the C
# runtime and compare with onnxruntime on the held-out digits.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check -e '.[test]'
mkdir -p out
$PY -m edgert.cli demo -o out/digits_cnn.edgert
