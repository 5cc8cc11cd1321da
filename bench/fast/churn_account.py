#!/usr/bin/env python3
"""Where the time of metadata churn goes, per FUSE request type, from the kernel's trace events
(issue 11, the churn row).

Runs `metadata_churn DIR FILES` (create + close of FILES files, a stat of each, an unlink of
each) while recording through tracefs (root) the FUSE requests' send and end and the system
calls of the churn process and of the daemon's threads. Then prints:

  per system call of the churn process (openat, close, newfstatat, unlink): calls per file and
  the median / mean time inside the call;
  per FUSE request type: requests per file; round trip (fuse_request_send to fuse_request_end,
  the time the kernel's request lives); of it "to worker" (sent -> the daemon worker's
  read(/dev/fuse) returns: queueing and the worker's wake-up), "daemon" (that return -> the
  reply's writev: libfuse and tipfs's handler: MetaStore, RocksDB, locks) and "reply" (the
  writev -> the request's end in the kernel);
  FORGET / BATCH_FORGET (no reply, no kernel request: the daemon's read returns a message that no
  writev answers): reads per file and the daemon's time from the read's return to its next read;
  the daemon's CPU (utime + stime of all its threads) and voluntary context switches per file.
Requests of other FUSE mounts are left out (the connection of the churn's own requests).

A request "sync" means the caller waits for it (LOOKUP, CREATE, UNLINK); RELEASE is sent in the
background by close(2) and FORGET by the inode's eviction, so they cost the daemon's CPU but not
the caller's wait.

Usage (root; DIR an empty directory of a tipfs mount):
  bench/fast/churn_account.py --daemon PID --churn build/bench/foundation/metadata_churn \
      --dir MNT/churn [--files 2000]
"""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from trace_events import LINE, TRACE, process_cpu_ns, start_events, tids, write  # noqa: E402

NR_READ, NR_WRITEV, NR_SPLICE = 0, 20, 275
CHURN_SYSCALLS = {257: "openat", 3: "close", 262: "newfstatat", 332: "statx", 87: "unlink",
                  263: "unlinkat", 4: "stat", 6: "lstat"}
FOLLOWED = sorted({NR_READ, NR_WRITEV, NR_SPLICE} | set(CHURN_SYSCALLS))
SYNC_OPS = {"FUSE_LOOKUP", "FUSE_CREATE", "FUSE_UNLINK", "FUSE_GETATTR", "FUSE_MKNOD",
            "FUSE_OPEN", "FUSE_FLUSH"}


def voluntary_switches(pid):
    total = 0
    for t in tids(pid):
        try:
            status = open(f"/proc/{pid}/task/{t}/status").read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
    return total


