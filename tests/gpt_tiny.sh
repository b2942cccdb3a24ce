#!/usr/bin/env bash
# gpt-train's tiny preset on the interpreter (examples/gpt/README.md):
#   - the loss of an 8-step run decreases, --dump-grads writes n_params
#     floats and the loss;
#   - 4 steps, a checkpoint, 4 resumed steps: the same progress lines and a
#     byte-identical final checkpoint as the 8 steps in one go;
#   - every GEMM split over K in two tracks the unsplit run (--split-k 2),
#     and --profile prints its table;
#   - --check: step 1's gradients against the float64 reference;
#   - bad input (a missing data file, a corrupt checkpoint, an unsupported
#     config, a too-long --seq, a truncated checkpoint) exits 1 with one
#     message on stderr and leaves an existing checkpoint as it was;
#   - --sample prints its bytes.
# Data: the repository's own headers (include/, ~170 KB), batch 2 x 64.
#   usage: gpt_tiny.sh path/to/gpt-train source-dir [quick]
# quick = 1 (the sanitizer build, ~15x slower): training and sampling with
# one layer (-L 1) and --check at batch 1, still two layers there.
set -euo pipefail
GPT=$(realpath "$1")
SRC=$(realpath "$2")
QUICK=${3:-0}
TRAIN=() CHECK_B=2 SAMPLE=32
if [ "$QUICK" = 1 ]; then TRAIN=(-L 1) CHECK_B=1 SAMPLE=8; fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

fail() {
  echo "gpt_tiny: FAIL: $*" >&2
  exit 1
}
# Race checks double the interpreter's time; the kernels' own tests run
# them. --check below runs with them on.
export TK_RACE_CHECK=0
COMMON=(--backend interp --data "$SRC/include" --batch 2 --val-batches 1)
losses() { grep '^step' "$1" | sed 's/ *|  *[0-9.]* ms .*//'; }

# ---- training, resume ---------------------------------------------------------
"$GPT" "${COMMON[@]}" ${TRAIN[@]+"${TRAIN[@]}"} --steps 8 --save full.ckpt --dump-grads grads.bin >full.log
first=$(grep '^step' full.log | head -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
last=$(grep '^step' full.log | tail -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
echo "loss: step 1 $first, step 8 $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' || fail "the loss did not decrease"
grep -q '^val 8/8 | val_loss' full.log || fail "no validation loss"
n=$(sed -n 's/.* \([0-9]*\) parameters.*/\1/p' full.log)
[ "$(stat -c %s grads.bin)" -eq $((4 * n + 4)) ] || fail "grads.bin is not 4 x $n + 4 bytes"

# (the first half with one compile thread at startup, the full run with one
# a core: the prepare pass's threads change nothing)
"$GPT" "${COMMON[@]}" ${TRAIN[@]+"${TRAIN[@]}"} --steps 8 --stop-at 4 --save half.ckpt \
  --prepare-threads 1 >half.log
"$GPT" "${COMMON[@]}" --steps 8 --load half.ckpt --save resumed.ckpt >resumed.log
losses full.log >want.txt
(losses half.log; losses resumed.log) >got.txt
diff want.txt got.txt || fail "4 + 4 resumed steps differ from 8"
cmp full.ckpt resumed.ckpt || fail "the resumed run's checkpoint differs"
echo "resume: steps 5..8 and the final checkpoint identical"

# ---- --precompile: the start-up's kernels compiled by ptxas for sm_90a into a
# cache directory; a second run finds every one there ------------------------------
if command -v ptxas >/dev/null || [ -x /usr/local/cuda/bin/ptxas ] || [ -n "${TK_PTXAS:-}" ]; then
  pre=(--backend interp --arch sm_90a --batch 2 -L 1 --steps 0 --precompile "$WORK/pre")
  "$GPT" "${pre[@]}" >pre1.log || fail "--precompile"
  "$GPT" "${pre[@]}" >pre2.log || fail "--precompile (second run)"
  n=$(sed -n 's/.*; \([0-9]*\) compiled, 0 from disk).*/\1/p' pre1.log)
  [ -n "$n" ] && [ "$n" -gt 0 ] || { cat pre1.log; fail "--precompile compiled nothing"; }
  grep -q "; 0 compiled, $n from disk)" pre2.log || { cat pre2.log; fail "--precompile's second run compiled"; }
  [ "$(ls "$WORK/pre" | wc -l)" -ge "$n" ] || fail "--precompile: fewer than $n entries"
  echo "precompile: $n kernels compiled for sm_90a, all $n from disk the second time"
else
  echo "precompile: no ptxas here: skipped"
fi

# ---- every GEMM split over K in two (f32 partials summed in order) tracks
# the unsplit run; --profile prints its table ---------------------------------------
"$GPT" "${COMMON[@]}" ${TRAIN[@]+"${TRAIN[@]}"} --steps 8 --stop-at 3 --split-k 2 --profile >split.log
losses full.log | head -3 | sed 's/.*loss \([0-9.]*\).*/\1/' >want.txt
losses split.log | sed 's/.*loss \([0-9.]*\).*/\1/' >got.txt
paste want.txt got.txt | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-3 * $1) bad = 1 }
  END { exit bad || NR != 3 }' || { paste want.txt got.txt; fail "--split-k 2 does not track"; }
