#!/usr/bin/python3
"""The Python loader benchmark: PyTorch DataLoader epochs over a 4-disk tipfs array, plain
RandomSampler against tipfs.DisclosingSampler, cold, medians of --repeats runs, ratios from one
run of this script. Prints the table bench/loader/README.md quotes, and writes runs.csv,
summary.md and samples_per_second.png (gnuplot) to --results-dir.

    sudo bench/loader/run.py                     # everything (about 40 minutes, quiet machine)
    sudo bench/loader/run.py --quick             # 256 small samples, 1 repeat, hp-c2247 only

Data sets (tipfs-bench-gen loader): "loader", 4,096 samples, 64 MiB (the harness's loader set);
"large", 1,024 samples of 256 KiB. Each run: a fresh daemon (--cache-size 12M, the default
kernel data cache, --disk-model PROFILE) after dropping the page cache, then one epoch
(bench/loader/loader_epoch.py, batch 32, shuffled with one seed) in a fresh python3. Rows per
data set and profile: plain with num_workers 0, 2, 4, 8; disclosing with 0, 2, 4 (default
budget) and with 0 and an 8 MiB budget. Per run it records the epoch's time, the daemon's peak
RSS (VmHWM), and from .tipfs/stats.json the share of demand-read blocks that were disclosed and
the disclosed blocks never read.
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "harness"))
from tipfsbench.system import (HarnessError, MountOptions, Tools, Volume,  # noqa: E402
                               load_average, run_checked)

EPOCH = Path(__file__).with_name("loader_epoch.py")
SETS = {"loader": ("--samples", "4096", "--total", "64M", "--classes", "16"),
        "large": ("--samples", "1024", "--total", "256M", "--classes", "16")}
QUICK_SETS = {"loader": ("--samples", "256", "--total", "4M", "--classes", "4"),
              "large": ("--samples", "64", "--total", "16M", "--classes", "4")}


@dataclass(frozen=True)
class Config:
    variant: str  # plain | disclosing
    workers: int
    budget: str = ""  # "" for the default; a size such as 8M

    @property
    def name(self) -> str:
        budget = f" budget {self.budget}" if self.budget else ""
        return f"{self.variant} w{self.workers}{budget}"


def configs(workers: list) -> list:
    rows = [Config("plain", w) for w in workers] + [Config("plain", 8)]
    rows += [Config("disclosing", w) for w in workers] + [Config("disclosing", 0, "8M")]
    return list(dict.fromkeys(rows))


def size_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def daemon_memory(volume: Volume) -> dict:
    """The mounted daemon's peak and current RSS in MiB (VmHWM, VmRSS of /proc/PID/status)."""
    try:
        pid = int((volume.disks[0] / "tipfs.pid").read_text().split()[0])
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, ValueError, IndexError):
        return {}
    out = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def one_run(volume: Volume, options: MountOptions, data: Path, config: Config,
            python: str) -> dict:
    volume.cold_mount(options)
    try:
        argv = [python, str(EPOCH), "--dir", str(volume.mountpoint / data.name),
                "--variant", config.variant, "--workers", str(config.workers)]
        if config.budget:
            argv += ["--budget", str(size_bytes(config.budget))]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise HarnessError(f"{config.name} failed: {done.stderr.strip()[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        stats = json.loads((volume.mountpoint / ".tipfs" / "stats.json").read_text())
        result.update(daemon_memory(volume))
    finally:
        volume.unmount()
    demand = stats["demand.hits"] + stats["demand.misses"]
    consumed = stats["hints.manual.consumed"]
    never_read = stats["hints.cancelled"] + stats["hints.skipped"]
    result["demand_blocks"] = demand
    result["disclosed_read_pct"] = 100.0 * consumed / demand if demand else 0.0
    result["never_read_pct"] = (100.0 * never_read / (consumed + never_read)
                                if consumed + never_read else 0.0)
    disclosed = result["sampler"].get("disclosed_bytes", 0)
    result["never_read_bytes_pct"] = (100.0 * result["sampler"]["cancelled_bytes"] / disclosed
                                      if disclosed else 0.0)
    result["stall_s"] = stats["demand.stall.nanos"] / 1e9
    return result


def throughput_curve(run: dict, points: int = 10) -> list:
    """(fraction of the epoch's time, samples/s in that tenth of it) from one run's timeline:
    the samples whose batch arrived in each tenth of the epoch's duration (worker processes
    deliver batches in bursts, so bins of time, not of batches)."""
    times = run["timeline"]
    if not times or times[-1] <= 0:
        return []
    per_batch = run["samples"] / len(times)
    width = times[-1] / points
    counts = [0] * points
    for t in times:
        counts[min(points - 1, int(t / width))] += 1
    return [((k + 0.5) / points, counts[k] * per_batch / width) for k in range(points)]


def plot(results: dict, out: Path) -> None:
    """samples/s over the epoch, one panel per data set and profile: plain and disclosing with
    num_workers 0 and 4 (the median run of each)."""
    if shutil.which("gnuplot") is None:
        print("run.py: gnuplot missing, no plot", file=sys.stderr)
        return
    data_dir = out.parent / "curves"
    data_dir.mkdir(exist_ok=True)
    panels: dict = {}
    for (dataset, profile, config), runs in results.items():
        if config.budget or config.workers not in (0, 4):
            continue
        median_run = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
        path = data_dir / f"{dataset}_{profile}_{config.variant}_w{config.workers}.dat"
        path.write_text("".join(f"{x:.3f} {y:.1f}\n" for x, y in throughput_curve(median_run)))
        panels.setdefault((dataset, profile), []).append((path, config.name))
    if not panels:
        return
    columns = 2
    rows = (len(panels) + columns - 1) // columns
    script = [f"set terminal png size 1200,{420 * rows}", f"set output '{out}'",
              f"set multiplot layout {rows},{columns} title 'PyTorch DataLoader over 4 emulated "
              "disks, 12 MiB cache, cold: samples/s over the epoch (tenths, median run)'",
              "set xlabel 'fraction of the epoch (time)'", "set ylabel 'samples/s'", "set yrange [0:*]",
              "set key top left", "set grid"]
    for (dataset, profile), series in sorted(panels.items()):
        lines = ", ".join(f"'{p}' using 1:2 with linespoints title '{t}'"
                          for p, t in sorted(series, key=lambda s: s[1]))
        script += [f"set title '{dataset}, {profile}'", f"plot {lines}"]
    script.append("unset multiplot")
    subprocess.run(["gnuplot", "-e", "; ".join(script)], check=True)


def median(values):
    return statistics.median(values) if values else float("nan")


def table(results: dict, datasets, profiles, rows) -> str:
    out = ["| data set | profile | run | median s | samples/s | vs plain same workers | "
           "disclosed blocks read % | disclosed never read % | daemon peak RSS MiB |",
           "|---|---|---|---|---|---|---|---|---|"]
    for dataset in datasets:
        for profile in profiles:
            for config in rows:
                runs = results.get((dataset, profile, config), [])
                if not runs:
                    continue
                seconds = median([r["seconds"] for r in runs])
                plain = results.get((dataset, profile, Config("plain", config.workers)), [])
                ratio = seconds / median([r["seconds"] for r in plain]) if plain else None
                ratio_text = f"{ratio:.2f}" if ratio and config.variant != "plain" else "-"
                hinted = config.variant == "disclosing"
                out.append(
                    f"| {dataset} | {profile} | {config.name} | {seconds:.2f} | "
                    f"{runs[0]['samples'] / seconds:.0f} | {ratio_text} | "
                    + (f"{median([r['disclosed_read_pct'] for r in runs]):.1f} | "
                       f"{median([r['never_read_pct'] for r in runs]):.1f} | " if hinted
                       else "- | - | ")
                    + f"{median([r.get('VmHWM', float('nan')) for r in runs]):.1f} |")
    return "\n".join(out)


def goals(results: dict, datasets, profiles) -> str:
    def med(dataset, profile, config):
        runs = results.get((dataset, profile, config), [])
        return median([r["seconds"] for r in runs]) if runs else float("nan")

    out = ["| data set | profile | disclosing/plain w0 (goal <= 0.30) | disclosing/plain w4 "
           "(goal <= 0.70) | disclosing w0 / plain w8 (goal <= 1.0) |", "|---|---|---|---|---|"]
    for dataset in datasets:
        for profile in profiles:
            d0 = med(dataset, profile, Config("disclosing", 0))
            out.append(f"| {dataset} | {profile} | "
                       f"{d0 / med(dataset, profile, Config('plain', 0)):.2f} | "
                       f"{med(dataset, profile, Config('disclosing', 4)) / med(dataset, profile, Config('plain', 4)):.2f} | "
                       f"{d0 / med(dataset, profile, Config('plain', 8)):.2f} |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build", help="where tipfs was built")
    parser.add_argument("--sets", default="loader,large", help="data sets: loader,large")
    parser.add_argument("--profiles", default="hp-c2247,ssd", help="--disk-model profiles")
    parser.add_argument("--workers", default="0,2,4", help="num_workers to compare")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--results-dir", default=str(REPO / "bench" / "results" / "loader"))
    parser.add_argument("--scratch", default="/var/tmp",
                        help="where the scratch volume goes (removed at the end)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the python3 with torch that runs the epochs")
    parser.add_argument("--quick", action="store_true",
                        help="small data sets, 1 repeat, hp-c2247 only (a smoke test)")
    parser.add_argument("--replot", metavar="DIR",
                        help="redo summary.md and the plot from DIR/runs.json, run nothing")
    args = parser.parse_args()
    if args.replot:
        return report(Path(args.replot), *load_runs(Path(args.replot) / "runs.json"))
    if os.geteuid() != 0:
        parser.error("run as root: each run drops the page cache and mounts FUSE")
    datasets = args.sets.split(",")
    if unknown := [d for d in datasets if d not in SETS]:
        parser.error(f"unknown data set {unknown[0]!r} (known: {', '.join(SETS)})")
    profiles = ["hp-c2247"] if args.quick else args.profiles.split(",")
    repeats = 1 if args.quick else args.repeats
    workers = [int(w) for w in args.workers.split(",")]
    build = Path(args.build_dir)
    build = build if build.is_absolute() else REPO / build
    tools = Tools(tipfs=build / "cli" / "tipfs", gen=build / "bench/workloads/tipfs-bench-gen",
                  agrep=Path(), gnuld=Path(), xdataslice=Path(), loader=Path(),
                  libtipspec=Path(), build=build)
    for program in (tools.tipfs, tools.gen):
        if not program.exists():
            parser.error(f"missing {program}: cmake --build {build} --target tipfs tipfs-bench-gen")
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="tipfs-loaderbench-", dir=args.scratch))
    rows = configs(workers)
    results: dict = {}
    started = time.time()
    loads = [load_average()]
    volume = None
    try:
        volume = Volume(tools, scratch / "vol", 4)
        volume.mount(MountOptions(disk_model=""))
        for dataset in datasets:
            spec = (QUICK_SETS if args.quick else SETS)[dataset]
            run_checked([tools.gen, "loader", "--dir", volume.mountpoint / dataset, *spec],
                        f"generating the {dataset} data set")
        volume.unmount()
        with open(results_dir / "runs.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["dataset", "profile", "run", "repeat", "seconds", "samples",
                             "digest", "disclosed_read_pct", "never_read_pct",
                             "never_read_bytes_pct", "stall_s", "vmhwm_mib", "load1"])
            for repeat in range(repeats):  # interleaved: each repeat runs every row once
                for dataset in datasets:
                    for profile in profiles:
                        for config in rows:
                            r = one_run(volume, MountOptions(disk_model=profile, data_cache="kernel"),
                                        Path(dataset), config, args.python)
                            results.setdefault((dataset, profile, config), []).append(r)
                            loads.append(load_average())
                            writer.writerow([dataset, profile, config.name, repeat, r["seconds"],
                                             r["samples"], r["digest"],
                                             round(r["disclosed_read_pct"], 2),
                                             round(r["never_read_pct"], 2),
                                             round(r["never_read_bytes_pct"], 2),
                                             round(r["stall_s"], 3), r.get("VmHWM"), loads[-1]])
                            f.flush()
                            print(f"{dataset} {profile} {config.name} #{repeat}: "
                                  f"{r['seconds']:.2f} s", file=sys.stderr)
    finally:
        if volume is not None:
            volume.force_unmount()
        shutil.rmtree(scratch, ignore_errors=True)
    for (dataset, profile, config), runs in results.items():
        digests = {r["digest"] for r in runs} | {
            r["digest"] for r in results.get((dataset, profile, Config("plain", 0)), [])}
        if len(digests) != 1:
            raise HarnessError(f"{dataset} {profile} {config.name}: samples differ between runs")
    note = (f"# {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}, "
            f"{os.cpu_count()} CPUs, load average {min(loads):.1f}-{max(loads):.1f} during the "
            f"runs, {repeats} repeat(s), medians")
    (results_dir / "runs.json").write_text(json.dumps(dict(
        note=note, datasets=datasets, profiles=profiles, rows=[vars(c) for c in rows],
        results=[dict(dataset=d, profile=p, config=vars(c), runs=r)
                 for (d, p, c), r in results.items()])))
    return report(results_dir, note, datasets, profiles, rows, results)


def load_runs(path: Path) -> tuple:
    saved = json.loads(path.read_text())
    results = {(e["dataset"], e["profile"], Config(**e["config"])): e["runs"]
               for e in saved["results"]}
    return (saved["note"], saved["datasets"], saved["profiles"],
            [Config(**c) for c in saved["rows"]], results)


def report(results_dir: Path, note: str, datasets, profiles, rows, results: dict) -> int:
    summary = (note + "\n\n" + table(results, datasets, profiles, rows) + "\n\n"
               + goals(results, datasets, profiles) + "\n")
    (results_dir / "summary.md").write_text(summary)
    plot(results, results_dir / "samples_per_second.png")
    print(summary)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        print(f"run.py: {e}", file=sys.stderr)
        sys.exit(1)
