"""What the trace-based accounts of bench/fast (miss_account.py, churn_account.py) share: the
kernel's tracefs (root) and the /proc readers they sample the daemon with."""

import os
import re
import subprocess

TRACE = "/sys/kernel/tracing"
# One line of the trace with record-tgid: comm-pid (tgid) [cpu] flags timestamp: event: rest.
LINE = re.compile(r"^\s*(.*)-(\d+)\s+(?:\(\s*(\d+|-+)\)\s+)?\[(\d+)\]\s+\S+\s+([\d.]+):\s+"
                  r"(\w+):\s+(.*)$")


def write(path, value):
    with open(os.path.join(TRACE, path), "w") as f:
        f.write(value)


def start_events(events, syscalls, buffer_kb):
    """Mounts tracefs where it is not, empties the trace (tracing off, clock mono, tgids
    recorded) and enables `events`, the raw_syscalls ones filtered to the x86-64 numbers in
    `syscalls`. The caller turns tracing_on on and off around what it measures."""
    if not os.path.isdir(os.path.join(TRACE, "events")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACE], check=True)
    write("tracing_on", "0")
    write("trace", "")
    write("trace_clock", "mono")
    write("buffer_size_kb", str(buffer_kb))
    write("set_event", "")
    write("options/record-tgid", "1")
    syscall_filter = " || ".join(f"id == {nr}" for nr in syscalls)
    for ev in events:
        if ev.startswith("raw_syscalls"):
            write(f"events/{ev}/filter", syscall_filter)
        write(f"events/{ev}/enable", "1")


def tids(pid):
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except FileNotFoundError:
        return set()


def process_cpu_ns(pid):
    """User + system time of the whole process, all threads, the exited ones included."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1e9 / os.sysconf("SC_CLK_TCK")
