"""The extender's latency as a user's cluster sees it: its own process, a real apiserver, KWOK heartbeats.

    python bench/live_latency.py [--nodes 1000,5000] [--requests 150] [--holds 2]

Per size, one dev-cluster with that many KWOK GPU nodes (4 zones, 20 nodes per rack), about one
bound GPU pod per 5 nodes and 3 bound pods of the job being scheduled, and netsched's extender
started as `netsched extender` in its own process, first with the topology heuristic, then
with --model (models/default). Sequential filter then prioritize requests over one keep-alive
connection name every node, as kube-scheduler sends them (nodeCacheCapable).

Each scorer is measured in holds that alternate (live, quiet, quiet, live, ...):
  live   KWOK renews every node's lease and reports node status, as kubelets do
  quiet  KWOK and kube-controller-manager are paused (SIGSTOP) for the hold, so nothing
         heartbeats; a hold lasts seconds, well inside the 40 s lease, so no node turns NotReady
Prints p50 / p99 / max per verb and condition, p99 per hold, and the live/quiet ratio, and
rewrites the "Extender latency, live cluster" section of docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from kubernetes import client

from netsched.api.labels import JOB_LABEL
from netsched.devcluster import processes
from netsched.devcluster.devcluster import EXTENDER, DevCluster
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.rbac import EXTENDER_ROLE, EXTENDER_RULES, grant
from netsched.devcluster.wait import poll

sys.path.insert(0, str(Path(__file__).parent))
from extender_latency import JOB, measure_http, request_bodies  # noqa: E402
from extender_throughput import _serving, cpu_by_process  # noqa: E402
from report import exit_on_sigterm, publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Extender latency, live cluster"
MODEL = ROOT / "models/default"
WARMUP = 30


def populate(core: client.CoreV1Api, names: list[str], seed: int) -> None:
    """Background GPU pods on a fifth of the nodes, and the scheduled job's 3 peers, bound directly."""
    rng = random.Random(seed)
    pods = [bound(gpu_pod(f"bg-{i}", rng.choice((1, 2, 4))), node)
            for i, node in enumerate(rng.sample(names, len(names) // 5))]
    pods += [bound(gpu_pod(f"{JOB}-{k}", 2, labels={JOB_LABEL: JOB}), node)
             for k, node in enumerate(rng.sample(names, 3))]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: core.create_namespaced_pod("default", p), pods))
    poll(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod("default").items)
         >= len(pods), 300, f"{len(pods)} pods Running (kwok)", interval=1)


def bound(pod: dict, node: str) -> dict:
    pod["spec"]["nodeName"] = node
    return pod


def start_extender(cluster: DevCluster, model: Path | None) -> tuple[processes.Process, int]:
    port, metrics_port = processes.free_port(), processes.free_port()
    argv = [*cluster.extender_argv(port, metrics_port), "--no-explain-events"]
    if model is not None:
        argv.append(f"--model={model}")
    proc = processes.start("bench-extender", argv, cluster.log("bench-extender"), cwd=cluster.directory)
    try:
        processes.wait_until(proc, lambda: _serving(f"http://127.0.0.1:{metrics_port}/readyz"), timeout=120,
                             port=metrics_port)
    except BaseException:
        processes.stop(proc.pid)
        raise
    return proc, port


