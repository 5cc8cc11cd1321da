#!/usr/bin/env bash
# tipfs mounted the usual way: `mount -t fuse.tipfs DISK MOUNTPOINT -o OPTIONS`, /etc/fstab lines
# through `mount -a -T FILE` and `mount -T FILE MOUNTPOINT`, plain umount(8); mount options as
# `-o key=value`, generic ones (ro, noatime, nodev) enforced, x-* and _netdev accepted, nofail and
# noauto as mount(8) means them, a bad option refused in one line. mount(8) runs mount.fuse3,
# which runs `tipfs` from the standard PATH (mount clears PATH; /bin/sh's default has
# /usr/local/bin): so that it finds the tipfs under test, the test runs in a private mount
# namespace with a tmpfs over /usr/local/bin holding a link to it. Exit 77: skipped.
#   system_mount_test.sh PATH_TO_TIPFS
set -euo pipefail
TIPFS=$(realpath "$1")
[[ $(id -u) -eq 0 ]] || { echo "SKIP: mount(8) of a FUSE file system needs root here"; exit 77; }
[[ -c /dev/fuse ]] || { echo "SKIP: no /dev/fuse"; exit 77; }
command -v mount.fuse3 >/dev/null || [[ -x /sbin/mount.fuse3 ]] || { echo "SKIP: no mount.fuse3"; exit 77; }
if [[ -z ${TIPFS_TEST_NAMESPACE:-} ]]; then
  exec env TIPFS_TEST_NAMESPACE=1 unshare --mount --propagation private "$0" "$@"
fi
mount -t tmpfs tmpfs /usr/local/bin
ln -s "$TIPFS" /usr/local/bin/tipfs

W=$(mktemp -d "${TMPDIR:-/tmp}/tipfs-fstab-XXXXXX")
cleanup() {
  for m in "$W/mnt" "$W/mnt2" "$W/mnt3"; do
    if findmnt -n "$m" >/dev/null 2>&1; then tipfs umount "$m" 2>/dev/null || umount -l "$m"; fi
  done
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# plain umount(8) returns before the daemon has synced and exited: wait for its pid file to go
wait_daemon_gone() {
  for _ in $(seq 200); do [[ -e $1/tipfs.pid ]] || return 0; sleep 0.05; done
  fail "the daemon of $1 did not exit after umount"
}
mkdir -p "$W"/a{0,1,2,3} "$W"/b{0,1} "$W"/mnt "$W"/mnt2 "$W"/mnt3
tipfs mkfs "$W"/a{0,1,2,3} >/dev/null
tipfs mkfs "$W"/b{0,1} >/dev/null

# 1. mount -t fuse.tipfs with tipfs options and generic ones.
mount -t fuse.tipfs "$W/a0" "$W/mnt" \
  -o cache_size=16M,disk_model=ssd:slowdown=2,data_cache=direct,noatime,nodev,x-test.option=1,_netdev
[[ $(findmnt -n -o FSTYPE "$W/mnt") == fuse.tipfs ]] || fail "mount -t fuse.tipfs mounted no fuse.tipfs"
options=$(findmnt -n -o OPTIONS "$W/mnt")
[[ ,$options, == *,noatime,* && ,$options, == *,nodev,* ]] || fail "generic options not applied: $options"
[[ $(head -n1 "$W/mnt/.tipfs/disk-model") == ssd,slowdown=2 ]] || fail "disk_model= not applied"
grep -q '"data_cache":"direct"' "$W/mnt/.tipfs/stats.json" || fail "data_cache= not applied"
echo "written through mount -t" >"$W/mnt/hello"
sync
before=$(stat -c %X "$W/mnt/hello")
sleep 1.1
cat "$W/mnt/hello" >/dev/null
[[ $(stat -c %X "$W/mnt/hello") == "$before" ]] || fail "noatime: a read moved atime"
umount "$W/mnt"
wait_daemon_gone "$W/a0"

# 2. fstab: one volume read-only, one noauto, one nofail whose disk is missing.
cat >"$W/fstab" <<FSTAB
# tipfs volumes (type fuse.tipfs; knobs of disk_model= joined by ':')
$W/a0  $W/mnt   fuse.tipfs  ro,cache_size=16M,x-systemd.automount  0 0
$W/b0  $W/mnt2  fuse.tipfs  noauto,cache_size=16M,readahead=off    0 0
FSTAB
mount -a -T "$W/fstab" || fail "mount -a -T fstab failed"
findmnt -n "$W/mnt" >/dev/null || fail "mount -a did not mount $W/mnt"
! findmnt -n "$W/mnt2" >/dev/null || fail "mount -a mounted a noauto line"
[[ ,$(findmnt -n -o OPTIONS "$W/mnt"), == *,ro,* ]] || fail "ro not applied"
[[ $(cat "$W/mnt/hello") == "written through mount -t" ]] || fail "data lost across mounts"
if echo x 2>/dev/null >"$W/mnt/new"; then fail "a write to a ro mount succeeded"; fi
mount -T "$W/fstab" "$W/mnt2" || fail "mount -T fstab MOUNTPOINT of the noauto line failed"
findmnt -n "$W/mnt2" >/dev/null || fail "$W/mnt2 not mounted"
umount "$W/mnt" "$W/mnt2"
wait_daemon_gone "$W/a0"
wait_daemon_gone "$W/b0"

# 3. _netdev lines are mounted by mount -a and skipped by mount -a -O no_netdev.
echo "$W/b0  $W/mnt3  fuse.tipfs  _netdev,cache_size=16M  0 0" >"$W/fstab.net"
mount -a -O no_netdev -T "$W/fstab.net"
! findmnt -n "$W/mnt3" >/dev/null || fail "mount -a -O no_netdev mounted a _netdev line"
mount -a -T "$W/fstab.net"
findmnt -n "$W/mnt3" >/dev/null || fail "mount -a did not mount the _netdev line"
umount "$W/mnt3"
wait_daemon_gone "$W/b0"

# 4. nofail: mount(8) strips it before running mount.fuse3, and `mount -a` goes on past a line
#    that fails; given to tipfs itself (the form mount.fuse3 runs), a missing disk is no error.
out=$(tipfs "$W/missing" "$W/mnt3" -o nofail,cache_size=16M 2>&1) || fail "nofail: exit $?: $out"
[[ $out == *"does not exist; not mounted (nofail)"* ]] || fail "nofail said '$out'"
! findmnt -n "$W/mnt3" >/dev/null || fail "nofail mounted something"
printf '%s\n' "$W/missing $W/mnt3 fuse.tipfs nofail 0 0" "$W/b0 $W/mnt2 fuse.tipfs defaults 0 0" \
  >"$W/fstab.nofail"
mount -a -T "$W/fstab.nofail" 2>/dev/null || true
findmnt -n "$W/mnt2" >/dev/null || fail "mount -a stopped at the failing nofail line"
umount "$W/mnt2"
wait_daemon_gone "$W/b0"

# 5. A bad option is refused in one line naming it, and nothing is mounted.
if err=$(mount -t fuse.tipfs "$W/a0" "$W/mnt" -o cache_size=16M,bogus=1 2>&1); then
  fail "mount accepted -o bogus=1"
fi
[[ $(wc -l <<<"$err") -eq 1 && $err == *"unknown mount option 'bogus=1'"* ]] || fail "bad option said: $err"
! findmnt -n "$W/mnt" >/dev/null || fail "a refused mount left something mounted"
echo "system mount: OK"
