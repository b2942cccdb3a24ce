#!/usr/bin/env bash
# Fails when a layer of the library reaches UP (docs/DESIGN.md: a layer may
# include and call only itself and the layers below):
#  - symbols: an object of a layer references (nm -u) a symbol that only a
#    higher layer's objects define (nm --defined-only). Static libraries alone
#    do not catch this: the final link resolves an upward call whenever every
#    layer is on the line;
#  - includes: a file of a layer has #include "X/..." where X is a higher
#    layer. tk/ (the public headers) and headers outside the layers are
#    allowed everywhere.
#   scripts/check-layers.sh BUILD_DIR [SOURCE_DIR]   (after a build; ctest check-layers)
#   scripts/check-layers.sh --self-test              (proves both checks can fail)
# Exit: 0 clean (one summary line), 1 violations (one line each), 2 usage.
set -euo pipefail

# The layers, lowest first: "source folder:CMake OBJECT target" (the same
# table as TK_LAYERS in CMakeLists.txt, which makes the targets). A file
# belongs to the layer whose folder holds it directly: ops/nv/lower.h is layer
# ops/nv, not ops.
LAYERS=(ir:tk_ir ops/nv:tk_opsnv ops:tk_ops jit:tk_jit kernels:tk_kernels)
# kernels/ is written on the public API: besides tk/ it may include only the
# registry's one internal header (docs/DESIGN.md, "Adding a kernel").
KERNEL_INCLUDES="jit/registry.h"

die() { echo "check-layers: $*" >&2; exit 2; }

# The rank (index in LAYERS) of a source path such as "ops/nv/lower.h", or -1.
rank_of() {
    local path=$1 dir=${1%/*} i
    [[ $path == */* ]] || { echo -1; return; }
    for i in "${!LAYERS[@]}"; do
        [[ $dir == "${LAYERS[i]%%:*}" ]] && { echo "$i"; return; }
    done
    echo -1
}

