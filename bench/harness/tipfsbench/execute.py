"""Measuring: one cold run at a time, its counters, and the progress line.

For each run: unmount, drop the page cache, mount afresh with the run's options (an empty
daemon cache), run the program with the mount root as its working directory (the native variant:
the plain data directory, after the same page-cache drop), time it from outside, then save
`tipfs stats --json` and `tipfs stats --breakdown --json` and unmount. One row per run goes to
runs.csv at once, so an interrupted set keeps what it measured (--resume continues it).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

from .datasets import DataSets
from .plan import Run
from .system import (MountOptions, Tools, VolumeSet, drop_page_cache, load_average,
                     run_checked, run_timed)
from .workloads import WORKLOADS, canonical_output, program_report, program_variant

COLUMNS = [
    "run_id", "key", "workload", "variant", "fraction", "native", "disks", "disk_model",
    "slowdown", "gap_ns", "cache", "hints", "data_cache", "repeat", "status", "exit_code",
    "elapsed_s", "scaled_s", "program_elapsed_s", "bytes_read", "program_reads", "output_sha256",
    "demand_reads", "blocks_read", "fuse_read_mb", "demand_hits", "demand_misses", "stall_s",
    "readahead_issued",
    "readahead_hits", "hint_calls", "hints_refused", "hints_prefetched", "hints_used",
    "hints_evicted_unused", "hints_cancelled", "manual_consumed", "speculative_consumed",
    "coverage", "manual_hinted_mb", "speculative_hinted_mb", "speculative_accuracy",
    "disk_reads", "disk_read_mb", "disk_utilization", "late_completions", "horizon",
    "spec_forks", "spec_restarts", "spec_offtrack_mismatch", "spec_offtrack_behind",
    "spec_hints_issued", "spec_hints_consumed", "spec_reads_without_data",
    "spec_child_ended_forbidden", "spec_last_forbidden_syscall", "spec_start_failures",
    "reads_in_flight", "spec_hint_bytes_issued", "spec_hint_bytes_consumed",
    "hinted_unused_mb", "spec_hints_clean", "spec_hints_tainted", "spec_waits_at_sites",
    "spec_forks_at_once", "tainted_consumed", "history_consumed", "history_hinted_mb",
    "spec_history_hints", "spec_history_hint_bytes", "spec_history_cancelled",
    "spec_history_recorded",
    "cpu_s", "daemon_cpu_s", "load_before", "load_after", "started_at",
]
DONE_STATUSES = ("ok", "mismatch")


# libtipspec's state directory of one run, under the scratch directory (removed after the run).
STATE_DIR_NAME = "tipspec-state"


def stats_row(stats: dict) -> dict:
    """The columns taken from a mount's stats.json after a run (the counters start at zero with
    each mount, so they are the run's own)."""
    def num(name: str) -> float:
        value = stats.get(name, 0)
        return float(value) if isinstance(value, (int, float)) else 0.0
    # demand.reads counts read requests; hits and misses count the blocks those requests
    # touched, the unit in which hinted accesses are consumed.
    blocks = num("demand.hits") + num("demand.misses")
    manual = num("hints.manual.consumed")
    # Speculation's hints are clean or tainted; history replays the last run: all automatic.
    speculative = (num("hints.speculative.consumed") + num("hints.speculative_tainted.consumed")
                   + num("hints.history.consumed"))
    disks = stats.get("disks", []) or []
    utilization = [float(d.get("utilization", 0)) for d in disks if isinstance(d, dict)]
    return {
        "demand_reads": int(num("demand.reads")), "blocks_read": int(blocks),
        "fuse_read_mb": round(num("fuse.read.bytes") / 1e6, 3),
        "demand_hits": int(num("demand.hits")),
        "demand_misses": int(num("demand.misses")),
        "stall_s": round(num("demand.stall.nanos") / 1e9, 4),
        "readahead_issued": int(num("readahead.issued")),
        "readahead_hits": int(num("readahead.hits")),
        "hint_calls": int(num("hints.calls")), "hints_refused": int(num("hints.refused")),
        "hints_prefetched": int(num("hints.prefetched")), "hints_used": int(num("hints.used")),
        "hints_evicted_unused": int(num("hints.evicted_unused")),
        "hints_cancelled": int(num("hints.cancelled")),
        "manual_consumed": int(manual), "speculative_consumed": int(speculative),
        # The paper's hint coverage: the share of the blocks read that had been hinted.
        "coverage": round((manual + speculative) / blocks, 4) if blocks else "",
        "manual_hinted_mb": round(num("hints.manual.bytes") / 1e6, 3),
        "speculative_hinted_mb": round(num("hints.speculative.bytes") / 1e6, 3),
        "speculative_accuracy": round(num("hints.speculative.accuracy"), 4),
        "disk_reads": int(num("disk.read.ops")),
        "disk_read_mb": round(num("disk.read.bytes") / 1e6, 3),
        "disk_utilization": round(statistics.fmean(utilization), 4) if utilization else "",
        "late_completions": int(num("disk.late.completions")),
        "horizon": round(num("hints.horizon"), 2),
        "tainted_consumed": int(num("hints.speculative_tainted.consumed")),
        "history_consumed": int(num("hints.history.consumed")),
        "history_hinted_mb": round(num("hints.history.bytes") / 1e6, 3),
        # Disk requests in flight (queued or in service) times seconds, summed over the disks;
        # measure() divides by the run's time, giving the average number in flight.
        "reads_in_flight": sum(float(d.get("queue_depth_seconds_total", 0))
                               for d in disks if isinstance(d, dict)),
    }


