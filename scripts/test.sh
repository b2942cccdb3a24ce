#!/usr/bin/env bash
# Sets up, checks the style (.clang-format), builds and runs every test: a
# warnings-as-errors build, its install
# into a temporary prefix with a consumer project built against it
# (scripts/test-install.sh), the Python package pip-installed into a throwaway
# venv with its tests (scripts/test-python.sh), then an AddressSanitizer +
# UndefinedBehaviorSanitizer build, then the builder fuzzer for a bounded time
# (TK_FUZZ_SECONDS, default 60; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/check-format.sh
jobs=$(nproc)
cmake -S . -B build -DTK_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure
./scripts/test-install.sh build
./scripts/test-python.sh
cmake -S . -B build-asan -DTK_WERROR=ON -DTK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure
fuzz_s=${TK_FUZZ_SECONDS:-60}
if [[ $fuzz_s != 0 ]]; then
  ./scripts/fuzz.sh "$fuzz_s"
fi
