#!/usr/bin/env bash
# Installs and builds (scripts/setup.sh), then runs the whole test suite: unit tests and the
# integration tests that mount real tipfs volumes. `--long` adds the long crash/soak runs.
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
[[ ${1:-} == --long ]] && LABELS=()
ctest --test-dir build --output-on-failure -j"$(nproc)" "${LABELS[@]}"
