#!/usr/bin/env bash
# Issue 12, first section: is racecheck's WAR report on the producer/consumer
# ring (tk_gemm_bf16_bf16_ab_128x256x64_w8_s3_tma) a race, or racecheck not
# seeing the mbarrier release? One GPU call, ~6 minutes, on the H200:
#   scripts/race-proof.sh     (nvcc, compute-sanitizer; a carried build-device/)
# Logs: $OUT/summary.txt (10 lines, also printed), steps.log, pcs.txt (the SASS
# at the reported PCs), race-logs.tar.gz (every log). Steps, most telling
# first, each under `timeout`, all within RACE_BUDGET seconds (480):
#  1. builds tests/gpu/ring_race.cu (the ring alone, see its header) with nvcc
#     and tests/gpu/ring_gemm.c (one library GEMM) against build-device/libtk.so
#  2. ring_race plain: `broken` must show mismatches (the test sees an early
#     refill), `ok` (the library's protocol), `all` and `bar` none
#  3. ring_race under racecheck: ok, all (every consumer lane arrives on rel),
#     bar (a named barrier instead of bar.warp.sync), broken; copies by
#     st.shared (the library's element path: the STS.U16 of the report) and by
#     cp.async (its aligned fallback)
#  4. the library's GEMM under racecheck: 128x256x64 s3 and 128x256x128 s2 at
#     ragged shapes whose B pitch forces the producer's fallback (300x700x200
#     is the suite's case), at an aligned shape (copy engine only: the tool
#     does not see its writes), and aligned with TK_NO_TMA=1 (cp.async)
#  5. synccheck on the library kernel at the two ragged shapes
# How to read it (the summary's last line applies these rules):
#  - ok plain > 0 mismatches: a real race in the protocol.
#  - ok under racecheck flags only readers that are not lane 0 of their warp,
#    and `all` is clean: the tool credits an mbarrier.arrive with the arriving
#    thread's own accesses only. The other lanes' reads reach lane 0's release
#    through bar.warp.sync, which ptxas compiles to a NOP in a converged warp
#    (nothing for the tool to see). `bar` clean too: a real barrier suffices.
#  - the library's ragged runs with that signature (reader lanes 1-31, writer
#    the producer warp) and the aligned run clean: the same blind spot.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-out/race}
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/race-proof.XXXXXX)
deadline=$((SECONDS + ${RACE_BUDGET:-480}))
export TK_CACHE_DIR=$work/tk-cache
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CC=${CC:-$(command -v cc || command -v gcc || echo "$NVCC")}
tool() { command -v "$1" || echo "$(dirname "$NVCC")/$1"; }
HAZ=$PWD/scripts/racecheck-hazards.awk
PROD=256 # 8 consumer warps everywhere: threads from 256 on are the producer's
: >"$out/steps.log"

# The timeout of a step that wants $1 s: what the budget leaves; 0: skip it.
tmo() {
  local l=$((deadline - SECONDS - 10))
  if ((l < 15)); then echo 0; else echo $(($1 < l ? $1 : l)); fi
}
# step NAME WANT CMD...: CMD's output goes to $work/NAME.log
step() {
  local name=$1 t t0=$SECONDS rc
  t=$(tmo "$2")
  shift 2
  if ((t == 0)); then
    echo "skipped (budget)" >"$work/$name.log"
    echo "$name: skipped" | tee -a "$out/steps.log"
    return 99
  fi
  timeout -k 10 "$t" "$@" >"$work/$name.log" 2>&1
  rc=$?
  echo "$name: rc $rc, $((SECONDS - t0)) s: ${*##*/}" | tee -a "$out/steps.log"
  return $rc
}
# mism NAME: the mismatch count ring_race printed
mism() { grep -oE '[0-9]+ mismatches' "$work/$1.log" 2>/dev/null | cut -d' ' -f1 || true; }
failed() { grep -qiE "device not supported|error 999" "$1" 2>/dev/null; }
# haz NAME: one line on the hazards in $work/NAME.log; PC pairs to NAME.pairs
haz() {
  local f=$work/$1.log s
  [[ -s $f ]] || { echo "no log"; return; }
  grep -q "skipped (budget)" "$f" && { echo "skipped"; return; }
  failed "$f" && { echo "tool failed: $(grep -m1 -iE 'not supported|999' "$f" | cut -c1-80)"; return; }
  awk -v prod=$PROD -v pairs="$work/$1.pairs" -f "$HAZ" "$f"
  s=$(grep -m1 -oE "[0-9]+ hazards displayed \([0-9]+ errors, [0-9]+ warnings\)" "$f")
  echo " [tool: ${s:-no summary}]"
}
# counts NAME: "<hazards> <WAR readers in lane 0>" of $work/NAME.log
counts() {
  awk -v prod=$PROD -f "$HAZ" "$work/$1.log" 2>/dev/null |
    sed -E 's/^([0-9]+) hazards.*reader lane 0 ([0-9]+).*/\1 \2/'
}

