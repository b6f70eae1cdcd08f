"""End-to-end scheduling throughput with the real kube-scheduler, with and without netsched's extender.

    python bench/extender_throughput.py [--nodes 1000] [--pods 1000] [--rounds 2]

One dev-cluster with --nodes KWOK GPU nodes (4 zones, 20 nodes per rack). Three extra
kube-scheduler processes, identical but for their extender, each with its own profile:

  plain      no extender
  netsched   the dev-cluster's extender, default flags (shortlist 1)
  all-nodes  a second extender with --shortlist 0 (filter returns every feasible node)

Per run, --pods pods (jobs of 4 replicas x 2 GPUs) are created behind a schedulingGate,
then released together; throughput is pods / (last binding - release). Runs alternate
(A B C C B A ...) so drift hits every configuration alike. Also reports how tightly jobs
were placed (share of jobs whose pods all share one rack). Writes the "Extender
throughput" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import yaml
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from netsched.cluster import processes
from netsched.cluster.binaries import ensure_binaries
from netsched.cluster.devcluster import DevCluster
from netsched.cluster.pods import gpu_pod
from netsched.cluster.scheduler_config import ExtenderSettings, scheduler_config
from netsched.cluster.topology import RACK_LABEL, ZONE_LABEL
from netsched.cluster.wait import poll
from netsched.extender.protocol import JOB_LABEL

sys.path.insert(0, str(Path(__file__).parent))
from report import write_section  # noqa: E402

SECTION = "## Extender throughput"
GATE = "netsched.io/bench"
REPLICAS, GPUS = 4, 2


def start_scheduler(cluster: DevCluster, name: str, extender_url: str | None) -> int:
    """A kube-scheduler with one profile `name`, fast client limits, optional extender."""
    d = cluster.directory
    kubeconfig = d / "kube-scheduler.kubeconfig"
    config = scheduler_config(kubeconfig, ExtenderSettings(extender_url) if extender_url else None)
    config["profiles"] = [{"schedulerName": name}]
    config["clientConnection"].update(qps=5000, burst=5000)
    path = d / f"bench-{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    port = processes.free_port()
    bin_dir = ensure_binaries(quiet=True)
    proc = processes.start(f"bench-{name}", [
        str(bin_dir / "kube-scheduler"), f"--config={path}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}", "--authentication-skip-lookup=true",
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={d / 'certs'}",
    ], cluster.log(f"bench-{name}"), cwd=d)
    processes.wait_until(proc, lambda: _serving(f"https://127.0.0.1:{port}/healthz"), timeout=60)
    return proc.pid


def start_extender(cluster: DevCluster, shortlist: int) -> tuple[int, str]:
    port = processes.free_port()
    proc = processes.start("bench-extender", [
        sys.executable, "-m", "netsched", "extender", f"--kubeconfig={cluster.directory}/netsched-extender"
        ".kubeconfig", "--host=127.0.0.1", f"--port={port}", f"--shortlist={shortlist}",
    ], cluster.log("bench-extender"), cwd=cluster.directory)
    url = f"http://127.0.0.1:{port}"
    processes.wait_until(proc, lambda: _serving(f"{url}/readyz"), timeout=60)
    return proc.pid, url


def _serving(url: str) -> bool:
    try:  # a component's self-signed health endpoint: only checked, never trusted
        with urllib.request.urlopen(url, timeout=2, context=ssl._create_unverified_context()) as resp:
            return resp.status == 200
    except OSError:
        return False


def job_pods(scheduler: str, pods: int) -> list[dict]:
    out = []
    for j in range(pods // REPLICAS):
        for r in range(REPLICAS):
            pod = gpu_pod(f"job{j}-{r}", GPUS, scheduler=scheduler, labels={JOB_LABEL: f"job{j}"},
                          annotations={"netsched.io/job-gpus": str(REPLICAS * GPUS)})
            pod["spec"]["schedulingGates"] = [{"name": GATE}]
            out.append(pod)
    return out


class BindWatch:
    """Records when each pod of a namespace gets a node, from a raw watch (cheap to decode)."""

    def __init__(self, core: client.CoreV1Api, namespace: str):
        self.bound: dict[str, tuple[float, str]] = {}
        self.core, self.namespace = core, namespace
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        resp = self.core.list_namespaced_pod(self.namespace, watch=True, _preload_content=False,
                                             timeout_seconds=600)
        for line in iter_resp_lines(resp):
            obj = orjson.loads(line)["object"]
            node = (obj.get("spec") or {}).get("nodeName")
            name = obj["metadata"]["name"]
            if node and name not in self.bound:
                self.bound[name] = (time.monotonic(), node)
            if self.stop.is_set():
                return


def one_run(cluster: DevCluster, core: client.CoreV1Api, scheduler: str, pods: int, run: int,
            racks: dict[str, str]) -> dict:
    ns = f"bench-{scheduler}-{run}"
    core.create_namespace({"metadata": {"name": ns}})
    poll(lambda: core.read_namespaced_service_account("default", ns), 60, f"the default SA in {ns}")
    specs = job_pods(scheduler, pods)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: core.create_namespaced_pod(ns, p), specs))
    watch = BindWatch(core, ns)
    time.sleep(1)  # let the watch start before release
    release = time.monotonic()
    ungate = [{"op": "remove", "path": "/spec/schedulingGates"}]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: core.patch_namespaced_pod(p["metadata"]["name"], ns, ungate), specs))
    released = time.monotonic() - release
    poll(lambda: len(watch.bound) >= pods, 600, f"{pods} pods of {ns} to be bound", interval=0.2)
    watch.stop.set()
    last = max(t for t, _ in watch.bound.values())
    result = {"scheduler": scheduler, "pods_per_s": pods / (last - release), "release_s": released,
              "last_s": last - release,
              "one_rack": one_rack_share(watch.bound, racks)}
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    poll(lambda: not core.list_namespaced_pod(ns, limit=1).items, 600, f"pods of {ns} to go", interval=1)
    core.delete_namespace(ns)
    return result


def one_rack_share(bound: dict[str, tuple[float, str]], racks: dict[str, str]) -> float:
    jobs = defaultdict(set)
    for pod, (_, node) in bound.items():
        jobs[pod.rsplit("-", 1)[0]].add(racks[node])
    return sum(len(r) == 1 for r in jobs.values()) / len(jobs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    order = ["plain", "netsched", "all-nodes"]
    with tempfile.TemporaryDirectory() as d:
        cluster = DevCluster(directory=Path(d), nodes=args.nodes, zones=4,
                             racks_per_zone=max(1, args.nodes // 80),
                             progress=lambda m: print(m, file=sys.stderr))
        cluster.up()
        pids = []
        try:
            core = client.CoreV1Api(cluster.api_client())
            nodes = core.list_node().items
            racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in nodes}
            zones = len({n.metadata.labels[ZONE_LABEL] for n in nodes})
            ext_pid, all_url = start_extender(cluster, shortlist=0)
            pids.append(ext_pid)
            urls = {"plain": None, "netsched": cluster.extender_url, "all-nodes": all_url}
            pids += [start_scheduler(cluster, name, url) for name, url in urls.items()]
            runs = []
            for rnd in range(args.rounds):
                for name in order if rnd % 2 == 0 else reversed(order):
                    runs.append(one_run(cluster, core, name, args.pods, rnd, racks))
                    r = runs[-1]
                    print(f"round {rnd + 1} {name}: {r['pods_per_s']:.1f} pods/s (gates removed in "
                          f"{r['release_s']:.1f} s, last bound at {r['last_s']:.1f} s), "
                          f"{r['one_rack']:.0%} of jobs in one rack", file=sys.stderr)
        finally:
            for pid in pids:
                processes.stop(pid)
            cluster.down(quiet=True)
    section = report(args, runs, len(set(racks.values())), zones)
    print(section)
    write_section(SECTION, section)
    return 0


def report(args: argparse.Namespace, runs: list[dict], racks: int, zones: int) -> str:
    by = defaultdict(list)
    for r in runs:
        by[r["scheduler"]].append(r)
    base = statistics.median(r["pods_per_s"] for r in by["plain"])
    rows = []
    for name, text in (("plain", "no extender"), ("netsched", "netsched extender, default (shortlist 1)"),
                       ("all-nodes", "netsched extender, `--shortlist 0` (every feasible node back)")):
        rates = [r["pods_per_s"] for r in by[name]]
        releases = ", ".join(f"{r['release_s']:.1f}" for r in by[name])
        med = statistics.median(rates)
        rows.append(f"| {text} | {', '.join(f'{x:.0f}' for x in rates)} | {med / base:.2f} | "
                    f"{statistics.median(r['one_rack'] for r in by[name]):.0%} | "
                    f"{releases} |")
    return "\n".join([
        SECTION, "",
        f"Command: `python bench/extender_throughput.py --nodes {args.nodes} --pods {args.pods} "
        f"--rounds {args.rounds}` ({time.strftime('%Y-%m-%d')}, 2 cores shared by everything).",
        "",
        f"Real kube-scheduler v1.34.10, {args.nodes} KWOK nodes x 8 GPUs in {zones} zones / {racks} racks, "
        f"{args.pods} pods per run ({args.pods // REPLICAS} jobs of {REPLICAS} x {GPUS} GPUs) released "
        "together from a schedulingGate; pods/s = pods / (last binding - release). Each configuration "
        "is its own kube-scheduler process (client QPS 5000, percentageOfNodesToScore 100); runs "
        "alternate A B C C B A. Explanation events were on (one extra Event write per pod).",
        "",
        "| configuration | pods/s per run | ratio to no extender (medians) | jobs in one rack | "
        "gates removed in (s) |",
        "|---|---|---|---|---|",
        *rows, "",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
