#!/usr/bin/env bash
# gpt-train's training step on the null driver (tests/nullcuda): the driver
# calls a step makes, from two runs that differ only in their step count
# (2 and 4; each its own fresh cache, so start-up is the same). Per step:
#   - no allocation, free, compile, module load, function attribute or
#     occupancy query, and no tensor map encoded again (the maps of step 1
#     are memoized per pointer: jit/launch.c);
#   - no cuCtxSynchronize, at most one device-to-host copy (the loss);
#   - every launch and map valid by the driver API's rules (none refused),
#     and every launch passing each parameter its kernel's PTX declares (ptxas
#     hidden: every module goes through cuLink as PTX, which the null driver
#     reads the declarations from).
# usage: gpt_null_driver.sh path/to/gpt-train path/to/null-cuda-dir source-dir
set -euo pipefail
GPT=$(realpath "$1")
NULLDIR=$(realpath "$2")
SRC=$(realpath "$3")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() {
    echo "gpt_null_driver: FAIL: $*" >&2
    exit 1
}
for n in 2 4; do
    TK_CACHE_DIR="$WORK/cache$n" TK_NULL_CUDA_REPORT="$WORK/calls$n" LD_LIBRARY_PATH="$NULLDIR" \
        TK_PTXAS=/nonexistent/ptxas TK_INSTALLED_PACK= \
        "$GPT" --preset tiny --steps "$n" --batch 2 --data "$SRC/include" --quiet \
        >"$WORK/out$n" 2>&1 || fail "gpt-train --steps $n: $(tail -3 "$WORK/out$n")"
    [ -s "$WORK/calls$n" ] || fail "no report from the null driver (is $NULLDIR/libcuda.so.1 it?)"
done
# name count lines; per step = (4 steps - 2 steps) / 2
per_step() { awk -v f="$1" 'NR==FNR { a[$1] = $2; next } $1 == f { print ($2 - a[f]) / 2 }' \
    "$WORK/calls2" "$WORK/calls4"; }
for f in cuMemAlloc cuMemFree cuLinkCreate cuModuleLoadData cuModuleLoadDataEx cuFuncSetAttribute \
    cuOccupancyMaxActiveBlocksPerMultiprocessor cuTensorMapEncodeTiled cuCtxSynchronize; do
    [ "$(per_step "$f")" = 0 ] || fail "a step makes $(per_step "$f") $f"
done
launches=$(per_step cuLaunchKernel)
[ "$launches" -gt 10 ] || fail "only $launches launches a step"
dtoh=$(per_step cuMemcpyDtoH)
[ "$dtoh" -le 1 ] || fail "a step copies $dtoh times to the host"
for n in 2 4; do
    grep -q "^rejected 0" "$WORK/calls$n" || fail "refused: $(grep '^rejected' "$WORK/calls$n")"
done
count() { awk -v f="$1" '$1 == f { print $2 }' "$WORK/calls4"; }
all=$(($(count cuLaunchKernel) + $(count cuLaunchKernelEx)))
[ "$(count params_checked)" = "$all" ] ||
    fail "$(count params_checked) of $all launches had their parameters checked"
maps=$(count cuTensorMapEncodeTiled)
echo "gpt_null_driver: a step makes $launches launches and $dtoh copy to the host;" \
    "$maps tensor maps encoded in all, none again after step 1"
