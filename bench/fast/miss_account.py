#!/usr/bin/env python3
"""Where the time of one FUSE read goes, from the kernel's own trace events (issue 11).

Records, for --seconds, through tracefs (root): the scheduler's wake-ups and switches, the CPUs'
idle entries and exits, the FUSE requests' send and end, and the system calls of the daemon's
threads and of the readers. Then follows each FUSE READ from the reader's pread64 to its return
and prints, per stage, the median and mean over the reads that ran alone (one request in flight,
as at fio --numjobs=1):

  reader user         the reader's own time between two preads (fio's loop)
  syscall -> queued   pread64 entry to fuse_request_send (the kernel's FUSE request)
  queued -> worker    the request queued to the worker's return from reading /dev/fuse: its
                      wake-up, including a halted vCPU's way out of idle (split below)
  worker -> backing   the daemon's work before the backing read (libfuse, GetAttr, the cache's
                      lookup and fetch set-up, the emulator's Enter)
  backing read        the backing file's pread (PosixDisk's inline read)
  backing -> reply    the backing read's end to the reply's writev: the model's wait, the timer's
                      lateness, the completion (FinishPending) and the reply's set-up
  reply -> ended      the writev's entry to fuse_request_end
  ended -> reader     the reply to the reader's return from pread64: its wake-up (split below)

A read without a backing read (a hit, or a miss the worker finished itself) shows "worker ->
reply" instead of the three middle stages. Wake-ups are split into waking -> wakeup (the IPI to
the target CPU and its exit from idle; "same cpu" needs no IPI, "idle cpu" had to leave a halt)
and wakeup -> running (the run queue). Per read it also counts the wake-ups and switches of the
daemon's threads by role (FUSE worker, the Clock's real-time timer thread, ...), and, from
/proc over the window, each role's CPU, run-queue wait and context switches per read, the
daemon's minor page faults and its whole CPU per read.

Timestamps are the trace's microseconds (trace_clock mono). Options: --threads-only (only count
the reads and report the threads: for many jobs, where no read runs alone), --mallocs (a uprobe
on libc's malloc counts the daemon's allocations per read; it slows every process meanwhile),
--probes NAME... (uprobes in the daemon marking a read's way; each hit costs microseconds or
more on a VM, so they show order, not durations), --save FILE / --trace-file FILE.

Usage (during a running fio against a tipfs mount; root):
  bench/fast/miss_account.py --daemon PID --readers "PID ..." [--seconds 2]
"""
import argparse
import bisect
import collections
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from trace_events import LINE, TRACE, process_cpu_ns, start_events, tids, write  # noqa: E402

THREADS_BEFORE, THREADS_AFTER, ROLES = {}, {}, {}
FAULTS = None
PROCESS_CPU = None
TGIDS = {}
NR_READ, NR_WRITE, NR_PREAD64, NR_READV, NR_WRITEV = 0, 1, 17, 19, 20
NR_FUTEX, NR_PREADV2 = 202, 327
FUSE_READ = 15
EVENTS = [
    "sched/sched_waking", "sched/sched_wakeup", "sched/sched_switch", "power/cpu_idle",
    "fuse/fuse_request_send", "fuse/fuse_request_end", "raw_syscalls/sys_enter",
    "raw_syscalls/sys_exit",
]
# The system calls followed (x86-64 numbers); the raw_syscalls events are filtered to these, for
# every process: FUSE workers that libfuse starts during the window are found by their tgid.
FOLLOWED_SYSCALLS = (0, 1, 17, 19, 20, 202, 275, 327)


def file_offset(path, vaddr):
    segs = os.popen(f"readelf -lW {path}").read()
    for l in segs.splitlines():
        f = l.split()
        if f[:1] == ["LOAD"]:
            off, va, size = int(f[1], 16), int(f[2], 16), int(f[5], 16)
            if va <= vaddr < va + size:
                return vaddr - va + off
    raise SystemExit(f"{vaddr:#x} is in no segment of {path}")


