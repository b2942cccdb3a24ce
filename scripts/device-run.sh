#!/usr/bin/env bash
# Runs on the GPU machine over a carried build-device/ (scripts/build-device.sh):
# the GPU test suites, the example (twice: compile, then disk cache), the SASS
# check and the benchmarks. Logs go to $OUT (or ./device-out).
#   scripts/device-run.sh [tests] [bench]   (default: both)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export TK_CACHE_DIR=/tmp/tk-cache PYTHONUNBUFFERED=1
what=${*:-tests bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
rc=0
if [[ $what == *tests* ]]; then
  for t in test_gpu_ops test_gpu_kernels test_jit test_lower; do
    echo "== $t"
    ./build-device/$t >"$out/$t.log" 2>&1 || rc=1
    grep -E "^gpu|skipped|Checks|Failure|Error|first call|second process" "$out/$t.log" | tail -80
  done
  echo "== test_gpu_kernels twice over one kept disk cache (second run: every kernel from disk)"
  rm -rf /tmp/tk-kept && mkdir -p /tmp/tk-kept
  for run in 1 2; do
    TK_TEST_CACHE_DIR=/tmp/tk-kept ./build-device/test_gpu_kernels >"$out/kept$run.log" 2>&1 || rc=1
    echo "run $run: $(grep -c 'kernel.*compiled' "$out/kept$run.log") compiled, $(grep -c 'from the disk cache' "$out/kept$run.log") from disk; $(grep Checks "$out/kept$run.log")"
  done
  echo "== example (first run compiles, second loads from disk)"
  rm -rf "$TK_CACHE_DIR"
  ./build-device/attention 2>&1 | tee "$out/example1.log" || rc=1
  ./build-device/attention 2>&1 | tee "$out/example2.log" || rc=1
  echo "== SASS"
  for k in "gemm" "attention d=128" "attention d=64"; do
    ./build-device/tk_dump $k ptx sm_90a >/tmp/k.ptx && ptxas -arch=sm_90a -v /tmp/k.ptx -o /tmp/k.cubin 2>&1 | grep -E "registers|spill" | tr '\n' ' '
    echo " $k: HMMA $(cuobjdump -sass /tmp/k.cubin | grep -c HMMA)"
  done | tee "$out/sass.txt"
fi
if [[ $what == *bench* ]]; then
  echo "== bench"
  (cd bench && python3 bench_gemm.py ../build-device 2>&1 | tee "$out/bench_gemm.md") || rc=1
  (cd bench && python3 bench_attention.py ../build-device 2>&1 | tee "$out/bench_attention.md") || rc=1
  ./build-device/bench_jit 2>&1 | tee "$out/bench_jit.txt" || true
fi
# The device tool returns at most 8 files: keep the tables, pack the logs.
(cd "$out" && tar czf logs.tgz --exclude=logs.tgz --exclude='bench_*' . && \
  find . -maxdepth 1 -type f ! -name logs.tgz ! -name 'bench_*' -delete)
exit $rc