{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  "$CS" --version | tail -1
} >"$work/gpu.txt" 2>&1
"$CS" --help >"$work/cs_help.txt" 2>&1
limit=()
grep -q -- "--print-limit" "$work/cs_help.txt" && limit=(--print-limit 3000)
kfilter=--kernel-name
grep -q -- "--kernel-name" "$work/cs_help.txt" || kfilter=--kernel-regex
RC=("$CS" --tool racecheck --racecheck-report all "${limit[@]}")

# ---- 1. builds ---------------------------------------------------------------
RR=$work/ring_race RG=$work/ring_gemm
step build_ring 120 "$NVCC" -gencode=arch=compute_90a,code=sm_90a -O2 -lineinfo \
  tests/gpu/ring_race.cu -o "$RR"
"$(tool cuobjdump)" -sass "$RR" >"$work/ring_race.sass" 2>&1
if [[ -f build-device/libtk.so ]]; then
  step build_gemm 60 "$CC" -O2 -Iinclude tests/gpu/ring_gemm.c -Lbuild-device -ltk \
    -Wl,-rpath,"$PWD/build-device" -lm -o "$RG"
  for s in "s3 64 3" "s2 128 2"; do # the kernels' SASS, to read the PCs against
    set -- $s
    ./build-device/tk_dump gemm ptx sm_90a bm=128 bn=256 bk="$2" warps=8 stages="$3" tma=1 \
      >"$work/gemm_$1.ptx" 2>&1 &&
      "$(tool ptxas)" -arch=sm_90a "$work/gemm_$1.ptx" -o "$work/gemm_$1.cubin" &&
      "$(tool nvdisasm)" -c "$work/gemm_$1.cubin" >"$work/gemm_$1.sass"
  done
else
  echo "no build-device/libtk.so: the library's steps are skipped" | tee -a "$out/steps.log"
fi

# ---- 2. ring_race plain: many blocks, slow consumers ---------------------------
P=(blocks=264 tiles=64 iters=200 sleep=2000)
for v in "ok_cp ok copy=cp" "ok_st ok copy=st" "ok_lds ok read=lds" "ok_s2 ok stages=2" \
  "ok_fast ok sleep=0 iters=1000" "all all copy=st" "bar bar copy=st" \
  "broken_cp broken copy=cp" "broken_st broken copy=st" "broken_s2 broken stages=2"; do
  set -- $v
  n=$1 var=$2
  shift 2
  step "plain_$n" 60 "$RR" "$var" "${P[@]}" "$@" # its own settings last: they win
done

# ---- 3.-5. under the tools: small runs (the tool does not depend on timing) ---
S=(blocks=2 tiles=12 iters=1 sleep=0)
ring_rc() { local n=$1; shift; step "rc_ring_$n" 90 "${RC[@]}" "$RR" "$@" "${S[@]}"; }
gemm_rc() {
  local n=$1
  shift
  step "gemm_$n" 60 "$RG" "$@"
  step "rc_gemm_$n" 120 "${RC[@]}" $kfilter kns=tk_gemm "$RG" "$@"
}
ring_rc ok_st ok copy=st
if failed "$work/rc_ring_ok_st.log"; then
  echo "compute-sanitizer unusable on this machine: the tool steps are skipped" |
    tee -a "$out/steps.log"
else
  ring_rc all_st all copy=st
  ring_rc broken_st broken copy=st
  ring_rc bar_st bar copy=st
  if [[ -x $RG ]]; then # B pitches of 1400 and 258 bytes: the producer's element path
    gemm_rc s3_ragged 300 700 200 128 256 64 8 3 1     # the suite's case, 4 k-tiles
    gemm_rc s2_ragged_k 257 129 1000 128 256 128 8 2 1 # 2 stages of 128, 8 k-tiles
  fi
  ring_rc ok_cp ok copy=cp
  ring_rc broken_cp broken copy=cp
  ring_rc all_cp all copy=cp
  if [[ -x $RG ]]; then
    gemm_rc s3_ragged_k 257 129 1000 128 256 64 8 3 1 # 16 k-tiles
    gemm_rc s3_aligned 512 512 512 128 256 64 8 3 1   # the copy engine only
    step gemm_notma 60 env TK_NO_TMA=1 "$RG" 512 512 512 128 256 64 8 3 1
    step rc_gemm_notma 120 env TK_NO_TMA=1 "${RC[@]}" $kfilter kns=tk_gemm \
      "$RG" 512 512 512 128 256 64 8 3 1
    step sc_gemm_s3_ragged 90 "$CS" --tool synccheck $kfilter kns=tk_gemm \
      "$RG" 300 700 200 128 256 64 8 3 1
    step sc_gemm_s2_ragged_k 90 "$CS" --tool synccheck $kfilter kns=tk_gemm \
      "$RG" 257 129 1000 128 256 128 8 2 1
  fi
  ring_rc ok_st_lds ok copy=st read=lds
