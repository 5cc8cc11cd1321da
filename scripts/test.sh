#!/usr/bin/env bash
# Installs and builds (scripts/setup.sh, warnings as errors), checks the tree's form (clang-format;
# clang's -Wthread-safety over the lock annotations; a Release -O3 build as users make), then
# runs the whole test suite: unit tests and the integration tests that mount real tipfs volumes;
# then the tests labelled rados, against a one-node Ceph cluster that this script starts
# (scripts/ceph-dev.sh) and always stops; then stress on real mounts (scripts/stress.sh:
# stress-ng file stressors, fio verify=crc32c across stripe units, both data-cache modes); then
# the sanitizer runs (scripts/sanitize.sh: the tests labelled sanitize, the load test among them,
# under ASan+UBSan and under TSan). A failing step does not skip the later ones; the exit status
# is nonzero if any failed.
# `--long` adds the long crash/soak runs; `--no-sanitize` skips the sanitizer builds.
# Leaves no mount behind, also when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."
LABELS=(-LE 'long|rados')
SANITIZE=1
for arg in "$@"; do
  case $arg in
    --long) LABELS=(-LE rados) ;;
    --no-sanitize) SANITIZE=0 ;;
    *) echo "test.sh: unknown option '$arg' (expected --long or --no-sanitize)" >&2; exit 2 ;;
  esac
done
TIPFS_WERROR=ON ./scripts/setup.sh
./scripts/check_format.sh
./scripts/check_clang.sh
./scripts/check_release.sh

source scripts/lib/test_tmp.sh
CEPH_DIR=$(mktemp -d /tmp/tipfs-ceph-XXXXXX)
# FUSE over io_uring (--fuse-io-uring, the "_ring" test parameters) is a kernel switch, off by
# default: on for this run where the kernel has it (Linux 6.14+), then back as it was. Its tests
# then fail rather than skip.
RING_SWITCH=/sys/module/fuse/parameters/enable_uring
RING_WAS=""
if [[ -e $RING_SWITCH ]]; then
  RING_WAS=$(cat "$RING_SWITCH")
  if echo Y 2>/dev/null >"$RING_SWITCH"; then
    export TIPFS_REQUIRE_FUSE_RING=1
  else
    RING_WAS=""
    echo "test.sh: cannot turn on FUSE over io_uring ($RING_SWITCH): its tests skip" >&2
  fi
fi
# Mounts first (their daemons are clients of the clusters), then every cluster of this run: the
# one started below, and any that a test which crashed left under TEST_TMP.
cleanup() {
  findmnt -rn -t fuse.tipfs -o TARGET 2>/dev/null | while read -r mp; do
    if [[ $mp == "$TEST_TMP"/* ]]; then umount -l "$mp" 2>/dev/null || true; fi
  done || true
  find "$TEST_TMP" -maxdepth 4 -name ceph.conf 2>/dev/null | while read -r conf; do
    ./scripts/ceph-dev.sh stop "$(dirname "$conf")" || true
  done || true
  cleanup_test_tmp
  ./scripts/ceph-dev.sh stop "$CEPH_DIR" || true
  if [[ -n $RING_WAS ]]; then echo "$RING_WAS" > "$RING_SWITCH" || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # interrupted: the EXIT trap still stops what this run started

status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" "${LABELS[@]}" || status=$?

# The RADOS tests fail, not skip, if the cluster is missing here.
if ceph_env=$(./scripts/ceph-dev.sh start "$CEPH_DIR"); then eval "$ceph_env"; fi
export TIPFS_REQUIRE_CEPH=1
rados_status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" -L rados || rados_status=$?
# Every RADOS test removes what it wrote: an object left behind is a removal that leaks.
((rados_status)) || ./scripts/ceph-dev.sh check "$CEPH_DIR" || rados_status=$?
# A failed RADOS test may be the cluster's doing (full, a daemon gone): say what the cluster was.
if ((rados_status)); then status=$rados_status; ./scripts/ceph-dev.sh report "$CEPH_DIR" || true; fi
./scripts/ceph-dev.sh stop "$CEPH_DIR"
unset TIPFS_CEPH_CONF TIPFS_CEPH_POOL TIPFS_REQUIRE_CEPH

./scripts/stress.sh || status=$?
if (( SANITIZE )); then ./scripts/sanitize.sh both || status=$?; fi
exit "$status"
