#!/usr/bin/env bash
# Runs on the GPU machine over a carried build-device/ (scripts/build-device.sh):
# the GPU test suites, the benchmarks, then the disk-cache checks (a second run
# of the kernel tests and of the example), the JIT tests and the SASS check.
# Most important first, so a run cut short still says the most. Logs go to
# $OUT (or ./device-out).
#   scripts/device-run.sh [tests] [attn] [python] [cache] [notma] [race] [sanitize] [bench] [wgmma] [wgsweep] [bwd]
#                         [configs] [sweep] [ncu] [aot] [zoo] [gpt] [start] [sansuites] [pairs]
# pairs: issue 12's clusters of two sharing B (tk_gemm_config.cluster): test_gpu_kernels's
# gpu_pairs case (every GEMM shape on the pairs), memcheck/racecheck/synccheck on ring_gemm's pairs at
# ragged shapes, and bench_gemm_wgmma.py pairs beside cuBLAS.
# start (also run by gpt): gpt-train's start-up from a carried --precompile cache, as a
# kernel pack without ptxas, and cold on one thread and on one a core; bench_jit, bench_compile.
# gpt: issue 19's trainer (examples/gpt) on the GPU beside bench/gpt_reference.py, its
# data-parallel path through a one-rank NCCL communicator (gpt-train --nccl), and its cold
# start with the kernels compiled on one thread and on one a core.
# zoo: issue 17's kernels (norm, rotary, Based, Hedgehog): their GPU tests, compute-sanitizer
# on the Based suite, their benchmarks beside torch and flash-linear-attention (carry
# bench/wheels: pip download --no-deps fla-core flash-linear-attention einops -d bench/wheels).
#   (default: tests cache race bench wgmma)
# python: the Python package's GPU tests from the source tree, the example twice.
# attn: the attention forward alone (its GPU cases on both kernels, memcheck and
# racecheck at a ragged shape per D, bench_attention.py).
# tests: every GPU suite once (compiles; graph: a CUDA graph of tk_gemm and
# tk_attention_forward replayed on new inputs); cache: the kernel suite again from
# the disk cache, the example twice, test_jit and the SASS checks (scripts/sass_uregs_all.sh too).
# wgsweep: the wgmma block shapes beside cuBLAS (bench_gemm_wgmma.py sweep).
# bwd: attention backward beside torch (bench_attention_bwd.py).
# sanitize: compute-sanitizer memcheck, synccheck, racecheck and initcheck on the wgmma
# GEMM, the Hopper attention and its backward at ragged shapes (tests/gpu/ring_*.c).
# sansuites: the other shipped kernels' GPU suites under the same four tools.
# Each section's seconds go to $out/times.txt.
# aot: a cache made by tk-aot without a GPU (see that block) loads with 0 compiles.
# notma: the kernel tests again with TK_NO_TMA=1 (sm_90 kernels take their
# cp.async path on the same mbarrier ring).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export TK_CACHE_DIR=/tmp/tk-cache PYTHONUNBUFFERED=1
what=${*:-tests cache race bench wgmma}
t0=$SECONDS
stamp() { echo "$1: $((SECONDS - t0)) s" >>"$out/times.txt"; t0=$SECONDS; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
rc=0
summary() { grep -E "^gpu|^lower gpu|skipped|Checks|Failure|Error|first call|second process|kernel .*:" "$1" | tail -100; }
# sanitize_runs "TOOLS" "PROG ARGS"...: each compute-sanitizer tool on each run of
# tests/gpu/PROG.c (built here against build-device/); a tool's error, a
# nonzero exit (a wrong result) or a failed build sets rc.
# san_one TOOL LOG LABEL CMD...: CMD under compute-sanitizer's TOOL (SAN_TIMEOUT seconds,
# default 200), its output in LOG; prints LABEL with the exit and the summary lines (also
# left in $san_sum). A nonzero exit, or any error or hazard, fails the run.
san_one() {
  local tool=$1 log=$2 label=$3 st
  shift 3
  timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool "$tool" --print-limit 50 "$@" >"$log" 2>&1
  st=$?
  san_sum=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rel err|Checks" "$log" | tr '\n' ' ')
  echo "  $tool $label: exit $st; $san_sum"
  [[ $st == 0 ]] && grep -qE "(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)" "$log" || rc=1
  return $st
}
sanitize_runs() {
  local tools=$1 r tool lib="-Lbuild-device -ltk -Wl,-rpath,$PWD/build-device -lm"
  shift
  local progs=$(printf '%s\n' "${@%% *}" | sort -u) p
  for p in $progs; do
    cc -O2 -Iinclude "tests/gpu/$p.c" $lib -o "/tmp/$p" || { rc=1; return; }
  done
  for tool in $tools; do
    for r in "$@"; do
      san_one "$tool" "$out/san_${tool}_${r// /_}.log" "$r" /tmp/$r
    done
  done
}
kernels_run() { # $1: run number; the disk cache in /tmp/tk-kept is kept between runs
  TK_TEST_CACHE_DIR=/tmp/tk-kept ./build-device/test_gpu_kernels >"$out/kernels$1.log" 2>&1 || rc=1
  echo "run $1: $(grep -c ': compiled' "$out/kernels$1.log") kernels compiled, $(grep -c 'from the disk cache' "$out/kernels$1.log") loaded from disk; $(grep Checks "$out/kernels$1.log")"
}
if [[ $what == *configs* ]]; then
  echo "== mma.sync ceiling (nvcc)"
  nvcc -O3 -arch=sm_90 bench/mma_ceiling.cu -o /tmp/mma_ceiling && /tmp/mma_ceiling | tee "$out/mma_ceiling.md"
  echo "== GEMM block shapes"
  ./build-device/bench_gemm_configs 4096 2>&1 | tee "$out/gemm_configs.md"
  echo "== attention block shapes"
  ./build-device/bench_attention_configs 2>&1 | tee "$out/attention_configs.md"
fi
if [[ " $what " == *" sweep "* ]]; then # GEMM shapes beside cuBLAS with clock and power
  echo "== mma.sync ceiling, with the SM clock and power while it runs"
  if nvcc -O3 -arch=sm_90 bench/mma_ceiling.cu -o /tmp/mma_ceiling; then
    nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 100 >"$out/ceiling_clocks.log" &
    smi=$!
    /tmp/mma_ceiling 3 | tee "$out/mma_ceiling.md" || rc=1
    kill $smi
    echo "SM clock and power over the last second of the sustained run:"
    tail -12 "$out/ceiling_clocks.log" | head -10 | tr '\n' ';'; echo
  else
    rc=1
  fi
  for op in ${SWEEP_OPS-ab abt}; do
    (cd bench && python3 bench_gemm_sweep.py ../build-device 4096 $op 2>&1 | tee "$out/sweep_$op.md") || rc=1
  done
fi
if [[ $what == *ncu* ]]; then # hardware counters of one GEMM and one attention launch (and NCU_*'s)
  sec="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy"
  timeout 120 ncu --clock-control none $sec -k regex:${NCU_GEMM:-tk_gemm} --launch-count 1 \
    ./build-device/bench_gemm_configs 4096 >"$out/ncu_gemm.txt" 2>&1
  [[ ${NCU_ATTN:-1} == 0 ]] || timeout 120 ncu --clock-control none $sec -k regex:tk_attn --launch-skip ${NCU_ATTN_SKIP:-73} \
    --launch-count 1 ./build-device/bench_attention_configs >"$out/ncu_attn.txt" 2>&1
  # NCU_HOPPER="D B H N causal": the Hopper attention at that shape (bench/attention_once.py)
  [[ -z ${NCU_HOPPER:-} ]] || (cd bench && timeout 150 ncu --clock-control none $sec -k regex:tk_attn \
    --launch-skip 2 --launch-count 1 python3 attention_once.py ../build-device $NCU_HOPPER 2 \
    >"$out/ncu_hopper.txt" 2>&1)
  # NCU_NORM="R C": the LayerNorm forward (residual, weight, bias) at R x C (bench/norm_once.py;
  # the trainer's is 16384 768)
  [[ -z ${NCU_NORM:-} ]] || (cd bench && timeout 120 ncu --clock-control none $sec -k regex:norm_fwd \
    --launch-skip 2 --launch-count 1 python3 norm_once.py ../build-device $NCU_NORM \
    >"$out/ncu_norm.txt" 2>&1)
  grep -E "stalled|Duration|Throughput|Issue Slots|Warp Cycles|Stall|No Eligible|Eligible Warps|Registers|Achieved Occ|Theoretical Occ|Bank" "$out"/ncu_*.txt | head -80
fi
if [[ $what == *aot* ]]; then # issue 15: kernels precompiled without a GPU load with 0 compiles
  # Prepared off the GPU (the cache travels inside the carried build-device/):
  #   scripts/build-device.sh && ./build-device/tk-aot -a sm_90a -d build-device/aot-cache all &&
  #   ptxas --version | tail -1 > build-device/aot-cache/PTXAS_VERSION
  # tk_compile finds ptxas-made entries under the key of the ptxas it finds
  # here (TK_PTXAS, PATH, /usr/local/cuda/bin): it must be the same build.
  echo "== aot: the carried cache, 0 compiles expected"
  echo "ptxas there: $(cat build-device/aot-cache/PTXAS_VERSION 2>/dev/null); here: $(ptxas --version | tail -1)"
  rm -rf /tmp/tk-aot && cp -r build-device/aot-cache /tmp/tk-aot
  TK_CACHE_DIR=/tmp/tk-aot ./build-device/attention 2>&1 | tee "$out/aot.log" || rc=1
  grep -q "cache: 0 compiled" "$out/aot.log" || { echo "aot: kernels were compiled on the GPU machine"; rc=1; }
fi
if [[ $what == *tests* ]]; then
  echo "== test_lower (every op family: GPU vs interpreter)"
  CK_RUN_CASE=gpu ./build-device/test_lower >"$out/ops.log" 2>&1 || rc=1
  summary "$out/ops.log"
  stamp test_lower
  echo "== test_wgmma (wgmma: GPU vs interpreter)"
  ./build-device/test_wgmma >"$out/wgmma.log" 2>&1 || rc=1
  summary "$out/wgmma.log"
  grep -E "^gpu wgmma" "$out/wgmma.log" | tail -25
  stamp test_wgmma
  echo "== test_attention_bwd (GPU vs float64)"
  CK_RUN_CASE=gpu ./build-device/test_attention_bwd >"$out/bwd.log" 2>&1 || rc=1
  grep -E "^gpu|Checks|Failure|Error" "$out/bwd.log" | tail -30
  stamp test_attention_bwd
  echo "== test_gpu_graph (tk_gemm and tk_attention_forward captured in a CUDA graph)"
  ./build-device/test_gpu_graph >"$out/graph.log" 2>&1 || rc=1
  grep -E "^graph|Checks|Failure|Error|skipped" "$out/graph.log"
  stamp test_gpu_graph
  echo "== test_gpu_kernels (run 1: compiles)"
  rm -rf /tmp/tk-kept && mkdir -p /tmp/tk-kept
  kernels_run 1
  summary "$out/kernels1.log"
  stamp test_gpu_kernels
fi
if [[ " $what " == *" attn "* ]]; then # the attention forward alone: suite, sanitizers, bench
  echo "== test_gpu_kernels, attention cases (both kernels)"
  CK_RUN_CASE=gpu_attention ./build-device/test_gpu_kernels >"$out/attn.log" 2>&1 || rc=1
  summary "$out/attn.log" | tail -3
  grep -E "^gpu attn" "$out/attn.log" | awk '{print $NF, $(NF-2)}' | sort -g | tail -2
  runs=()
  for d in 64 128 256; do runs+=("ring_attn 1 2 1 200 333 $d 1 2"); done
  sanitize_runs "memcheck racecheck" "${runs[@]}"
  stamp attn_tests
  (cd bench && python3 bench_attention.py ../build-device 2>&1 | tee "$out/bench_attention.md") || rc=1
  stamp attn_bench
fi
if [[ " $what " == *" python "* ]]; then # issue 16: the Python package on the GPU
  # from the source tree: no install on a machine without the internet
  echo "== python/tests/test_torch_{gpu,cpu}.py (the package over build-device/libtk.so)"
  PYTHONPATH=python/src TILEKITTENS_LIB=$PWD/build-device/libtk.so TK_CACHE_DIR=/tmp/tk-py \
    python3 -m pytest -q -rs python/tests/test_torch_gpu.py python/tests/test_torch_cpu.py >"$out/python.log" 2>&1 || rc=1
  tail -15 "$out/python.log"
  echo "== example twice (the library's choice of kernel; the second run loads from disk)"
  rm -rf "$TK_CACHE_DIR"
  ./build-device/attention 2>&1 | tee "$out/example1.log" | tail -4 || rc=1
  ./build-device/attention 2>&1 | tee "$out/example2.log" | tail -4 || rc=1
  stamp python
fi
if [[ $what == *notma* ]]; then
  echo "== test_gpu_kernels with TK_NO_TMA=1 (cp.async copies on the ring)"
  TK_NO_TMA=1 TK_CACHE_DIR=/tmp/tk-notma ./build-device/test_gpu_kernels >"$out/kernels_notma.log" 2>&1 || rc=1
  summary "$out/kernels_notma.log"
  echo "== test_attention_bwd with TK_NO_TMA=1 (the Hopper backward's producer on cp.async)"
  TK_NO_TMA=1 TK_CACHE_DIR=/tmp/tk-notma CK_RUN_CASE=gpu ./build-device/test_attention_bwd >"$out/bwd_notma.log" 2>&1 || rc=1
  grep -E "Checks|Failure|Error" "$out/bwd_notma.log"
fi
if [[ $what == *race* ]]; then # compute-sanitizer racecheck on every copy-engine kernel
  # racecheck credits an mbarrier arrival with the arriving thread's own
  # accesses only (docs/PERF_NOTES.md, "The racecheck report"): a WAR whose
  # reader is lane 1-31 of a consumer warp, released through bar.warp.sync
  # and lane 0's arrival, is the tool's blind spot. What fails: a WAR read by
  # a lane 0 (the arriving lane itself), and any RAW or WAW.
  echo "== racecheck: copy-engine kernels at a ragged shape (the producer's fallback is visible)"
  if cc -O2 -Iinclude tests/gpu/ring_gemm.c -Lbuild-device -ltk -Wl,-rpath,"$PWD/build-device" \
       -lm -o /tmp/ring_gemm; then
    # RACE_CFGS picks configs (default: all five)
    cfgs=${RACE_CFGS:-"128 256 128 8 2 1;128 256 64 8 3 1;128 128 64 4 3 1;128 256 64 8 4 1 0 1;128 256 64 8 4 0 1 1"}
    IFS=';' read -ra cfgl <<<"$cfgs"
    for cfg in "${cfgl[@]}"; do
      log="$out/race_${cfg// /_}.log"
      timeout 150 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 3000 \
        --kernel-name kns=tk_gemm /tmp/ring_gemm 300 700 200 $cfg >"$log" 2>&1
      line=$(awk -v prod=256 -f scripts/racecheck-hazards.awk "$log")
      echo "  $cfg: $line"
      set -- $cfg
      if (($4 < 8)); then # lockstep (no producer): bar.sync, which the tool sees; any hazard is real
        [[ $line == "0 hazards"* ]] || rc=1
      else
        grep -qE "reader lane 0 [1-9]|RAW [1-9]|WAW [1-9]" <<<"$line" && rc=1
      fi
    done
  else
    rc=1
  fi
fi
if [[ $what == *sanitize* ]]; then # issues 12 and 13: memcheck, racecheck, synccheck at ragged shapes
  # The wgmma GEMM at three ragged shapes (the second with a B pitch the engine
  # cannot map: the producer's fallback; the third with more tiles than SMs,
  # so blocks take two, and fewer k-tiles than stages), the Hopper attention at
  # two ragged shapes per head dim, its backward's Hopper kernels at two ragged
  # shapes per head dim (ring_attn_bwd: GQA, Nq != Nkv, causal and not). A tool's
  # error or a wrong result fails the mode.
  runs=("ring_gemm 1000 1000 300 128 256 64 8 4 1 0 1" "ring_gemm 300 700 200 128 256 64 8 4 1 0 1"
        "ring_gemm 1500 2900 70 128 256 64 8 4 1 0 1")
  for d in 64 128 256; do
    runs+=("ring_attn 1 2 1 200 333 $d 1 2" "ring_attn 2 2 2 129 65 $d 0 2")
  done
  for d in 64 128; do # the third wraps the dQ kernel's ring; the fourth has rows without keys;
    # the last two: the fast mode (fused kernel, dQ through atomics)
    runs+=("ring_attn_bwd 1 4 2 200 333 $d 1" "ring_attn_bwd 2 2 2 150 70 $d 0"
           "ring_attn_bwd 1 4 2 200 700 $d 1" "ring_attn_bwd 1 2 1 300 70 $d 1"
           "ring_attn_bwd 1 4 2 200 333 $d 1 1" "ring_attn_bwd 2 2 2 150 70 $d 0 1")
  done
  sanitize_runs "${SAN_TOOLS:-memcheck synccheck racecheck initcheck}" "${runs[@]}"
  stamp sanitize
fi
if [[ $what == *pairs* ]]; then # issue 12: pairs of blocks sharing B through multicast
  echo "== test_gpu_kernels gpu_pairs (gemm_cluster_on_gpu)"
  CK_RUN_CASE=gpu_pairs timeout 200 ./build-device/test_gpu_kernels >"$out/pairs_kernels.log" 2>&1 || rc=1
  summary "$out/pairs_kernels.log" | tail -25
  # A·B with tiles past M in a pair, B's fallback (a 1400-byte pitch), A·Bᵀ with two tiles a
  # block, the 128x128 block
  sanitize_runs "${SAN_TOOLS:-memcheck racecheck synccheck}" \
    "ring_gemm 300 1000 300 128 256 64 8 4 1 0 1 2" "ring_gemm 300 700 200 128 256 64 8 4 1 0 1 2" \
    "ring_gemm 1500 2900 70 128 256 64 8 4 1 1 1 2" "ring_gemm 700 900 500 128 128 64 8 6 1 0 1 2"
  stamp pairs_checks
  (cd bench && timeout 400 python3 bench_gemm_wgmma.py ../build-device pairs 2>&1 |
    tee "$out/pairs.md") || rc=1
  stamp pairs_bench
fi
if [[ $what == *sansuites* ]]; then # issue 15: every other shipped kernel under each tool
  # Each suite's GPU cases (the small ones where a suite has them) under memcheck,
  # racecheck, synccheck and initcheck, one process each (CK_FORK=no: the tool sees
  # every launch); the table goes to $out/sanitizer_table.md. SAN_SUITES and SAN_TOOLS
  # pick a part (a device call is 10 minutes).
  t="$out/sanitizer_table.md"
  [[ -f $t ]] || printf '| suite (cases) | tool | exit | summary |\n|---|---|---|---|\n' >"$t"
  for sc in ${SAN_SUITES:-norm:gpu rotary:gpu xent:gpu bias_grad:gpu adamw:gpu embedding:gpu \
      attention_decode:gpu attention_paged:gpu_small attention_varlen:gpu_small based:gpu \
      hedgehog:gpu hedgehog_bwd:gpu}; do
    s=${sc%%:*} c=${sc#*:}
    [[ -x build-device/test_$s ]] || { echo "  test_$s: not built"; rc=1; continue; }
    for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
      CK_FORK=no CK_RUN_CASE=$c san_one $tool "$out/sansuite_${s}_$tool.log" "test_$s ($c)" \
        ./build-device/test_$s
      echo "| test_$s ($c) | $tool | $? | $san_sum |" >>"$t"
    done
  done
  stamp sansuites
fi
if [[ $what == *wgsweep* ]]; then # the wgmma block shapes beside cuBLAS
  echo "== wgmma block shapes"
  (cd bench && python3 bench_gemm_wgmma.py ../build-device sweep 2>&1 | tee "$out/wgmma_sweep.md") || rc=1
  stamp wgsweep
fi
if [[ " $what " == *" wgmma "* ]]; then # issue 12's table: wgmma beside mma.sync and cuBLAS
  echo "== GEMM on wgmma"
  (cd bench && python3 bench_gemm_wgmma.py ../build-device 2>&1 | tee "$out/bench_gemm_wgmma.md") || rc=1
  stamp wgmma
fi
if [[ $what == *bwd* ]]; then
  echo "== attention backward"
  (cd bench && python3 bench_attention_bwd.py ../build-device 2>&1 | tee "$out/bench_attention_bwd.md") || rc=1
  stamp bwd
fi
if [[ $what == *bench* ]]; then
  echo "== bench"
  (cd bench && python3 bench_gemm.py ../build-device 2>&1 | tee "$out/bench_gemm.md") || rc=1
  (cd bench && python3 bench_attention.py ../build-device 2>&1 | tee "$out/bench_attention.md") || rc=1
  ./build-device/bench_jit 2>&1 | tee "$out/bench_jit.md" || true
  # the compile stages and the pool on this host's cores (CPU only: LLVM and ptxas)
  PATH=$PATH:/usr/local/cuda/bin ./build-device/bench_compile 3 2>&1 | tee "$out/bench_compile.md" || true
fi
if [[ $what == *zoo* ]]; then # issue 17: norm, rotary, Based (Hedgehog when it lands)
  for t in norm rotary based hedgehog; do
    [[ -x build-device/test_$t ]] || continue
    echo "== test_$t (gpu)"
    CK_RUN_CASE=gpu ./build-device/test_$t >"$out/zoo_$t.log" 2>&1 || rc=1
    summary "$out/zoo_$t.log"
  done
  for s in based hedgehog; do # the linear attentions (Based's segments included)
    for t in memcheck racecheck; do
      CK_FORK=no CK_RUN_CASE=gpu SAN_TIMEOUT=300 san_one $t "$out/zoo_san_${s}_$t.log" test_$s \
        ./build-device/test_$s
    done
  done
  for b in norm rotary based hedgehog; do
    [[ -f bench/bench_$b.py ]] || continue
    echo "== bench_$b.py"
    (cd bench && BASED_PROFILE=1 BASED_VCOLS=32,64 python3 bench_$b.py ../build-device) \
      >"$out/zoo_bench_$b.log" 2>&1 || rc=1
    grep -v "^check [bf]" "$out/zoo_bench_$b.log" | tail -40
  done
fi
if [[ $what == *gpt* ]]; then
  # issue 19: gpt-train's float64 check on the tiny preset, then 124M at 16 x 1024 beside the
  # PyTorch reference eager and compiled (loss tracking over 50 steps, tokens/s, MFU), the
  # gradients of step 1 against float64 layer by layer, sampling, and NCCL's one-rank check.
  g=build-device/gpt-train
  echo "== gpt-train --check (tiny)"
  timeout 90 $g --check --data include --batch 2 >"$out/gpt_check.log" 2>&1 || rc=1
  tail -4 "$out/gpt_check.log"
  echo "== bench_gpt.py (124m, 50 steps)"
  timeout 400 python3 bench/bench_gpt.py build-device --steps 50 --json-out "$out/gpt_runs.json" \
    --plot >"$out/gpt_bench.log" 2>&1 || rc=1
  grep -v "^step" "$out/gpt_bench.log" | tail -40
  echo "== gradients of step 1 (124m) against float64"
  timeout 120 $g --preset 124m --batch 16 --steps 1 --seed 1337 --dump-grads /tmp/g.bin \
    --save /tmp/g1.ckpt >"$out/gpt_dump.log" 2>&1 || rc=1
  timeout 150 python3 bench/gpt_reference.py grads --seed 1337 --preset 124m --batch 16 \
    --seq 1024 --dump /tmp/g.bin --fp64 >"$out/gpt_grads.log" 2>&1 || rc=1
  tail -45 "$out/gpt_grads.log"
  timeout 60 $g --load /tmp/g1.ckpt --steps 1 --sample 200 --prompt '#include <' --temp 0.8 \
    >"$out/gpt_sample.log" 2>&1 || rc=1
  tail -5 "$out/gpt_sample.log"
  echo "== gpt_dp_check"
  NCCL_NVLS_ENABLE=0 timeout 60 build-device/gpt_dp_check >"$out/gpt_dp.log" 2>&1 || rc=1
  tail -10 "$out/gpt_dp.log"
  # the trainer's data-parallel path (buckets posted during the backward, NCCL's stream, the
  # finish) through a one-rank communicator: the losses must equal a run without NCCL
  echo "== gpt-train --nccl (one rank) against a run without it"
  a="--preset 124m --batch 16 --steps 8 --data include"
  timeout 60 $g $a >"$out/gpt_plain.log" 2>&1 || rc=1
  NCCL_NVLS_ENABLE=0 timeout 60 $g $a --nccl >"$out/gpt_nccl.log" 2>&1 || rc=1
  if diff <(grep '^step' "$out/gpt_plain.log" | cut -d'|' -f1-4) \
    <(grep '^step' "$out/gpt_nccl.log" | cut -d'|' -f1-4); then
    echo "  losses and norms identical"
  else
    echo "  FAIL: --nccl changed the losses"; rc=1
  fi
  stamp gpt
fi
if [[ $what == *gpt* || $what == *start* ]]; then # issue 15: the trainer's start-up, the JIT's floors
  g=build-device/gpt-train
  # a cache made without a GPU from the same tree (gpt-train --backend interp --arch sm_90a
  # --preset 124m --batch 16 --steps 0 --precompile gpt-cache, carried): every kernel must come
  # from the disk, which needs this machine's ptxas to be the build machine's
  if [[ -d gpt-cache ]]; then
    echo "== gpt-train 124m start-up from the carried --precompile cache"
    echo "  ptxas here: $( (ptxas --version || /usr/local/cuda/bin/ptxas --version) 2>/dev/null | tail -1)"
    rm -rf /tmp/gpt-cache && cp -r gpt-cache /tmp/gpt-cache
    TK_CACHE_DIR=/tmp/gpt-cache timeout 120 $g --preset 124m --batch 16 --steps 0 \
      >"$out/gpt_aot.log" 2>&1 || rc=1
    echo "  $(grep -o 'kernels ready in .*' "$out/gpt_aot.log")"
    grep -q '; 0 compiled, ' "$out/gpt_aot.log" || { echo "  FAIL: kernels compiled"; rc=1; }
    # the same directory as a kernel pack (its tk-pack manifest names the build machine's
    # ptxas): an empty disk cache and no ptxas here, still 0 compiles
    echo "== gpt-train 124m start-up from it as a kernel pack, with no ptxas"
    d=$(mktemp -d)
    TK_CACHE_DIR=$d TK_KERNEL_PACKS=/tmp/gpt-cache TK_PTXAS=/nonexistent timeout 120 $g \
      --preset 124m --batch 16 --steps 0 >"$out/gpt_pack.log" 2>&1 || rc=1
    rm -rf "$d"
    echo "  $(grep -o 'kernels ready in .*' "$out/gpt_pack.log")"
    grep -q '; 0 compiled, ' "$out/gpt_pack.log" || { echo "  FAIL: kernels compiled"; rc=1; }
  fi
  # the cold start (empty disk cache, the driver's cache off): the prepare pass on one thread
  # against one a core (examples/gpt/prep.c)
  echo "== gpt-train cold start, 124m: --prepare-threads 1 against 0 (one a core)"
  for n in 1 0; do
    d=$(mktemp -d)
    TK_CACHE_DIR=$d CUDA_CACHE_DISABLE=1 timeout 300 $g --preset 124m --batch 16 --steps 0 \
      --prepare-threads $n >"$out/gpt_cold_$n.log" 2>&1 || rc=1
    echo "  threads $n: $(grep -o 'kernels ready in .*' "$out/gpt_cold_$n.log")"
    rm -rf "$d"
  done
  ./build-device/bench_jit 2>&1 | tee "$out/bench_jit.md" || true
  PATH=$PATH:/usr/local/cuda/bin ./build-device/bench_compile 3 2>&1 | tee "$out/bench_compile.md" || true
  stamp start
fi
if [[ $what == *cache* ]]; then
  echo "== test_gpu_kernels (run 2: every kernel from the disk cache)"
  kernels_run 2
  echo "== example (first run compiles, second loads from disk)"
  rm -rf "$TK_CACHE_DIR"
  ./build-device/attention 2>&1 | tee "$out/example1.log" || rc=1
  ./build-device/attention 2>&1 | tee "$out/example2.log" || rc=1
  echo "== test_jit"
  ./build-device/test_jit >"$out/jit.log" 2>&1 || rc=1
  summary "$out/jit.log"
  echo "== SASS"
  for k in "gemm" "gemm bm=128 bn=256 bk=128 warps=8 stages=2 tma=1" \
           "gemm bm=128 bn=256 bk=64 warps=8 stages=4 tma=1 wgmma=1" "attention d=128" "attention d=64"; do
    set -- $k # kernel, then its options (after the stage and arch)
    ./build-device/tk_dump "$1" ptx sm_90a "${@:2}" >/tmp/k.ptx &&
      ptxas -arch=sm_90a -v /tmp/k.ptx -o /tmp/k.cubin 2>&1 | grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | tr '\n' ' '
    echo " $k: HMMA $(cuobjdump -sass /tmp/k.cubin | grep -c HMMA) HGMMA $(cuobjdump -sass /tmp/k.cubin | grep -c HGMMA) UTMALDG $(cuobjdump -sass /tmp/k.cubin | grep -c UTMALDG)"
  done | tee "$out/sass.txt"
  echo "== SASS: no uniform register read that nothing writes (every golden variant)"
  OUT=/tmp/tk-uregs scripts/sass_uregs_all.sh build-device || rc=1
  cp /tmp/tk-uregs/uregs.txt "$out/uregs.txt" 2>/dev/null
fi
# The device tool returns at most 8 files.
# Tables (*.md) stay as files; everything else goes into logs.tgz (built
# outside $out, so a log still being written cannot race the archive).
(cd "$out" && tar czf /tmp/tk-logs.tgz --exclude='*.md' --exclude=logs.tgz . &&
  find . -maxdepth 1 -type f ! -name '*.md' -delete && mv /tmp/tk-logs.tgz logs.tgz)
exit $rc
