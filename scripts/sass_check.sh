#!/usr/bin/env bash
# SASS check for the GPU machine: lowers the built-in GEMM (and attention)
# to PTX with tk_dump, assembles with ptxas, dumps SASS with cuobjdump and
# checks that the tensor-core instruction (HMMA) is there and that nothing
# goes to local memory (LDL/STL = spills).
#
#   scripts/sass_check.sh [build-dir] [arch]      (defaults: build-device sm_90a)
# Writes the PTX/cubin/SASS under $OUT (or a temp dir) for inspection.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-device}
arch=${2:-sm_90a}
dump="$build/tk_dump"
out=${OUT:-$(mktemp -d)}
for t in ptxas cuobjdump; do
  command -v "$t" >/dev/null || [ -x "/usr/local/cuda/bin/$t" ] || { echo "sass_check: $t not found" >&2; exit 2; }
done
PATH="$PATH:/usr/local/cuda/bin"
[ -x "$dump" ] || { echo "sass_check: $dump not built (cmake --build $build --target tk_dump)" >&2; exit 2; }

fail=0
check() { # name, spill-free required (1/0), kernel (gemm|attention), tk_dump options...
  local name=$1 strict=$2 kernel=$3; shift 3
  "$dump" "$kernel" ptx "$arch" "$@" > "$out/$name.ptx"
  ptxas -arch="$arch" -v "$out/$name.ptx" -o "$out/$name.cubin" 2> "$out/$name.ptxas.log"
  cuobjdump -sass "$out/$name.cubin" > "$out/$name.sass"
  local hmma ldl regs
  hmma=$(grep -c "HMMA" "$out/$name.sass" || true)
  ldl=$(grep -cE "\b(LDL|STL)\b" "$out/$name.sass" || true)
  regs=$(grep -o "Used [0-9]* registers" "$out/$name.ptxas.log" | head -1)
  printf "%-28s %s: HMMA %4d, LDL/STL %3d, %s\n" "$name" "$arch" "$hmma" "$ldl" "$regs"
  [ "$hmma" -gt 0 ] || { echo "  FAIL: no HMMA in $name"; fail=1; }
  if [ "$strict" = 1 ] && [ "$ldl" -ne 0 ]; then echo "  FAIL: $name uses local memory"; fail=1; fi
}
check gemm_bf16 1 gemm in=bf16 out=bf16
check gemm_f16_abt_f32 1 gemm in=f16 out=f32 tb=1
check attention_d64 0 attention d=64 causal=1
check attention_d128 0 attention d=128
echo "sass_check: files in $out"
exit $fail
