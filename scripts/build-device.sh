#!/usr/bin/env bash
# Builds everything with the NVPTX subset of LLVM linked statically, stripped,
# into build-device/ (git-ignored) so a device call can carry it to the GPU
# machine, which has no LLVM. Run there: build-device/<binary>.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# -DTK_SHARED=OFF: the tests, benchmarks and examples use libtk.so (every
# symbol visible); libtilekittens.so, LLVM inside it too, would double the size.
cmake -S . -B build-device -DTK_LLVM_STATIC=ON -DTK_SHARED=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-device -j"$(nproc)"
find build-device -maxdepth 1 -type f -executable -exec strip {} +
du -sh build-device | cut -f1 | sed 's/^/build-device: /'