def tipspec_row(path: Path) -> dict:
    """libtipspec's counters (`tipfs run --stats-file`): summed over the processes that wrote
    them (a program that execs writes once per image)."""
    totals: dict = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            name, _, value = line.partition(" ")
            if name.startswith("tipspec.") and value.strip().isdigit():
                totals[name] = totals.get(name, 0) + int(value)
    def get(name: str):
        return totals.get("tipspec." + name, "")
    return {"spec_forks": get("forks"), "spec_restarts": get("restarts"),
            "spec_offtrack_mismatch": get("offtrack_mismatch"),
            "spec_offtrack_behind": get("offtrack_behind"),
            "spec_hints_issued": get("hints_issued"), "spec_hints_consumed": get("hints_consumed"),
            "spec_reads_without_data": get("reads_without_data"),
            "spec_child_ended_forbidden": get("child_ended_forbidden"),
            "spec_last_forbidden_syscall": get("last_forbidden_syscall"),
            "spec_start_failures": get("start_failures"),
            "spec_hint_bytes_issued": get("hint_bytes_issued"),
            "spec_hint_bytes_consumed": get("hint_bytes_consumed"),
            "spec_hints_clean": get("hints_clean"), "spec_hints_tainted": get("hints_tainted"),
            "spec_waits_at_sites": get("waits_at_sites"),
            "spec_forks_at_once": get("forks_at_once"),
            "spec_history_hints": get("history_hints"),
            "spec_history_hint_bytes": get("history_hint_bytes"),
            "spec_history_cancelled": get("history_cancelled"),
            "spec_history_recorded": get("history_recorded")}


class Progress:
    """One status line while the set runs: runs done, the run now, elapsed time and an estimate
    of what is left (from the runs measured so far: the same run's median, else the same
    workload and variant scaled by the slowdown and the fraction of the work, else the mean
    run)."""

    def __init__(self, total: int, mode: str):
        self.total = total
        self.done = 0
        self.failures = 0
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty() if mode == "auto" else mode == "tty"
        self.quiet = mode == "none"
        self.seconds_by_key: dict = {}
        self.seconds_by_kind: dict = {}

    def note(self, message: str) -> None:
        if self.quiet:
            return
        if self.tty:
            sys.stderr.write("\r\033[K")
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    def record(self, run: Run, seconds: float, ok: bool) -> None:
        self.done += 1
        if not ok:
            self.failures += 1
        self.seconds_by_key.setdefault(run.key(), []).append(seconds)
        self.seconds_by_kind.setdefault((run.workload, run.variant), []).append(
            seconds / (run.slowdown() * run.fraction))

    def estimate(self, run: Run) -> Optional[float]:
        if run.key() in self.seconds_by_key:
            return statistics.median(self.seconds_by_key[run.key()])
        kind = self.seconds_by_kind.get((run.workload, run.variant))
        if kind:
            return statistics.median(kind) * run.slowdown() * run.fraction
        every = [s for v in self.seconds_by_key.values() for s in v]
        return statistics.fmean(every) if every else None

    def show(self, run: Run, repeat: int, repeats: int, remaining: list) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        guesses = [self.estimate(r) for r, _ in remaining]
        known = [g for g in guesses if g is not None]
        eta = ""
        if known:
            # Unknown runs count as the mean of the known ones; each run also costs a remount.
            left = sum(known) + (len(guesses) - len(known)) * statistics.fmean(known)
            eta = f" eta ~{_clock(left + 2.0 * len(guesses))}"
        where = "native" if run.setup is None else f"{run.setup.disks}d {run.setup.disk_model()}"
        if run.setup is not None and run.setup.hints == "ignore":
            where += " hints=ignore"
        line = (f"[{self.done + 1}/{self.total}] {run.workload}/{run.variant}"
                f" f={run.fraction:g} {where} rep {repeat + 1}/{repeats}"
                f" | {_clock(elapsed)} elapsed{eta} | failures {self.failures}")
        if self.tty:
            sys.stderr.write("\r\033[K" + line[: _columns() - 1])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.tty and not self.quiet:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return 160


