"""`netsched train` beside a CPU hog, on one fitting thread and on more: does a busy machine stall it?

    nice -n 15 python bench/train_beside_hog.py [--jobs 600] [--threads 1,2] [--timeout 600]

Simulates `--jobs` jobs (seed 3), starts `yes > /dev/null` at the bench's own nice level (one
process keeping one CPU busy, as another pod on the node would) and times `netsched train` on them
with each `--threads` in turn, then the same without the hog. A run that has not finished after
`--timeout` seconds is stopped and reported as such. Rewrites "Training beside a CPU hog" in
docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from report import exit_on_sigterm, publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Training beside a CPU hog"


def netsched(*argv: str, timeout: float | None = None) -> float | None:
    """Seconds the command took, None if it ran past `timeout`; the environment without OMP_NUM_THREADS,
    so `--threads` alone decides."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "netsched", *argv], env=env, check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - started


def main() -> int:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--threads", default="1,2", help="thread counts to time, comma-separated")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a run is stopped")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    rows = ["| CPU hog | --threads | seconds | load (1 min) after |", "|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        data = f"{tmp}/sim.csv"
        netsched("simulate", "--jobs", str(args.jobs), "--seed", "3", "--out", data)
        for hog in (True, False):
            for n in threads:
                yes = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if hog else None
                try:
                    took = netsched("train", data, "--out", f"{tmp}/models", "--name", f"t{n}", "--force",
                                    "--threads", str(n), timeout=args.timeout)
                finally:
                    if yes is not None:
                        yes.kill()
                        yes.wait()
                shown = f"{took:.1f}" if took is not None else f"not done after {args.timeout:.0f}"
                rows.append(f"| {'yes' if hog else 'none'} | {n} | {shown} | {os.getloadavg()[0]:.1f} |")
                print(rows[-1], file=sys.stderr, flush=True)
    command = " ".join(["nice -n 15 python bench/train_beside_hog.py", *sys.argv[1:]])
    publish("\n".join([
        SECTION, "",
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, shared with other "
        f"work). `netsched train` on {args.jobs} simulated jobs (seed 3), every kind cross-validated, beside "
        "`yes > /dev/null` at the same nice level and without it, by its `--threads` (OpenMP and BLAS "
        "threads of the fits; OMP_NUM_THREADS unset). With two threads on two cores each of gradient "
        "boosting's short parallel loops waits at its end for the thread the kernel has put behind the "
        "hog; the default is one thread (netsched/training/threads.py).", "", *rows, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