# Upward references between the layers' objects under $1 (a build dir).
check_symbols() {
    local build=$1 i dir target objdir o
    : >"$tmp/defs"
    : >"$tmp/uses"
    for i in "${!LAYERS[@]}"; do
        dir=${LAYERS[i]%%:*}
        target=${LAYERS[i]#*:}
        objdir=$build/CMakeFiles/$target.dir
        [[ -d $objdir ]] || die "no objects of $target in $objdir (build first)"
        while IFS= read -r o; do
            nm -g --defined-only "$o" | awk -v r="$i" 'NF >= 2 { print $NF, r }' >>"$tmp/defs"
            nm -u "$o" | awk -v r="$i" -v f="${o##*/}" 'NF >= 2 { print $NF, r, f }' >>"$tmp/uses"
            echo >>"$tmp/objects"
        done < <(find "$objdir" -name '*.o' | sort)
    done
    local names
    names=$(printf '%s\n' "${LAYERS[@]%%:*}")
    awk -v names="$names" '
        BEGIN { split(names, name, "\n") }
        FNR == NR { if (!($1 in def) || $2 < def[$1]) def[$1] = $2; next }
        ($1 in def) && def[$1] > $2 {
            printf "%s: %s (defined in higher layer %s, referenced by %s)\n",
                   name[$2 + 1], $1, name[def[$1] + 1], $3
        }' "$tmp/defs" "$tmp/uses" | sort -u
}

# Upward #includes in the layers' files under $1 (a source dir).
check_includes() {
    local src=$1 i dir f line inc r
    for i in "${!LAYERS[@]}"; do
        dir=${LAYERS[i]%%:*}
        for f in "$src/$dir"/*.[ch] "$src/$dir"/*.def; do
            [[ -f $f ]] || continue
            echo >>"$tmp/files"
            while IFS=: read -r line inc; do
                r=$(rank_of "$inc")
                if ((r > i)); then
                    echo "$dir: $dir/${f##*/}:$line includes $inc (higher layer ${LAYERS[r]%%:*})"
                elif [[ $dir == kernels && $inc == */* && $inc != tk/* ]] &&
                     [[ " $KERNEL_INCLUDES " != *" $inc "* ]]; then
                    echo "$dir: $dir/${f##*/}:$line includes $inc (kernels use tk/ and $KERNEL_INCLUDES)"
                fi
            done < <(awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*["<][^">]+[">]/) {
                              s = substr($0, RSTART, RLENGTH)
                              sub(/^[^"<]*["<]/, "", s)
                              sub(/[">]$/, "", s)
                              print FNR ":" s
                          }' "$f")
        done
    done
}

check() {
    local build=$1 src=$2 out
    tmp=$(mktemp -d) # global: the functions below and the EXIT trap use it
    trap 'rm -rf "$tmp"' EXIT
    : >"$tmp/objects"
    : >"$tmp/files"
    out=$(check_symbols "$build"; check_includes "$src")
    if [[ -n $out ]]; then
        echo "$out"
        echo "check-layers: $(wc -l <<<"$out") upward reference(s) or include(s)" \
             "(layers, lowest first: ${LAYERS[*]%%:*})"
        return 1
    fi
    echo "check-layers: ${#LAYERS[@]} layers, $(wc -l <"$tmp/objects") objects," \
         "$(wc -l <"$tmp/files") files: nothing reaches up"
}

# Builds a scratch tree with upward calls and includes (ir -> jit, and
# ops/nv -> ops, which matching folders by prefix would miss) beside downward
# ones, and expects exactly the upward ones; then the tree without them passes.
self_test() {
    local me=$0 cc=${CC:-cc} bad out rc
    t=$(mktemp -d) # global: the EXIT trap runs after this function returns
    trap 'rm -rf "$t"' EXIT
    for bad in 1 0; do
        rm -rf "${t:?}"/*
        mkdir -p "$t/src/ir" "$t/src/ops/nv" "$t/src/jit" "$t/src/kernels" "$t/src/tk"
        printf '/* public */\n' >"$t/src/tk/tk.h"
        printf 'int tk_low(void);\n' >"$t/src/ir/low.h"
        printf 'int tk_high(void);\n' >"$t/src/jit/high.h"
        printf 'int tk_reg(void);\n' >"$t/src/jit/registry.h"
        printf '#include "ir/low.h"\nint tk_high(void) { return tk_low(); }\n' >"$t/src/jit/high.c"
        printf 'int tk_op(void);\n' >"$t/src/ops/op.h"
        printf '#include "ops/nv/nv.h"\nint tk_op(void) { return tk_nv(); }\n' >"$t/src/ops/op.c"
        printf 'int tk_nv(void);\n' >"$t/src/ops/nv/nv.h"
        printf '#include "tk/tk.h"\n#include "jit/registry.h"\nint tk_k(void) { return 2; }\n' \
            >"$t/src/kernels/k.c"
        if ((bad)); then
            printf '#include "ops/op.h"\nint tk_k2(void) { return tk_op(); }\n' \
                >"$t/src/kernels/k2.c"
            printf '#include "jit/high.h"\nint tk_low(void) { return tk_high(); }\n' \
                >"$t/src/ir/low.c"
            printf '#include "tk/tk.h"\n#include "ops/op.h"\n%s\n' \
                'int tk_nv(void) { return tk_op(); }' >"$t/src/ops/nv/nv.c"
        else
            printf 'int tk_low(void) { return 0; }\n' >"$t/src/ir/low.c"
            printf '#include "ir/low.h"\nint tk_nv(void) { return 1; }\n' >"$t/src/ops/nv/nv.c"
        fi
        local i dir target f o
        for i in "${!LAYERS[@]}"; do
            dir=${LAYERS[i]%%:*}
            target=${LAYERS[i]#*:}
            mkdir -p "$t/build/CMakeFiles/$target.dir/$dir"
            for f in "$t/src/$dir"/*.c; do
                [[ -f $f ]] || continue
                o=$t/build/CMakeFiles/$target.dir/$dir/${f##*/}.o
                "$cc" -I"$t/src" -c "$f" -o "$o" || die "self-test: $cc failed"
            done
        done
        rc=0
        out=$(bash "$me" "$t/build" "$t/src") || rc=$?
        if ((bad)); then
            local w want=("ir: tk_high (defined in higher layer jit, referenced by low.c.o)"
                          "ops/nv: tk_op (defined in higher layer ops, referenced by nv.c.o)"
                          "ir: ir/low.c:1 includes jit/high.h (higher layer jit)"
                          "ops/nv: ops/nv/nv.c:2 includes ops/op.h (higher layer ops)"
                          "kernels: kernels/k2.c:1 includes ops/op.h (kernels use tk/ and jit/registry.h)")
            ((rc == 1)) || { echo "$out"; die "self-test: upward tree passed (rc $rc)"; }
            for w in "${want[@]}"; do
                grep -qxF "$w" <<<"$out" || { echo "$out"; die "self-test: missed: $w"; }
            done
            # Only those (downward calls and includes are fine) + the count line.
            (($(wc -l <<<"$out") == ${#want[@]} + 1)) ||
                { echo "$out"; die "self-test: extra lines"; }
        else
            ((rc == 0)) || { echo "$out"; die "self-test: clean tree failed (rc $rc)"; }
        fi
    done
    echo "check-layers self-test: an upward call and an upward include fail; a clean tree passes"
}

case "${1:-}" in
--self-test) self_test ;;
"" | -h | --help) sed -n '2,13p' "$0"; exit 2 ;;
*) check "$1" "${2:-$(cd "$(dirname "$0")/.." && pwd)}" ;;
esac
