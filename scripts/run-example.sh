#!/usr/bin/env bash
# Sets up, builds and runs the main example (attention forward). Without a
# GPU it runs on the CPU interpreter and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target attention
./build/attention "$@"
