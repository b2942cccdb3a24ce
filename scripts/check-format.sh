#!/usr/bin/env bash
# The one style (.clang-format) holds on every C source file git tracks:
# prints the files that differ and fails. Fix with
#   clang-format -i $(git ls-files '*.c' '*.h' '*.cu')
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not found" >&2; exit 2; }
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h' '*.cu')
if ((${#bad[@]})); then
  printf 'check-format: not in the project style (clang-format -i fixes it):\n'
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: $(git ls-files '*.c' '*.h' '*.cu' | wc -l) files in the project style ($(clang-format --version | grep -o 'version [0-9.]*'))"