def mapped(pid, part):
    return next(line.split()[-1] for line in open(f"/proc/{pid}/maps") if part in line)


def symbol(pid, where, name):
    """(path, file offset) of the function `name` (demangled, up to its arguments) in the
    daemon's executable (where="exe") or in the mapped library whose path contains `where`."""
    path = os.readlink(f"/proc/{pid}/exe") if where == "exe" else mapped(pid, where)
    out = os.popen(f"nm -C --defined-only {path} 2>/dev/null; nm -DC --defined-only {path}").read()
    for line in out.splitlines():
        f = line.split(" ", 2)
        if len(f) == 3 and f[1] in "Tt" and (f[2] == name or f[2].startswith(name + "(") or
                                               f[2].split("@")[0] == name):
            return path, file_offset(path, int(f[0], 16))
    raise SystemExit(f"{name} not found in {path}")


# --probes: where each read's own marks come from (a uprobe each; each hit costs a trap, about
# 1-3 us on this VM, so a probed run is for the order and gaps of stages, not for its totals).
PROBES = {
    "fs_read": ("exe", "tipfs::fusefs::FileSystem::ReadAsync"),
    "start_read": ("exe", "tipfs::cache::FileCache::StartRead"),
    "drain": ("exe", "tipfs::cache::FileCache::DrainIssues"),
    "enter": ("exe", "tipfs::stripe::DiskEmulator::Enter"),
    "run_at": ("exe", "tipfs::SystemClock::RunAt"),
    "on_timer": ("exe", "tipfs::stripe::DiskEmulator::OnTimer"),
    "fetch_done": ("exe", "tipfs::cache::FileCache::OnFetchDone"),
    "reply_iov": ("libfuse3", "fuse_reply_iov"),
}


def thread_snapshot(pid):
    """Per thread of `pid`: (cpu ns, run-queue wait ns, voluntary, involuntary switches)."""
    out = {}
    for t in tids(pid):
        try:
            run, wait, _ = (int(x) for x in open(f"/proc/{pid}/task/{t}/schedstat").read().split())
            status = open(f"/proc/{pid}/task/{t}/status").read()
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        vol = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        invol = int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        out[t] = (run, wait, vol, invol)
    return out


def minor_faults(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[7])


def thread_roles(pid, samples=20, interval=0.01):
    """Role of each thread from where it sleeps (wchan) and its policy, sampled a few times."""
    seen = collections.defaultdict(collections.Counter)
    for _ in range(samples):
        for t in tids(pid):
            try:
                w = open(f"/proc/{pid}/task/{t}/wchan").read().strip()
                policy = int(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[38])
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
            if policy in (1, 2):
                seen[t]["real-time (timer)"] += 100
            elif "fuse_dev" in w:
                seen[t]["FUSE worker"] += 1
            elif "io_cqring" in w or "io_uring" in w:
                seen[t]["io_uring thread"] += 1
            elif w not in ("0", ""):
                seen[t][f"sleeps in {w}"] += 1
        time.sleep(interval)
    return {t: c.most_common(1)[0][0] for t, c in seen.items()}