def record(daemon, churn, directory, files):
    start_events(("fuse/fuse_request_send", "fuse/fuse_request_end", "raw_syscalls/sys_enter",
                  "raw_syscalls/sys_exit"), FOLLOWED, buffer_kb=65536)
    cpu0, switches0 = process_cpu_ns(daemon), voluntary_switches(daemon)
    write("tracing_on", "1")
    proc = subprocess.Popen([churn, directory, str(files)], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    write("tracing_on", "0")
    cpu1, switches1 = process_cpu_ns(daemon), voluntary_switches(daemon)
    with open(os.path.join(TRACE, "trace")) as f:
        text = f.read()
    write("set_event", "")
    for ev in ("raw_syscalls/sys_enter", "raw_syscalls/sys_exit"):
        write(f"events/{ev}/filter", "0")
    write("trace", "")
    if proc.returncode != 0:
        sys.exit(f"metadata_churn failed ({proc.returncode})")
    return text, proc.pid, float(out.strip()), cpu1 - cpu0, switches1 - switches0


def parse(text, daemon, churn_pid):
    """Events as (time us, tid, tgid, event, payload)."""
    events = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        _, tid, tgid, _, ts, event, payload = m.groups()
        tid = int(tid)
        tgid = int(tgid) if tgid and tgid.strip("-") else tid
        events.append((float(ts) * 1e6, tid, tgid, event, payload))
    return events


def describe(values):
    if not values:
        return "-"
    return f"{statistics.median(values):7.1f} {statistics.fmean(values):7.1f}"


def account(events, daemon, churn_pid, files):
    # Other FUSE mounts' requests are in the trace too: keep the connection the churn uses.
    connection = None
    for ts, tid, tgid, event, payload in events:
        if event == "fuse_request_send" and tgid == churn_pid:
            connection = payload.split()[1]
            break
    syscall_open = {}
    churn_calls = collections.defaultdict(list)
    sends = {}  # unique -> (time, opcode name, sending tid)
    last_read_exit = {}  # daemon tid -> time of its last read(/dev/fuse) return
    last_writev = {}  # daemon tid -> time of its last writev entry
    unanswered = {}  # daemon tid -> read-exit time of a message no writev answered yet
    per_op = collections.defaultdict(lambda: collections.defaultdict(list))
    forgets = []
    for ts, tid, tgid, event, payload in events:
        if event in ("sys_enter", "sys_exit"):
            nr = int(payload.split()[1])
            if tgid == churn_pid and nr in CHURN_SYSCALLS:
                if event == "sys_enter":
                    syscall_open[tid] = (nr, ts)
                elif tid in syscall_open and syscall_open[tid][0] == nr:
                    churn_calls[CHURN_SYSCALLS[nr]].append(ts - syscall_open.pop(tid)[1])
            elif tgid == daemon:
                if nr in (NR_READ, NR_SPLICE) and event == "sys_exit":
                    ret = int(payload.split("=")[1])
                    if ret > 0:
                        last_read_exit[tid] = ts
                        unanswered[tid] = ts
                elif nr in (NR_READ, NR_SPLICE) and event == "sys_enter":
                    start = unanswered.pop(tid, None)
                    if start is not None:
                        forgets.append(ts - start)  # a message answered by no writev
                elif nr == NR_WRITEV and event == "sys_enter":
                    last_writev[tid] = ts
                    unanswered.pop(tid, None)
        elif event == "fuse_request_send":
            f = payload.split()
            if f[1] != connection:
                continue
            unique = int(f[f.index("req") + 1])
            name = re.search(r"\((\w+)\)", payload).group(1)
            sends[unique] = (ts, name)
        elif event == "fuse_request_end":
            f = payload.split()
            if f[1] != connection:
                continue
            unique = int(f[f.index("req") + 1])
            if unique not in sends:
                continue
            sent, name = sends.pop(unique)
            d = per_op[name]
            d["round trip"].append(ts - sent)
            r, w = last_read_exit.get(tid), last_writev.get(tid)
            if tgid == daemon and r is not None and w is not None and sent <= r <= w <= ts:
                d["to worker"].append(r - sent)
                d["daemon"].append(w - r)
                d["reply"].append(ts - w)
    return churn_calls, per_op, forgets


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemon", type=int, required=True, help="the tipfs daemon's pid")
    parser.add_argument("--churn", required=True, help="the metadata_churn binary")
    parser.add_argument("--dir", required=True, help="an empty directory in the mount")
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    text, churn_pid, seconds, cpu_ns, switches = record(args.daemon, args.churn, args.dir,
                                                        args.files)
    events = parse(text, args.daemon, churn_pid)
    churn_calls, per_op, forgets = account(events, args.daemon, churn_pid, args.files)
    n = args.files
    print(f"metadata_churn {n} files: {seconds:.3f} s, {seconds / n * 1e6:.1f} us per file; "
          f"daemon CPU {cpu_ns / n / 1e3:.1f} us per file, "
          f"{switches / n:.2f} voluntary switches per file; load {open('/proc/loadavg').read().strip()}")
    print("\nsystem call of the churn     per file   median    mean (us in the call)")
    for name, values in sorted(churn_calls.items()):
        print(f"  {name:26s} {len(values) / n:8.2f}  {describe(values)}")
    print("\nFUSE request          per file  round trip       to worker        daemon"
          "           reply   (median, mean us)")
    for name, d in sorted(per_op.items(), key=lambda kv: -len(kv[1]["round trip"])):
        kind = "sync" if name in SYNC_OPS else "bg"
        print(f"  {name:14s} {kind:4s} {len(d['round trip']) / n:6.2f}  "
              f"{describe(d['round trip'])}  {describe(d['to worker'])}  "
              f"{describe(d['daemon'])}  {describe(d['reply'])}")
    print(f"  {'FORGET (any)':14s} bg   {len(forgets) / n:6.2f}  (no reply)"
          f"{'':25s}{describe(forgets)}")


if __name__ == "__main__":
    main()