fi

# ---- summary ------------------------------------------------------------------------
sum=$out/summary.txt
{
  echo "1 gpu/tool: $(tr '\n' ' ' <"$work/gpu.txt" | cut -c1-150)"
  echo "2 ring plain mismatches: ok cp $(mism plain_ok_cp) st $(mism plain_ok_st)" \
    "lds $(mism plain_ok_lds) s2 $(mism plain_ok_s2) fast $(mism plain_ok_fast);" \
    "all $(mism plain_all); bar $(mism plain_bar) | broken cp $(mism plain_broken_cp)" \
    "st $(mism plain_broken_st) s2 $(mism plain_broken_s2)"
  echo "3 racecheck ring ok st:     $(haz rc_ring_ok_st)"
  echo "4 racecheck ring all st:    $(haz rc_ring_all_st) | bar st: $(haz rc_ring_bar_st)"
  echo "5 racecheck ring broken st: $(haz rc_ring_broken_st)"
  echo "6 racecheck ring cp: ok $(haz rc_ring_ok_cp) | broken $(haz rc_ring_broken_cp)" \
    "| all $(haz rc_ring_all_cp)"
  echo "7 racecheck gemm s3 300x700x200: $(haz rc_gemm_s3_ragged)" \
    "| 257x129x1000: $(haz rc_gemm_s3_ragged_k)"
  echo "8 racecheck gemm s2 257x129x1000: $(haz rc_gemm_s2_ragged_k)" \
    "| aligned 512³: $(haz rc_gemm_s3_aligned) | TK_NO_TMA 512³: $(haz rc_gemm_notma)"
  echo "9 gemm plain: $(cat "$work"/gemm_*.log 2>/dev/null |
    grep -oE '[0-9x]+ A·B [^:]*: rel err [0-9.e+-]+' | tr '\n' ';')" \
    "synccheck s3/s2: $(grep -hoE 'ERROR SUMMARY: [0-9]+' "$work"/sc_gemm_*.log 2>/dev/null |
      tr '\n' '/')"
} >"$sum"
# line 10: the header's rules, applied
okp=$(mism plain_ok_st) okc=$(mism plain_ok_cp) brp=$(mism plain_broken_st)
read -r okh okl0 <<<"$(counts rc_ring_ok_st)"
read -r allh _ <<<"$(counts rc_ring_all_st)"
read -r brh brl0 <<<"$(counts rc_ring_broken_st)"
read -r gh gl0 <<<"$(counts rc_gemm_s3_ragged)"
if [[ -z $brp || -z $okp ]]; then
  v="INCOMPLETE: plain runs missing (steps.log)"
elif ((${okp:-0} + ${okc:-0} > 0)); then
  v="REAL RACE: the library's protocol (ok) read refilled stages"
elif ((brp == 0)); then
  v="INCONCLUSIVE: the broken twin corrupted nothing (consumers not slow enough)"
elif [[ -n ${okh:-} ]] && ((okh == 0)); then
  v="racecheck is clean on the ring alone: compare lines 7-8 and pcs.txt"
elif ((${okl0:-1} == 0 && ${allh:-1} == 0)); then
  v="FALSE POSITIVE: ok corrupts nothing, broken does; racecheck flags ok only for readers"
  v+=" in lanes 1-31, and nothing once every lane arrives (broken: ${brh:-?} hazards,"
  v+=" ${brl0:-?} lane-0 readers; gemm s3 ragged: ${gh:-?}, ${gl0:-?})"
else
  v="MIXED: see lines 3-8 and pcs.txt"
fi
echo "10 verdict: $v" >>"$sum"
# the SASS at each run's reported PCs (haz wrote the .pairs)
for p in "$work"/*.pairs; do
  [[ -s $p ]] || continue
  case $p in
    *rc_gemm_s2*) sass=$work/gemm_s2.sass ;;
    *rc_gemm_*) sass=$work/gemm_s3.sass ;;
    *) sass=$work/ring_race.sass ;;
  esac
  {
    echo "== $(basename "$p" .pairs) (SASS: $(basename "$sass"))"
    sort -t: -k2 -nr "$p" | head -8
    for pc in $(grep -oE "0x[0-9a-f]+" "$p" | sed 's/^0x0*//' | sort -u | head -12); do
      grep -m1 -E "/\*0*${pc}\*/" "$sass" 2>/dev/null | sed 's/  */ /g; s#/\* 0x[0-9a-f]* \*/##'
    done
  } >>"$out/pcs.txt"
done
cat "$sum"
tar -czf "$out/race-logs.tar.gz" -C "$work" --exclude='*.cubin' --exclude=ring_race \
  --exclude=ring_gemm --exclude=tk-cache . 2>/dev/null
echo "logs: $out/race-logs.tar.gz ($(du -h "$out/race-logs.tar.gz" | cut -f1)), ${SECONDS} s"
