#!/usr/bin/env bash
# tk-aot precompiles GEMM, attention and attention backward specializations for sm_90a into a
# fresh directory; a second process asks for the same list and must find
# every kernel there (--require-cached: 0 compiles). Skips without ptxas.
# With the null driver's directory (tests/nullcuda) as a second argument, the
# deployment side too: a process with a "GPU" and no ptxas loads every kernel
# from the directory as a kernel pack through the driver (tk-aot --load), 0
# compiled, each cubin holding its entry; with one entry removed, exactly
# that one is compiled and --require-cached fails.
#   scripts/aot-roundtrip.sh path/to/tk-aot [path/to/null-cuda-dir]
set -euo pipefail
aot=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/tk-aot-XXXXXX")
trap 'rm -rf "$dir"' EXIT
specs="gemm:bf16:bf16:ab:default attention:bf16:64:causal attention:bf16:256:full:wgmma
  attention_bwd:bf16:64:causal:det:wgmma"
if ! out=$("$aot" -a sm_90a -d "$dir" $specs 2>&1); then
  if grep -q "ptxas not found" <<<"$out"; then echo "aot roundtrip skipped: $out"; exit 0; fi
  echo "$out"; exit 1
fi
echo "$out"
n=$(ls "$dir"/*.tkc | wc -l)
[[ $n == 5 ]] || { echo "expected 5 entries in $dir, found $n"; exit 1; }
# a kernel pack: the manifest names the ptxas that made the entries
head -1 "$dir/tk-pack" | grep -qx "tilekittens kernel pack 1" &&
  grep -q "^compiler ptxas " "$dir/tk-pack" || { echo "no kernel pack manifest in $dir"; exit 1; }
"$aot" -a sm_90a -d "$dir" --require-cached $specs
[[ -n ${2:-} ]] || exit 0
# the GPU machine: the null driver, no ptxas, no installed pack, no disk cache
deploy() {
  TK_PTXAS=/nonexistent/ptxas TK_INSTALLED_PACK= TK_KERNEL_PACKS= LD_LIBRARY_PATH=$2 \
    "$aot" -a sm_90a -d "$1" --load --require-cached $specs
}
out=$(deploy "$dir" "$2") || { echo "$out"; echo "the deployment side compiled or failed"; exit 1; }
echo "$out"
grep -q "5 loaded from $dir, 0 compiled" <<<"$out" || { echo "expected 5 loaded, 0 compiled"; exit 1; }
rm "$(ls "$dir"/*.tkc | head -1)"
if out=$(deploy "$dir" "$2"); then echo "$out"; echo "a missing entry went unnoticed"; exit 1; fi
grep -q "4 loaded from $dir, 1 compiled" <<<"$out" || { echo "$out"; echo "expected 1 compiled"; exit 1; }
echo "aot roundtrip: deployment side on the null driver: 5 loaded, 0 compiled; one removed: 1 compiled"
