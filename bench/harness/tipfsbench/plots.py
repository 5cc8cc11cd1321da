"""gnuplot PNGs of the figure CSVs. Each figure gets its data file(s) and its script under
plots/ (kept, so a figure can be restyled and redrawn with `gnuplot plots/NAME.gp`) and NAME.png
beside the CSVs.
"""

from __future__ import annotations

import csv
import math
import subprocess
from pathlib import Path

from .plan import FIGURE_TITLES

COLORS = {"native": "#7f7f7f", "original": "#1f77b4", "speculating": "#d62728",
          "speculating-wait": "#ff7f0e", "manual": "#2ca02c"}
SUBSYSTEM_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                    "#e377c2", "#bcbd22", "#17becf", "#dddddd"]
HEADER = ('set terminal pngcairo noenhanced size {w},{h} font ",10"\nset output "{png}"\n'
          'set datafile missing "NaN"\n')


def _read(path: Path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _num(text: str) -> str:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return "NaN"
    return "NaN" if math.isnan(value) else f"{value:g}"


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def _layout(n: int) -> tuple:
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    return math.ceil(n / cols), cols


def _gnuplot(script: Path) -> None:
    done = subprocess.run(["gnuplot", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"gnuplot {script} failed: {done.stderr.strip()}")


def figure3(results: Path, plots: Path, subtitle: str) -> Path:
    rows = _read(results / "fig3.csv")
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    variants = [v for v in COLORS if any(r["variant"] == v for r in rows)]
    table = {(r["workload"], r["variant"]): r for r in rows}
    dat = plots / "fig3.dat"
    with open(dat, "w", encoding="utf-8") as f:
        f.write("# workload then per variant (" + " ".join(variants) + "): median min max, "
                "then the same relative to the original's median\n")
        for w in workloads:
            cells, relative = [], []
            base = table.get((w, "original"), {}).get("median_s")
            for v in variants:
                r = table.get((w, v), {})
                values = [_num(r.get(c, "")) for c in ("median_s", "min_s", "max_s")]
                cells += values
                relative += [_num(str(float(x) / float(base))) if x != "NaN" and base else "NaN"
                             for x in values]
            f.write(" ".join([_quote(w)] + cells + relative) + "\n")
    png = results / "fig3.png"
    script = plots / "fig3.gp"
    n = len(variants)
    abs_plot = ", ".join(
        f'"{dat}" using {2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i}{":xtic(1)" if i == 0 else ""} '
        f'title "{v}{" (real timing)" if v == "native" else ""}" lc rgb "{COLORS[v]}"'
        for i, v in enumerate(variants))
    rel_plot = ", ".join(
        f'"{dat}" using {2 + 3 * (n + i)}:{3 + 3 * (n + i)}:{4 + 3 * (n + i)}'
        f'{":xtic(1)" if i == 0 else ""} title "{v}" lc rgb "{COLORS[v]}"'
        for i, v in enumerate(variants))
    script.write_text(HEADER.format(w=1400, h=560, png=png) + f"""
set multiplot layout 1,2 title "{FIGURE_TITLES['fig3']}\\n{subtitle}"
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top left
set xtics rotate by -30
set logscale y
set ylabel "elapsed time, s (median; bars: min-max)"
set title "run time"
plot {abs_plot}
unset logscale y
set yrange [0:*]
set ylabel "relative to the original"
set title "relative to the original (native: real timing, no emulated disks)"
plot {rel_plot}, 1 with lines dt 2 lc rgb "black" notitle
unset multiplot
""", encoding="utf-8")
    _gnuplot(script)
    return png


def figure4(results: Path, plots: Path, subtitle: str, goal: float) -> Path:
    rows = [r for r in _read(results / "fig4.csv") if r["variant"] != "original"]
    variants = [v for v in COLORS if any(r["variant"] == v for r in rows)]
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    table = {(r["workload"], r["variant"]): r for r in rows}
    dat = plots / "fig4.dat"
    with open(dat, "w", encoding="utf-8") as f:
        for w in workloads:
            cells = []
            for v in variants:
                r = table.get((w, v), {})
                base = r.get("original_median_s")
                for c in ("median_s", "min_s", "max_s"):
                    x = _num(r.get(c, ""))
                    percent = math.nan
                    if x != "NaN" and base:
                        percent = (float(x) / float(base) - 1) * 100
                    cells.append(_num(str(percent)))
            f.write(" ".join([_quote(w)] + cells) + "\n")
    png = results / "fig4.png"
    script = plots / "fig4.gp"
    body = ", ".join(f'"{dat}" using {2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i}'
                     f'{":xtic(1)" if i == 0 else ""} title "{v}, hints ignored" '
                     f'lc rgb "{COLORS[v]}"' for i, v in enumerate(variants))
    script.write_text(HEADER.format(w=900, h=520, png=png) + f"""
set title "{FIGURE_TITLES['fig4']}\\n{subtitle}"
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.8 border -1
set grid ytics
set ylabel "% slower than the original's median (bars: min and max)"
set key top left
set xzeroaxis lt -1
plot {body}, \\
     {(goal - 1) * 100:g} with lines dt 2 lc rgb "#d62728" title "goal {(goal - 1) * 100:g} %"
""", encoding="utf-8")
    _gnuplot(script)
    return png


def sweep(results: Path, plots: Path, figure: str, x_column: str, x_label: str, subtitle: str,
          logx: bool = False) -> Path:
    rows = _read(results / f"{figure}.csv")
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    panels = []
    for w in workloads:
        curves = []
        for v in [v for v in COLORS if any(r["workload"] == w and r["variant"] == v for r in rows)]:
            dat = plots / f"{figure}-{w}-{v}.dat"
            with open(dat, "w", encoding="utf-8") as f:
                for r in rows:
                    if r["workload"] == w and r["variant"] == v:
                        f.write(" ".join(_num(r[c]) for c in (x_column, "median_s", "min_s",
                                                               "max_s")) + "\n")
            curves.append(f'"{dat}" using 1:2:3:4 with yerrorlines lw 2 pt 7 '
                          f'lc rgb "{COLORS[v]}" title "{v}"')
        panels.append(f'set title "{w}"\nplot ' + ", ".join(curves))
    if figure == "fig6":
        curves = []
        for i, w in enumerate(workloads):
            dat = plots / f"fig6-{w}-spec-over-manual.dat"
            with open(dat, "w", encoding="utf-8") as f:
                for r in rows:
                    if r["workload"] == w and r["variant"] == "speculating":
                        f.write(f"{_num(r[x_column])} {_num(r['speculating_over_manual'])}\n")
            curves.append(f'"{dat}" using 1:2 with linespoints lw 2 pt {5 + i} title "{w}"')
        panels.append('set title "speculating / manual (goal <= 1.05 for agrep, xdataslice)"\n'
                      'set ylabel "ratio"\nset yrange [0:*]\n'
                      "plot " + ", ".join(curves) + ', 1.05 with lines dt 2 lc rgb "black" '
                      'title "1.05"')
    rows_n, cols = _layout(len(panels))
    png = results / f"{figure}.png"
    script = plots / f"{figure}.gp"
    ylabel = "time scaled back by the ratio, s" if figure == "fig6" else "elapsed time, s"
    title = f"{FIGURE_TITLES[figure]}; medians, bars: min-max\\n{subtitle}"
    script.write_text(HEADER.format(w=560 * cols, h=380 * rows_n + 60, png=png) + f"""
set multiplot layout {rows_n},{cols} title "{title}"
set grid
set key below horizontal
{"set logscale x 2" if logx else ""}
set offsets {"0" if figure == "gap" else "graph 0.05"}, graph 0.05, 0, 0
set xlabel "{x_label}"
set ylabel "{ylabel}"
set yrange [0:*]
{chr(10).join(panels)}
unset multiplot
""", encoding="utf-8")
    _gnuplot(script)
    return png


def breakdown(results: Path, plots: Path, subtitle: str) -> Path:
    rows = _read(results / "breakdown.csv")
    groups = list(dict.fromkeys((r["workload"], r["variant"]) for r in rows))
    subsystems = list(dict.fromkeys(r["subsystem"] for r in rows))
    if "idle" in subsystems:  # idle last, on top
        subsystems = [s for s in subsystems if s != "idle"] + ["idle"]
    share = {(r["workload"], r["variant"], r["subsystem"]): r["median_share"] for r in rows}
    dat = plots / "breakdown.dat"
    with open(dat, "w", encoding="utf-8") as f:
        f.write("# label " + " ".join(subsystems) + "\n")
        for w, v in groups:
            f.write(_quote(f"{w}/{v}") + " " + " ".join(
                _num(str(100 * float(share.get((w, v, s), "0") or 0))) for s in subsystems) + "\n")
    png = results / "breakdown.png"
    script = plots / "breakdown.gp"
    title = (f"{FIGURE_TITLES['breakdown']}: share of the daemon's capacity (wall time x CPUs)"
             f"\\n{subtitle}")
    body = ", ".join(f'"{dat}" using {i + 2}{":xtic(1)" if i == 0 else ""} title "{s}" '
                     f'lc rgb "{SUBSYSTEM_COLORS[i % len(SUBSYSTEM_COLORS)]}"'
                     for i, s in enumerate(subsystems))
    script.write_text(HEADER.format(w=max(900, 90 * len(groups) + 300), h=600, png=png) + f"""
set title "{title}"
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border -1
set boxwidth 0.75
set key outside right
set yrange [0:100]
set ylabel "% of capacity (median over the repeats)"
set xtics rotate by -40
plot {body}
""", encoding="utf-8")
    _gnuplot(script)
    return png


def draw_all(results: Path, figures: set, subtitle: str, overhead_goal: float) -> list:
    plots = results / "plots"
    plots.mkdir(exist_ok=True)
    made, problems = [], []
    jobs = []
    if "fig3" in figures:
        jobs += [lambda: figure3(results, plots, subtitle),
                 lambda: breakdown(results, plots, subtitle)]
    if "fig4" in figures:
        jobs.append(lambda: figure4(results, plots, subtitle, overhead_goal))
    if "fig6" in figures:
        jobs.append(lambda: sweep(results, plots, "fig6", "ratio", "processor/disk speed ratio",
                                  subtitle))
    if "disks" in figures:
        jobs.append(lambda: sweep(results, plots, "disks", "disks", "disks", subtitle, logx=True))
    if "gap" in figures:
        jobs.append(lambda: sweep(results, plots, "gap", "gap_ns_per_byte",
                                  "G, ns per byte (1000/G = MB/s per disk)", subtitle))
    for job in jobs:
        try:
            made.append(job())
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            problems.append(str(e))
    return made, problems
