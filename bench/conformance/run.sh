#!/usr/bin/env bash
# Conformance run anyone can repeat: pjdfstest (POSIX semantics, as root, with other users) and
# fsx (random reads, writes, truncates and mmaps checked against a model of the file) against a
# fresh tipfs mount in each data-cache mode and against the backing file system itself. The
# suites are not Debian packages and the repository does not carry them: give their checkouts.
#
#   bench/conformance/run.sh --pjdfstest DIR --fsx DIR [--fsx-ops N] [--targets LIST] [--jobs N]
#
#   --pjdfstest DIR  a checkout of https://github.com/pjd/pjdfstest (built in a scratch copy:
#                    autoreconf, configure, make; the checkout itself is not changed)
#   --fsx DIR        a checkout of xfstests (https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev);
#                    only ltp/fsx.c is compiled, with a three-line config.h
#   --fsx-ops N      operations per fsx run (default 100000; the issue's run used 1000000)
#   --targets LIST   comma-separated, of: native, kernel, direct, and kernel_ring, direct_ring (the
#                    mode over FUSE's io_uring, --fuse-io-uring on) (default native,kernel,direct)
#   --jobs N         pjdfstest test files run at once (prove -j, default 1)
#
# pjdfstest decides what to expect by the file system type (df -T); tipfs is run as EXT4, the
# file system whose behaviour its POSIX comparison tests match. Prints one table: per target the
# pjdfstest files, subtests and failures, and each fsx run's result. Needs root.
set -euo pipefail
BENCH_NAME=conformance
source "$(dirname "${BASH_SOURCE[0]}")/../lib/scratch_volume.sh"
source "$REPO/scripts/lib/packages.sh"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
PJD="" FSX_SRC="" FSX_OPS=100000 TARGETS=native,kernel,direct JOBS=1
while (($#)); do
  case $1 in
    --pjdfstest) PJD=$2; shift 2 ;;
    --fsx) FSX_SRC=$2; shift 2 ;;
    --fsx-ops) FSX_OPS=$2; shift 2 ;;
    --targets) TARGETS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $PJD && -f $PJD/pjdfstest.c ]] || { echo "run.sh: --pjdfstest DIR: no pjdfstest.c in '$PJD'" >&2; exit 2; }
[[ -n $FSX_SRC && -f $FSX_SRC/ltp/fsx.c ]] || { echo "run.sh: --fsx DIR: no ltp/fsx.c in '$FSX_SRC'" >&2; exit 2; }
[[ $FSX_OPS =~ ^[0-9]+$ ]] || { echo "run.sh: --fsx-ops '$FSX_OPS' is not a number" >&2; exit 2; }
IFS=, read -r -a TARGET_LIST <<<"$TARGETS"
for t in "${TARGET_LIST[@]}"; do
  [[ $t =~ ^(native|kernel|direct|kernel_ring|direct_ring)$ ]] ||
    { echo "run.sh: unknown target '$t' (native, kernel, direct, kernel_ring, direct_ring)" >&2; exit 2; }
done
ensure_packages autoconf automake make gcc perl libssl-dev

# ---- build the suites in the scratch directory ----
SUITES=$WORK/suites
mkdir -p "$SUITES"
cp -r "$PJD" "$SUITES/pjdfstest"
(
  cd "$SUITES/pjdfstest"
  # Let PJDFSTEST_FS name the file system type pjdfstest expects behaviour of.
  sed -i 's/^if \[ -z "\${fs}" \]; then/[ -n "${PJDFSTEST_FS:-}" ] \&\& fs="${PJDFSTEST_FS}"\n&/' tests/conf
  autoreconf -ifs >/dev/null 2>&1 && ./configure >/dev/null && make pjdfstest >/dev/null
) || { echo "run.sh: building pjdfstest failed (in $SUITES/pjdfstest)" >&2; exit 1; }
mkdir -p "$SUITES/fsx"
# What xfstests' configure would put in config.h for these headers on Linux.
printf '#include <assert.h>\n#include <getopt.h>\n#include <sys/param.h>\n' >"$SUITES/fsx/config.h"
gcc -O2 -D_GNU_SOURCE -DHAVE_ERR_H -DHAVE_SYS_TYPES_H -DHAVE_SYS_STAT_H -DHAVE_UNISTD_H \
  -DHAVE_STRING_H -DHAVE_STDLIB_H -DHAVE_ERRNO_H -DHAVE_SYS_FCNTL_H -DHAVE_SYS_TIME_H \
  -I"$SUITES/fsx" -I"$FSX_SRC/src" -I"$FSX_SRC/include" "$FSX_SRC/ltp/fsx.c" -o "$SUITES/fsx/fsx" \
  2>"$SUITES/fsx/build.log" || { echo "run.sh: compiling fsx failed:" >&2; tail -20 "$SUITES/fsx/build.log" >&2; exit 1; }

