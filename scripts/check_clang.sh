#!/usr/bin/env bash
# Compiles the tree's C++ with Debian's clang, front end only (-fsyntax-only: no code generation,
# so it takes a fraction of a build), with -Wthread-safety -Werror: every GUARDED_BY, REQUIRES
# and lock in util/mutex.h is checked, and clang's other warnings too. Checks the libraries, the
# daemon and libtipspec; `--all` adds the tests and benchmarks.
#   BUILD_DIR  where the clang build is configured (default: build-clang)
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=0
for arg in "$@"; do
  case $arg in
    --all) ALL=1 ;;
    *) echo "check_clang.sh: unknown option '$arg' (expected --all)" >&2; exit 2 ;;
  esac
done
source scripts/lib/packages.sh
ensure_packages clang
BUILD_DIR=${BUILD_DIR:-build-clang}
cmake -S . -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DTIPFS_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# One line per translation unit: the directory, then the compile command without its output.
python3 - "$BUILD_DIR/compile_commands.json" "$ALL" "$PWD" >"$BUILD_DIR/syntax_commands" <<'PY'
import json, shlex, sys
commands, include_all, root = json.load(open(sys.argv[1])), sys.argv[2] == "1", sys.argv[3]
for c in commands:
    source = c["file"][len(root) + 1:]
    if not include_all and source.split("/")[0] in ("tests", "bench"):
        continue
    args = shlex.split(c["command"])
    i = args.index("-o")
    del args[i:i + 2]
    print(shlex.quote(c["directory"]), shlex.join(args + ["-fsyntax-only"]))
PY
count=$(wc -l <"$BUILD_DIR/syntax_commands")
if ! xargs -P"$(nproc)" -L1 sh -c 'cd "$0" && "$@"' <"$BUILD_DIR/syntax_commands"; then
  echo "check_clang: clang reports the errors above (-Wthread-safety -Werror)" >&2
  exit 1
fi
echo "check_clang: $count files clean under clang -Wthread-safety -Werror"
