"""`netsched report` over a year of job records: wall and CPU time of the command, as users run it.

    python bench/report_scale.py [--jobs 50000] [--repeats 3] [--no-publish]

Writes a records file of --jobs jobs over 365 days on 32 nodes (netsched.testing.records
.generated_records: the operator's own record builder), then runs `netsched report` on it as a
subprocess --repeats times, with the estimated gain (the shipped model) and without (--no-gain), and
reports the median wall time and CPU time (user + system) of each. Target: 50,000 records in 5 s. The
gain figures of the generated records are no claim: the records are made up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netsched.testing.records import generated_records

sys.path.insert(0, str(Path(__file__).parent))
from report import publish_unless  # noqa: E402

SECTION = "## netsched report over a year of records"


def timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (the child's user + system) of one run."""
    before = os.times()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "netsched", "report", *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = generated_records(Path(tmp) / "records.jsonl", args.jobs)
        size = path.stat().st_size / 1e6
        lines = [SECTION, "", f"`python bench/report_scale.py --jobs {args.jobs} --repeats {args.repeats}` "
                 f"({time.strftime('%Y-%m-%d')}, load average {os.getloadavg()[0]:.1f} at the start): "
                 f"{args.jobs} generated records over 365 days ({size:.0f} MB), `netsched report` as a "
                 "subprocess, medians of the repeats.", "",
                 "| run | wall s | CPU s (user + system) |", "|---|---|---|"]
        for name, extra in (("table with the estimated gain (shipped model)", []),
                            ("-o json with the gain and --plot", ["-o", "json", "--plot", f"{tmp}/gain.svg"]),
                            ("table without the gain (--no-gain)", ["--no-gain"])):
            runs = [timed([str(path), *extra]) for _ in range(args.repeats)]
            lines.append(f"| {name} | {statistics.median(w for w, _ in runs):.2f} | "
                         f"{statistics.median(c for _, c in runs):.2f} |")
    text = "\n".join(lines)
    return publish_unless(args.no_publish, text)


if __name__ == "__main__":
    sys.exit(main())
