#!/usr/bin/env bash
# Runs the builder fuzzer (tests/fuzz/fuzz_builder.c) for SECONDS (default
# 60) under ASan + UBSan, starting from the committed corpus, and prints
# libFuzzer's executions and coverage (cov: edges, ft: features).
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]
# New interesting inputs go to BUILD_DIR/fuzz-corpus (not committed); a
# crash is written as BUILD_DIR/fuzz-artifacts/crash-* and fails the script:
# copy it into tests/fuzz/corpus/ (it then replays as the fuzz_corpus test)
# and fix the bug.
set -euo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build-fuzz}
cc=${TK_FUZZ_CC:-clang-22}
command -v "$cc" >/dev/null || { echo "fuzz.sh: $cc not found (apt-get install clang-22 libclang-rt-22-dev)"; exit 1; }
nice -n 10 cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Debug \
    -DTK_SANITIZE=ON -DTK_FUZZ=ON -DTK_CHECK_LAYERS=OFF >/dev/null
nice -n 10 cmake --build "$build" -j"${TK_JOBS:-2}" --target fuzz_builder >/dev/null
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$build/fuzz_builder" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=1024 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/" \
    "$build/fuzz-corpus" "$root/tests/fuzz/corpus" 2>&1 | tee "$build/fuzz.log" |
    grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|stat::|ERROR|SUMMARY|==[0-9]+==" || true
rc=${PIPESTATUS[0]}
ls "$build"/fuzz-artifacts/ | grep -q . && { echo "fuzz.sh: crash inputs in $build/fuzz-artifacts"; exit 1; }
exit "$rc"
