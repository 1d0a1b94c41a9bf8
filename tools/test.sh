#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine (apt, pip,
# the real models into the cache), builds the wheel, installs it into a fresh virtual
# environment, and runs the whole suite and the fuzzer against that installed package.
#
# The venv is build/venv (made anew each run); the tests import edgert from it, never
# from the checkout (tests/conftest.py checks, EDGERT_TEST_INSTALLED=1).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP_FLAGS=(-q --disable-pip-version-check)

echo "== system packages"
bash tools/install_system_deps.sh

echo "== the wheel"
# setuptools stages the wheel in build/lib: start it afresh so nothing stale gets in.
rm -rf build/dist build/lib build/lib.* build/bdist.*
SECONDS=0
$PY -m pip wheel "${PIP_FLAGS[@]}" --no-deps -w build/dist .
wheel=$(ls build/dist/edgert-*.whl)
echo "$wheel: $(stat -c %s "$wheel") bytes, built in ${SECONDS} s"

echo "== a fresh venv with the wheel installed"
rm -rf build/venv
$PY -m venv build/venv
VPY=build/venv/bin/python
SECONDS=0
$VPY -m pip install "${PIP_FLAGS[@]}" "${wheel}[test]"
echo "installed with its test dependencies in ${SECONDS} s"
build/venv/bin/edgert --version

echo "== real models (cached in ${EDGERT_MODEL_CACHE:-~/.cache/edgert/models})"
$VPY tools/fetch_models.py

echo "== the fallback backends' wheels for the emulated boards"
$VPY tools/fetch_backend_wheels.py

echo "== generated files up to date"
$VPY tools/gen_oplist.py --check

echo "== fuzzing the C loader (${EDGERT_FUZZ_SECONDS:-60} s)"
PYTHON=$VPY bash tools/fuzz.sh "${EDGERT_FUZZ_SECONDS:-60}"

echo "== the runtime under ASan + UBSan, and valgrind memcheck of edgert-run on three real models"
EDGERT_REQUIRE_MODELS=1 PYTHON=$VPY bash tools/sanitize.sh all

echo "== tests (against $(cd build && ../$VPY -c 'import edgert, os; print(os.path.dirname(edgert.__file__))'))"
EDGERT_TEST_INSTALLED=1 EDGERT_REQUIRE_MODELS=1 EDGERT_REQUIRE_ARM=1 EDGERT_REQUIRE_BROWSER=1 $VPY -m pytest -q -p no:cacheprovider tests "$@"
