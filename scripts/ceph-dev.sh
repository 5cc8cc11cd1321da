#!/usr/bin/env bash
# A one-node Ceph cluster for tests and benchmarks, from Debian's packages (ceph-mon, ceph-osd):
# one monitor and one OSD on loopback, the OSD's objects in memory (memstore), no cephx, one pool
# whose objects have a single copy. Everything it makes lives under DIR: the conf file, the
# monitor's and the OSD's data, logs, pid files and admin sockets. No systemd: the daemons are
# started directly, and stop kills exactly those whose pid files are under DIR.
#
#   scripts/ceph-dev.sh start DIR     make and start the cluster, wait until the pool takes I/O,
#                                     print `export TIPFS_CEPH_CONF=... TIPFS_CEPH_POOL=...`
#   scripts/ceph-dev.sh status DIR    say what runs; exit 0 when the pool takes I/O
#   scripts/ceph-dev.sh check DIR     after tests that clean up: exit 0 when the pool holds no
#                                     object and the OSD's count of bytes held is 0 to capacity
#   scripts/ceph-dev.sh report DIR    what a failed run needs to be explained: status, health,
#                                     capacity used (ceph df), and the ends of the daemons' logs
#   scripts/ceph-dev.sh stop DIR      stop the daemons started under DIR, then remove DIR
#   scripts/ceph-dev.sh stop-osd DIR  stop the OSD cleanly (memstore saves its objects to DIR)
#   scripts/ceph-dev.sh start-osd DIR start it again (it loads them) and wait until the pool works
#
# Environment: CEPH_DEV_POOL (default tipfs), CEPH_DEV_PORT (the monitor's port; default a free
# one from 40000-59999), CEPH_DEV_MEMSTORE_BYTES (the OSD's capacity, default 2 GiB; memstore
# keeps every byte in memory), CEPH_DEV_OSD_MEMORY (osd_memory_target, default 1 GiB),
# CEPH_DEV_OP_THREADS (the OSD's op threads, default 1: memstore's byte count is exact only with
# one; more for benchmarks of concurrent reads),
# CEPH_DEV_AUTH=cephx (authentication on, as on a real cluster: keyrings under DIR, and a client
# "tipfs" with only the caps tipfs needs, whose id and keyring start also prints as
# TIPFS_CEPH_CLIENT and TIPFS_CEPH_KEYRING).
#   eval "$(scripts/ceph-dev.sh start /tmp/ceph)" && ... && scripts/ceph-dev.sh stop /tmp/ceph
set -euo pipefail

POOL=${CEPH_DEV_POOL:-tipfs}
AUTH=${CEPH_DEV_AUTH:-none}
MEMSTORE_BYTES=${CEPH_DEV_MEMSTORE_BYTES:-$((2 << 30))}
OSD_MEMORY=${CEPH_DEV_OSD_MEMORY:-$((1 << 30))}
OP_THREADS=${CEPH_DEV_OP_THREADS:-1}
MARKER="# made by tipfs scripts/ceph-dev.sh"

say() { echo "ceph-dev: $*" >&2; }
die() { echo "ceph-dev: $*" >&2; exit 1; }
[[ $OP_THREADS =~ ^[1-9][0-9]?$ ]] || die "CEPH_DEV_OP_THREADS='$OP_THREADS': expected a number of threads, 1 to 99"

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
}

