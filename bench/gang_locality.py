"""Gang locality with the real kube-scheduler and extender: how many jobs end up on one node.

    python bench/gang_locality.py [--nodes 1000] [--jobs 250] --json after.json
    PYTHONPATH=/tmp/before python bench/gang_locality.py ... --json before.json   # older code
    python bench/gang_locality.py --report before.json after.json

One dev-cluster (its kube-scheduler, extender and operator; 4 zones, 20 nodes per rack) per
run. Two workloads, one after the other, each in its own namespace: --jobs jobs of 4 x 2 GPUs,
each followed by 4 single-GPU pods,

  gated    GPUJobs: the operator creates each job's pods gang-gated and releases them together
  ungated  pods labelled `netsched.io/job` with no size hint, created one at a time (replica,
           single, replica, single, ...) as another controller would

8 client threads create job after job (each job's own items in order), so jobs and singles
interleave as they reach the scheduler. Reports the share of jobs whose 4 pods share one node
and one rack, and pods bound per second (every pod of the workload over the span from the first
binding to the last; client creation pace bounds it, so compare runs of one harness only).
Nothing finishes during a run: the cluster ends 3/8 full, so a node with room for a whole job
exists at every submission. The older code runs from a `git worktree` through PYTHONPATH;
`--report` writes the "Gang locality" section of docs/benchmarks-history.md from two runs' JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kubernetes import client

import netsched
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL, RACK_LABEL
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob

sys.path.insert(0, str(Path(__file__).parent))
from extender_throughput import BindWatch  # noqa: E402
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Gang locality"
REPLICAS, GPUS, SINGLES = 4, 2, 4
MODES = ("gated", "ungated")


def create_job(core: client.CoreV1Api, jobs: client.CustomObjectsApi, ns: str, mode: str, j: int) -> None:
    """One job and its singles, in order: the job (gated) or replica, single, replica, ... (ungated)."""
    singles = [gpu_pod(f"s{j}-{i}", 1) for i in range(SINGLES)]
    if mode == "gated":
        job = make_gpujob(f"g{j}", replicas=REPLICAS, gpus=GPUS, manifest=True)
        jobs.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, job)
        items = singles
    else:
        replicas = [gpu_pod(f"u{j}-{r}", GPUS, labels={JOB_LABEL: f"u{j}"}) for r in range(REPLICAS)]
        items = [p for pair in zip(replicas, singles, strict=True) for p in pair]
    for pod in items:
        core.create_namespaced_pod(ns, pod)


def one_workload(cluster: DevCluster, mode: str, jobs_n: int, racks: dict[str, str]) -> dict:
    core = client.CoreV1Api(cluster.api_client())
    jobs = client.CustomObjectsApi(cluster.api_client())
    ns = f"locality-{mode}"
    core.create_namespace({"metadata": {"name": ns}})
    poll(lambda: core.read_namespaced_service_account("default", ns), 60, f"the default SA in {ns}")
    pods = jobs_n * (REPLICAS + SINGLES)
    watch = BindWatch(core, ns)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda j: create_job(core, jobs, ns, mode, j), range(jobs_n)))
    poll(lambda: len(watch.bound) >= pods, 900, f"{pods} pods of {ns} to be bound", interval=0.5)
    watch.stop.set()
    by_job: dict[str, set[str]] = defaultdict(set)
    for p in core.list_namespaced_pod(ns, label_selector=JOB_LABEL).items:
        by_job[p.metadata.labels[JOB_LABEL]].add(watch.bound[p.metadata.name][1])
    times = sorted(t for t, _ in watch.bound.values())
    result = {"mode": mode, "jobs": len(by_job), "pods": pods,
              "one_node": sum(len(n) == 1 for n in by_job.values()) / len(by_job),
              "one_rack": sum(len({racks[n] for n in nodes}) == 1 for nodes in by_job.values()) / len(by_job),
              "pods_per_s": (pods - 1) / (times[-1] - times[0])}
    jobs.delete_collection_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)  # or the operator recreates
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    core.delete_namespace(ns)
    return result


def run(args: argparse.Namespace) -> None:
    results = []
    with tempfile.TemporaryDirectory() as d:
        cluster = DevCluster(directory=Path(d), nodes=args.nodes, zones=4,
                             racks_per_zone=max(1, args.nodes // 80),
                             progress=lambda m: print(m, file=sys.stderr))
        cluster.up()
        try:
            core = client.CoreV1Api(cluster.api_client())
            racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
            for mode in MODES:
                # each workload gets a cluster as empty as the first one's: the last one's pods must go
                poll(lambda: not [n for n in core.list_namespace().items
                                  if n.metadata.name.startswith("locality-")],
                     900, "the previous workload's namespace to go", interval=2)
                results.append(one_workload(cluster, mode, args.jobs, racks))
                r = results[-1]
                print(f"{mode}: {r['one_node']:.1%} of jobs on one node, {r['one_rack']:.1%} in one rack, "
                      f"{r['pods_per_s']:.1f} pods/s", file=sys.stderr)
        finally:
            cluster.down(quiet=True)
    figures = {"nodes": args.nodes, "jobs": args.jobs, "racks": len(set(racks.values())), "code": code(),
               "results": results}
    Path(args.json).write_text(json.dumps(figures, indent=1))


def code() -> str:
    """The commit of the netsched this run imported (a worktree through PYTHONPATH, or this one)."""
    where = Path(netsched.__file__).resolve().parents[1]
    return subprocess.run(["git", "-C", str(where), "describe", "--always", "--dirty"],
                          capture_output=True, text=True, check=True).stdout.strip()


def report(before_path: str, after_path: str) -> str:
    before, after = (json.loads(Path(p).read_text()) for p in (before_path, after_path))
    rows = []
    for label, doc in (("before", before), ("after", after)):
        for r in doc["results"]:
            rows.append(f"| {label} ({doc['code']}) | {r['mode']} | {r['one_node']:.1%} | "
                        f"{r['one_rack']:.1%} | {r['pods_per_s']:.1f} |")
    return "\n".join([
        SECTION, "",
        f"Command: `python bench/gang_locality.py --nodes {after['nodes']} --jobs {after['jobs']} --json "
        f"after.json`, the same from `git worktree add /tmp/before {before['code']}` under "
        "`PYTHONPATH=/tmp/before` for before, then `python bench/gang_locality.py --report before.json "
        f"after.json` ({time.strftime('%Y-%m-%d')}, 2 cores shared by everything, one run each).", "",
        f"The dev-cluster's own kube-scheduler, extender (default flags) and operator; {after['nodes']} KWOK "
        f"nodes x 8 GPUs in 4 zones / {after['racks']} racks. Per workload {after['jobs']} jobs of "
        f"{REPLICAS} x {GPUS} GPUs, each followed by {SINGLES} single-GPU pods, created by 8 client threads "
        "(gated: GPUJobs, released by the operator's gang gate; ungated: pods labelled `netsched.io/job` "
        "without a size hint, replica and single alternating). Nothing finishes, the cluster ends 3/8 "
        "full: a node with room for a whole job existed at every submission. pods/s: every pod of the "
        "workload over the span from first to last binding, paced by the client's creations.", "",
        "| code | workload | jobs on one node | jobs in one rack | pods/s |",
        "|---|---|---|---|---|",
        *rows, "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=250)
    parser.add_argument("--json", help="write this run's figures here")
    parser.add_argument("--report", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="write docs/benchmarks-history.md's section from two runs' JSON")
    args = parser.parse_args()
    exit_on_sigterm()
    if args.report:
        publish(report(*args.report))
    elif args.json:
        run(args)
    else:
        parser.error("give --json FILE (a run) or --report BEFORE AFTER")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