# ---- one target ----
NATIVE=$WORK/native
# prepare TARGET: leaves the directory to test in $DIR (fresh volume for tipfs targets)
prepare() {
  unmount
  rm -rf "${DISKS[@]}" "$NATIVE"
  mkdir -p "${DISKS[@]}" "$NATIVE"
  case $1 in
    native) DIR=$NATIVE ;;
    kernel | direct | kernel_ring | direct_ring)
      local ring=off
      [[ $1 == *_ring ]] && ring=on
      "$TIPFS" mkfs "${DISKS[@]}" >/dev/null
      "$TIPFS" mount --data-cache "${1%_ring}" --fuse-io-uring "$ring" --allow-other "${DISKS[0]}" "$MNT"
      DIR=$MNT/work
      mkdir -p "$DIR"
      ;;
  esac
  chmod 0755 "$WORK" "$DIR"
}

declare -A PJD_FILES PJD_TESTS PJD_FAILED_FILES PJD_FAILED PJD_TODO FSX_PLAIN FSX_MMAP
run_pjdfstest() {
  local target=$1 log=$RESULTS/pjdfstest-$1.log fs_type=""
  [[ $target != native ]] && fs_type=EXT4
  (cd "$DIR" && PJDFSTEST_FS=$fs_type prove -j"$JOBS" -r "$SUITES/pjdfstest/tests") >"$log" 2>&1 || true
  # "Files=237, Tests=8827, ..." and, on failure, "Failed 3/8827 subtests" per the summary.
  PJD_FILES[$target]=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\1/p' "$log")
  PJD_TESTS[$target]=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\2/p' "$log")
  PJD_FAILED[$target]=$(sed -n 's/^Failed \([0-9]*\)\/[0-9]* subtests.*/\1/p' "$log" | tail -1)
  # Files listed in the summary with failures or a bad exit; "TODO passed" alone is no failure.
  PJD_FAILED_FILES[$target]=$(grep -cE 'Failed: [1-9]|Wstat: [1-9]|Dubious' "$log" || true)
  PJD_TODO[$target]=$(grep -c 'TODO passed' "$log" || true)
  [[ -n ${PJD_FAILED[$target]} ]] || PJD_FAILED[$target]=0
  grep -q '^Result: PASS' "$log" || [[ ${PJD_FAILED[$target]} != 0 ]] ||
    PJD_FAILED[$target]="? (see $log)"
}

# fsx_run TARGET KIND: KIND plain (no mmap) or mmap (fsx's defaults, mapped reads and writes)
fsx_run() {
  local target=$1 kind=$2 log=$RESULTS/fsx-$1-$2.log flags=(-N "$FSX_OPS" -S 1 -q)
  [[ $kind == plain ]] && flags+=(-R -W)
  if (cd "$DIR" && "$SUITES/fsx/fsx" "${flags[@]}" "fsx-$kind.file") >"$log" 2>&1; then
    echo "pass"
  elif [[ $target == direct* && $kind == mmap ]] && grep -q 'No such device\|ENODEV' "$log"; then
    echo "n/a (no shared mmap)"
  else
    echo "FAIL (see $log)"
  fi
}

start=$(date +%s)
for target in "${TARGET_LIST[@]}"; do
  echo "== $target: pjdfstest" >&2
  prepare "$target"
  run_pjdfstest "$target"
  echo "== $target: fsx, $FSX_OPS operations without and with mmap" >&2
  prepare "$target"
  FSX_PLAIN[$target]=$(fsx_run "$target" plain)
  FSX_MMAP[$target]=$(fsx_run "$target" mmap)
done
unmount

{
  machine_note
  echo "# bench/conformance/run.sh --fsx-ops $FSX_OPS, pjdfstest $(git -C "$PJD" log -1 --format=%h 2>/dev/null || echo '?'), xfstests $(git -C "$FSX_SRC" log -1 --format=%h 2>/dev/null || echo '?'), $(( $(date +%s) - start )) s"
  printf '%-8s %10s %10s %14s %12s %12s %-24s %-24s\n' target pjd-files subtests failed-files \
    failed todo-passed "fsx no mmap" "fsx mmap"
  for target in "${TARGET_LIST[@]}"; do
    printf '%-8s %10s %10s %14s %12s %12s %-24s %-24s\n' "$target" "${PJD_FILES[$target]:-?}" \
      "${PJD_TESTS[$target]:-?}" "${PJD_FAILED_FILES[$target]:-?}" "${PJD_FAILED[$target]}" \
      "${PJD_TODO[$target]:-0}" "${FSX_PLAIN[$target]}" "${FSX_MMAP[$target]}"
  done
} | tee "$RESULTS/table.txt"