def record(daemon, readers, seconds, mallocs=False, probes=(), events=None):
    events = EVENTS if events is None else events
    pids = tids(daemon)
    for r in readers:
        pids |= tids(r)
    start_events(events, FOLLOWED_SYSCALLS, buffer_kb=32768)
    uprobes = list(probes)
    if mallocs:
        # Counts the daemon's heap allocations (a uprobe on libc's malloc: every process's
        # malloc traps while it is set, so timings of this run mean nothing).
        uprobes.append("malloc")
    if uprobes:
        defs = []
        for name in uprobes:
            where, fn = ("libc.so", "malloc") if name == "malloc" else PROBES[name]
            path, off = symbol(daemon, where, fn)
            defs.append(f"p:missacct/{name} {path}:{off:#x}")
        write("uprobe_events", "\n".join(defs) + "\n")
        daemon_filter = " || ".join(f"common_pid == {p}" for p in sorted(tids(daemon)))
        for name in uprobes:
            write(f"events/missacct/{name}/filter", daemon_filter)
            write(f"events/missacct/{name}/enable", "1")
    global THREADS_BEFORE, THREADS_AFTER, ROLES
    global FAULTS
    ROLES = thread_roles(daemon)
    THREADS_BEFORE = thread_snapshot(daemon)
    faults0 = minor_faults(daemon)
    cpu0 = process_cpu_ns(daemon)
    write("tracing_on", "1")
    time.sleep(seconds)
    write("tracing_on", "0")
    THREADS_AFTER = thread_snapshot(daemon)
    FAULTS = minor_faults(daemon) - faults0
    global PROCESS_CPU
    PROCESS_CPU = process_cpu_ns(daemon) - cpu0
    for ev in events:
        write(f"events/{ev}/enable", "0")
        if ev.startswith("raw_syscalls"):
            write(f"events/{ev}/filter", "0")
    if uprobes:
        for name in uprobes:
            write(f"events/missacct/{name}/enable", "0")
    # Read before the uprobes go: removing a dynamic event resets the ring buffer.
    with open(os.path.join(TRACE, "trace")) as f:
        text = f.read()
    if uprobes:
        write("uprobe_events", "")
    write("trace", "")
    write("buffer_size_kb", "1408")
    write("trace_clock", "local")
    write("tracing_on", "1")  # as the kernel starts it
    write("options/record-tgid", "0")
    return text, tids(daemon) | {p for p in pids if p not in readers}


def kv(rest):
    return dict(re.findall(r"(\w+)=(\S+)", rest))


def parse(text):
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, tgid, cpu, ts, event, rest = m.groups()
        TGIDS[int(pid)] = int(tgid) if tgid and tgid.isdigit() else None
        yield int(pid), int(cpu), float(ts) * 1e6, event, rest, comm.strip()


def note_reader(cur, tid, key, value, after):
    """The first `key` of the read that reader `tid` has in flight, once its `after` is known
    (the wake-up and run of a reader follow the reply's end, in that order)."""
    r = cur.get(tid)
    if r is not None and after in r and key not in r:
        r[key] = value