need_packages() {
  local missing=()
  for tool in ceph-mon ceph-osd ceph rados monmaptool; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if ((${#missing[@]})); then
    die "${missing[*]} not found: install ceph-mon and ceph-osd (scripts/setup.sh does)"
  fi
}

ceph_cli() { timeout 60 ceph -c "$DIR/ceph.conf" --connect-timeout 20 "$@"; }

# The pid in a pid file, if that process is alive and is a Ceph daemon of this DIR.
live_pid() {
  local file=$1 pid
  [[ -f $file ]] || return 1
  pid=$(cat "$file" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-c $DIR/ceph.conf" || return 1
  echo "$pid"
}

wait_gone() {
  local pid=$1 i
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

stop_daemon() {
  local name=$1 pid
  pid=$(live_pid "$DIR/run/$name.pid") || return 0
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid"; then
    say "$name (pid $pid) ignored SIGTERM for 20 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" || true
  fi
}

pool_works() {
  local probe=$DIR/run/probe
  echo "tipfs ceph-dev probe $$" >"$probe"
  timeout 30 rados -c "$DIR/ceph.conf" -p "$POOL" put ceph-dev-probe "$probe" 2>/dev/null &&
    timeout 30 rados -c "$DIR/ceph.conf" -p "$POOL" get ceph-dev-probe "$probe.back" 2>/dev/null &&
    cmp -s "$probe" "$probe.back" &&
    timeout 30 rados -c "$DIR/ceph.conf" -p "$POOL" rm ceph-dev-probe 2>/dev/null
}

wait_pool() {
  local i
  for ((i = 0; i < 120; i++)); do
    pool_works && return 0
    sleep 0.5
  done
  die "the pool $POOL takes no I/O after 60 s (logs: $DIR/log)"
}

free_port() {
  local port i
  for ((i = 0; i < 50; i++)); do
    port=$((40000 + RANDOM % 20000))
    ss -Htln "sport = :$port" | grep -q . || { echo "$port"; return 0; }
  done
  die "no free port found in 40000-59999"
}

write_conf() {
  local port=$1 fsid=$2
  cat >"$DIR/ceph.conf" <<EOF
$MARKER
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = $AUTH
auth service required = $AUTH
auth client required = $AUTH
$([[ $AUTH = cephx ]] && echo "keyring = $DIR/keyring")
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
run dir = $DIR/run
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log

[mon]
mon data = $DIR/mon
admin socket = $DIR/run/\$name.asok

[osd]
osd data = $DIR/osd
$([[ $AUTH = cephx ]] && echo "keyring = $DIR/osd/keyring")
admin socket = $DIR/run/\$name.asok
osd objectstore = memstore
memstore device bytes = $MEMSTORE_BYTES
# Sparse objects: pages are allocated where data is written, not zero-filled up to the offset.
memstore page set = true
osd memory target = $OSD_MEMORY
# One op thread (CEPH_DEV_OP_THREADS for more). Memstore counts the bytes it holds in a plain
# integer that every op thread updates (Ceph 16.2): with Debian's default of 8 shards x 2 threads, concurrent writes to
# different placement groups lose updates, the count drifts and can go below zero, and then the
# OSD reports itself full ("full status failsafe engaged, dropping updates") and every later
# write times out. Seen here after two concurrent model tests on an empty pool. More threads
# serve concurrent reads faster (benchmarks): the count then drifts, which only an emptied pool
# turns into a false full.
osd op num shards = 1
osd op num threads per shard = $OP_THREADS
# A clean stop saves memstore's objects to osd data, so stop-osd/start-osd keeps them.
osd fast shutdown = false

[client]
log to file = false
EOF
}

start_mon() {
  local port fsid attempt
  for ((attempt = 0; attempt < 3; attempt++)); do
    port=${CEPH_DEV_PORT:-$(free_port)}
    fsid=$(cat /proc/sys/kernel/random/uuid)
    rm -rf "$DIR/mon" "$DIR/monmap"
    mkdir -p "$DIR/mon"
    write_conf "$port" "$fsid"
    monmaptool --create --addv a "[v2:127.0.0.1:$port]" --fsid "$fsid" "$DIR/monmap" >/dev/null
    local keyring=()
    if [[ $AUTH = cephx ]]; then
      rm -f "$DIR/keyring"
      ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
      ceph-authtool "$DIR/keyring" --gen-key -n client.admin --cap mon 'allow *' \
        --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
      keyring=(--keyring "$DIR/keyring")
    fi
    ceph-mon -c "$DIR/ceph.conf" --mkfs -i a --monmap "$DIR/monmap" "${keyring[@]}" \
      >>"$DIR/log/setup.log" 2>&1
    if ceph-mon -c "$DIR/ceph.conf" -i a >>"$DIR/log/setup.log" 2>&1 &&
       ceph_cli -s >/dev/null 2>&1; then
      say "monitor up on 127.0.0.1:$port"
      return 0
    fi
    stop_daemon mon.a
    [[ -z ${CEPH_DEV_PORT:-} ]] || break
  done
  die "the monitor did not start (logs: $DIR/log)"
}

start_osd() {
  ceph-osd -c "$DIR/ceph.conf" -i 0 >>"$DIR/log/setup.log" 2>&1 ||
    die "ceph-osd did not start (logs: $DIR/log)"
}

cmd_start() {
  need_packages
  if [[ -e $DIR ]]; then
    [[ -z $(ls -A "$DIR" 2>/dev/null) ]] || die "$DIR exists and is not empty"
  fi
  mkdir -p "$DIR"/{run,log,osd}
  DIR=$(cd "$DIR" && pwd)
  # A start that fails half-way leaves nothing running.
  trap 'echo "ceph-dev: start failed; stopping what it started" >&2; cmd_stop' EXIT
  start_mon
  local uuid id
  uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$(ceph_cli osd new "$uuid" 2>>"$DIR/log/setup.log") || die "ceph osd new failed (logs: $DIR/log)"
  if [[ $AUTH = cephx ]]; then
    ceph_cli auth get-or-create "osd.$id" mon 'allow profile osd' osd 'allow *' \
      -o "$DIR/osd/keyring" 2>>"$DIR/log/setup.log" || die "cannot make the OSD's key"
  fi
  ceph-osd -c "$DIR/ceph.conf" -i "$id" --mkfs --osd-uuid "$uuid" >>"$DIR/log/setup.log" 2>&1 ||
    die "ceph-osd --mkfs failed (logs: $DIR/log)"
  start_osd
  ceph_cli osd pool create "$POOL" 8 8 >>"$DIR/log/setup.log" 2>&1 || die "cannot create pool $POOL"
  ceph_cli osd pool set "$POOL" size 1 --yes-i-really-mean-it >>"$DIR/log/setup.log" 2>&1 ||
    die "cannot set the size of pool $POOL"
  ceph_cli osd pool application enable "$POOL" tipfs >>"$DIR/log/setup.log" 2>&1 || true
  wait_pool
  local client=""
  if [[ $AUTH = cephx ]]; then
    # What tipfs needs and no more: read the maps, read/write/class calls (the lock) in the pool.
    ceph_cli auth get-or-create client.tipfs mon 'allow r' osd "allow rwx pool=$POOL" \
      -o "$DIR/client.tipfs.keyring" 2>>"$DIR/log/setup.log" || die "cannot make client.tipfs"
    client=" TIPFS_CEPH_CLIENT=tipfs TIPFS_CEPH_KEYRING=$DIR/client.tipfs.keyring"
  fi
  trap - EXIT
  say "cluster up: pool $POOL, conf $DIR/ceph.conf (memstore $((MEMSTORE_BYTES >> 20)) MiB, auth $AUTH)"
  echo "export TIPFS_CEPH_CONF=$DIR/ceph.conf TIPFS_CEPH_POOL=$POOL$client"
}

cmd_status() {
  [[ -d $DIR ]] && DIR=$(cd "$DIR" && pwd)
  [[ -f $DIR/ceph.conf ]] || { say "no cluster under $DIR"; return 1; }
  local name pid
  for name in mon.a osd.0; do
    if pid=$(live_pid "$DIR/run/$name.pid"); then say "$name: pid $pid"; else say "$name: not running"; fi
  done
  if pool_works; then say "pool $POOL takes I/O (conf $DIR/ceph.conf)"; else say "pool $POOL takes no I/O"; return 1; fi
}

# The OSD's own count of the bytes it holds ("stat_bytes_used"), refreshed every few seconds.
osd_bytes_used() {
  timeout 20 ceph --admin-daemon "$DIR/run/osd.0.asok" perf dump osd 2>/dev/null |
    sed -n 's/.*"stat_bytes_used": *\([0-9]*\).*/\1/p'
}

cmd_check() {
  local left used i
  left=$(timeout 60 rados -c "$DIR/ceph.conf" -p "$POOL" ls --all 2>&1) ||
    die "cannot list pool $POOL: $left"
  [[ -z $left ]] || die "pool $POOL still holds $(wc -l <<<"$left") objects: $(head -3 <<<"$left" | tr '\t\n' '/ ')"
  # An empty pool holds a few KiB (the PGs' metadata); a count beyond the capacity is one that
  # went below zero (see "osd op num shards" above).
  for ((i = 0; i < 15; i++)); do
    used=$(osd_bytes_used)
    [[ -n $used ]] || die "osd.0 does not answer on its admin socket"
    ((used <= 1 << 20)) && return 0
    sleep 1
  done
  die "osd.0 counts $used bytes held in an empty pool (capacity $MEMSTORE_BYTES)"
}

cmd_report() {
  cmd_status || true
  ceph_cli health detail 2>&1 | sed 's/^/ceph-dev: health: /' >&2 || true
  ceph_cli df 2>&1 | sed 's/^/ceph-dev: df: /' >&2 || true
  local log
  for log in "$DIR"/log/mon.a.log "$DIR"/log/osd.0.log; do
    [[ -f $log ]] || continue
    say "last lines of $log:"
    tail -n 25 "$log" | sed 's/^/ceph-dev:   /' >&2
  done
}

cmd_stop() {
  [[ -d $DIR ]] || return 0
  DIR=$(cd "$DIR" && pwd)
  if [[ -f $DIR/ceph.conf ]] && ! head -1 "$DIR/ceph.conf" | grep -qF "$MARKER"; then
    die "$DIR/ceph.conf was not made by ceph-dev.sh; leaving $DIR alone"
  fi
  stop_daemon osd.0
  stop_daemon mon.a
  rm -rf "$DIR"
}

cmd_stop_osd() {
  stop_daemon osd.0
  say "osd.0 stopped"
}

cmd_start_osd() {
  live_pid "$DIR/run/osd.0.pid" >/dev/null && die "osd.0 is running already"
  start_osd
  wait_pool
  say "osd.0 up again"
}

case ${1:-} in
  -h | --help | help) usage; exit 0 ;;
esac
[[ $# -eq 2 ]] || { usage >&2; exit 2; }
DIR=$2
case $1 in
  start) cmd_start ;;
  status) cmd_status ;;
  check) DIR=$(cd "$DIR" && pwd); cmd_check ;;
  report) [[ -d $DIR ]] && DIR=$(cd "$DIR" && pwd); cmd_report ;;
  stop) cmd_stop ;;
  stop-osd) DIR=$(cd "$DIR" && pwd); cmd_stop_osd ;;
  start-osd) DIR=$(cd "$DIR" && pwd); cmd_start_osd ;;
  *) echo "ceph-dev.sh: unknown command '$1' (start, status, check, report, stop, stop-osd, start-osd)" >&2; exit 2 ;;
esac
