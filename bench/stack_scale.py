"""The whole stack at 1,000 / 5,000 / 10,000 KWOK nodes: what each component costs, how the extender
serves, as deployed and on shared cores.

    python bench/stack_scale.py [--nodes 1000,5000,10000] [--pairs 1000] [--pods 1000] [--rounds 2] \
        [--window 60] [--no-write] [--results FILE]

Per size, one dev-cluster: real kube-apiserver, etcd, kube-controller-manager, kube-scheduler with
netsched's extender (`--model models/default`), the GPUJob operator (forecaster and packer on), KWOK
nodes heartbeating in 4 zones of 80-node racks; a fifth of the nodes run bound GPU pods and nodes/100
GPUJobs of 2 x 8 GPUs run through the operator. Then, in each arrangement:

  as deployed  the extender's serving and watch processes on CPU 1, every other process on the
               machine on CPU 0, as if the extender had a node of its own
  shared       every process on both CPUs

it measures
  - over --window seconds of steady state: each process's CPU (cores) and memory (RSS); the API
    server's requests per second from each netsched user (its API Priority and Fairness counters: the
    bench adds one FlowSchema per user, at the priority level those users get anyway); the
    forecaster's and the packer's passes (the operator's histograms);
  - filter and prioritize p99 with the model, heartbeats live: --pairs sequential pairs naming every
    node, as kube-scheduler sends them (bench/live_latency.py's requests), and of each filter the
    extender's own part (its request thread on a CPU or waiting for one; as deployed the client
    waits for CPU 0 with the control plane);
  - throughput: --pods pods (jobs of 4 x 2 GPUs) through a real kube-scheduler with the extender and
    through one without, after one discarded run without, --rounds pairs alternating A B B A
    (bench/extender_throughput.py's runs); each round's ratio divides by that round's run without;
  - `netsched whatif` for a 2 x 8 GPUs job, wall time as a user runs it (its own process), 3 runs; as
    deployed on CPU 1, as if from the user's own machine.

Prints a table per size and the curve (each cost over nodes, relative to the smallest size: 1.00 grows
linearly, above it faster), and rewrites the "Whole stack at scale" section of docs/benchmarks-history.md.
Telemetry agents are not part of it (bench/telemetry_scale.py measures their series and probes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from kubernetes import client

from netsched.api.connect import items
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import RACK_LABEL
from netsched.devcluster import processes
from netsched.devcluster.devcluster import EXTENDER, OPERATOR, DevCluster
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob

sys.path.insert(0, str(Path(__file__).parent))
from extender_latency import request_bodies  # noqa: E402
from extender_throughput import cpu_by_process, one_run  # noqa: E402
from live_latency import MODEL, hold, populate  # noqa: E402
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Whole stack at scale"
NS = "stack-bench"
CONTROL_CPU, EXTENDER_CPU = 0, 1
NETSCHED_USERS = (EXTENDER, OPERATOR)
PASS_METRICS = {"forecaster pass": "netsched_operator_forecast_pass_seconds",
                "packer solve": "netsched_packer_pack_seconds"}


# ---- processes ----------------------------------------------------------------------------------


def pin(pids: list[int], cpus: set[int]) -> None:
    """Every thread of every process in `pids` on `cpus` (threads they start later inherit it)."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError):  # a thread that has ended is left out
                os.sched_setaffinity(int(task.name), cpus)


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def components(state: dict) -> dict[str, int]:
    """Each process by the name the table gives it: the dev-cluster's components and the extender's
    watch process."""
    pids = {name: info["pid"] for name, info in state["components"].items()}
    for child in processes.children(pids[EXTENDER]):
        pids[f"{EXTENDER} watch"] = child
    return pids


def every_process() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


