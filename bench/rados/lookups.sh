#!/usr/bin/env bash
# bench/rados/lookups.sh BUILD_A BUILD_B [ROUNDS]: what a cold lookup costs on RADOS disks. On a
# one-node cluster of its own (scripts/ceph-dev.sh, 4 OSD op threads; always stopped), a volume of
# 4 namespaces holding the agrep tree (400 files), then per round and build, with and without
# `none,L=2ms`: a cold mount and `find text -type f | xargs stat` (each lookup stats every disk
# the file touches, synchronously). Prints seconds per run and the RADOS operations counted.
# Run as root (drop_caches, FUSE).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)
A=$(readlink -f "$1") B=$(readlink -f "$2") ROUNDS=${3:-5}
W=$(mktemp -d /tmp/tipfs-lookups-XXXXXX)
cleanup() {
  if findmnt -n "$W/mnt" >/dev/null 2>&1; then "$A/cli/tipfs" umount "$W/mnt" || umount -l "$W/mnt"; fi
  "$REPO/scripts/ceph-dev.sh" stop "$W/ceph" || true
  rm -rf "$W"
}
trap cleanup EXIT
eval "$(CEPH_DEV_OP_THREADS=4 "$REPO/scripts/ceph-dev.sh" start "$W/ceph")"
mkdir -p "$W/meta" "$W/mnt"
disks=()
for i in 0 1 2 3; do disks+=("rados:$TIPFS_CEPH_POOL/lookups-$i?conf=$TIPFS_CEPH_CONF"); done
"$A/cli/tipfs" mkfs --meta "$W/meta" "${disks[@]}" >/dev/null
"$A/cli/tipfs" mount "$W/meta" "$W/mnt"
"$A/bench/workloads/tipfs-bench-gen" agrep --dir "$W/mnt" --files 400 --total 8M >/dev/null 2>&1
"$A/cli/tipfs" umount "$W/mnt"
echo "# $(date -u +%H:%MZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < ROUNDS; r++)); do
  for build in "$A" "$B"; do
    for model in none none,L=2ms; do
      sync
      echo 3 >/proc/sys/vm/drop_caches
      "$build/cli/tipfs" mount --disk-model "$model" "$W/meta" "$W/mnt"
      t=$(date +%s.%N)
      n=$(cd "$W/mnt" && find text -type f | xargs stat -c %b | wc -l)
      e=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')
      ops=$(grep -o "[0-9]* operations" "$W/mnt/.tipfs/stats" | awk '{s += $1} END {print s}')
      echo "$build $model files=$n seconds=$e rados_operations=$ops"
      "$build/cli/tipfs" umount "$W/mnt"
    done
  done
done
echo "# $(date -u +%H:%MZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
