#!/usr/bin/env bash
# Installs and builds (scripts/setup.sh, warnings as errors), checks the tree's form (clang-format;
# clang's -Wthread-safety over the lock annotations; a Release -O3 build as users make), then
# runs the whole test suite: unit tests and the integration tests that mount real tipfs volumes,
# then stress on real mounts (scripts/stress.sh: stress-ng file stressors, fio verify=crc32c
# across stripe units, both data-cache modes), then the sanitizer runs (scripts/sanitize.sh: the
# tests labelled sanitize, the load test among them, under ASan+UBSan and under TSan).
# `--long` adds the long crash/soak runs; `--no-sanitize` skips the sanitizer builds.
# Leaves no mount behind, also when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."
LABELS=(-LE long)
SANITIZE=1
for arg in "$@"; do
  case $arg in
    --long) LABELS=() ;;
    --no-sanitize) SANITIZE=0 ;;
    *) echo "test.sh: unknown option '$arg' (expected --long or --no-sanitize)" >&2; exit 2 ;;
  esac
done
TIPFS_WERROR=ON ./scripts/setup.sh
./scripts/check_format.sh
./scripts/check_clang.sh
./scripts/check_release.sh

source scripts/lib/test_tmp.sh
trap cleanup_test_tmp EXIT

ctest --test-dir build --output-on-failure -j"$(nproc)" "${LABELS[@]}"
./scripts/stress.sh
if (( SANITIZE )); then ./scripts/sanitize.sh both; fi