@contextlib.contextmanager
def arranged(name: str, pids: dict[str, int]) -> Iterator[None]:
    """The processes on their CPUs for arrangement `name`. As deployed, the extender has CPU 1 to itself:
    every other process on the machine (the control plane, this bench and what it starts, and anything
    else running here, which inherits CPU 0 when it starts processes) goes to CPU 0, as if the extender
    ran on a node of its own; each process gets its own CPUs back after."""
    before = {}
    if name == "as deployed":
        extender = {p for key, pid in pids.items() if key.startswith(EXTENDER) for p in processes.tree(pid)}
        for pid in every_process():
            with contextlib.suppress(OSError):  # gone, or a kernel thread that stays where it is
                before[pid] = os.sched_getaffinity(pid)
                pin([pid], {EXTENDER_CPU} if pid in extender else {CONTROL_CPU})
    try:
        yield
    finally:
        if before:
            for pid in every_process():  # one started meanwhile inherited CPU 0: it gets both
                pin([pid], before.get(pid, {CONTROL_CPU, EXTENDER_CPU}))


# ---- the API server's view ----------------------------------------------------------------------


def count_by_user(api: client.ApiClient) -> None:
    """One FlowSchema per netsched user, at the priority level it gets anyway, so the API server counts
    its requests apart (apiserver_flowcontrol_dispatched_requests_total{flow_schema=...})."""
    flow = client.FlowcontrolApiserverV1Api(api)
    for user in NETSCHED_USERS:
        flow.create_flow_schema({
            "metadata": {"name": f"bench-{user}"},
            "spec": {"matchingPrecedence": 500, "priorityLevelConfiguration": {"name": "global-default"},
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "clusterScope": True, "namespaces": ["*"]}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})


