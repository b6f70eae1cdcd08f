"""Check the default-scheduler emulation (`preemptive_schedule`) against the real kube-scheduler.

    python bench/default_check.py [--scenarios 24] [--passing 4] [--quiet 15] [--json out.json]

The packer benchmark's scenarios (4/8 nodes x 4/8 pods per node, 4 classes, utilisation 0.90-1.05)
on one dev-cluster: per scenario KWOK nodes and ReplicaSets whose pods name a scheduler nobody
serves; once every pod exists a second kube-scheduler (default plugins) starts and runs until
nothing changes. Pods bound per class and per ReplicaSet are compared with the emulation's, the
real layout with a closer model (`kube_model`). Writes a section of docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml
from kubernetes import client

from netsched.devcluster import processes
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.pods import scheduled_condition
from netsched.devcluster.scheduler_config import scheduler_config
from netsched.devcluster.topology import KWOK_ANNOTATION
from netsched.devcluster.wait import poll
from netsched.packing.default_scheduler import fits
from netsched.packing.problem import Problem
from netsched.testing.packing_scenarios import failing, scenario

sys.path.insert(0, str(Path(__file__).parent))
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Default-scheduler emulation against the real kube-scheduler"
CHECK = "netsched-check"  # the pods' schedulerName: no scheduler serves it until the check's starts
NS = "default-check"
PRIORITIES = (0, 1000, 2000, 3000)
MARK = "netsched.io/default-check"  # label on the check's nodes, so one list/delete finds them
CELLS = list(itertools.product((4, 8), (4, 8), (0.90, 0.95, 1.00, 1.05)))
DRAWS = 200  # runs of the closer model per scenario: its ties are random, as kube-scheduler's


def seeds(cell: tuple[int, int, float], want_failing: bool):
    nodes, ppn, util = cell
    return ((*cell, s) for s in range(400) if failing(scenario(nodes, ppn, 4, util, s)) == want_failing)


def pick(total: int, passing: int) -> list[tuple[int, int, float, int]]:
    """(nodes, pods per node, utilisation, seed): failing seeds, the k-th of each cell in turn, then
    seeds the emulation places fully, at utilisation 0.90 (few are, above)."""
    cells = sorted(CELLS, key=lambda c: (c[2], c))  # a short second round: all sizes at 0.90
    fail = itertools.chain.from_iterable(zip(*(seeds(c, True) for c in cells), strict=False))
    fine = itertools.chain.from_iterable(zip(*(seeds(c, False) for c in cells if c[2] == 0.90), strict=False))
    return [*itertools.islice(fail, total - passing), *itertools.islice(fine, passing)]


def rs_of(pod: str) -> str:
    return pod.rsplit("-", 1)[0]  # scenario pods are rs<k>-<replica>, real ones rs<k>-<suffix>


def kube_model(problem: Problem, rng: random.Random) -> dict[str, str | None]:
    """kube-scheduler v1.34's default profile as it acts here, where the emulation differs: the queue
    pops a priority's pods in the order its informer listed them (by name); integer scores; the
    PodTopologySpread system default (ReplicaSet pods spread over hostnames, weight 2; nodes have
    no zone label) besides NodeResourcesFit and BalancedAllocation; random ties. No preemption:
    every pod queues by priority before the first is scheduled, so nothing is ever preempted."""
    free = {n.name: dict(n.capacity) for n in problem.nodes}
    cap = {n.name: n.capacity for n in problem.nodes}
    replicas: dict[str, Counter] = defaultdict(Counter)  # node -> pods per ReplicaSet
    out: dict[str, str | None] = {}
    for pod in sorted(problem.pods, key=lambda p: (-p.priority, rs_of(p.name))):
        feasible = [n for n in free if fits(free[n], pod)]
        weight = math.log(len(feasible) + 2)
        spread = {n: round(replicas[n][rs_of(pod.name)] * weight + 2) for n in feasible}  # maxSkew 3 - 1
        high, low = max(spread.values(), default=0), min(spread.values(), default=0)
        scores = {}
        for n in feasible:
            used = [(cap[n][r] - free[n][r] + pod.requests[r], cap[n][r]) for r in ("cpu", "memory")]
            least = sum((c - u) * 100 // c for u, c in used) // 2
            balanced = int((1 - abs(used[0][0] / used[0][1] - used[1][0] / used[1][1]) / 2) * 100)
            scores[n] = least + balanced + 2 * (100 * (high + low - spread[n]) // high)
        best = [n for n in feasible if scores[n] == max(scores.values())]
        out[pod.name] = node = rng.choice(best) if best else None
        if node:
            replicas[node][rs_of(pod.name)] += 1
            free[node] = {r: v - pod.requests.get(r, 0) for r, v in free[node].items()}
    return out


def layout(bound) -> list:
    """Which ReplicaSets' pods share each node, nodes unnamed (they are identical)."""
    nodes: dict[str, list[str]] = defaultdict(list)
    for pod, node in bound:
        nodes[node].append(rs_of(pod))
    return sorted(sorted(v) for v in nodes.values())


