#!/usr/bin/env bash
# Stress on a real mount, with Debian's tools only, in both data-cache modes, and in kernel mode
# over FUSE's io_uring (--fuse-io-uring on) where the kernel offers it:
#   - stress-ng's file-system stressors (directories, links, renames, seeks, locks, attributes,
#     extended attributes, copies; data checked where the stressor can, --verify) all at once;
#   - fio writing and reading back with verify=crc32c, blocks of 1 KiB to 257 KiB at offsets not
#     aligned to the stripe unit, so most blocks span two or more disks; several jobs at once.
# Any error or data mismatch fails the run. Used by scripts/test.sh; 93 s on the 2-core machine at
# load 6.
#   BUILD_DIR   the build whose tipfs runs (default: build)
#   STRESS_SECONDS  how long stress-ng runs per mode (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/packages.sh
ensure_packages stress-ng fio
BUILD=${BUILD_DIR:-build}
TIPFS=$PWD/$BUILD/cli/tipfs
[[ -x $TIPFS ]] || { echo "stress.sh: no $TIPFS: build first (scripts/setup.sh)" >&2; exit 1; }
SECONDS_PER_MODE=${STRESS_SECONDS:-30}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tipfs-stress-XXXXXX")
MNT=$WORK/mnt
DISKS=("$WORK"/disk0 "$WORK"/disk1 "$WORK"/disk2 "$WORK"/disk3)
cleanup() {
  if findmnt -n "$MNT" >/dev/null 2>&1; then "$TIPFS" umount "$MNT" || umount -l "$MNT"; fi
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
mkdir -p "${DISKS[@]}" "$MNT"

status=0
MODES=(kernel direct)
if [[ $(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null) == Y ]]; then
  MODES+=(kernel_ring)
else
  echo "== stress: not over io_uring (the kernel does not offer it; scripts/test.sh turns it on)"
fi
for mode in "${MODES[@]}"; do
  ring=off
  [[ $mode == *_ring ]] && ring=on
  "$TIPFS" mkfs --stripe-unit 64K "${DISKS[@]}" >/dev/null
  "$TIPFS" mount --data-cache "${mode%_ring}" --fuse-io-uring "$ring" "${DISKS[0]}" "$MNT"
  mkdir "$MNT/stress-ng" "$MNT/fio"
  echo "== stress ($mode): stress-ng, $SECONDS_PER_MODE s"
  # Each stressor with one worker; --verify makes those that can check what they read back.
  if ! (cd "$MNT/stress-ng" && stress-ng --temp-path "$MNT/stress-ng" --timeout "$SECONDS_PER_MODE" \
    --verify --metrics-brief --dir 1 --dentry 1 --link 1 --symlink 1 --rename 1 --seek 1 \
    --hdd 1 --hdd-bytes 16M --chmod 1 --utime 1 --xattr 1 --getdent 1 --fstat 1 --flock 1 \
    --lockf 1 --copy-file 1 --copy-file-bytes 128M --fsize 1 --touch 1 --dirdeep 1 \
    --access 1 --dup 1 --open 1 >"$WORK/stress-ng-$mode.log" 2>&1); then
    echo "stress.sh: stress-ng failed on a $mode mount:" >&2
    grep -v 'metrc' "$WORK/stress-ng-$mode.log" | tail -20 >&2
    status=1
  fi
  echo "== stress ($mode): fio verify=crc32c across stripe units"
  # --verify_state_save=0: fio would leave local-*-verify.state files in the current directory.
  if ! fio --name=stripes --verify_state_save=0 --directory="$MNT/fio" --numjobs=3 --size=48M \
    --rw=randwrite \
    --bsrange=1k-257k --bs_unaligned=1 --ioengine=psync --verify=crc32c --verify_fatal=1 \
    --do_verify=1 --fsync_on_close=1 --group_reporting --minimal >"$WORK/fio-$mode.log" 2>&1; then
    echo "stress.sh: fio found an error or a mismatch on a $mode mount:" >&2
    tail -20 "$WORK/fio-$mode.log" >&2
    status=1
  fi
  "$TIPFS" umount "$MNT"
  rm -rf "${DISKS[@]}" && mkdir -p "${DISKS[@]}"
done
exit $status
