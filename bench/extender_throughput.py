"""End-to-end scheduling throughput with the real kube-scheduler, with and without netsched's extender.

    python bench/extender_throughput.py [--nodes 1000] [--pods 1000] [--rounds 3]

One dev-cluster with --nodes KWOK GPU nodes (4 zones, 20 nodes per rack). Three extra
kube-scheduler configurations, identical but for their extender, each with its own profile:

  plain      no extender
  netsched   the dev-cluster's extender, default flags (shortlist 1)
  all-nodes  a second extender with --shortlist 0 (filter returns every feasible node)

Per run, --pods pods (jobs of 4 replicas x 2 GPUs) are created for a scheduler that is not
running yet; then that configuration's kube-scheduler starts and schedules the backlog, and
throughput is (pods - 1) / (last binding - first binding). Releasing pods from the client
instead (removing schedulingGates) measured the client's patch rate, not the scheduler.
Only one bench scheduler runs at a time. Runs alternate (A B C C B A ...) so drift hits
every configuration alike; each round's ratio divides by that round's no-extender run. Also
reports how tightly jobs were placed (share of jobs whose pods all share one rack), the lag
from each binding to the pod's NetworkPlacement Event, and where the time goes: kube-scheduler's
algorithm by phase (its /metrics) and every process's CPU per pod. Writes the "Extender
throughput" section of docs/benchmarks-history.md ("Extender throughput, N nodes" at other sizes).
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

import numpy as np
import orjson
import yaml
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from netsched.api.connect import items
from netsched.api.labels import JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.devcluster import processes
from netsched.devcluster.binaries import ensure_binaries, read_versions
from netsched.devcluster.devcluster import EXTENDER, DevCluster
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.scheduler_config import ExtenderSettings, scheduler_config
from netsched.devcluster.wait import Timeout, poll
from netsched.jobs.hard_limits import pinned_to, requirement_patch
from netsched.testing import extender_http

sys.path.insert(0, str(Path(__file__).parent))
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Extender throughput"  # at other than the default 1,000 nodes, a section of its own
REPLICAS, GPUS = 4, 2
CONFIGURATIONS = {"bench-plain": "no extender", "bench-netsched": "netsched extender, default (shortlist 1)",
                  "bench-all-nodes": "netsched extender, `--shortlist 0` (every feasible node back)",
                  "bench-pinned": "netsched extender, each job placed whole first (POST /gang) and its pods "
                                  "pinned to their nodes, as the operator releases a gang"}


def start_scheduler(cluster: DevCluster, name: str,
                    extender_url: str | None) -> tuple[processes.Process, str]:
    """A kube-scheduler with one profile `name`, fast client limits, optional extender; and the URL of
    its /metrics (served without authentication, for this bench only)."""
    d = cluster.directory
    kubeconfig = d / "kube-scheduler.kubeconfig"
    config = scheduler_config(kubeconfig, ExtenderSettings(extender_url) if extender_url else None)
    config["profiles"] = [{"schedulerName": name}]
    config["clientConnection"].update(qps=5000, burst=5000)
    path = d / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    port = processes.free_port()
    bin_dir = ensure_binaries(quiet=True)
    proc = processes.start(name, [
        str(bin_dir / "kube-scheduler"), f"--config={path}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}", "--authentication-skip-lookup=true",
        "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={d / 'certs'}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
    ], cluster.log(name), cwd=d)
    processes.wait_until(proc, lambda: _serving(f"https://127.0.0.1:{port}/healthz"), timeout=60, port=port)
    return proc, f"https://127.0.0.1:{port}/metrics"


def start_extender(cluster: DevCluster, shortlist: int) -> tuple[int, tuple[str, str]]:
    """A second extender as the dev-cluster runs its own (with its extender_args): its pid, and its
    scheduling and metrics URLs."""
    port, metrics_port = processes.free_port(), processes.free_port()
    argv = [*cluster.extender_argv(port, metrics_port), f"--shortlist={shortlist}"]
    proc = processes.start("bench-extender", argv, cluster.log("bench-extender"), cwd=cluster.directory)
    urls = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}"
    processes.wait_until(proc, lambda: _serving(f"{urls[1]}/readyz"), timeout=60, port=metrics_port)
    return proc.pid, urls


def _serving(url: str) -> bool:
    try:  # a component's self-signed health endpoint: only checked, never trusted
        with urllib.request.urlopen(url, timeout=2, context=ssl._create_unverified_context()) as resp:
            return resp.status == 200
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_by_process(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        with contextlib.suppress(OSError):  # a process that has gone is left out
            out[name] = cpu_seconds(pid)
    return out


def scheduler_seconds(url: str) -> dict[str, float]:
    """Seconds kube-scheduler spent, summed over its pods so far, from its /metrics: in the scheduling
    algorithm (its filter and score phases and the extender's calls) and in each extension point."""
    with urllib.request.urlopen(url, timeout=5, context=ssl._create_unverified_context()) as resp:
        text = resp.read().decode()
    out: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("scheduler_scheduling_algorithm_duration_seconds_sum"):
            out["algorithm"] += float(value)
        elif name.startswith("scheduler_framework_extension_point_duration_seconds_sum"):
            point = name.split('extension_point="', 1)[1].split('"', 1)[0]
            out[point] += float(value)
    return dict(out)


def writer_totals(cluster: DevCluster, metrics_url: str) -> tuple[float, float]:
    """The extender's explanation-writer histogram: (seconds summed, events written), from /metrics (read
    as the dev-cluster's admin)."""
    status, text = extender_http.request(f"{metrics_url}/metrics", token=extender_http.admin_token(cluster))
    assert status == 200, text
    total = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for part in total:
            if line.startswith(f"netsched_extender_explain_event_seconds_{part} "):
                total[part] = float(line.split()[1])
    return total["sum"], total["count"]


def job_pods(scheduler: str, pods: int) -> list[dict]:
    out = []
    for j in range(pods // REPLICAS):
        for r in range(REPLICAS):
            pod = gpu_pod(f"job{j}-{r}", GPUS, scheduler=scheduler, labels={JOB_LABEL: f"job{j}"},
                          annotations={"netsched.io/job-gpus": str(REPLICAS * GPUS)})
            out.append(pod)
    return out


def pin_gangs(core: client.CoreV1Api, namespace: str, pods: list[dict], racks: dict[str, str],
              extender_url: str) -> list[float]:
    """Pin each job's pods where the extender places the job whole (POST /gang), with each node's room
    counted here from the pods bound now and the jobs pinned before (the extender's own assumptions
    last 30 s, less than making a backlog takes); the seconds of each /gang call."""
    used: dict[str, float] = defaultdict(float)
    for pod in items(core.list_pod_for_all_namespaces, field_selector="spec.nodeName!="):
        if pod["status"].get("phase") not in ("Succeeded", "Failed"):
            used[pod["spec"]["nodeName"]] += sum(float((c.get("resources") or {}).get("requests", {}).get(
                "nvidia.com/gpu", 0)) for c in pod["spec"]["containers"])
    seconds = []
    for j in range(0, len(pods), REPLICAS):
        job = pods[j:j + REPLICAS]
        room = {n: int((8 - used[n]) // GPUS) for n in racks if used[n] + GPUS <= 8}
        members = [{**p, "metadata": {**p["metadata"], "namespace": namespace}} for p in job]
        body = {"namespace": namespace, "name": job[0]["metadata"]["labels"][JOB_LABEL], "pods": members,
                "room": room}
        started = time.perf_counter()
        request = urllib.request.Request(f"{extender_url}/gang", orjson.dumps(body),
                                         {"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=30) as resp:
            nodes = orjson.loads(resp.read())["nodes"]
        seconds.append(time.perf_counter() - started)
        for p in job:
            node = nodes[p["metadata"]["name"]]
            p["spec"]["affinity"] = requirement_patch(p["spec"], pinned_to(node))[0]["value"]
            used[node] += GPUS
    return seconds


class BindWatch:
    """Records when each pod of a namespace gets a node, from a raw watch (cheap to decode).
    A watch stream can end early; it resumes from the last resourceVersion it saw."""

    def __init__(self, core: client.CoreV1Api, namespace: str):
        self.bound: dict[str, tuple[float, str]] = {}
        self.core, self.namespace = core, namespace
        self.stop = threading.Event()
        self.version: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._follow()
            except Exception as exc:  # keep measuring: log and resume
                print(f"bind watch restarting after {type(exc).__name__}: {exc}", file=sys.stderr)
                self.version = None  # e.g. 410 Gone: list again from now
                time.sleep(0.2)

    def _follow(self) -> None:
        resp = self.core.list_namespaced_pod(self.namespace, watch=True, _preload_content=False,
                                             timeout_seconds=60, resource_version=self.version)
        for line in iter_resp_lines(resp):
            obj = orjson.loads(line)["object"]
            self.version = obj["metadata"].get("resourceVersion", self.version)
            node = (obj.get("spec") or {}).get("nodeName")
            name = obj["metadata"]["name"]
            if node and name not in self.bound:
                self.bound[name] = (time.monotonic(), node)
            if self.stop.is_set():
                return


class PlacementEvents:
    """When the first NetworkPlacement Event of each pod of a namespace was seen: with BindWatch,
    the lag from a binding to its explanation, both as this client heard them."""

    def __init__(self, core: client.CoreV1Api, namespace: str):
        self.seen: dict[str, float] = {}
        self.core, self.namespace = core, namespace
        self.stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        version = None
        while not self.stop.is_set():
            try:
                resp = self.core.list_namespaced_event(self.namespace, watch=True, _preload_content=False,
                                                       timeout_seconds=60, resource_version=version)
                for line in iter_resp_lines(resp):
                    obj = orjson.loads(line)["object"]
                    version = obj["metadata"].get("resourceVersion", version)
                    if obj.get("reason") == "NetworkPlacement":
                        self.seen.setdefault(obj["involvedObject"]["name"], time.monotonic())
                    if self.stop.is_set():
                        return
            except Exception as exc:  # keep measuring: log and resume
                print(f"event watch restarting after {type(exc).__name__}: {exc}", file=sys.stderr)
                version = None
                time.sleep(0.2)


def one_run(cluster: DevCluster, core: client.CoreV1Api, scheduler: str, extender: tuple[str, str] | None,
            pods: int, run: int, racks: dict[str, str], explained: bool = True,
            pids: dict[str, int] | None = None, pinned: bool = False) -> dict:
    """One configuration's run; `extender`: its scheduling and metrics URLs (None: no extender).
    `pinned`: each job's pods made as the operator releases a gang, every member pinned to the node
    the extender chose for it with the rest (POST /gang), so kube-scheduler filters one node per pod."""
    extender_url, metrics = extender or (None, "")
    ns = f"{scheduler}-{run + 1}"
    core.create_namespace({"metadata": {"name": ns}})
    poll(lambda: core.read_namespaced_service_account("default", ns), 60, f"the default SA in {ns}")
    made = job_pods(scheduler, pods)
    gang_seconds = pin_gangs(core, ns, made, racks, extender_url) if pinned and extender_url else []
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: core.create_namespaced_pod(ns, p), made))
    watch = BindWatch(core, ns)
    events = PlacementEvents(core, ns) if extender_url and explained else None
    time.sleep(2)  # the watch is running and the apiserver has settled from the creations
    written = writer_totals(cluster, metrics) if extender_url else (0.0, 0.0)
    proc, metrics_url = start_scheduler(cluster, scheduler, extender_url)
    pids = {**(pids or {}), "bench kube-scheduler": proc.pid, "this bench": os.getpid()}
    try:
        cpu_before = cpu_by_process(pids)
        poll(lambda: len(watch.bound) >= pods, 600, f"{pods} pods of {ns} to be bound", interval=0.2)
        cpu = {k: v - cpu_before[k] for k, v in cpu_by_process(pids).items() if k in cpu_before}
        phases = scheduler_seconds(metrics_url)
    finally:
        processes.stop(proc.pid)
    watch.stop.set()
    times = sorted(t for t, _ in watch.bound.values())
    result = {"scheduler": scheduler, "pods_per_s": (pods - 1) / (times[-1] - times[0]),
              "one_rack": one_rack_share(watch.bound, racks), "lags": [],
              "cpu_ms_per_pod": {k: v * 1000 / pods for k, v in cpu.items()},
              "phase_ms_per_pod": {k: v * 1000 / pods for k, v in phases.items()},
              "busy": phases.get("algorithm", 0.0) / (times[-1] - times[0]), "gang_seconds": gang_seconds}
    if events is not None:  # the explanations of the last bindings are still on their way
        with contextlib.suppress(Timeout):  # the extender drops explanations rather than block
            poll(lambda: len(events.seen) >= pods, 60, f"NetworkPlacement events of {ns}", interval=0.5)
        events.stop.set()
        result["lags"] = [events.seen[p] - watch.bound[p][0] for p in watch.bound if p in events.seen]
        result["explained"] = len(result["lags"]) / pods
        seconds, count = (after - before for after, before in zip(writer_totals(cluster, metrics), written,
                                                                   strict=True))
        result["writer"] = seconds / count if count else float("nan")
    # pod by pod, as they were made: one deletecollection of every pod outlasted a busy API server's
    # request timeout again and again
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: delete_pod(core, ns, name), watch.bound))
    poll(lambda: not core.list_namespaced_pod(ns, limit=1).items, 600, f"pods of {ns} to go", interval=1)
    core.delete_namespace(ns)
    # the namespace's cleanup (the extender's NetworkPlacement Events among it) would otherwise run
    # during the next run and slow whichever configuration comes next
    poll(lambda: not core.list_namespace(field_selector=f"metadata.name={ns}").items, 600,
         f"namespace {ns} to go", interval=1)
    return result


def delete_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    def gone() -> bool:
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        return True
    poll(gone, 300, f"pod {namespace}/{name} deleted", interval=2)


def one_rack_share(bound: dict[str, tuple[float, str]], racks: dict[str, str]) -> float:
    jobs = defaultdict(set)
    for pod, (_, node) in bound.items():
        jobs[pod.rsplit("-", 1)[0]].add(racks[node])
    return sum(len(r) == 1 for r in jobs.values()) / len(jobs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print, do not write the history")
    parser.add_argument("--no-explain-events", action="store_true",
                        help="both extenders write no NetworkPlacement events: what explaining costs")
    parser.add_argument("--no-operator", action="store_true",
                        help="no GPUJob operator: what it costs (it watches every node and pod)")
    args = parser.parse_args()
    exit_on_sigterm()
    flags = ("--no-explain-events",) if args.no_explain_events else ()
    order = list(CONFIGURATIONS)  # not "netsched": the dev-cluster's
    with tempfile.TemporaryDirectory() as d:
        # plain HTTP to the extender, as the figures in docs/benchmarks.md were measured (what mutual TLS
        # costs is not measured yet); this bench's own kube-scheduler has no client certificate
        cluster = DevCluster(directory=Path(d), nodes=args.nodes, zones=4,
                             racks_per_zone=max(1, args.nodes // 80), extender_args=flags,
                             extender_mtls=False, run_operator=not args.no_operator,
                             progress=lambda m: print(m, file=sys.stderr))
        state = cluster.up()
        pids = []
        try:
            core = client.CoreV1Api(cluster.api_client())
            nodes = core.list_node().items
            racks = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in nodes}
            zones = len({n.metadata.labels[ZONE_LABEL] for n in nodes})
            ext_pid, all_urls = start_extender(cluster, 0)
            pids.append(ext_pid)
            watched = {name: info["pid"] for name, info in state["components"].items()} | {
                "bench extender (--shortlist 0)": ext_pid}
            watched |= {f"{name} watches": child for name in (EXTENDER, "bench extender (--shortlist 0)")
                        for child in processes.children(watched[name])}
            own = (cluster.extender_url, cluster.extender_metrics_url)
            urls = dict(zip(order, (None, own, all_urls, own), strict=True))
            # The first minutes after 1,000 nodes appear are slow for everyone (KWOK and the
            # controller-manager settle them); one discarded run takes that out of the figures.
            warm = one_run(cluster, core, order[0], None, args.pods, -1, racks, pids=watched)
            print(f"warm-up (discarded): {warm['pods_per_s']:.1f} pods/s", file=sys.stderr)
            runs = []
            for rnd in range(args.rounds):
                for name in order if rnd % 2 == 0 else reversed(order):
                    runs.append(one_run(cluster, core, name, urls[name], args.pods, rnd, racks,
                                        not args.no_explain_events, watched, pinned=name == "bench-pinned"))
                    r = runs[-1]
                    print(f"round {rnd + 1} {name}: {r['pods_per_s']:.1f} pods/s, "
                          f"{r['one_rack']:.0%} of jobs in one rack, scheduler busy {r['busy']:.0%}, "
                          f"CPU ms per pod {sum(r['cpu_ms_per_pod'].values()):.1f}", file=sys.stderr)
        finally:
            for pid in pids:
                processes.stop(pid)
            cluster.down(quiet=True)
    section = report(args, runs, len(set(racks.values())), zones)
    if args.no_write:
        print(section)
    else:
        publish(section)
    return 0


def report(args: argparse.Namespace, runs: list[dict], racks: int, zones: int) -> str:
    by = defaultdict(list)
    for r in runs:
        by[r["scheduler"]].append(r)
    base = statistics.median(r["pods_per_s"] for r in by["bench-plain"])
    rows, lag_rows = [], []
    for name, text in CONFIGURATIONS.items():
        rates = [r["pods_per_s"] for r in by[name]]
        # a round runs every configuration back to back: its ratio compares like with like
        per_round = [r["pods_per_s"] / p["pods_per_s"]
                     for r, p in zip(by[name], by["bench-plain"], strict=True)]
        rows.append(f"| {text} | {', '.join(f'{x:.0f}' for x in rates)} | "
                    f"{', '.join(f'{x:.2f}' for x in per_round)} | {statistics.median(rates) / base:.2f} | "
                    f"{statistics.median(r['one_rack'] for r in by[name]):.0%} |")
        lags = np.array([lag for r in by[name] for lag in r["lags"]])
        if len(lags):
            p50, p95 = np.percentile(lags, [50, 95])
            explained = statistics.mean(r["explained"] for r in by[name])
            writer = statistics.mean(r["writer"] for r in by[name])
            lag_rows.append(f"| {text} | {len(lags)} | {explained:.0%} | "
                            f"{p50:.2f} / {p95:.2f} / {lags.max():.2f} | {writer:.2f} |")
    return "\n".join([
        SECTION + ("" if args.nodes == 1000 else f", {args.nodes:,} nodes"), "",
        f"Command: `python bench/extender_throughput.py --nodes {args.nodes} --pods {args.pods} "
        f"--rounds {args.rounds}{' --no-explain-events' if args.no_explain_events else ''}"
        f"{' --no-operator' if args.no_operator else ''}` "
        f"({time.strftime('%Y-%m-%d')}, 2 cores shared by everything).",
        "",
        f"Real kube-scheduler {read_versions()['KUBERNETES_VERSION']}, {args.nodes} KWOK nodes x 8 GPUs "
        f"in {zones} zones / {racks} racks, heartbeating; "
        f"{args.pods} pods per run ({args.pods // REPLICAS} jobs of {REPLICAS} x {GPUS} GPUs) waiting "
        "for their kube-scheduler, which then starts; pods/s = (pods - 1) / (last binding - first "
        "binding), after one discarded warm-up run. Each configuration is its own kube-scheduler "
        "process (client QPS 5000, percentageOfNodesToScore 100), one at a time; runs alternate "
        "A B C C B A, and a round's ratio divides by the no-extender run of the same round. "
        + ("" if args.no_operator else "The GPUJob operator runs throughout too. ") + "Both "
        "extenders run throughout (each watches every pod) and "
        + ("write no events (--no-explain-events)." if args.no_explain_events else
           "write a NetworkPlacement Event per pod placed through them."),
        "",
        "| configuration | pods/s per round | ratio per round | ratio of medians | jobs in one rack |",
        "|---|---|---|---|---|",
        *rows, "",
        *(["Event lag: from a pod's binding to its NetworkPlacement Event, both as a watching client saw "
           "them, every pod of every round; and the mean of the part the extender itself reports (its "
           "writer's queue wait plus the write, from its /metrics), the rest being the two watches:", "",
           "| configuration | pods | explained | lag p50 / p95 / max, s | in the writer, mean s |",
           "|---|---|---|---|---|",
           *lag_rows, ""] if lag_rows else []),
        *where_time_goes(by),
        *gang_calls(by["bench-pinned"]),
    ])


def gang_calls(runs: list[dict]) -> list[str]:
    """What placing each job whole cost the extender (the operator's call, off kube-scheduler's path)."""
    ms = np.array([s * 1000 for r in runs for s in r["gang_seconds"]])
    if not len(ms):
        return []
    p50, p99 = np.percentile(ms, [50, 99])
    return [f"Placing a job whole (POST /gang, {REPLICAS} members, every node a candidate), as the bench "
            f"client waited for it: {len(ms)} calls, p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
            f"max {ms.max():.1f} ms.", ""]


PHASES = ("PreFilter", "Filter", "PreScore", "Score")


def where_time_goes(by: dict[str, list[dict]]) -> list[str]:
    """Per configuration, medians over its runs: how busy kube-scheduler's one scheduling loop was, its ms
    per pod by phase (the extender's call is the algorithm's time outside the framework's phases),
    and every process's CPU ms per pod."""
    def phases(r: dict) -> list[float]:
        ms = r["phase_ms_per_pod"]
        by_phase = [ms.get(k, 0.0) for k in PHASES]
        return [r["busy"], ms.get("algorithm", 0.0), *by_phase, ms.get("algorithm", 0.0) - sum(by_phase)]

    plain = by["bench-plain"]  # processes in the order of their share without an extender
    names = sorted({p for runs in by.values() for r in runs for p in r["cpu_ms_per_pod"]},
                   key=lambda p: -statistics.median(r["cpu_ms_per_pod"].get(p, 0.0) for r in plain))
    phase_rows, cpu_rows = [], []
    for name, text in CONFIGURATIONS.items():
        busy, *ms = np.median([phases(r) for r in by[name]], axis=0)
        phase_rows.append(f"| {text} | {busy:.0%} | " + " | ".join(f"{v:.2f}" for v in ms) + " |")
        cpu = np.median([[r["cpu_ms_per_pod"].get(p, 0.0) for p in names] for r in by[name]], axis=0)
        all_ = statistics.median(sum(r["cpu_ms_per_pod"].values()) for r in by[name])
        cpu_rows.append(f"| {text} | " + " | ".join(f"{v:.1f}" for v in cpu) + f" | {all_:.1f} |")
    return [
        "Where the time goes, medians over each configuration's runs. kube-scheduler runs its scheduling "
        "algorithm for one pod at a time: *busy* is the algorithm's time summed over the run's binding "
        "window (bindings run beside it). Its ms per pod from its own /metrics: the algorithm, its "
        "framework phases, and the rest of it (the extender's calls):", "",
        "| configuration | busy | algorithm | " + " | ".join(PHASES) + " | rest of algorithm |",
        "|---|" + "---:|" * (2 + len(PHASES)) + "---:|",
        *phase_rows, "",
        "CPU ms per pod of every process (an extender's watch process is a column of its own), from "
        "kube-scheduler being up to the last binding (/proc):", "",
        "| configuration | " + " | ".join(names) + " | all |",
        "|---|" + "---:|" * (len(names) + 1),
        *cpu_rows, "",
    ]

if __name__ == "__main__":
    raise SystemExit(main())