def node_manifest(name: str, capacity: dict[str, int]) -> dict:
    res = {"cpu": f"{capacity['cpu']}m", "memory": str(capacity["memory"]), "pods": "1000"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, MARK: "node"},
                         "annotations": {KWOK_ANNOTATION: "fake"}},
            "status": {"capacity": res, "allocatable": res}}


def rs_manifest(name: str, replicas: int, pod) -> dict:
    requests = {"cpu": f"{pod.requests['cpu']}m", "memory": str(pod.requests["memory"])}
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"rs": name}},
        "template": {"metadata": {"labels": {"rs": name}}, "spec": {
            "schedulerName": CHECK, "priorityClassName": f"check-p{pod.priority}",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "netsched/workload:dev",
                            "resources": {"requests": requests}}]}}}}


def settled(core: client.CoreV1Api, replicas: int, quiet: float, timeout: float) -> tuple[list, int]:
    """Poll until every replica exists and is bound or Unschedulable and nothing changed for `quiet`
    seconds (longer than the scheduler's 10 s maximum backoff, so a retry would have shown).
    Returns the live pods and how many pods were ever seen (replicas + preemption victims)."""
    seen: set[str] = set()
    last, since, deadline = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NS).items
        seen |= {p.metadata.name for p in pods}
        state = sorted((p.metadata.name, p.spec.node_name, p.status.nominated_node_name,
                        p.metadata.deletion_timestamp is not None,
                        (c := scheduled_condition(p)) and (c.status, c.reason)) for p in pods)
        if state != last:
            last, since = state, time.monotonic()
        done = len(pods) == replicas and all(
            p.spec.node_name or (c := scheduled_condition(p)) and c.reason == "Unschedulable" for p in pods)
        if done and time.monotonic() - since >= quiet and not any(s[3] for s in state):
            return pods, len(seen)
        time.sleep(0.5)
    raise TimeoutError(f"placement not stable after {timeout:.0f} s")


