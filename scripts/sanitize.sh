#!/usr/bin/env bash
# Sanitizer runs: builds the tipfs binary and every test labelled *_sanitize (the target
# tipfs_sanitize_tests; see tests/CMakeLists.txt) with AddressSanitizer+UBSan into build-asan and
# with ThreadSanitizer into build-tsan, and runs `ctest -L sanitize` in each. Every sanitized
# process, the daemon included, writes its reports under <build>/sanitizer-logs; any report
# fails the run. Usage: scripts/sanitize.sh [address|thread|both] (default both).
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-both}
jobs=$(nproc)
status=0
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

run() {
  local kind=$1 dir=$2
  echo "== $kind: building into $dir"
  # GCC's -Wmaybe-uninitialized misfires on sanitizer-instrumented code (std::variant in
  # file_cache.cc under ASan); the normal build keeps it as an error. -O1 -g1 (line tables: the
  # reports still name function, file and line) compiles in about 0.45 of the time of -O2 -g
  # (file_cache.cc and its test under ASan+UBSan, g++ 12), and the two builds were most of the
  # test command's time on a fresh machine.
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIPFS_SANITIZE="$kind" \
    -DTIPFS_WERROR=ON -DCMAKE_CXX_FLAGS="-Wno-maybe-uninitialized" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    "${launcher[@]}" >/dev/null
  cmake --build "$dir" --target tipfs tipfs_sanitize_tests -j"$jobs"
  local logs=$PWD/$dir/sanitizer-logs
  rm -rf "$logs" && mkdir -p "$logs"
  # The load test runs 20 s here (the sanitized daemon is several times slower).
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:log_path=$logs/asan" \
  UBSAN_OPTIONS="print_stacktrace=1:log_path=$logs/ubsan" \
  TSAN_OPTIONS="suppressions=$PWD/tests/reliability/tsan.supp:history_size=7:second_deadlock_stack=1:log_path=$logs/tsan" \
  TIPFS_LOAD_SECONDS=20 \
    ctest --test-dir "$dir" -L sanitize --output-on-failure -j"$jobs" || status=1
  if compgen -G "$logs/*" >/dev/null; then
    echo "== $kind: sanitizer reports:" >&2
    head -n 60 "$logs"/* >&2
    status=1
  fi
}

source scripts/lib/test_tmp.sh
trap cleanup_test_tmp EXIT

start=$(date +%s)
[[ $which == address || $which == both ]] && run address build-asan
[[ $which == thread || $which == both ]] && run thread build-tsan
echo "== sanitize.sh: $(( $(date +%s) - start )) s, status $status"
exit $status
