#!/usr/bin/env bash
# Coverage-guided fuzzing of the hint ioctls and the control files with libFuzzer (clang):
# builds tests/reliability/hint_ioctl_fuzzer.cc with every library instrumented
# (-fsanitize=fuzzer-no-link, plus AddressSanitizer) into build-fuzz, then fuzzes for
# SECONDS (default 60). Crashes and broken invariants leave their input in build-fuzz/findings.
# The always-built seeded variant of the same harness is the gtest reliability_hint_fuzz_test.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is needed for libFuzzer" >&2; exit 2; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIPFS_FUZZ=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" >/dev/null
cmake --build build-fuzz --target tipfs_hint_ioctl_fuzzer -j"$(nproc)"
mkdir -p build-fuzz/corpus build-fuzz/findings
# The harness keeps its metadata store in $TMPDIR; memory is faster and its fsyncs prove nothing.
[[ -w /dev/shm ]] && export TMPDIR=${TMPDIR:-/dev/shm}
exec build-fuzz/tests/reliability/tipfs_hint_ioctl_fuzzer build-fuzz/corpus \
  -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=4096 -max_len=4096 \
  -artifact_prefix=build-fuzz/findings/
