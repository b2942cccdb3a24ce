#!/usr/bin/env bash
# Fails unless the shared library exports exactly the functions the public
# headers declare (include/tk/*.h, marked TK_API): nothing internal leaks out
# of libtilekittens.so, and no public declaration lacks TK_API (it would be
# hidden, and a program using it would not link).
#   scripts/check-exports.sh LIB [SOURCE_DIR]   (ctest check-exports)
#   scripts/check-exports.sh --self-test        (proves both directions fail)
# The declarations come from the compiler (gcc -aux-info), not from a grep.
# Exit: 0 the same (one summary line), 1 a difference (one line each), 2 usage.
set -euo pipefail

die() { echo "check-exports: $*" >&2; exit 2; }

# compare DECLARED EXPORTED (files of sorted names): prints each difference.
compare() {
    local bad=0 s
    while IFS= read -r s; do
        [[ -n $s ]] && { echo "exported but not declared in include/tk: $s"; bad=1; }
    done < <(comm -13 "$1" "$2")
    while IFS= read -r s; do
        [[ -n $s ]] && { echo "declared but not exported (TK_API missing?): $s"; bad=1; }
    done < <(comm -23 "$1" "$2")
    return $bad
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ ${1-} == --self-test ]]; then
    printf 'tk_a\ntk_b\n' >"$tmp/decl"
    printf 'tk_a\ntk_b\n' >"$tmp/same"
    printf 'tk_a\ntk_b\ntk_internal\n' >"$tmp/extra"
    printf 'tk_a\n' >"$tmp/missing"
    compare "$tmp/decl" "$tmp/same" >/dev/null || die "self-test: equal lists reported"
    out=$(compare "$tmp/decl" "$tmp/extra" || true)
    [[ $out == *"not declared"*tk_internal* ]] || die "self-test: an extra export went unnoticed"
    out=$(compare "$tmp/decl" "$tmp/missing" || true)
    [[ $out == *"not exported"*tk_b* ]] || die "self-test: a missing export went unnoticed"
    echo "check-exports: self-test ok"
    exit 0
fi

lib=${1-}
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
[[ -f $lib ]] || die "usage: $0 LIB [SOURCE_DIR] | --self-test (no library '$lib')"
gcc=${TK_GCC:-gcc} # -aux-info (the declarations as the compiler saw them) is gcc's

for h in "$src"/include/tk/*.h; do echo "#include \"tk/${h##*/}\""; done >"$tmp/all.c"
"$gcc" -std=c17 -I"$src/include" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c" ||
    die "the public headers do not compile"
grep "/include/tk/" "$tmp/aux" | sed -E 's/\(.*//; s/.*[ *]([A-Za-z_][A-Za-z0-9_]*) *$/\1/' |
    sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/exported"
[[ -s $tmp/declared ]] || die "no declarations found in $src/include/tk"
if compare "$tmp/declared" "$tmp/exported"; then
    echo "check-exports: $(wc -l <"$tmp/exported") symbols, all declared in include/tk and exported"
else
    exit 1
fi
