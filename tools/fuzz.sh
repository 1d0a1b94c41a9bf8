#!/usr/bin/env bash
# Fuzzes the C loader (and prepare + one run of whatever loads) for N seconds with
# libFuzzer, ASan and UBSan, starting from a seed corpus of valid files.
# Usage: tools/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
make -s -C csrc fuzz
corpus=build/fuzz/corpus
mkdir -p "$corpus" build/fuzz/findings
${PYTHON:-python3} tools/make_fuzz_corpus.py "$corpus"
# -fork keeps one crash from hiding others; findings go to build/fuzz/findings.
build/fuzz/fuzz_loader -max_total_time="$secs" -max_len=131072 -timeout=20 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix=build/fuzz/findings/ "$corpus" 2>&1 | tail -n 25
echo "fuzzing finished without a finding"
