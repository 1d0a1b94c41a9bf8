#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine (pip, apt,
# the real models into the cache), builds, then runs the whole suite and the fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

echo "== python packages"
$PY -m pip install -q --disable-pip-version-check -e '.[test]'

echo "== system packages"
bash tools/install_system_deps.sh

echo "== real models (cached in ${EDGERT_MODEL_CACHE:-~/.cache/edgert/models})"
$PY tools/fetch_models.py

echo "== generated files up to date"
$PY tools/gen_oplist.py --check

echo "== fuzzing the C loader (${EDGERT_FUZZ_SECONDS:-60} s)"
bash tools/fuzz.sh "${EDGERT_FUZZ_SECONDS:-60}"

echo "== tests"
EDGERT_REQUIRE_MODELS=1 $PY -m pytest -q tests "$@"