grep -q '^| tk_gemm (qkv dW) | [0-9]* | ' split.log || fail "--profile printed no qkv dW row"
echo "split-k 2: steps 1..3 within 1e-3 of the unsplit run; the profile has its rows"

# ---- the float64 check, race checks on ----------------------------------------
TK_RACE_CHECK=1 "$GPT" "${COMMON[@]}" --batch "$CHECK_B" --check >check.log ||
  { cat check.log; fail "--check"; }
grep '^check:' check.log

# ---- bad input: exit 1, one message, the checkpoint untouched -----------------------
cp full.ckpt keep.ckpt
bad() {
  local what=$1
  shift
  if "$GPT" "${COMMON[@]}" --steps 2 --save keep.ckpt "$@" >bad.out 2>bad.err; then
    fail "$what: exit status 0"
  fi
  [ "$(wc -l <bad.err)" -eq 1 ] || { cat bad.err; fail "$what: not one line on stderr"; }
  cmp -s keep.ckpt full.ckpt || fail "$what: the checkpoint changed"
  [ ! -e keep.ckpt.tmp ] || fail "$what: keep.ckpt.tmp left behind"
  echo "bad input, $what: $(cat bad.err)"
}
bad "missing data" --data "$WORK/no-such-file"
cp full.ckpt corrupt.ckpt
byte=$(od -An -tu1 -j4000 -N1 full.ckpt | tr -d ' ')
printf "\\$(printf '%03o' $((byte ^ 0xff)))" | dd of=corrupt.ckpt bs=1 seek=4000 conv=notrunc status=none
cmp -s corrupt.ckpt full.ckpt && fail "corrupt.ckpt is not corrupt"
bad "corrupt checkpoint" --load corrupt.ckpt
head -c 1000 full.ckpt >short.ckpt
bad "truncated checkpoint" --load short.ckpt
bad "head dim 48" -C 96
bad "seq > T_max" --seq 65
bad "17 compile threads" --prepare-threads 17
bad "--precompile without --arch" --precompile "$WORK/nowhere"
bad "config vs checkpoint" --load full.ckpt -L 3 -H 2 -C 128

# ---- sampling ------------------------------------------------------------------------
"$GPT" --backend interp --load full.ckpt --steps 0 --sample "$SAMPLE" --prompt '#include' \
  --quiet >sample.out
# the header line, the prompt, the bytes, a newline
size=$(($(stat -c %s sample.out) - $(head -1 sample.out | wc -c)))
[ "$size" -eq $((8 + SAMPLE + 1)) ] || fail "--sample $SAMPLE printed $size bytes after its header"
echo "sample: $(tail -c +$(($(head -1 sample.out | wc -c) + 1)) sample.out | od -An -c | head -2 | tr -s ' ')"
echo "gpt_tiny: PASS"
