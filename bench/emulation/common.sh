# shellcheck shell=bash disable=SC2034  # REPLAY and others are used by the scripts sourcing this
# Shared by the bench/emulation scripts (sourced, not run): paths, volumes under a scratch
# directory, cold mounts, and an exit trap that never leaves a mount behind.
#
# Environment: BUILD_DIR (default build, relative to the repository or absolute), RESULTS_DIR
# (default bench/results/emulation), TIPFS_BENCH_TMP (where scratch volumes go, default /tmp).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
TIPFS=$BUILD/cli/tipfs
REPLAY=$BUILD/bench/emulation/tipfs-model-replay
RESULTS=${RESULTS_DIR:-$ROOT/bench/results/emulation}
[[ -x $TIPFS ]] || { echo "no $TIPFS: build first (cmake --build $BUILD --target tipfs)" >&2; exit 1; }
for tool in jq awk; do
  command -v $tool >/dev/null || { echo "$tool is missing (apt-get install $tool)" >&2; exit 1; }
done
mkdir -p "$RESULTS"

WORK=$(mktemp -d "${TIPFS_BENCH_TMP:-/tmp}/tipfs-emu-XXXXXX")
VOLUMES=()  # names made by make_volume, unmounted at exit

cleanup() {
  local name pid
  # Our own background jobs first (a fio still reading would keep the mount busy).
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for name in "${VOLUMES[@]}"; do
    if findmnt -n "$WORK/$name/mnt" >/dev/null; then
      "$TIPFS" umount "$WORK/$name/mnt" || umount -l "$WORK/$name/mnt" || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# make_volume NAME DISKS [mkfs args...]: an unmounted volume of DISKS disks under $WORK/NAME.
make_volume() {
  local name=$1 disks=$2 i
  shift 2
  local paths=()
  for ((i = 0; i < disks; i++)); do paths+=("$WORK/$name/disk$i"); done
  mkdir -p "${paths[@]}" "$WORK/$name/mnt"
  VOLUMES+=("$name")
  "$TIPFS" mkfs "$@" "${paths[@]}" >/dev/null
}

mountpoint_of() { echo "$WORK/$1/mnt"; }
daemon_pid() { cat "$WORK/$1/disk0/tipfs.pid"; }

unmount_volume() {
  local mp=$WORK/$1/mnt
  if findmnt -n "$mp" >/dev/null; then "$TIPFS" umount "$mp"; fi
}

# mount_volume NAME [mount args...]: (re)mounts NAME; a new daemon, so its cache is cold.
mount_volume() {
  local name=$1
  shift
  unmount_volume "$name"
  "$TIPFS" mount "$@" "$WORK/$name/disk0" "$WORK/$name/mnt"
}

DROP_WARNED=0
drop_caches() {
  sync
  if [[ -w /proc/sys/vm/drop_caches ]]; then
    echo 3 > /proc/sys/vm/drop_caches
  elif ((DROP_WARNED == 0)); then
    echo "warning: cannot drop the page cache (not root): the backing files stay cached" >&2
    DROP_WARNED=1
  fi
}

# cold_mount NAME [mount args...]: unmount, drop the page cache, mount: nothing of the volume is
# cached in the daemon, the kernel's FUSE page cache or the backing file system's page cache.
cold_mount() {
  local name=$1
  shift
  unmount_volume "$name"
  drop_caches
  mount_volume "$name" "$@"
}

now_ns() { date +%s%N; }
# nap SECONDS: sleep that a signal interrupts at once (bash runs traps only between commands, and
# a `wait` returns on a signal where a foreground sleep does not).
nap() {
  sleep "$1" &
  wait $!
}
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'; }

# Daemon CPU time (user + system, all threads) in clock ticks, from /proc/PID/stat fields 14-15
# (counted after the ")" that ends the command name, which may hold spaces).
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }

# write_small_files DIR COUNT SEED: COUNT files of 8-32 KiB (uniform, whole KiB) named
# f00000..., random bytes; prints each size in bytes, one a line.
write_small_files() {
  local dir=$1 count=$2 seed=$3 i size
  mkdir -p "$dir"
  awk -v n="$count" -v seed="$seed" 'BEGIN {srand(seed); for (i = 0; i < n; i++)
    print (8 + int(rand() * 25)) * 1024}' > "$WORK/sizes.$seed"
  i=0
  while read -r size; do
    head -c "$size" /dev/urandom > "$(printf '%s/f%05d' "$dir" "$i")"
    i=$((i + 1))
  done < "$WORK/sizes.$seed"
  cat "$WORK/sizes.$seed"
}
