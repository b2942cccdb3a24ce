#!/usr/bin/env bash
# Every golden-PTX variant (tests/test_golden_ptx.c's, all arches) through ptxas and a
# disassembler, then scripts/sass_uregs.py: no kernel may read a uniform register that
# nothing writes (the ptxas 13.0 cp.async defect, docs/LOWERING.md). Needs ptxas and
# nvdisasm or cuobjdump (NVDISASM=path picks one; the CUDA toolkit of the GPU machine
# has both; here: pip download nvidia-cuda-nvdisasm).
#   scripts/sass_uregs_all.sh [build-dir]      (default build; logs in $OUT or a temp dir)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${OUT:-$(mktemp -d)}
PATH="$PATH:/usr/local/cuda/bin"
dis=${NVDISASM:-$(command -v nvdisasm || command -v cuobjdump || true)}
[[ -n $dis ]] || { echo "sass_uregs_all: no nvdisasm or cuobjdump" >&2; exit 2; }
[[ $dis == *cuobjdump ]] && dis="$dis -sass" || dis="$dis -c"
mkdir -p "$out/ptx" "$out/sass"
TK_PTX_DUMP="$out/ptx" "./$build/test_golden_ptx" >"$out/golden.log" 2>&1 ||
  { echo "sass_uregs_all: test_golden_ptx failed (see $out/golden.log)"; exit 1; }
export out dis
one() { # name.arch.ptx -> name.arch.sass
  local f=$1 b a
  b=$(basename "$f" .ptx) a=${b##*.}
  ptxas -arch="$a" "$f" -o "$out/sass/$b.cubin" 2>"$out/sass/$b.err" && $dis "$out/sass/$b.cubin" >"$out/sass/$b.sass"
}
export -f one
ls "$out"/ptx/*.ptx | xargs -P "$(nproc)" -I{} bash -c 'one {}' || { echo "sass_uregs_all: ptxas or the disassembler failed"; exit 1; }
python3 scripts/sass_uregs.py "$out"/sass/*.sass >"$out/uregs.txt"
rc=$?
echo "sass_uregs_all: $(ls "$out"/sass/*.sass | wc -l) kernels, $(grep -vc ': ok$' "$out/uregs.txt") flagged ($out/uregs.txt)"
grep -v ': ok$' "$out/uregs.txt" | head -20
exit $rc
