#!/usr/bin/env bash
# The Python package (python/), as a user gets it: `pip install ./python` into a
# throwaway venv (scikit-build-core builds libtilekittens.so with LLVM linked in:
# the library only, Release, about 20 s on 2 cores), then its tests there. Without
# torch or a GPU (CI) the tests that need them skip, saying why. Then the GPT
# reference's torch-free tests (numpy).
#   scripts/test-python.sh   (scripts/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check pytest numpy
"$venv/bin/pip" install -q --disable-pip-version-check ./python
# From the venv, not the repository: the installed package is what is tested.
cd "$venv"
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$root/python/tests"
# The GPT reference's torch-free half (bench/gpt_spec.py: generator, init, data, checkpoint).
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$root/bench/test_gpt_reference.py"
