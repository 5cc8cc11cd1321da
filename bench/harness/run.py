#!/usr/bin/env python3
"""tipfs benchmark harness: the experiments of SpecHint (Chang & Gibson, OSDI 1999) on tipfs,
reproduced and extended (issue 6). One command measures Figure 3 (run time per workload and
variant, with a native baseline), Figure 4 (overhead with hints ignored), Figure 6 (processor/
disk speed ratio sweep), a disk-count sweep (Table 8) and a Gap (G) sweep, with the per-subsystem
breakdown of every run, and writes CSVs, gnuplot PNGs and a Markdown summary beside the paper's
numbers into bench/results/<timestamp>/. See bench/README.md.

  bench/harness/run.py --quick                 # every figure on tiny data, a few minutes
  bench/harness/run.py                         # the full set (hours; see bench/README.md)
  bench/harness/run.py --figures fig3 --workloads agrep,gnuld --repeats 3
  bench/harness/run.py --resume bench/results/20260101-120000
  bench/harness/run.py --report bench/results/20260101-120000   # tables and plots again

Needs root (page-cache drops, FUSE mounts) and the built programs (--build-dir, default build).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

from tipfsbench import plots, report  # noqa: E402
from tipfsbench.datasets import SCALES, DataSets  # noqa: E402
from tipfsbench.execute import Progress, Runner, completed  # noqa: E402
from tipfsbench.plan import FIGURES, Options, Plan  # noqa: E402
from tipfsbench.system import (  # noqa: E402
    REPO, HarnessError, Tools, VolumeSet, check_prerequisites, describe_build, load_average)
from tipfsbench.workloads import EXTRA_VARIANTS, OVERHEAD_GOAL, WORKLOADS  # noqa: E402

DEFAULTS = {
    "repeats": 5, "sweep_repeats": 3, "sweep_fraction": 0.25, "scale": "default",
    "ratios": "1,2,3,4,6", "disk_counts": "1,2,4,10", "gaps": "0,100,profile,500,1000",
    "timeout": 3600.0,
}
QUICK = {
    "repeats": 1, "sweep_repeats": 1, "sweep_fraction": 1.0, "scale": "tiny",
    "ratios": "1,2", "disk_counts": "1,4", "gaps": "0,profile", "timeout": 600.0,
}


def _list(text: str) -> list:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Defaults of the full set: " + ", ".join(f"--{k.replace('_', '-')} {v}"
                                                        for k, v in DEFAULTS.items())
               + ". --quick: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
               + " (flags given explicitly win).")
    p.add_argument("--quick", action="store_true", help="every figure on tiny data (smoke use)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help="comma list of " + ", ".join(WORKLOADS) + " (default: all)")
    p.add_argument("--figures", default=",".join(FIGURES),
                   help="comma list of " + ", ".join(FIGURES) + " (default: all)")
    p.add_argument("--variants", default="",
                   help="extra variants for Figure 3: " + ", ".join(EXTRA_VARIANTS))
    p.add_argument("--repeats", type=int, help="runs per (workload, variant) in Figures 3 and 4")
    p.add_argument("--sweep-repeats", type=int, help="runs per point of the sweeps")
    p.add_argument("--sweep-fraction", type=float,
                   help="share of each workload's work done at each sweep point (files, objects, "
                        "slices, samples); 1 = all of it")
    p.add_argument("--disks", type=int, default=4,
                   help="disks of Figures 3, 4, 6 and the gap sweep")
    p.add_argument("--profile", default="hp-c2247",
                   help="--disk-model base spec (a profile and keys, not slowdown or G)")
    p.add_argument("--cache-size", default="12M", help="daemon cache (the paper's 12 MB)")
    p.add_argument("--data-cache", default="direct", choices=["direct", "kernel"],
                   help="direct: the daemon's cache is the only cache, as TIP's was (default)")
    p.add_argument("--ratios", help="Figure 6 processor/disk speed ratios (slowdown)")
    p.add_argument("--disk-counts", help="disk-count sweep")
    p.add_argument("--gaps", help="Gap sweep: G in ns per byte; 'profile' = the profile's own")
    p.add_argument("--fig4-manual", action="store_true",
                   help="Figure 4 also runs the manual variant with hints ignored")
    p.add_argument("--sweep-real", action="store_true",
                   help="the sweeps also run the real programs (grep, tre-agrep, ld)")
    p.add_argument("--scale", choices=sorted(SCALES), help="data-set size")
    p.add_argument("--seed", type=int, default=1, help="generator seed")
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build"))
    p.add_argument("--results-dir", help="default bench/results/<timestamp>")
    p.add_argument("--data-root", default=os.environ.get("TIPFS_BENCH_DATA",
                                                         "/var/tmp/tipfs-bench/data"),
                   help="where generated data sets are cached (outside any volume)")
    p.add_argument("--work-root", default=os.environ.get("TIPFS_BENCH_TMP", "/var/tmp/tipfs-bench"),
                   help="where the volumes' backing directories are made (removed at exit)")
    p.add_argument("--keep-volumes", action="store_true", help="leave the backing directories")
    p.add_argument("--timeout", type=float, help="seconds before a run is killed")
    p.add_argument("--progress", default="auto", choices=["auto", "tty", "line", "none"])
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="print the runs and exit")
    p.add_argument("--resume", metavar="DIR", help="continue an interrupted set in DIR")
    p.add_argument("--report", metavar="DIR", help="only redo DIR's tables, summary and plots")
    args = p.parse_args(argv)
    preset = QUICK if args.quick else DEFAULTS
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def make_options(args: argparse.Namespace) -> Options:
    workloads = _list(args.workloads)
    figures = _list(args.figures)
    variants = _list(args.variants)
    for w in workloads:
        if w not in WORKLOADS:
            raise HarnessError(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    for f in figures:
        if f not in FIGURES:
            raise HarnessError(f"unknown figure {f!r}; known: {', '.join(FIGURES)}")
    for v in variants:
        if v not in EXTRA_VARIANTS:
            raise HarnessError(f"unknown extra variant {v!r}; known: {', '.join(EXTRA_VARIANTS)}")
    keys = {item.partition("=")[0] for item in args.profile.split(",")[1:]}
    if "slowdown" in keys and "fig6" in figures:
        raise HarnessError("--profile sets slowdown, which Figure 6 sweeps: leave it out")
    if keys & {"G", "bw"} and "gap" in figures:
        raise HarnessError("--profile sets G or bw, which the gap sweep sweeps: leave it out "
                           "(or drop the gap figure)")
    if args.repeats < 1 or args.sweep_repeats < 1 or not 0 < args.sweep_fraction <= 1:
        raise HarnessError("--repeats and --sweep-repeats must be >= 1, --sweep-fraction in (0, 1]")
    gaps = [None if g == "profile" else float(g) for g in _list(args.gaps)]
    return Options(
        workloads=workloads, figures=figures, variants=variants, repeats=args.repeats,
        sweep_repeats=args.sweep_repeats, sweep_fraction=args.sweep_fraction, disks=args.disks,
        profile=args.profile, cache=args.cache_size, data_cache=args.data_cache,
        ratios=[float(r) for r in _list(args.ratios)],
        disk_counts=[int(n) for n in _list(args.disk_counts)], gaps=gaps,
        fig4_manual=args.fig4_manual, sweep_real=args.sweep_real)


def machine() -> str:
    return f"{platform.node()}, {os.cpu_count()} CPUs, Linux {platform.release()}"


def write_report(results_dir: Path, no_plots: bool) -> list:
    """Tables, summary.md and plots from what RESULTS_DIR holds; returns problems to print."""
    config = json.loads((results_dir / "config.json").read_text(encoding="utf-8"))
    results = report.Results(results_dir)
    report.write_all(results)
    loads = [float(r["load_before"]) for r in results.rows if r["load_before"]]
    context = {
        "started": config["started"], "machine": config["machine"],
        "load": (f"{min(loads):.1f}-{max(loads):.1f} over the runs" if loads
                 else f"{config['load_at_start']:.1f} at the start"),
        "scale": config["args"]["scale"], "seed": config["args"]["seed"], "git": config["git"],
        "max_load": max(loads) if loads else None, "cpus": os.cpu_count(),
    }
    (results_dir / "summary.md").write_text(report.summary_markdown(results, context),
                                            encoding="utf-8")
    if no_plots:
        return []
    machine_state = "quiet" if report.measured_quietly(context) else "shared, loaded"
    o = results.plan["options"]
    subtitle = (f"base: {o['disks']} disks {o['profile']}, cache {o['cache']}, {o['data_cache']}, "
                f"cold; measured on a {machine_state} machine ({config['started']})")
    _, problems = plots.draw_all(results_dir, set(o["figures"]), subtitle, OVERHEAD_GOAL)
    return problems


def main(argv: list) -> int:
    args = parse_args(argv)
    if args.report:
        problems = write_report(Path(args.report), args.no_plots)
        for problem in problems:
            print(f"plot: {problem}", file=sys.stderr)
        print(f"summary: {Path(args.report) / 'summary.md'}")
        return 1 if problems else 0
    if args.resume:
        results_dir = Path(args.resume)
        saved = json.loads((results_dir / "config.json").read_text(encoding="utf-8"))["args"]
        for name in ("progress", "timeout", "build_dir", "keep_volumes", "no_plots", "dry_run"):
            saved[name] = getattr(args, name)
        args = argparse.Namespace(**{**vars(args), **saved, "resume": args.resume})
    options = make_options(args)
    plan = Plan(options)
    done = completed(Path(args.resume) / "runs.csv") if args.resume else set()
    schedule = plan.schedule(done)
    if args.dry_run:
        for run, repeat in schedule:
            print(f"{run.key()} repeat {repeat + 1}")
        print(f"{len(schedule)} runs")
        return 0
    check_prerequisites(not args.no_plots)
    tools = Tools.find(args.build_dir)
    if args.resume:
        results_dir = Path(args.resume)
    else:
        results_dir = Path(args.results_dir) if args.results_dir else (
            REPO / "bench" / "results" / time.strftime("%Y%m%d-%H%M%S"))
        results_dir.mkdir(parents=True, exist_ok=False)
        config = {"args": vars(args), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                  "machine": machine(), "load_at_start": load_average(),
                  "git": describe_build(tools.build)}
        (results_dir / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (results_dir / "plan.json").write_text(json.dumps(plan.to_json(), indent=1), encoding="utf-8")

    progress = Progress(len(schedule), args.progress)
    progress.note(f"results: {results_dir} ({len(schedule)} runs to do)")
    kinds = {WORKLOADS[w].kind for w in options.workloads}
    data = DataSets(tools, Path(args.data_root), SCALES[args.scale], args.seed, sorted(kinds),
                    progress.note)
    work_root = Path(args.work_root)
    work_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=work_root))
    (scratch / "out").mkdir()
    volumes = VolumeSet(tools, scratch, data.copy_into)

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    status = 0
    try:
        data.generate()
        runner = Runner(tools, data, volumes, results_dir, scratch / "out", args.timeout, progress)
        for i, (run, repeat) in enumerate(schedule):
            progress.show(run, repeat, plan.repeats[run.key()], schedule[i:])
            runner.measure(run, repeat)
        progress.finish()
    except KeyboardInterrupt:
        progress.finish()
        print(f"interrupted; continue with: {sys.argv[0]} --resume {results_dir}", file=sys.stderr)
        status = 130
    except HarnessError as e:
        progress.finish()
        print(f"error: {e}", file=sys.stderr)
        print(f"what was measured is kept; continue with: {sys.argv[0]} --resume {results_dir}",
              file=sys.stderr)
        status = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the cleanup must not be cut short
        volumes.close(remove=not args.keep_volumes)
        if not args.keep_volumes:
            try:
                (scratch / "out").rmdir()
                scratch.rmdir()
            except OSError:
                pass
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if (results_dir / "runs.csv").exists():
        problems = write_report(results_dir, args.no_plots)
        for problem in problems:
            print(f"plot: {problem}", file=sys.stderr)
        print(f"results: {results_dir}\nsummary: {results_dir / 'summary.md'}")
        final = report.Results(results_dir)
        if status == 0 and (final.failures() or final.disagreeing() or problems):
            status = 2
    return status


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except HarnessError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
