#!/usr/bin/env bash
# tk-aot precompiles GEMM, attention and attention backward specializations for sm_90a into a
# fresh directory; a second process asks for the same list and must find
# every kernel there (--require-cached: 0 compiles). Skips without ptxas.
#   scripts/aot-roundtrip.sh path/to/tk-aot
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
