#!/usr/bin/env bash
# The PTX diff of every shipped kernel between a revision and the working
# tree (tests/test_golden_ptx.c lists the variants).
#   scripts/ptx-diff.sh [REV]      REV defaults to HEAD; prints `diff -ru` output
# A refactor prints nothing; a codegen change shows exactly what it changed.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
dump() { # source dir, build dir, output dir
    cmake -S "$1" -B "$2" >/dev/null
    cmake --build "$2" -j"$(nproc)" --target test_golden_ptx >/dev/null
    mkdir -p "$3"
    # The comparison's verdict does not matter here, only the dumped PTX.
    TK_PTX_DUMP="$3" CK_FORK=no "$2/test_golden_ptx" >/dev/null 2>&1 || true
}
git worktree add --detach "$tmp/src" "$rev" >/dev/null 2>&1
dump "$tmp/src" "$tmp/build-old" "$tmp/old"
dump . build-ptxdiff "$tmp/new"
[ -n "$(ls "$tmp/old")" ] || { echo "ptx-diff: $rev has no test_golden_ptx to dump with" >&2; exit 2; }
diff -ru "$tmp/old" "$tmp/new" && echo "ptx-diff: identical PTX for every variant ($rev vs working tree)" >&2