class Runner:
    def __init__(self, tools: Tools, data: DataSets, volumes: VolumeSet, results: Path,
                 scratch: Path, timeout: float, progress: Progress):
        self.tools = tools
        self.data = data
        self.volumes = volumes
        self.results = results
        self.scratch = scratch
        self.timeout = timeout
        self.progress = progress
        self.runs_dir = results / "runs"
        self.outputs_dir = results / "outputs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.outputs_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = results / "runs.csv"
        self.references: dict = {}  # (workload, fraction) -> digest of the original's output
        self.next_id = 1
        if self.csv_path.exists():
            for row in read_runs(self.csv_path):
                self.next_id = max(self.next_id, int(row["run_id"]) + 1)
                if row["variant"] == "original" and row["status"] in DONE_STATUSES:
                    self.references.setdefault((row["workload"], row["fraction"]),
                                               row["output_sha256"])
        else:
            with open(self.csv_path, "w", newline="", encoding="utf-8") as f:
                csv.writer(f).writerow(COLUMNS)

    def measure(self, run: Run, repeat: int) -> dict:
        run_id = self.next_id
        self.next_id += 1
        workload = WORKLOADS[run.workload]
        stem = self.runs_dir / f"{run_id:05d}-{run.workload}-{run.variant}"
        invocation = workload.build(self.tools, self.data, program_variant(run.variant),
                                    run.fraction, self.scratch)
        argv = list(invocation.argv)
        spec_stats = Path(f"{stem}.tipspec")
        volume = None
        if run.setup is None:
            drop_page_cache()
            cwd = self.data.dir
        else:
            volume = self.volumes.get(run.setup.disks)
            volume.cold_mount(MountOptions(run.setup.disk_model(), run.setup.cache,
                                           run.setup.hints, run.setup.data_cache))
            cwd = volume.mountpoint
        # `tipfs run` preloads the library of the build being measured, not whichever one it
        # would find first (a copied build still knows the path of the tree it was built in).
        env = dict(os.environ, TIPSPEC_LIBRARY=str(self.tools.libtipspec))
        if volume is not None and run.variant.startswith("speculating"):
            prefix = [self.tools.tipfs, "run", "--mount", volume.mountpoint,
                      "--stats-file", spec_stats]
            if run.variant == "speculating-wait":
                prefix += ["--wait-for-data", "on"]
            argv = prefix + ["--"] + argv
            env["TIPSPEC_STATE_DIR"] = str(self._fresh_state_dir())
            if run.variant == "speculating-2nd":
                self._first_run(run, volume, argv, env, invocation, Path(f"{stem}.first"))
                # libtipspec appends to --stats-file: the measured run's counters must be its own.
                spec_stats.unlink(missing_ok=True)
        load_before = load_average()
        started = time.strftime("%Y-%m-%dT%H:%M:%S")
        measured = run_timed(argv, cwd, Path(f"{stem}.stdout"), Path(f"{stem}.stderr"),
                             self.timeout, env=env)
        load_after = load_average()
        row = {column: "" for column in COLUMNS}
        row.update({
            "run_id": run_id, "key": run.key(), "workload": run.workload,
            "variant": run.variant, "fraction": f"{run.fraction:g}",
            "native": int(run.setup is None), "repeat": repeat,
            "exit_code": "" if measured.returncode is None else measured.returncode,
            "elapsed_s": round(measured.seconds, 4), "cpu_s": round(measured.cpu_seconds, 3),
            "scaled_s": round(measured.seconds / run.slowdown(), 4),
            "load_before": load_before, "load_after": load_after, "started_at": started,
        })
        if run.setup is not None:
            row.update({"disks": run.setup.disks, "disk_model": run.setup.disk_model(),
                        "slowdown": f"{run.setup.slowdown:g}",
                        "gap_ns": "" if run.setup.gap_ns is None else f"{run.setup.gap_ns:g}",
                        "cache": run.setup.cache, "hints": run.setup.hints,
                        "data_cache": run.setup.data_cache})
        report = program_report(measured.stderr.read_text(encoding="utf-8", errors="replace"))
        row.update({"program_elapsed_s": report.get("elapsed", ""),
                    "bytes_read": report.get("bytes_read", ""),
                    "program_reads": report.get("reads", "")})
        if volume is not None:
            try:
                row["daemon_cpu_s"] = volume.daemon_cpu_seconds()
                stats_text = run_checked([self.tools.tipfs, "stats", "--json", volume.mountpoint],
                                         "tipfs stats --json")
                breakdown = run_checked([self.tools.tipfs, "stats", "--breakdown", "--json",
                                         volume.mountpoint], "tipfs stats --breakdown --json")
                Path(f"{stem}.stats.json").write_text(stats_text, encoding="utf-8")
                Path(f"{stem}.breakdown.json").write_text(breakdown, encoding="utf-8")
                row.update(stats_row(json.loads(stats_text)))
                if measured.seconds > 0:
                    row["reads_in_flight"] = round(row["reads_in_flight"] / measured.seconds, 3)
            finally:
                volume.unmount()
        if run.variant.startswith("speculating"):
            row.update(tipspec_row(spec_stats))
            issued, consumed = row["spec_hint_bytes_issued"], row["spec_hint_bytes_consumed"]
            if issued != "" and consumed != "":
                # Issue 10's figure, divided by the bytes the original read in the report (the
                # children's own reads count in this mount's fuse.read.bytes too).
                row["hinted_unused_mb"] = round(max(0, issued - consumed) / 1e6, 3)
        if measured.returncode is None:
            row["status"] = "timeout"
        elif measured.returncode not in invocation.accept_codes:
            row["status"] = "failed"
        else:
            output = canonical_output(invocation, measured.stdout.read_bytes())
            digest = hashlib.sha256(output).hexdigest()
            row["output_sha256"] = digest
            saved = self.outputs_dir / f"{run.workload}-f{run.fraction:g}-{digest[:12]}.out"
            if not saved.exists():
                saved.write_bytes(output)
            reference_key = (run.workload, f"{run.fraction:g}")
            if run.variant == "original":
                self.references.setdefault(reference_key, digest)
            reference = self.references.get(reference_key)
            row["status"] = "ok" if reference in (None, digest) else "mismatch"
            if row["status"] == "mismatch":
                self.progress.note(f"OUTPUT DIFFERS: {run.key()} run {run_id}: {saved.name} vs "
                                   f"the original's {reference[:12]}")
        for path in invocation.outputs:
            Path(path).unlink(missing_ok=True)
        shutil.rmtree(self.scratch / STATE_DIR_NAME, ignore_errors=True)
        if row["status"] in ("failed", "timeout"):
            self.progress.note(f"{row['status'].upper()}: {run.key()} run {run_id} (exit "
                               f"{row['exit_code'] or 'none: killed after the timeout'}); see "
                               f"{stem}.stderr")
        Path(f"{stem}.stdout").unlink(missing_ok=True)  # the canonical output is kept once
        with open(self.csv_path, "a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerow([row[c] for c in COLUMNS])
        self.progress.record(run, measured.seconds, row["status"] in DONE_STATUSES)
        return row


    def _fresh_state_dir(self) -> Path:
        """An empty state directory for libtipspec (learned read sites, recorded reads): each
        measured run starts as a first run unless it is primed."""
        state = self.scratch / STATE_DIR_NAME
        shutil.rmtree(state, ignore_errors=True)
        state.mkdir(mode=0o700)
        return state

    def _first_run(self, run: Run, volume, argv: list, env: dict, invocation,
                   stem: Path) -> None:
        """The untimed first run before a speculating-2nd run: the same command on its own cold
        mount, so that what it leaves in the state directory is what a user's second run finds;
        then a fresh cold mount for the measured run."""
        measured = run_timed(argv, volume.mountpoint, Path(f"{stem}.stdout"),
                             Path(f"{stem}.stderr"), self.timeout, env=env)
        if measured.returncode not in invocation.accept_codes:
            self.progress.note(f"the first run before {run.key()} failed (exit "
                               f"{measured.returncode}); see {stem}.stderr")
        Path(f"{stem}.stdout").unlink(missing_ok=True)
        for path in invocation.outputs:
            Path(path).unlink(missing_ok=True)
        volume.unmount()
        volume.cold_mount(MountOptions(run.setup.disk_model(), run.setup.cache, run.setup.hints,
                                       run.setup.data_cache))


def read_runs(path: Path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def completed(path: Path) -> set:
    """(key, repeat) of the runs a results directory already holds (for --resume)."""
    if not path.exists():
        return set()
    return {(row["key"], int(row["repeat"])) for row in read_runs(path)
            if row["status"] in DONE_STATUSES}

