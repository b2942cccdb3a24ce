#!/usr/bin/env bash
# Installs what TileKittens needs from Debian's packages, when missing. Safe to rerun.
set -euo pipefail
# clang-22 + libclang-rt-22-dev: the libFuzzer build of scripts/fuzz.sh (CI runs it);
# python3-venv: scripts/test-python.sh's throwaway venv.
pkgs=(build-essential cmake pkg-config check llvm-22-dev libxxhash-dev zlib1g-dev libzstd-dev clang-format
      clang-22 libclang-rt-22-dev python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The CUDA headers (cuda.h; libcuda itself is dlopen'ed at run time) and
# ptxas: /usr/local/cuda, or else NVIDIA's own wheels from PyPI in .cuda-wheels/
# (git-ignored), where CMake finds them (TK_CUDA_HOME; TK_PTXAS for the tests)
# Debian's CUDA package is too old for the tensor-map API.
cuda_wheels="$(cd "$(dirname "$0")/.." && pwd)/.cuda-wheels"
if [ ! -f /usr/local/cuda/include/cuda.h ] && [ ! -f "$cuda_wheels/nvidia/cu13/include/cuda.h" ]; then
  echo "setup: no /usr/local/cuda: CUDA 13.0 headers and ptxas from PyPI into $cuda_wheels"
  command -v pip3 >/dev/null || { $sudo_cmd apt-get install -y -qq python3-pip >/dev/null; }
  pip3 install -q --no-deps --target "$cuda_wheels" \
    'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-nvcc==13.0.*'
fi
echo "setup: ok (LLVM $(/usr/lib/llvm-22/bin/llvm-config --version), $(cmake --version | head -1))"
