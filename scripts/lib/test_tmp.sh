# Sourced by test.sh and sanitize.sh. Every test of one run makes its volumes and mounts under a
# directory of that run's own (TMPDIR; tests/support uses it), so that the cleanup after a test
# that crashed takes down only this run's mounts, never those of another run on the machine.
TEST_TMP=$(mktemp -d /tmp/tipfs-run-XXXXXX)
chmod 1777 "$TEST_TMP"  # some tests run programs as another user inside it
export TMPDIR=$TEST_TMP

cleanup_test_tmp() {
  findmnt -rn -t fuse.tipfs -o TARGET 2>/dev/null | while read -r mp; do
    if [[ $mp == "$TEST_TMP"/* ]]; then
      umount -l "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || true
    fi
  done || true  # findmnt finds no mount at all: not a failure of the run
  rm -rf --one-file-system "$TEST_TMP" 2>/dev/null || true
}
