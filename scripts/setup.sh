#!/usr/bin/env bash
# Installs what TileKittens needs from Debian's packages, when missing. Safe to rerun.
set -euo pipefail
# clang-22 + libclang-rt-22-dev: the libFuzzer build of scripts/fuzz.sh (CI runs it).
pkgs=(build-essential cmake pkg-config check llvm-22-dev libxxhash-dev zlib1g-dev libzstd-dev
      clang-22 libclang-rt-22-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -f /usr/local/cuda/include/cuda.h ]; then
  echo "setup: warning: /usr/local/cuda/include/cuda.h not found (CUDA headers are needed to build)" >&2
fi
echo "setup: ok (LLVM $(/usr/lib/llvm-22/bin/llvm-config --version), $(cmake --version | head -1))"