def run_scenario(cluster: DevCluster, bin_dir: Path, idx: int, cell: tuple, quiet: float) -> dict:
    nodes, ppn, util, seed = cell
    problem = scenario(nodes, ppn, 4, util, seed)  # pods placed by the emulation
    sets = {name: list(pods) for name, pods in itertools.groupby(problem.pods, key=lambda p: rs_of(p.name))}
    api = cluster.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for i, node in enumerate(problem.nodes):  # fresh names: a just-deleted node's name may linger
        core.create_node(node_manifest(f"s{idx}-n{i}", node.capacity))
    # The node lifecycle controller taints a node not-ready until KWOK reports it Ready.
    poll(lambda: sum(not n.spec.taints and any(c.type == "Ready" and c.status == "True"
                                                for c in n.status.conditions or [])
                     for n in core.list_node(label_selector=MARK).items) == nodes,
         120, f"{nodes} nodes Ready and untainted")
    for name, pods in sets.items():
        apps.create_namespaced_replica_set(NS, rs_manifest(name, len(pods), pods[0]))
    total = len(problem.pods)
    poll(lambda: len(core.list_namespaced_pod(NS).items) == total, 120, f"{total} pods created")
    config = scheduler_config(cluster.directory / "kube-scheduler.kubeconfig")
    config["profiles"] = [{"schedulerName": CHECK}]  # default plugins; percentageOfNodesToScore 100
    (cluster.directory / "check-scheduler.yaml").write_text(yaml.safe_dump(config))
    argv = [str(bin_dir / "kube-scheduler"), f"--config={cluster.directory / 'check-scheduler.yaml'}",
            "--bind-address=127.0.0.1", f"--secure-port={processes.free_port()}",
            f"--cert-dir={cluster.directory / 'certs'}", "--authentication-skip-lookup=true",
            f"--authentication-kubeconfig={cluster.directory / 'kube-scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={cluster.directory / 'kube-scheduler.kubeconfig'}"]
    with processes.signals_deferred():  # never an unrecorded process
        proc = processes.start(CHECK, argv, cluster.log(f"{CHECK}-{idx}"), cwd=cluster.directory)
    try:
        pods, seen = settled(core, total, quiet, timeout=600)
    finally:
        processes.stop(proc.pid)
    bound = sorted((p.metadata.name, p.spec.node_name) for p in pods if p.spec.node_name)
    real, emu = Counter(rs_of(p) for p, _ in bound), {n: sum(p.running for p in ps) for n, ps in sets.items()}
    rng = random.Random(seed)
    model = [(sum(n is None for n in placed.values()), layout((p, n) for p, n in placed.items() if n))
             for placed in (kube_model(problem, rng) for _ in range(DRAWS))]
    result = {"cell": cell, "bound": bound, "pods": total, "evicted": seen - total,
              "rs_diff": sum(abs(real[n] - emu[n]) for n in sets),
              "model_pending": sum(m[0] for m in model) / DRAWS,
              "model_hits": sum(m[1] == layout(bound) for m in model)}
    for who, placed_in in (("emu", emu), ("real", real)):  # pending per class
        result[who] = tuple(sum(len(ps) - placed_in[n] for n, ps in sets.items() if ps[0].priority == c)
                            for c in PRIORITIES)
    apps.delete_collection_namespaced_replica_set(NS)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
    poll(lambda: not core.list_namespaced_pod(NS).items, 120, "the scenario's pods to go")
    core.delete_collection_node(label_selector=MARK)
    poll(lambda: not core.list_node(label_selector=MARK).items, 120, "the scenario's nodes to go")
    return result


def outcome(r: dict) -> str:
    """Real against emulated, pods placed per class from the highest down (the packer's order)."""
    real, emu = r["real"][::-1], r["emu"][::-1]
    return "yes" if real == emu else "no, real better" if real < emu else "no, real worse"


