#!/usr/bin/env bash
# Installs and builds (scripts/setup.sh), then runs the whole test suite: unit tests and the
# integration tests that mount real tipfs volumes, then the sanitizer runs (scripts/sanitize.sh:
# the tests labelled sanitize, the load test among them, under ASan+UBSan and under TSan).
# `--long` adds the long crash/soak runs; `--no-sanitize` skips the sanitizer builds.
# Leaves no mount behind, also when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

tipfs_test_mounts() { findmnt -rn -t fuse.tipfs -o TARGET 2>/dev/null | grep '^/tmp/tipfs-test-' | sort; }
BEFORE=$(tipfs_test_mounts || true)
cleanup() {
  # A test that crashed may have left a mount under /tmp/tipfs-test-*: take down the ones this
  # run made (another run's live mounts are not ours).
  comm -13 <(echo "$BEFORE") <(tipfs_test_mounts || true) | while read -r mp; do
    [[ -n $mp ]] && { umount -l "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || true; }
  done
}
trap cleanup EXIT

LABELS=(-LE long)
SANITIZE=1
for arg in "$@"; do
  case $arg in
    --long) LABELS=() ;;
    --no-sanitize) SANITIZE=0 ;;
    *) echo "test.sh: unknown option '$arg' (expected --long or --no-sanitize)" >&2; exit 2 ;;
  esac
done
ctest --test-dir build --output-on-failure -j"$(nproc)" "${LABELS[@]}"
if (( SANITIZE )); then ./scripts/sanitize.sh both; fi
