#!/usr/bin/env bash
# scripts/test.sh on a machine without a CUDA toolkit, simulated: a fresh clone
# of HEAD, run in a private mount namespace where /usr/local/cuda (and what it
# links to) is an empty tmpfs, the toolkit's wrappers in /usr/local/bin are
# /dev/null (not executable) and PATH has no CUDA directory. setup.sh then
# takes the CUDA headers and ptxas from NVIDIA's PyPI wheels (issue 16's proof).
# Needs root (unshare -m). Usage: scripts/test-nocuda.sh [LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-/tmp/tk-nocuda.log}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git clone -q . "$dir/src"
cd "$dir/src"
unshare -m bash -c '
  mount -t tmpfs none "$(readlink -f /usr/local/cuda)"
  for w in /usr/local/bin/ptxas /usr/local/bin/nvcc /usr/local/bin/nvlink; do
    [ -e "$w" ] && mount --bind /dev/null "$w"
  done
  PATH=$(echo "$PATH" | tr ":" "\n" | grep -v cuda | paste -sd:)
  echo "no toolkit: $(ls -A "$(readlink -f /usr/local/cuda)" | wc -l) entries in /usr/local/cuda," \
    "ptxas on PATH: $(command -v ptxas || echo none)"
  ./scripts/test.sh' >"$log" 2>&1 && rc=0 || rc=$?
tail -3 "$log"
echo "test-nocuda: scripts/test.sh exited $rc (log: $log)"
exit $rc
