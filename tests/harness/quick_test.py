#!/usr/bin/env python3
"""Integration test of the benchmark harness (label "integration": it mounts tipfs): runs
`bench/harness/run.py --quick` with one repeat on tiny data in a scratch directory and checks
what a user relies on, never timings: every run finished, every variant printed what the original
printed (native included), the manual variants' hints covered their reads, each figure's CSV,
PNG and the summary exist and are well-formed, every mounted run left its stats and breakdown,
the report can be redone from the files alone, and no mount or volume is left behind.

  tests/harness/quick_test.py --build-dir build     # exit 77 (skipped) without root or FUSE
"""

import argparse
import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "harness"))
sys.dont_write_bytecode = True
from tipfsbench.report import breakdown_entries  # noqa: E402
RUN = REPO / "bench" / "harness" / "run.py"
BUILD = "build"
FIGURE_CSVS = {
    "fig3.csv": ["workload", "variant", "runs", "median_s", "min_s", "max_s", "ratio_to_original"],
    "fig4.csv": ["workload", "variant", "runs", "median_s", "min_s", "max_s", "overhead"],
    "fig6.csv": ["workload", "variant", "ratio", "runs", "median_s", "raw_median_s"],
    "disks.csv": ["workload", "variant", "disks", "runs", "median_s"],
    "gap.csv": ["workload", "variant", "gap_ns_per_byte", "runs", "median_s"],
    "breakdown.csv": ["workload", "variant", "subsystem", "median_share", "median_seconds"],
}
SYNTHETIC = ["agrep", "gnuld", "xdataslice", "loader"]
REAL = ["grep", "tre-agrep", "sha256sum", "tar", "ld", "gcc", "json"]


def read_csv(path: Path) -> list:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def mounts_under(root: Path) -> list:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(str(root))]


class QuickSetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="tipfs-harness-test-", dir="/var/tmp"))
        cls.results = cls.tmp / "results"
        cls.work = cls.tmp / "work"
        argv = [sys.executable, str(RUN), "--quick", "--repeats", "1", "--sweep-repeats", "1",
                "--build-dir", BUILD, "--results-dir", str(cls.results),
                "--work-root", str(cls.work), "--data-root", str(cls.tmp / "data"),
                "--progress", "line", "--variants", "speculating-2nd"]
        cls.done = subprocess.run(argv, capture_output=True, text=True, timeout=1500, check=False)
        cls.runs = read_csv(cls.results / "runs.csv") if (cls.results / "runs.csv").exists() else []

    @classmethod
    def tearDownClass(cls):
        leftover = mounts_under(cls.tmp)
        for mountpoint in leftover:  # only if the harness failed to; the test then fails too
            subprocess.run(["umount", "-l", mountpoint], check=False)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_harness_succeeds_and_every_run_finished(self):
        self.assertEqual(self.done.returncode, 0, self.done.stderr[-4000:])
        self.assertTrue(self.runs)
        bad = [(r["key"], r["status"]) for r in self.runs if r["status"] != "ok"]
        self.assertEqual(bad, [])
        # The progress line named runs as they went.
        self.assertIn(f"[{len(self.runs)}/{len(self.runs)}]", self.done.stderr)

    def test_every_variant_prints_what_the_original_prints(self):
        by_output: dict = {}
        for r in self.runs:
            by_output.setdefault((r["workload"], r["fraction"]), set()).add(r["output_sha256"])
        for key, digests in by_output.items():
            self.assertEqual(len(digests), 1, f"{key}: outputs differ across variants: {digests}")
        variants = {(r["workload"], r["variant"]) for r in self.runs}
        for w in SYNTHETIC:
            for v in ("native", "original", "manual", "speculating"):
                self.assertIn((w, v), variants)
        for w in REAL:
            for v in ("native", "original", "speculating"):
                self.assertIn((w, v), variants)
        for w in SYNTHETIC + REAL:
            self.assertIn((w, "speculating-2nd"), variants)

    def test_counters_of_each_run(self):
        for r in self.runs:
            self.assertGreater(float(r["elapsed_s"]), 0, r["key"])
            if r["native"] == "1":
                continue
            stem = self.results / "runs" / f"{int(r['run_id']):05d}-{r['workload']}-{r['variant']}"
            stats = json.loads(Path(f"{stem}.stats.json").read_text())
            self.assertEqual(stats["disk_model"], r["disk_model"])
            breakdown = {name for name, _, _ in
                         breakdown_entries(Path(f"{stem}.breakdown.json").read_text())}
            self.assertTrue({"fuse_dispatch", "disk_wait", "idle"} <= breakdown, breakdown)
            self.assertGreater(int(r["blocks_read"]), 0, r["key"])
            if r["variant"] == "original":
                self.assertEqual(float(r["coverage"]), 0.0, r["key"])
                self.assertEqual(int(r["hint_calls"]), 0, r["key"])
            if r["variant"] == "manual":
                # Every read of the manual variants is disclosed (xdataslice's volume header,
                # read before any slice is planned, is not): coverage is the counters' plumbing.
                self.assertGreaterEqual(float(r["coverage"]), 0.9, r["key"])
                self.assertEqual(int(r["hints_refused"]), 0, r["key"])
            if r["variant"].startswith("speculating"):
                self.assertNotEqual(r["spec_forks"], "", r["key"])  # libtipspec wrote its counters
            if r["variant"] == "speculating-2nd":
                # The untimed first run before it left its output aside, and succeeded.
                first = Path(f"{stem}.first.stderr")
                self.assertTrue(first.exists(), r["key"])
                # Its counters are its own, not the sum with the first run's (libtipspec appends
                # to the stats file): one process wrote them, as for the first-run variant.
                pids = [line for line in Path(f"{stem}.tipspec").read_text().splitlines()
                        if line.startswith("tipspec.pid ")]
                first_run = [x for x in self.runs if x["workload"] == r["workload"]
                             and x["variant"] == "speculating" and x["hints"] == r["hints"]
                             and x["fraction"] == r["fraction"] and x["disks"] == r["disks"]
                             and x["disk_model"] == r["disk_model"]]
                if first_run:
                    stem1 = (self.results / "runs" /
                             f"{int(first_run[0]['run_id']):05d}-{r['workload']}-speculating")
                    pids1 = [line for line in Path(f"{stem1}.tipspec").read_text().splitlines()
                             if line.startswith("tipspec.pid ")]
                    self.assertEqual(len(pids), len(pids1), r["key"])
            if r["hints"] == "ignore":
                self.assertEqual(int(r["hints_prefetched"]), 0, r["key"])
            if r["slowdown"] not in ("", "1"):
                self.assertIn(f"slowdown={r['slowdown']}", r["disk_model"])
                self.assertAlmostEqual(float(r["scaled_s"]),
                                       float(r["elapsed_s"]) / float(r["slowdown"]), places=3)

    def test_figure_csvs_are_well_formed(self):
        for name, columns in FIGURE_CSVS.items():
            rows = read_csv(self.results / name)
            self.assertTrue(rows, name)
            for column in columns:
                self.assertIn(column, rows[0], name)
            for row in rows:
                for column in columns[3:]:
                    if row[column] != "":
                        float(row[column])
        fig3 = read_csv(self.results / "fig3.csv")
        self.assertEqual(len(fig3), 5 * len(SYNTHETIC) + 4 * len(REAL))
        for row in fig3:
            self.assertEqual(row["outputs_agree"], "yes", row)
            if row["variant"] == "original":
                self.assertEqual(row["ratio_to_original"], "1.000")
        self.assertEqual({r["ratio"] for r in read_csv(self.results / "fig6.csv")}, {"1", "2"})
        self.assertEqual({r["disks"] for r in read_csv(self.results / "disks.csv")}, {"1", "4"})
        self.assertEqual(len({r["gap_ns_per_byte"] for r in read_csv(self.results / "gap.csv")}), 2)

    def test_plots_are_pngs(self):
        for name in ("fig3", "fig4", "fig6", "disks", "gap", "breakdown"):
            data = (self.results / f"{name}.png").read_bytes()
            self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", name)
            self.assertEqual(data[12:16], b"IHDR", name)
            width, height = struct.unpack(">II", data[16:24])
            self.assertGreater(width, 300, name)
            self.assertGreater(height, 200, name)

    def test_summary(self):
        text = (self.results / "summary.md").read_text()
        self.assertRegex(text, r"\*\*Measured on a (shared, loaded|quiet) machine\*\*")
        for heading in ("## Figure 3 / Table 7 beside the paper", "### Hint coverage",
                        "### Speculation, first and second run", "## Figure 4", "## Figure 6",
                        "## Disk-count sweep", "## Gap"):
            self.assertIn(heading, text)
        for w in SYNTHETIC[:3]:
            self.assertRegex(text, rf"\n\| {w} \| [0-9.]+ s \|")
        self.assertIn("0 printed something other than the original, 0 failed", text)

    def test_report_can_be_redone_from_the_files(self):
        before = (self.results / "fig3.csv").read_text()
        (self.results / "fig3.csv").unlink()
        done = subprocess.run([sys.executable, str(RUN), "--report", str(self.results),
                               "--no-plots"], capture_output=True, text=True, check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual((self.results / "fig3.csv").read_text(), before)

    def test_resume_of_a_finished_set_runs_nothing(self):
        done = subprocess.run([sys.executable, str(RUN), "--resume", str(self.results),
                               "--dry-run", "--build-dir", BUILD], capture_output=True, text=True,
                              check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip().splitlines()[-1], "0 runs")

    def test_nothing_left_behind(self):
        self.assertEqual(mounts_under(self.tmp), [])
        self.assertEqual(list(self.work.iterdir()) if self.work.exists() else [], [])


def main() -> int:
    global BUILD
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build"))
    args, rest = parser.parse_known_args()
    BUILD = args.build_dir
    if os.geteuid() != 0 or not Path("/dev/fuse").exists():
        print("SKIP: needs root and /dev/fuse (page-cache drops, FUSE mounts)")
        return 77
    if shutil.which("gnuplot") is None:
        print("SKIP: gnuplot is missing")
        return 77
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
