#!/usr/bin/env bash
# Installs the library from BUILD_DIR (default build/) into a temporary
# prefix, then builds tests/consumer/ against it as a user would, four ways:
# find_package with the shared and with the static library, pkg-config with
# the shared and with the static library; each runs (on the interpreter).
#   scripts/test-install.sh [BUILD_DIR]   (after a build; scripts/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -f $build/CMakeCache.txt ]] || { echo "test-install: no build in $build" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
    { cat "$tmp/install.log"; exit 1; }
pc=$(find "$prefix" -name tilekittens.pc)
[[ -n $pc ]] || { echo "test-install: no tilekittens.pc installed" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pc")") # lib, lib64, lib/<multiarch>
# Headers under include/tilekittens/ (-I that, then "tk/tk.h"), not a bare tk/.
for f in "$prefix/include/tilekittens/tk/tk.h" "$libdir/cmake/TileKittens/TileKittensConfig.cmake" \
         "$libdir/cmake/TileKittens/TileKittensConfigVersion.cmake" "$libdir/libtilekittens.a"; do
    [[ -e $f ]] || { echo "test-install: $f not installed" >&2; exit 1; }
done
soname=$(readelf -d "$libdir/libtilekittens.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ $soname == libtilekittens.so.* && -e $libdir/$soname ]] ||
    { echo "test-install: bad SONAME '$soname'" >&2; exit 1; }

run() { # name binary
    local out
    out=$(env -u LD_LIBRARY_PATH "$2") || { echo "test-install: $1 failed: $out" >&2; exit 1; }
    echo "test-install: $1: $out"
}
for kind in shared static; do
    static=OFF
    [[ $kind == static ]] && static=ON
    cmake -S tests/consumer -B "$tmp/cm-$kind" -DCMAKE_PREFIX_PATH="$prefix" \
          -DTK_CONSUMER_STATIC=$static >/dev/null
    cmake --build "$tmp/cm-$kind" >/dev/null
    run "find_package ($kind)" "$tmp/cm-$kind/consumer"
done
export PKG_CONFIG_PATH=$libdir/pkgconfig
make -s -f tests/consumer/Makefile OUT="$tmp" "$tmp/consumer_pc" "$tmp/consumer_pc_static"
run "pkg-config (shared)" "$tmp/consumer_pc"
# The kernel pack (TK_INSTALL_KERNELS): tk-aot's entries and manifest, readable by
# all, which the shared library finds beside itself, wherever the prefix is.
if grep -q "^TK_INSTALL_KERNELS:BOOL=ON" "$build/CMakeCache.txt"; then
    pack=$prefix/share/tilekittens/kernels
    if grep -q "No kernel pack" "$tmp/install.log"; then
        grep -A3 "No kernel pack" "$tmp/install.log" | grep -q "ptxas not found" ||
            { cat "$tmp/install.log"; echo "test-install: the kernel pack failed" >&2; exit 1; }
        [[ ! -e $pack ]] || { echo "test-install: a pack directory without a pack" >&2; exit 1; }
        echo "test-install: no kernel pack installed (no ptxas)"
    else
        n=$(ls "$pack"/*.tkc | wc -l)
        [[ $n -ge 100 ]] && grep -q "^compiler ptxas " "$pack/tk-pack" ||
            { echo "test-install: the kernel pack in $pack has $n entries or no manifest" >&2; exit 1; }
        [[ -n $(find "$pack" -maxdepth 0 -perm -0755) && -z $(find "$pack" -type f ! -perm -0444) ]] ||
            { echo "test-install: the kernel pack is not readable by all" >&2; exit 1; }
        got=$(env -u LD_LIBRARY_PATH -u TK_KERNEL_PACKS -u TK_INSTALLED_PACK "$tmp/consumer_pc")
        [[ $got == *"kernel pack $(realpath "$pack")" ]] ||
            { echo "test-install: the library does not find its pack $pack: $got" >&2; exit 1; }
        echo "test-install: kernel pack of $n entries found by the shared library"
    fi
fi
run "pkg-config (static)" "$tmp/consumer_pc_static"
# The shared consumers need the library, the static ones do not.
readelf -d "$tmp/consumer_pc" | grep -q "NEEDED.*libtilekittens" ||
    { echo "test-install: consumer_pc does not load libtilekittens.so" >&2; exit 1; }
! readelf -d "$tmp/consumer_pc_static" | grep -q "NEEDED.*libtilekittens" ||
    { echo "test-install: consumer_pc_static loads libtilekittens.so" >&2; exit 1; }