class Stage:
    def __init__(self):
        self.values = collections.defaultdict(list)

    def add(self, name, us):
        self.values[name].append(us)

    def add_wakeup(self, who, waking, wakeup, run, awake_us):
        """The split of one wake-up of `who` (the worker or the reader): `waking` is the
        sched_waking record (time, waker, target cpu, target idle, same cpu), then the times of
        sched_wakeup and of its switch in; without a wake-up, `awake_us` as "was awake"."""
        if not waking:
            self.add(f"  {who} was awake (no wake-up)", awake_us)
            return
        key = "same" if waking[4] else "idle" if waking[3] else "busy"
        up = wakeup or waking[0]
        self.add(f"  {who} waking ({key} cpu) -> wakeup", up - waking[0])
        if run:
            self.add(f"  {who} wakeup -> running", run - up)

    def report(self, order, reads):
        print(f"{'stage':38s} {'median':>8s} {'mean':>8s} {'p90':>8s} {'n':>6s}")
        for name in order:
            v = self.values.get(name)
            if not v:
                continue
            v = sorted(v)
            p90 = v[min(len(v) - 1, int(len(v) * 0.9))]
            print(f"{name:38s} {statistics.median(v):8.1f} {statistics.mean(v):8.1f} "
                  f"{p90:8.1f} {len(v):6d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--daemon", type=int, required=True, help="the tipfs daemon's pid")
    ap.add_argument("--readers", default="", help="pids of the reading processes (fio's jobs)")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--trace-file", help="analyse this saved trace instead of recording")
    ap.add_argument("--save", help="also write the raw trace here")
    ap.add_argument("--threads-only", action="store_true",
                    help="trace only the FUSE requests (to count them) and report the threads' "
                    "costs per read: for many jobs, where reads do not run alone")
    ap.add_argument("--mallocs", action="store_true",
                    help="count the daemon's mallocs per read (slows every process meanwhile)")
    ap.add_argument("--probes", default="",
                    help="uprobes marking each read's way through the daemon: " +
                    " ".join(PROBES))
    args = ap.parse_args()
    readers = [int(p) for p in args.readers.split()]
    if args.trace_file:
        text = open(args.trace_file).read()
        m = re.search(r"^# daemon threads: (.*)$", text, re.M)
        daemon_tids = {int(t) for t in m.group(1).split()} if m else tids(args.daemon)
    else:
        text, daemon_tids = record(args.daemon, readers, args.seconds, args.mallocs,
                                   args.probes.split(),
                                   ["fuse/fuse_request_send"] if args.threads_only else None)
        daemon_tids = tids(args.daemon) | (daemon_tids - set(readers))
    if args.save:
        with open(args.save, "w") as f:
            f.write("# daemon threads: " + " ".join(map(str, sorted(daemon_tids))) + "\n")
            f.write(text)

    idle = {}  # cpu -> True while in idle
    idle_since = {}
    # Per task: the last waking (ts, waker, target cpu, was idle), wakeup ts.
    waking = {}
    wakeup = {}
    in_syscall = {}  # tid -> (nr, ts)
    # The read being followed, per reader.
    cur = {}
    reads = []
    last_pread_exit = {}
    sends = []  # every READ's send time, in order: a read ran alone if none fell inside it
    daemon_switch_in = collections.Counter()
    daemon_wakeups = collections.Counter()
    daemon_mallocs = collections.Counter()
    last_switch_in = {}
    roles = {}

    for pid, cpu, ts, event, rest, comm in parse(text):
        if TGIDS.get(pid) == args.daemon:
            daemon_tids.add(pid)
        if event == "malloc":
            daemon_mallocs[pid] += 1
            continue
        if event in PROBES:
            for r in cur.values():
                if "send" in r and f"@{event}" not in r and "end" not in r:
                    r[f"@{event}"] = ts
            continue
        if event == "cpu_idle":
            f = kv(rest)
            c = int(f["cpu_id"])
            if f["state"] == "4294967295":
                idle[c] = False
            else:
                idle[c] = True
                idle_since[c] = ts
            continue
        if event == "sched_waking":
            f = kv(rest)
            t = int(f["pid"])
            tc = int(f["target_cpu"])
            waking[t] = (ts, pid, tc, idle.get(tc, False) and tc != cpu, tc == cpu)
            note_reader(cur, t, "reader_wake", waking[t], after="end")
            if t in daemon_tids:
                daemon_wakeups[t] += 1
            continue
        if event == "sched_wakeup":
            t = int(kv(rest)["pid"])
            wakeup[t] = ts
            note_reader(cur, t, "reader_wakeup", ts, after="reader_wake")
            continue
        if event == "sched_switch":
            m = re.search(r"next_comm=(.*) next_pid=(\d+)", rest)
            nxt = int(m.group(2))
            if nxt in daemon_tids:
                prio = int(re.search(r"next_prio=(\d+)", rest).group(1))
                if prio < 100:
                    roles[nxt] = "real-time (timer)"
                daemon_switch_in[nxt] += 1
            last_switch_in[nxt] = ts
            note_reader(cur, nxt, "reader_run", ts, after="reader_wake")
            continue
        if event == "fuse_request_send":
            m = re.search(r"req (\d+) opcode (\d+)", rest)
            if int(m.group(2)) != FUSE_READ or pid not in cur:
                continue
            r = cur[pid]
            r["unique"] = int(m.group(1))
            r["send"] = ts
            sends.append(ts)
            continue
        if event == "fuse_request_end":
            u = int(re.search(r"req (\d+)", rest).group(1))
            for reader, r in cur.items():
                if r.get("unique") == u:
                    r["end"] = ts
                    r["replier"] = pid
            continue
        if event == "sys_enter":
            nr = int(re.search(r"NR (\d+)", rest).group(1))
            in_syscall[pid] = (nr, ts)
            if nr == NR_PREAD64 and pid in readers:
                cur[pid] = {"enter": ts, "prev_exit": last_pread_exit.get(pid)}
                continue
            if pid in daemon_tids:
                for r in list(cur.values()) + reads[-2:]:
                    if r.get("worker") == pid and "backing_exit" in r and \
                            "worker_back" not in r:
                        if nr == NR_FUTEX:
                            r["worker_futex"] = r.get("worker_futex", 0) + 1
                        elif nr in (NR_READ, 275):
                            r["worker_back"] = ts
                for r in cur.values():
                    if r.get("worker") == pid and "backing" not in r and "reply" not in r and \
                            nr in (NR_PREAD64, NR_PREADV2):
                        r["backing"] = ts
                    if nr == NR_WRITEV and r.get("send") and "reply" not in r and \
                            "worker_got" in r:
                        # The next writev after the request was picked up: its reply (one
                        # request at a time: --numjobs 1).
                        r["reply"] = ts
                        r["replier_tid"] = pid
            continue
        if event == "sys_exit":
            m = re.search(r"NR (\d+) = (-?\d+)", rest)
            nr, ret = int(m.group(1)), int(m.group(2))
            if pid in readers and nr == NR_PREAD64 and pid in cur:
                r = cur.pop(pid)
                r["exit"] = ts
                last_pread_exit[pid] = ts
                reads.append(r)
                continue
            if pid in daemon_tids:
                for r in cur.values():
                    if nr in (NR_READ, 275) and ret > 0 and r.get("send") and \
                            "worker_got" not in r and ts >= r["send"]:
                        r["worker_got"] = ts
                        r["worker"] = pid
                        roles.setdefault(pid, "FUSE worker")
                        w = waking.get(pid)
                        if w and w[0] >= r["send"] - 1:
                            r["wake"] = w
                            r["wakeup"] = wakeup.get(pid)
                            run = last_switch_in.get(pid)
                            if run is not None and run >= w[0]:
                                r["run"] = run
                        break
                    if r.get("worker") == pid and nr in (NR_PREAD64, NR_PREADV2) and \
                            "backing" in r and "backing_exit" not in r:
                        r["backing_exit"] = ts
            continue

    for r in reads:
        if "send" in r and "end" in r:
            lo = bisect.bisect_right(sends, r["send"])
            r["alone"] = lo >= len(sends) or sends[lo] > r["end"]
    stage = Stage()
    counted = 0
    for r in reads:
        if not r.get("alone") or "end" not in r or "worker_got" not in r or "reply" not in r:
            continue
        counted += 1
        if r.get("prev_exit") is not None:
            stage.add("reader user", r["enter"] - r["prev_exit"])
        stage.add("syscall -> queued", r["send"] - r["enter"])
        stage.add("queued -> worker", r["worker_got"] - r["send"])
        stage.add_wakeup("worker", r.get("wake"), r.get("wakeup"), r.get("run"),
                         r["worker_got"] - r["send"])
        if "backing" in r:
            stage.add("worker -> backing", r["backing"] - r["worker_got"])
            stage.add("backing read", r.get("backing_exit", r["backing"]) - r["backing"])
            stage.add("backing -> reply", r["reply"] - r.get("backing_exit", r["backing"]))
            if "worker_back" in r:
                stage.add("  (off the path) worker: backing -> next read(/dev/fuse)",
                          r["worker_back"] - r["backing_exit"])
                stage.add("  (off the path) worker futex calls after backing",
                          r.get("worker_futex", 0))
        else:
            stage.add("worker -> reply", r["reply"] - r["worker_got"])
        stage.add("reply -> ended", r["end"] - r["reply"])
        stage.add("ended -> reader", r["exit"] - r["end"])
        stage.add_wakeup("reader", r.get("reader_wake"), r.get("reader_wakeup"),
                         r.get("reader_run"), r["exit"] - r["end"])
        rt = r.get("replier_tid")
        stage.add("whole pread", r["exit"] - r["enter"])
        if rt is not None:
            stage.add(f"  replied by {'the worker' if rt == r['worker'] else 'another thread'}",
                      r["exit"] - r["enter"])
    probed = [name for name in PROBES if any(f"@{name}" in r for r in reads)]
    for r in reads:
        if not r.get("alone") or "end" not in r or "worker_got" not in r or "reply" not in r:
            continue
        marks = sorted((r[f"@{n}"], n) for n in probed if f"@{n}" in r)
        prev_ts, prev = r["worker_got"], "worker"
        for ts, n in marks:
            stage.add(f"  probe {prev} -> {n}", ts - prev_ts)
            prev_ts, prev = ts, n
        if marks:
            stage.add(f"  probe {prev} -> reply", r["reply"] - prev_ts)
    print(f"reads followed: {len(reads)}, alone and complete: {counted}")
    stage.report(["reader user", "syscall -> queued", "queued -> worker",
                  "  worker waking (same cpu) -> wakeup",
                  "  worker waking (idle cpu) -> wakeup", "  worker waking (busy cpu) -> wakeup",
                  "  worker wakeup -> running", "  worker was awake (no wake-up)",
                  "worker -> backing", "backing read", "backing -> reply",
                  "  (off the path) worker: backing -> next read(/dev/fuse)",
                  "  (off the path) worker futex calls after backing", "worker -> reply",
                  "reply -> ended", "ended -> reader", "  reader waking (same cpu) -> wakeup",
                  "  reader waking (idle cpu) -> wakeup",
                  "  reader waking (busy cpu) -> wakeup", "  reader wakeup -> running",
                  "  reader was awake (no wake-up)", "whole pread", "  replied by the worker",
                  "  replied by another thread"] +
                 sorted(k for k in stage.values if k.startswith("  probe")), reads)
    if counted:
        print("daemon threads per read: switched in / woken (threads of the role)")
        by_role = collections.defaultdict(lambda: [0, 0, 0, 0])
        for t in set(daemon_switch_in) | set(daemon_wakeups) | set(daemon_mallocs):
            role = roles.get(t, "other")
            by_role[role][0] += daemon_switch_in[t]
            by_role[role][1] += daemon_wakeups[t]
            by_role[role][2] += daemon_mallocs[t]
            by_role[role][3] += 1
        for role, (sw, wk, ma, n) in sorted(by_role.items()):
            extra = f" mallocs {ma / counted:5.2f}" if args.mallocs else ""
            print(f"  {role:20s} {sw / counted:6.2f} {wk / counted:6.2f}{extra} ({n} threads)")
    if THREADS_AFTER:
        sends = sum(1 for r in reads if "send" in r) or len(
            re.findall(r"fuse_request_send: .* opcode 15 ", text))
        print(f"daemon threads per FUSE read over the window ({sends} reads), by role "
              "(/proc schedstat and status):")
        print(f"  {'role':24s} {'cpu us':>8s} {'rq wait us':>10s} {'vol sw':>7s} {'invol sw':>8s}")
        agg = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
        for t, after in THREADS_AFTER.items():
            before = THREADS_BEFORE.get(t, (0, 0, 0, 0))
            a = agg[ROLES.get(t, "other")]
            for i in range(4):
                a[i] += after[i] - before[i]
            a[4] += 1
        for role, (run, wait, vol, invol, n) in sorted(agg.items()):
            if sends:
                print(f"  {role[:24]:24s} {run / 1e3 / sends:8.1f} {wait / 1e3 / sends:10.1f} "
                      f"{vol / sends:7.2f} {invol / sends:8.2f}  ({n} threads)")
        if sends and FAULTS is not None:
            print(f"  minor page faults of the daemon: {FAULTS / sends:.2f} per read")
        if sends and PROCESS_CPU is not None:
            print(f"  the whole daemon (every thread, exited ones too): "
                  f"{PROCESS_CPU / 1e3 / sends:.1f} us CPU per read (10 ms ticks)")


if __name__ == "__main__":
    sys.exit(main())