@contextmanager
def paused(pids: list[int]):
    """No heartbeats while inside: the processes that make them are stopped, then continued."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def hold(proc: processes.Process, port: int, bodies: list[bytes], count: int,
         control_plane: dict[str, int]) -> dict:
    """`count` filter + prioritize pairs: seconds of each, and the extender's CPU seconds per pair
    (when that stays put while latency grows, requests wait for the CPU, not for the extender); and
    the cores the control plane's processes kept busy meanwhile."""
    extender = {str(pid): pid for pid in (proc.pid, *processes.children(proc.pid))}  # with its watch process
    before, load = sum(cpu_by_process(extender).values()), os.getloadavg()[0]
    others, started = sum(cpu_by_process(control_plane).values()), time.monotonic()
    times = measure_http(port, bodies, count, WARMUP, pid=proc.pid)
    cores = (sum(cpu_by_process(control_plane).values()) - others) / (time.monotonic() - started)
    cpu = (sum(cpu_by_process(extender).values()) - before) / (count + WARMUP // 2 + 1)
    return {**times, "cpu": cpu, "load": (load + os.getloadavg()[0]) / 2, "control_plane": cores}


@contextmanager
def live_cluster(n: int, seed: int) -> Iterator[tuple[DevCluster, dict, list[bytes]]]:
    """A dev-cluster of n heartbeating KWOK nodes with the bound pods of `populate`, for extenders that
    start_extender starts: the cluster, its state (the components' pids) and filter bodies naming every
    node."""
    with tempfile.TemporaryDirectory() as d:
        cluster = DevCluster(directory=Path(d), nodes=n, zones=4, racks_per_zone=max(n // 80, 1),
                             run_extender=False, run_operator=False, extender_mtls=False,  # as measured
                             progress=lambda m: print(m, file=sys.stderr))
        state = cluster.up()
        try:
            core = client.CoreV1Api(cluster.api_client())
            names = [node.metadata.name for node in core.list_node().items]
            populate(core, names, seed)
            grant(cluster.api_client(), EXTENDER_ROLE, EXTENDER_RULES, EXTENDER)  # as `up` does for its own
            yield cluster, state, request_bodies(names, seed)
        finally:
            cluster.down(quiet=True)


def measure_size(n: int, requests: int, holds: int, seed: int) -> list[dict]:
    rows = []
    with live_cluster(n, seed) as (cluster, state, bodies):
        heartbeats = [state["components"][c]["pid"] for c in ("kwok", "kube-controller-manager")]
        control_plane = {name: info["pid"] for name, info in state["components"].items()}
        for scorer, model in (("heuristic", None), ("model", MODEL)):
            proc, port = start_extender(cluster, model)
            try:
                order = ["live", "quiet", "quiet", "live"] * ((holds + 1) // 2)
                per_hold = []
                for k, condition in enumerate(order[:2 * holds]):
                    if condition == "quiet":
                        with paused(heartbeats):
                            times = hold(proc, port, bodies, requests, control_plane)
                    else:
                        times = hold(proc, port, bodies, requests, control_plane)
                    per_hold.append((condition, times))
                    print(f"{n} nodes, {scorer}, hold {k + 1} ({condition}): filter p99 "
                          f"{np.percentile(times['filter'], 99) * 1000:.1f} ms", file=sys.stderr)
                rows.append({"nodes": n, "scorer": scorer, "holds": per_hold})
            finally:
                processes.stop(proc.pid)
    return rows


def stats(samples: np.ndarray) -> str:
    p50, p99 = np.percentile(samples, [50, 99]) * 1000
    return f"{p50:.2f} / {p99:.2f} / {samples.max() * 1000:.1f}"


def _by_condition(rows: list[dict]) -> Iterator[tuple[dict, str, list[dict]]]:
    """Each row's holds of one condition together: (row, "live" or "quiet", its holds' timings)."""
    for row in rows:
        for condition in ("live", "quiet"):
            yield row, condition, [t for c, t in row["holds"] if c == condition]


def report(args: argparse.Namespace, rows: list[dict]) -> str:
    lines = [SECTION, "",
             f"Command: `python bench/live_latency.py --nodes {args.nodes} --requests {args.requests} "
             f"--holds {args.holds}` ({time.strftime('%Y-%m-%d')}, 2 cores shared with other work). "
             "The extender runs as `netsched extender` in its own process against a real kube-apiserver "
             "whose KWOK nodes heartbeat (live) or are paused (quiet); sequential filter then prioritize "
             "naming every node, one keep-alive connection; holds alternate live, quiet, quiet, live.", "",
             "p50 / p99 / max in ms, all holds of a condition together; the extender's CPU (with its watch "
             "process) per filter + prioritize pair; the cores kept busy meanwhile by the control plane "
             "(kube-apiserver, etcd, KWOK, kube-controller-manager, kube-scheduler) of the 2 the machine "
             "has; and its load average:",
             "",
             "| nodes | scorer | condition | pairs | filter | prioritize | CPU ms per pair | control plane, "
             "cores | load |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for row, condition, held in _by_condition(rows):
        filt, prio = (np.concatenate([t[verb] for t in held]) for verb in ("filter", "prioritize"))
        lines.append(f"| {row['nodes']:,} | {row['scorer']} | {condition} | {len(filt)} | "
                     f"{stats(filt)} | {stats(prio)} | {np.mean([t['cpu'] for t in held]) * 1000:.2f} | "
                     f"{np.mean([t['control_plane'] for t in held]):.2f} | "
                     f"{np.mean([t['load'] for t in held]):.1f} |")
    lines += ["", "Where the slowest filters' time went: the filters at or above their condition's p95, "
              "mean ms of their wall time, of the extender's request thread on a CPU, and of that thread "
              "waiting in the run queue for a CPU (/proc schedstat); the rest is neither, e.g. waiting for "
              "Python's interpreter lock, or the client and the loopback:", "",
              "| nodes | scorer | condition | filters | wall | on a CPU | waiting for a CPU | rest |",
              "|---:|---|---|---:|---:|---:|---:|---:|"]
    for row, condition, held in _by_condition(rows):
        wall = np.concatenate([t["filter"] for t in held])
        thread = np.concatenate([t["filter_thread"] for t in held])
        slow = wall >= np.percentile(wall, 95)
        ran, queued = thread[slow].mean(axis=0) * 1000
        lines.append(f"| {row['nodes']:,} | {row['scorer']} | {condition} | {slow.sum()} | "
                     f"{wall[slow].mean() * 1000:.2f} | {ran:.2f} | {queued:.2f} | "
                     f"{wall[slow].mean() * 1000 - ran - queued:.2f} |")
    lines += ["", "Filter p99 per hold (ms), and live over quiet (the mean p99 of each condition's holds):",
              "", "| nodes | scorer | holds | live / quiet |", "|---:|---|---|---:|"]
    for row in rows:
        p99 = [(c, np.percentile(t["filter"], 99) * 1000) for c, t in row["holds"]]
        live = np.mean([v for c, v in p99 if c == "live"])
        quiet = np.mean([v for c, v in p99 if c == "quiet"])
        lines.append(f"| {row['nodes']:,} | {row['scorer']} | " + ", ".join(f"{c} {v:.1f}" for c, v in p99)
                     + f" | {live / quiet:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,5000")
    parser.add_argument("--requests", type=int, default=150, help="filter + prioritize pairs per hold")
    parser.add_argument("--holds", type=int, default=2, help="holds of each condition per scorer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="print, do not write the history")
    args = parser.parse_args()
    exit_on_sigterm()
    rows = [row for n in args.nodes.split(",") for row in measure_size(int(n), args.requests, args.holds,
                                                                        args.seed)]
    section = report(args, rows)
    if args.no_write:
        print(section)
    else:
        publish(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
