#!/usr/bin/env bash
# Checks that every C and C++ file of the tree is formatted as .clang-format says (Google style,
# 100 columns). Prints the files that differ and how to fix them; changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
ensure_packages clang-format
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.h')
else
  mapfile -t files < <(find . -path './build*' -prune -o \( -name '*.c' -o -name '*.cc' -o -name '*.h' \) -print)
fi
differ=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || differ+=("$f")
done
if ((${#differ[@]})); then
  echo "check_format: ${#differ[@]} of ${#files[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${differ[@]}" >&2
  echo "check_format: fix with: clang-format -i ${differ[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files clean"
