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
cmake --install "$build" --prefix "$prefix" >/dev/null
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
run "pkg-config (static)" "$tmp/consumer_pc_static"
# The shared consumers need the library, the static ones do not.
readelf -d "$tmp/consumer_pc" | grep -q "NEEDED.*libtilekittens" ||
    { echo "test-install: consumer_pc does not load libtilekittens.so" >&2; exit 1; }
! readelf -d "$tmp/consumer_pc_static" | grep -q "NEEDED.*libtilekittens" ||
    { echo "test-install: consumer_pc_static loads libtilekittens.so" >&2; exit 1; }
