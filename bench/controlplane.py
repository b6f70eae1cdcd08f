"""Measure the dev-cluster: build cache, start-up time, memory, pod latency.

    python bench/controlplane.py [--runs 3] [--nodes 8]

Prints a table and rewrites the "Control plane" section of docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client

from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll

sys.path.insert(0, str(Path(__file__).parent))
from report import exit_on_sigterm, publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Control plane"


def warm_build_seconds() -> float:
    t0 = time.monotonic()
    subprocess.run(["bash", str(ROOT / "hack/controlplane/build.sh")], check=True, capture_output=True)
    return time.monotonic() - t0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pod_latency(core: client.CoreV1Api) -> tuple[float, float]:
    """Seconds from create to Running, and from Running to Succeeded for a 2 s pod."""
    t0 = time.monotonic()
    core.create_namespaced_pod("default", gpu_pod("bench", 1, duration="2s"))
    poll(lambda: core.read_namespaced_pod("bench", "default").status.phase == "Running", 60, "Running",
         interval=0.02)
    t1 = time.monotonic()
    poll(lambda: core.read_namespaced_pod("bench", "default").status.phase == "Succeeded", 60,
         "Succeeded", interval=0.02)
    return t1 - t0, time.monotonic() - t1


def one_run(nodes: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        cluster = DevCluster(directory=Path(d), nodes=nodes, progress=lambda _: None)
        state = cluster.up()
        try:
            rss = {name: rss_mib(c["pid"]) for name, c in state["components"].items()}
            running, succeeded = pod_latency(client.CoreV1Api(cluster.api_client()))
        finally:
            cluster.down(quiet=True)
    return {"start": state["start_seconds"], "rss": rss, "running": running, "succeeded": succeeded}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=8)
    args = parser.parse_args()
    exit_on_sigterm()

    warm = warm_build_seconds()
    runs = []
    for i in range(args.runs):
        runs.append(one_run(args.nodes))
        print(f"run {i + 1}/{args.runs}: up in {runs[-1]['start']} s", file=sys.stderr)
    rss = {name: statistics.median(r["rss"][name] for r in runs) for name in runs[0]["rss"]}
    lines = [
        SECTION,
        "",
        f"Command: `python bench/controlplane.py --runs {args.runs} --nodes {args.nodes}` "
        f"({time.strftime('%Y-%m-%d')}, 2 cores).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| warm `hack/controlplane/build.sh` (cache hit) | {warm:.2f} s |",
        f"| `dev-cluster up`, {args.nodes} GPU nodes Ready, per run | "
        + ", ".join(f"{r['start']:.1f}" for r in runs) + " s |",
        f"| GPU pod created → Running (median) | {statistics.median(r['running'] for r in runs):.2f} s |",
        f"| 2 s pod Running → Succeeded (median) | "
        f"{statistics.median(r['succeeded'] for r in runs):.2f} s |",
        f"| RSS just after start, total (median) | {sum(rss.values()):.0f} MiB |",
        *(f"| RSS {name} | {mib:.0f} MiB |" for name, mib in rss.items()),
        "",
    ]
    section = "\n".join(lines)
    publish(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