def report(args, results: list[dict], wall: float) -> str:
    rows = [f"| {i} | {n} | {r['pods']} | {u:.2f} | {s} | {'/'.join(map(str, r['emu'][::-1]))} | "
            f"{'/'.join(map(str, r['real'][::-1]))} | {outcome(r)} | {'no' if r['rs_diff'] else 'yes'} "
            f"({r['rs_diff']}) | {r['evicted']} | {r['model_pending']:.2f} | {r['model_hits']}/{DRAWS} |"
            for i, r in enumerate(results) for n, _, u, s in [r["cell"]]]
    diff = [r for r in results if r["emu"] != r["real"]]
    better = sum(outcome(r) == "no, real better" for r in diff)
    delta = ", ".join(f"{sum(r['real']) - sum(r['emu']):+d}" for r in diff) or "-"
    total = {k: sum(sum(r[k]) if k in ("emu", "real") else r[k] for r in results)
             for k in ("emu", "real", "model_pending", "evicted")}
    return "\n".join([
        SECTION, "",
        f"Command: `python bench/default_check.py --scenarios {args.scenarios} --passing {args.passing} "
        f"--quiet {args.quiet:g}` ({time.strftime('%Y-%m-%d')}, kube-scheduler v1.34 of hack/controlplane, "
        f"2 cores shared with other work, {wall / 60:.0f} min).", "",
        "One dev-cluster (kube-apiserver, kube-controller-manager, KWOK); per scenario of "
        "`netsched/testing/packing_scenarios.py` its identical nodes as KWOK nodes, 4 PriorityClasses "
        "and its "
        "ReplicaSets, every pod created before a second kube-scheduler (default plugins, "
        "percentageOfNodesToScore 100) starts; stopped once every pod was bound or Unschedulable and nothing "
        f"changed for {args.quiet:g} s. Pending per class: 3000/2000/1000/0; same per class: pods placed per "
        "class, and if not, real against emulated from the highest class down; per ReplicaSet: in brackets "
        "the sum of the differences; evicted: pods the real scheduler preempted. Model: `kube_model` in "
        f"the script (the emulation plus what kube-scheduler does besides, below), {DRAWS} runs with random "
        "ties: its mean pending pods, and how many runs bound exactly the real layout (which ReplicaSets' "
        "pods share each node).", "",
        "| # | nodes | pods | utilisation | seed | pending emulated | pending real | same per class | "
        "same per ReplicaSet | evicted | model: pending | model: real layout |",
        "|" + "---|" * 12, *rows, "",
        f"- {len(results)} scenarios ({sum(any(r['emu']) for r in results)} where the emulation leaves pods "
        f"pending): the same pods placed per class in {len(results) - len(diff)}, per ReplicaSet in "
        f"{sum(not r['rs_diff'] for r in results)}. Where the classes differ ({len(diff)}): real better "
        f"{better}, worse {len(diff) - better}; pending pods, real minus emulated: {delta}. In all "
        f"{total['emu']} pods pending emulated, {total['real']} real, {total['model_pending']:.1f} by the "
        f"model (mean); {total['evicted']} evicted by the real scheduler.",
        *(["- Nothing was preempted: every pod queues by priority before the first is placed, so no pod "
           "finds a lower-priority one bound, in the emulation (by construction) as in kube-scheduler. "
           "These scenarios check the emulation's queue, filter and scores, not its preemption."]
          if not total["evicted"] else []),
        f"- The model bound the real layout in {sum(r['model_hits'] > 0 for r in results)} of "
        f"{len(results)} scenarios. Why the emulation differs: its queue acts as kube-scheduler's "
        "(compare the classes pending), but where a pod lands does not, "
        "and the greedy fill's leftovers follow from that: kube-scheduler breaks score ties at random (the "
        "emulation takes the first node; on identical empty nodes every first pod is a tie), scores in "
        "integers, adds PodTopologySpread's system default for ReplicaSet pods (spread over hostnames, "
        "weight 2 against 1 each for NodeResourcesFit and BalancedAllocation) and pops one priority's pods "
        "in the order its informer listed them (by name), not in the scenario's shuffled creation order.", "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=24)
    parser.add_argument("--passing", type=int, default=4, help="of them, seeds with nothing pending")
    parser.add_argument("--quiet", type=float, default=15.0, help="seconds without change = settled")
    parser.add_argument("--json", help="also write the results, real bindings included, here")
    args = parser.parse_args()
    exit_on_sigterm()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: stop everything
    started, results = time.monotonic(), []
    with tempfile.TemporaryDirectory() as d:
        # No extender or operator: the check wants kube-scheduler's default profile and nothing else.
        cluster = DevCluster(directory=Path(d), nodes=1, run_extender=False, run_operator=False,
                             progress=lambda m: print(m, file=sys.stderr))
        state = cluster.up()
        try:
            api = cluster.api_client()
            core = client.CoreV1Api(api)
            core.delete_collection_node()  # the dev-cluster's GPU node would take pods too
            core.create_namespace({"metadata": {"name": NS}})
            poll(lambda: core.read_namespaced_service_account("default", NS), 60, f"the default SA in {NS}")
            for p in PRIORITIES:
                client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": f"check-p{p}"},
                                                                   "value": p})
            for idx, cell in enumerate(pick(args.scenarios, args.passing)):
                results.append(r := run_scenario(cluster, Path(state["bin_dir"]), idx, cell, args.quiet))
                print(f"{idx}: {cell} pending emulated {r['emu']} real {r['real']} evicted {r['evicted']}"
                      f" model {r['model_pending']:.2f} layout {r['model_hits']}/{DRAWS}", file=sys.stderr)
        finally:
            cluster.down(quiet=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    publish(report(args, results, time.monotonic() - started))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