def metric_sums(text: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`, from Prometheus text."""
    total = 0.0
    want = [f'{k}="{v}"' for k, v in labels.items()]
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in "{ ") and all(w in line for w in want):
            total += float(line.rsplit(" ", 1)[1])
    return total


def apiserver_metrics(api: client.ApiClient) -> str:
    headers = {setting["key"]: setting["value"] for setting in api.configuration.auth_settings().values()}
    return api.call_api("GET", f"{api.configuration.host}/metrics", header_params=headers).read().decode()


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


# ---- one size -----------------------------------------------------------------------------------


def steady(api: client.ApiClient, pids: dict[str, int], operator_metrics: str, window: float) -> dict:
    """Per process cores and MB over `window` seconds; requests/s per netsched user; the passes."""
    def passes() -> dict[str, tuple[float, float]]:
        text = http_text(operator_metrics)
        return {k: (metric_sums(text, f"{m}_sum"), metric_sums(text, f"{m}_count"))
                for k, m in PASS_METRICS.items()}

    def requests() -> dict[str, float]:
        text = apiserver_metrics(api)
        return {u: metric_sums(text, "apiserver_flowcontrol_dispatched_requests_total",
                               flow_schema=f"bench-{u}") for u in NETSCHED_USERS}

    cpu0, req0, pass0, t0 = cpu_by_process(pids), requests(), passes(), time.monotonic()
    rss: dict[str, float] = {}
    while time.monotonic() - t0 < window:
        for name, pid in pids.items():
            rss[name] = max(rss.get(name, 0.0), rss_mb(pid))
        time.sleep(2)
    elapsed = time.monotonic() - t0
    cpu1, req1, pass1 = cpu_by_process(pids), requests(), passes()
    ran = {k: (pass1[k][0] - pass0[k][0], pass1[k][1] - pass0[k][1]) for k in PASS_METRICS}
    return {"cores": {k: (cpu1[k] - cpu0[k]) / elapsed for k in cpu1 if k in cpu0}, "rss": rss,
            "requests": {u: (req1[u] - req0[u]) / elapsed for u in NETSCHED_USERS},
            "passes": {k: (seconds / count if count else float("nan"), count)
                       for k, (seconds, count) in ran.items()}}


def whatif_walls(cluster: DevCluster, d: Path, runs: int, cpus: set[int] | None = None) -> list[float]:
    """`netsched whatif`'s wall time, `runs` times; on `cpus` (None: wherever the OS puts it)."""
    path = d / "whatif-job.json"
    path.write_text(json.dumps(make_gpujob("whatif", replicas=2, gpus=8, manifest=True,
                                           workload={"expectedDurationSeconds": 3600})))
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "netsched", "whatif", "-f", str(path), "-n", NS, "-o", "json",
                        f"--kubeconfig={cluster.kubeconfig}"], capture_output=True, check=True,
                       preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        walls.append(time.perf_counter() - t)
    return walls


def load(cluster: DevCluster, n: int, seed: int) -> None:
    """Bound GPU pods on a fifth of the nodes, and n/100 GPUJobs of 2 x 8 GPUs run by the operator."""
    api = cluster.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    populate(core, [node["metadata"]["name"] for node in items(core.list_node)], seed)
    core.create_namespace({"metadata": {"name": NS}})
    poll(lambda: core.read_namespaced_service_account("default", NS), 60, f"the default SA in {NS}")
    jobs = max(1, n // 100)
    for i in range(jobs):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, make_gpujob(
            f"run-{i}", replicas=2, gpus=8, duration="36000s", manifest=True,
            workload={"expectedDurationSeconds": 36000}))

    def running() -> int:
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)["items"]
        return sum((j.get("status") or {}).get("phase") == "Running" for j in listed)
    poll(lambda: running() == jobs, 1800, f"{jobs} GPUJobs to run", interval=5)


def measure_size(n: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as d:
        # plain HTTP to the extender, as extender_throughput runs it (its kube-scheduler has no client
        # certificate, and the figures so far were measured so)
        cluster = DevCluster(directory=Path(d), nodes=n, zones=4, racks_per_zone=max(1, n // 320),
                             extender_args=(f"--model={MODEL}",), extender_mtls=False,
                             progress=lambda m: print(m, file=sys.stderr))
        state = cluster.up()
        try:
            api = cluster.api_client()
            core = client.CoreV1Api(api)
            count_by_user(api)
            t = time.monotonic()
            load(cluster, n, args.seed)
            print(f"{n} nodes: loaded in {time.monotonic() - t:.0f} s", file=sys.stderr)
            # plain dicts: the client's model classes cost about 10 ms a node
            racks = {node["metadata"]["name"]: node["metadata"]["labels"][RACK_LABEL]
                     for node in items(core.list_node)}
            names = list(racks)
            bodies = request_bodies(names, args.seed)
            pids = components(state)
            control_plane = {k: v for k, v in pids.items() if not k.startswith(EXTENDER)}
            extender = processes_of(state)
            metrics_url = f"http://127.0.0.1:{state['ports']['operator-metrics']}/metrics"
            out: dict = {"nodes": n}
            for k, arrangement in enumerate(args.arrangements):
                with arranged(arrangement, pids):
                    row = steady(api, pids, metrics_url, args.window)
                    timings = hold(extender, int(cluster.extender_url.rsplit(":", 1)[1]), bodies, args.pairs,
                                   control_plane)
                    row["filter_p99"] = float(np.percentile(timings["filter"], 99) * 1000)
                    row["prioritize_p99"] = float(np.percentile(timings["prioritize"], 99) * 1000)
                    # the client runs beside the control plane: what of a filter's wall time was the
                    # extender's own (its request thread on a CPU or waiting for one)
                    own = timings["filter_thread"].sum(axis=1)
                    row["filter_own_p99"] = float(np.percentile(own, 99) * 1000)
                    row["ratios"], row["runs"] = throughput(cluster, core, args, racks, k, pids)
                    # a user runs whatif from a machine of their own, not the control plane's: as
                    # deployed, on the extender's CPU (the extender is idle between scheduling bursts)
                    row["whatif"] = whatif_walls(cluster, Path(d), 3,
                                                 {EXTENDER_CPU} if arrangement == "as deployed" else None)
                out[arrangement] = row
                print(f"{n} nodes, {arrangement}: filter p99 {row['filter_p99']:.1f} ms (the extender's "
                      f"own {row['filter_own_p99']:.1f} ms), prioritize p99 "
                      f"{row['prioritize_p99']:.1f} ms, throughput ratios "
                      f"{ratio_text(row['ratios'])} (pods/s in run order: "
                      f"{', '.join(f'{s}: {v:.1f}' for s, v in row['runs'])}), whatif "
                      f"{statistics.median(row['whatif']):.1f} s, extender "
                      f"{row['rss'][EXTENDER] + row['rss'].get(EXTENDER + ' watch', 0):.0f} MB",
                      file=sys.stderr)
            return out
        finally:
            cluster.down(quiet=True)


def processes_of(state: dict) -> processes.Process:
    """The dev-cluster's extender as live_latency.hold takes it."""
    return processes.Process(EXTENDER, state["components"][EXTENDER]["pid"], Path(os.devnull), None)


def throughput(cluster: DevCluster, core: client.CoreV1Api, args: argparse.Namespace, racks: dict[str, str],
               arrangement: int, pids: dict[str, int]
               ) -> tuple[dict[str, list[float]], list[tuple[str, float]]]:
    """Per configuration with the extender, each round's ratio of its pods/s to the run without, and
    every run's pods/s in the order they ran (an order effect shows there). bench-netsched: each pod
    placed on its own; bench-pinned: each job placed whole (POST /gang) and its pods pinned, as the
    operator releases a gang."""
    every = []
    # The first run of each arrangement was the slowest of its four, whichever scheduler ran it: one
    # discarded run, as extender_throughput has, so that the holds compare warmed runs
    warm = one_run(cluster, core, "bench-plain", None, args.pods, -1 - arrangement, racks, explained=False,
                   pids=pids)["pods_per_s"]
    print(f"warm-up (discarded): {warm:.1f} pods/s", file=sys.stderr)
    ratios: dict[str, list[float]] = {name: [] for name in args.configs}
    for rnd in range(args.rounds):
        own = (cluster.extender_url, cluster.extender_metrics_url)
        order = [("bench-plain", None), *((name, own) for name in args.configs)]
        runs = {}
        for scheduler, url in order if rnd % 2 == 0 else reversed(order):
            run = arrangement * args.rounds + rnd  # each run its own namespace
            runs[scheduler] = one_run(cluster, core, scheduler, url, args.pods, run, racks, explained=False,
                                      pids=pids, pinned=scheduler == "bench-pinned")["pods_per_s"]
            every.append((scheduler, runs[scheduler]))
        for name in args.configs:
            ratios[name].append(runs[name] / runs["bench-plain"])
    return ratios, every


# ---- report -------------------------------------------------------------------------------------

def ratio_text(ratios: dict[str, list[float]] | list[float]) -> str:
    """Per configuration, its ratios per round ("pinned 1.51, 1.40; pod by pod 1.02, 0.98"); a list
    alone (sizes measured before there was more than one configuration) is pod by pod."""
    by = ratios if isinstance(ratios, dict) else {"bench-netsched": ratios}
    words = {"bench-netsched": "pod by pod", "bench-pinned": "pinned"}
    return "; ".join(f"{words.get(k, k)} {', '.join(f'{x:.2f}' for x in v)}" for k, v in by.items())


SHOWN = (EXTENDER, f"{EXTENDER} watch", OPERATOR, "kube-apiserver", "etcd", "kube-scheduler", "kwok",
         "kube-controller-manager")


def report(args: argparse.Namespace, sizes: list[dict]) -> str:
    lines = [SECTION, "",
             f"Command: `python bench/stack_scale.py --nodes {args.nodes} --pairs {args.pairs} "
             f"--pods {args.pods} --rounds {args.rounds} --window {args.window:g} --configs "
             f"{','.join(args.configs)} --arrangements '{','.join(args.arrangements)}'` "
             f"({time.strftime('%Y-%m-%d')}). "
             "As deployed: the extender's serving and watch processes on CPU 1, every other process "
             "on the machine (control plane, operator, bench client, kube-schedulers, other work) on CPU 0, "
             "`netsched whatif` on CPU 1 (a user's own machine); "
             "shared: all on both. The extender's own part of a filter: its request thread's time on a CPU "
             "and in the run queue (/proc schedstat), the rest being the client's and the loopback's. "
             "Throughput: one discarded run without the extender per arrangement, "
             "then runs alternating A B C C B A (A without the extender; B, C: "
             "each job placed whole and its pods pinned, as the operator releases a gang, and each pod on "
             "its own); each ratio divides by its round's run without.", "",
             "| nodes | arrangement | filter / prioritize p99, ms | filter p99, the extender's own, ms | "
             "throughput vs no extender, per round | "
             "whatif median, s | extender MB (serving + watch) | operator MB | netsched API requests/s "
             "(extender, operator) |",
             "|---:|---|---:|---:|---|---:|---:|---:|---|"]
    for s in sizes:
        for arrangement in ("as deployed", "shared"):
            if arrangement not in s:
                continue
            r = s[arrangement]
            lines.append(
                f"| {s['nodes']:,} | {arrangement} | {r['filter_p99']:.1f} / {r['prioritize_p99']:.1f} | "
                + (f"{r['filter_own_p99']:.1f} | " if "filter_own_p99" in r else "– | ") +
                f"{ratio_text(r['ratios'])} | {statistics.median(r['whatif']):.2f} | "
                f"{r['rss'][EXTENDER]:.0f} + {r['rss'].get(EXTENDER + ' watch', 0):.0f} | "
                f"{r['rss'][OPERATOR]:.0f} | "
                + ", ".join(f"{r['requests'][u]:.1f}" for u in NETSCHED_USERS) + " |")
    lines += ["", f"Steady state ({args.window:g} s, shared arrangement), cores and MB of each process, "
              "and the operator's passes (mean seconds, passes in the window):", "",
              "| nodes | " + " | ".join(SHOWN) + " | " + " | ".join(PASS_METRICS) + " |",
              "|---:|" + "---:|" * (len(SHOWN) + len(PASS_METRICS))]
    for s in sizes:
        r = s["shared"]
        cells = [f"{r['cores'].get(p, float('nan')):.2f} / {r['rss'].get(p, 0):.0f}" for p in SHOWN]
        cells += [f"{mean:.2f} s ({count:.0f})" if count else "none" for mean, count in r["passes"].values()]
        lines.append(f"| {s['nodes']:,} | " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        first = sizes[0]
        lines += ["", f"The curve: each cost per node, over the same at {first['nodes']:,} nodes "
                  "(1.00: grows linearly with nodes; above 1, faster):", "",
                  "| nodes | " + " | ".join(f"{p} cores" for p in SHOWN[:3]) + " | "
                  + " | ".join(f"{p} MB" for p in SHOWN[:3]) + " | API requests/s |",
                  "|---:|" + "---:|" * 7]
        for s in sizes[1:]:
            scale = s["nodes"] / first["nodes"]

            def rel(key: str, proc: str, s: dict = s, scale: float = scale) -> str:
                a, b = first["shared"][key].get(proc, 0.0), s["shared"][key].get(proc, 0.0)
                return f"{b / a / scale:.2f}" if a else "-"
            before = max(sum(first["shared"]["requests"].values()), 1e-9)
            req = sum(s["shared"]["requests"].values()) / before / scale
            lines.append(f"| {s['nodes']:,} | " + " | ".join(rel("cores", p) for p in SHOWN[:3]) + " | "
                         + " | ".join(rel("rss", p) for p in SHOWN[:3]) + f" | {req:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,5000,10000")
    parser.add_argument("--pairs", type=int, default=1000,
                        help="filter + prioritize pairs per arrangement (of 200, p99 is the second slowest)")
    parser.add_argument("--pods", type=int, default=1000, help="pods per throughput run")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds per arrangement")
    parser.add_argument("--arrangements", type=lambda v: v.split(","), default=["as deployed", "shared"],
                        help="'as deployed' (the extender on CPU 1, every other process on the machine on "
                        "CPU 0: other work here is squeezed onto one CPU meanwhile) and/or 'shared'")
    parser.add_argument("--configs", type=lambda v: v.split(","), default=["bench-pinned", "bench-netsched"],
                        help="the configurations with the extender each round runs beside the one without: "
                        "bench-pinned (each job placed whole and its pods pinned, as the operator releases "
                        "a gang), bench-netsched (each pod on its own)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of steady state measured")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="print, do not write the history")
    parser.add_argument("--results", type=Path, help="keep each size's figures in this JSON file as it is "
                        "measured, and take the sizes it already holds from it (a long run that stopped "
                        "goes on where it stopped)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs 2 CPUs: one for the extender, one for everything else")
    exit_on_sigterm()
    kept = json.loads(args.results.read_text()) if args.results and args.results.exists() else {}
    sizes = []
    for n in args.nodes.split(","):
        if n not in kept:  # a size measured by an earlier run of the same command is not measured again
            kept[n] = measure_size(int(n), args)
            if args.results:
                args.results.write_text(json.dumps(kept))
        sizes.append(kept[n])
    section = report(args, sizes)
    if args.no_write:
        print(section)
    else:
        publish(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
