"""Gang completion time, joint against pod by pod: the real extender places a seeded stream of training
gangs on a simulated cluster, and the simulator's completion-time law scores where they went.

    nice -n 15 python bench/gang_jct.py [--nodes 300] [--gangs 300] [--seeds 2027,2028,2029]
        [--load 0.7] [--limited 0.25] [--scorer model|topology] [--paired 2029] [--no-probe] [--no-publish]

Cluster: the simulator's (netsched/datagen/simulator.py, default profile's GPUs and links) with racks of
about 24 nodes, as bench/telemetry_scale.py builds it; the extender reads it as nodes (zone, rack and GPU
product labels) in a ReadModel, every node pair's link measured once with the probes' noise in its
TelemetryStore, and scores with the shipped model (models/current.json, as the chart serves it) or the
topology heuristic (`--scorer topology`).

Gangs: bench/telemetry_scale.py's `gang_jobs` (2, 4 or 8 replicas of 4 or 8 GPUs, training, data in a
zone), each member a pod of the gang's job with the operator's hints (replicas, job GPUs, input size,
communication, a noisy expected duration, `zone:` data source) and, on `--limited` of them,
`max-peer-distance: rack`. They arrive as a Poisson stream at `--load` of the GPUs, first come first placed
(a gang that does not fit waits for the next one to end), each holding its GPUs until it ends. Both arms
see the same gangs at the same arrival times:

  joint       netsched.extender.gang.decide_gang (POST /gang's function), `room` = how many members each
              node's free GPUs take;
  pod by pod  each member in turn through Extender.filter over the nodes whose free GPUs take it (what
              kube-scheduler's own filters hand it), the members before it bound as pods of its job (so
              its peers apply), on the node kube-scheduler would take: filter's one node (shortlist 1,
              the default), else the highest prioritize score.

Members are applied to the read model as bound pods as they are placed and deleted when their gang ends.
A gang's completion time is the simulator's (`completion_seconds`, no noise): it ends with its slowest
replica (telemetry_scale's `gang_seconds`). Decision time: the /gang call against the sum of a gang's
filter (+ prioritize) calls, in process, on a machine shared with other work.

Two aids to read the gap, not placements the extender makes:
- the probe arm (with the model; `--no-probe` leaves it out): the same joint search with the scorer
  wrapped so that every walk's model part is read against one reference time per decision
  (`OneTimeScale`): ModelScorer scores a candidate against the best of the candidates of *its own call*,
  so sums over walks that scored different candidates do not compare predicted times;
- `--paired`: on those seeds the joint arm's stream asks pod by pod (and the probe) first at each of its
  decisions, on the same cluster state, and undoes their bindings: the arms' choices compare gang by gang
  without the streams diverging (a different placement changes every later gang's cluster).
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from netsched.api.labels import (
    COMMUNICATION,
    COMMUNICATION_GB_PER_HOUR,
    DATA_SOURCE,
    EXPECTED_SECONDS,
    INPUT_SIZE_GB,
    JOB_GPUS,
    MAX_PEER_DISTANCE,
    REPLICAS,
    WORKLOAD_KIND,
)
from netsched.datagen.simulator import GPUS_PER_NODE, Cluster, Job, SimConfig
from netsched.devcluster.topology import gpu_nodes
from netsched.extender.engine import Extender
from netsched.extender.gang import GangRequest, decide_gang
from netsched.extender.learned import HEURISTIC_SHARE, SLOWDOWN_AT_ZERO
from netsched.extender.metrics import Metrics
from netsched.extender.plugin import Request
from netsched.extender.protocol import parse_args, parse_pod
from netsched.extender.scorers import NodeScorer, Scored, TopologyScorer
from netsched.telemetry.store import TelemetryStore
from netsched.testing.builders import make_node, make_pod
from netsched.testing.extender import cache_of

sys.path.insert(0, str(Path(__file__).parent))
from report import exit_on_sigterm, publish_unless  # noqa: E402
from telemetry_scale import gang_jobs, gang_seconds, make_cluster, shape  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Gang completion time, joint against pod by pod"
NAMESPACE = "ml"
JOINT, POD_BY_POD, ONE_SCALE = "joint", "pod by pod", "joint, one time scale (probe)"
FOREVER = 1e12  # the read model and the store never go stale: the simulated stream has no wall clock


@dataclass
class Placed:
    """One gang as an arm placed it."""

    job: int
    nodes: list[int]
    fewest: int  # the fewest nodes the gang could have used at that moment (free GPUs only)
    seconds: float  # its completion time, from start
    waited: float  # from arrival to start
    decide: float  # the arm's decision time for it (the last, successful attempt)


@dataclass
class ArmResult:
    placed: list[Placed] = field(default_factory=list)
    unplaced: int = 0  # gangs no arm attempt placed even on an idle cluster
    refused: int = 0  # attempts that placed nothing although the free GPUs held the gang (it waited on)

    def mean(self, get: Callable[[Placed], float]) -> float:
        return statistics.mean(get(p) for p in self.placed) if self.placed else math.nan

    @property
    def split(self) -> float:
        """Share of gangs on more nodes than the free GPUs required at the time."""
        return self.mean(lambda p: float(len(set(p.nodes)) > p.fewest))

    @property
    def split_one_node(self) -> tuple[int, int]:
        """Gangs one node could hold at the time, and how many of them went to more than one."""
        one = [p for p in self.placed if p.fewest == 1]
        return len(one), sum(len(set(p.nodes)) > 1 for p in one)


def world(nodes: int, seed: int, scorer: str) -> tuple[Cluster, Callable[[], Extender]]:
    """The simulated cluster and a maker of fresh extenders over it (one per arm: nothing carries over)."""
    cluster = make_cluster(nodes, seed)
    placed = {n.name: n for n in gpu_nodes(nodes, *shape(nodes), GPUS_PER_NODE)}  # as Cluster lays them out
    manifests = [make_node(name, zone=placed[name].zone, rack=placed[name].rack, gpus=GPUS_PER_NODE,
                           gpu_model=str(cluster.gpu[i])) for i, name in enumerate(cluster.names)]
    rng = np.random.default_rng([seed, 5])
    noise = SimConfig.measure_noise
    links = []
    for i, src in enumerate(cluster.names):
        for j, dst in enumerate(cluster.names):
            if i != j:
                bw, rtt = cluster.node_link(i, j)
                seen = rng.lognormal(0, noise, 2)
                links.append((src, dst, rtt * float(seen[0]), bw * float(seen[1]), None))

    def make() -> Extender:
        store = TelemetryStore(max_age=FOREVER)
        store.record_many(links)
        cache = cache_of(manifests, max_age=FOREVER)
        return Extender(cache, telemetry=store, scorer=make_scorer(scorer), shortlist=1)
    return cluster, make


def make_scorer(kind: str) -> NodeScorer:
    if kind == "topology":
        return TopologyScorer()
    from threadpoolctl import threadpool_limits

    from netsched.extender.learned import ModelScorer, ModelSource

    threadpool_limits(1, user_api="openmp")  # as the extender serves it (netsched.extender.server)
    metrics = Metrics()
    source = ModelSource(ROOT / "models" / "current.json", metrics, reload_seconds=3600)
    source.poll()
    if source.predictor is None:
        raise SystemExit("gang_jct: models/current.json could not be loaded; see the log line above, or run "
                         "with --scorer topology")
    return ModelScorer(source, TopologyScorer(), metrics)


def member_pods(cluster: Cluster, job: Job, limited: bool, hint: float) -> list[dict]:
    """The gang's member pods as the operator creates them: its job label and workload hints."""
    notes = {JOB_GPUS: str(job.replicas * job.gpus_per_replica), REPLICAS: str(job.replicas),
             WORKLOAD_KIND: job.kind, INPUT_SIZE_GB: f"{job.input_gb:.1f}", COMMUNICATION: job.comm,
             COMMUNICATION_GB_PER_HOUR: f"{job.comm_gb_per_hour:.2f}", EXPECTED_SECONDS: f"{hint:.0f}",
             DATA_SOURCE: f"zone:{cluster.zone_names[job.where]}"}
    if limited:
        notes[MAX_PEER_DISTANCE] = "rack"
    return [make_pod(f"{job.id}-{r}", namespace=NAMESPACE, gpus=job.gpus_per_replica, job=job.id,
                     annotations=dict(notes), uid=f"uid-{job.id}-{r}") for r in range(job.replicas)]


def fewest_nodes(free: np.ndarray, job: Job) -> int:
    """The fewest nodes whose free GPUs hold the gang (the roomiest first)."""
    takes = np.sort(np.minimum(free // job.gpus_per_replica, job.replicas))[::-1]
    return int(np.searchsorted(np.cumsum(takes), job.replicas) + 1)


Arm = Callable[[Extender, list[dict], np.ndarray, Job], tuple[list[str] | None, float]]


def joint(extender: Extender, pods: list[dict], free: np.ndarray, job: Job) -> tuple[list[str] | None, float]:
    names = extender.cluster.snapshot().table.names
    room = {names[i]: int(n) for i, n in enumerate(free // job.gpus_per_replica) if n > 0}
    req = GangRequest(NAMESPACE, job.id, tuple(parse_pod(p) for p in pods), room)
    started = time.perf_counter()
    placed = decide_gang(extender, req)
    took = time.perf_counter() - started
    return ([placed.nodes[p["metadata"]["name"]] for p in pods] if placed.placed else None), took


def pod_by_pod(extender: Extender, pods: list[dict], free: np.ndarray,
               job: Job) -> tuple[list[str] | None, float]:
    table = extender.cluster.snapshot().table
    left = free.copy()
    chosen: list[str] = []
    took = 0.0
    for pod in pods:
        offered = [table.names[i] for i in np.flatnonzero(left >= job.gpus_per_replica)]
        args = parse_args({"Pod": pod, "Nodes": None, "NodeNames": offered})
        started = time.perf_counter()
        out = extender.filter(args)
        if len(out.passed) > 1:  # kube-scheduler asks prioritize and takes the best (its own scores aside)
            got = extender.prioritize(parse_args({"Pod": pod, "Nodes": None, "NodeNames": out.passed}))
            node = got.hosts[int(np.argmax(got.scores))]
        else:
            node = out.passed[0] if out.passed else None
        took += time.perf_counter() - started
        if node is None:  # this member waits; so do the others (their bindings undone: a gang or nothing)
            for done in pods[:len(chosen)]:
                extender.cluster.apply("pods", "MODIFIED", done)
            return None, took
        chosen.append(node)
        left[table.index[node]] -= job.gpus_per_replica
        extender.cluster.apply("pods", "MODIFIED", bound(pod, node))
    return chosen, took


def bound(pod: dict, node: str) -> dict:
    return {**pod, "spec": {**pod["spec"], "nodeName": node}, "status": {"phase": "Running"}}


def run_arm(cluster: Cluster, extender: Extender, jobs: list[Job], arrivals: np.ndarray,
            pods: list[list[dict]], arm: Arm) -> ArmResult:
    """The stream through one arm: first come first placed, each gang holding its GPUs until it ends."""
    result = ArmResult()
    index = extender.cluster.snapshot().table.index
    at = np.array([index[n] for n in cluster.names])  # simulator position -> table position
    where = {n: i for i, n in enumerate(cluster.names)}
    free = np.full(len(cluster.names), GPUS_PER_NODE)  # by table position
    running: list[tuple[float, int, list[int]]] = []
    now = 0.0
    for k, job in enumerate(jobs):
        now = max(now, float(arrivals[k]))
        for pod in pods[k]:
            extender.cluster.apply("pods", "ADDED", pod)  # created pending, as its controller does
        while True:
            while running and running[0][0] <= now:
                _, j, nodes = heapq.heappop(running)
                np.add.at(free, at[nodes], jobs[j].gpus_per_replica)
                for pod in pods[j]:
                    extender.cluster.apply("pods", "DELETED", pod)
            names, fewest = None, 0
            if (free // job.gpus_per_replica).sum() >= job.replicas:
                fewest = fewest_nodes(free, job)
                names, took = arm(extender, pods[k], free, job)
            if names is not None:
                break
            result.refused += names is None and fewest > 0
            if not running:  # an idle cluster cannot take it: leave it out
                result.unplaced += 1
                for pod in pods[k]:
                    extender.cluster.apply("pods", "DELETED", pod)
                break
            now = running[0][0]
        if names is None:
            continue
        nodes = [where[n] for n in names]
        np.subtract.at(free, at[nodes], job.gpus_per_replica)
        for pod, node in zip(pods[k], names, strict=True):
            extender.cluster.apply("pods", "MODIFIED", bound(pod, node))
        seconds = gang_seconds(cluster, job, nodes)
        result.placed.append(Placed(k, nodes, fewest, seconds, now - float(arrivals[k]), took))
        heapq.heappush(running, (now + seconds, k, nodes))
    return result


@dataclass
class Stream:
    """One seed's world and gangs, the same for every arm."""

    cluster: Cluster
    make: Callable[[], Extender]
    jobs: list[Job]
    arrivals: np.ndarray
    pods: list[list[dict]]


def stream(nodes: int, gangs: int, seed: int, load: float, limited: float, scorer: str) -> Stream:
    cluster, make = world(nodes, seed, scorer)
    jobs = gang_jobs(cluster, np.random.default_rng([seed, 1]), gangs)
    rng = np.random.default_rng([seed, 6])
    limits = rng.random(len(jobs)) < limited
    hints = [j.work_s * float(rng.lognormal(0, 0.3)) for j in jobs]
    pods = [member_pods(cluster, j, bool(limits[k]), hints[k]) for k, j in enumerate(jobs)]
    mean_gpus = statistics.mean(j.replicas * j.gpus_per_replica for j in jobs)
    mean_s = statistics.mean(j.work_s for j in jobs)  # as telemetry_scale's stream: compute on an H100
    gap = mean_gpus * mean_s / (load * nodes * GPUS_PER_NODE)
    arrivals = np.cumsum(np.random.default_rng([seed, 3]).exponential(gap, len(jobs)))
    return Stream(cluster, make, jobs, arrivals, pods)


def run_seed(world_: Stream, seed: int, probe: bool) -> dict[str, ArmResult]:
    arms: dict[str, tuple[Arm, Callable[[Extender], Extender]]] = {
        JOINT: (joint, lambda e: e), POD_BY_POD: (pod_by_pod, lambda e: e)}
    if probe:
        arms[ONE_SCALE] = (joint_one_scale, one_scale)
    out = {}
    for name, (arm, adapt) in arms.items():
        print(f"seed {seed}: {name} ...", file=sys.stderr, flush=True)
        out[name] = run_arm(world_.cluster, adapt(world_.make()), world_.jobs, world_.arrivals, world_.pods,
                            arm)
    return out


@dataclass
class Paired:
    """Each decision of the joint arm's stream asked of every arm on the same cluster state."""

    seconds: dict[str, list[float]] = field(default_factory=dict)  # arm -> the gang's JCT where it put it
    shapes: list[tuple[int, int, bool]] = field(default_factory=list)  # replicas, GPUs each, rack-limited
    gpus: dict[str, list[str]] = field(default_factory=dict)  # arm -> the GPU product most of it ran on


def paired(world_: Stream, probe: bool) -> Paired:
    """The joint arm's stream; at each of its decisions, pod by pod (and the probe) asked first on the same
    state, their bindings undone, so the arms' choices compare gang by gang without the streams diverging."""
    out = Paired()
    cluster = world_.cluster
    where = {n: i for i, n in enumerate(cluster.names)}

    def every_arm(extender: Extender, pods: list[dict], free: np.ndarray,
                  job: Job) -> tuple[list[str] | None, float]:
        asked: dict[str, list[str] | None] = {}
        asked[POD_BY_POD], _ = pod_by_pod(extender, pods, free, job)
        for pod in pods:  # undone: pending again
            extender.cluster.apply("pods", "MODIFIED", pod)
        if probe:
            own = extender.scorer
            extender.scorer = OneTimeScale(own)
            asked[ONE_SCALE], _ = joint_one_scale(extender, pods, free, job)
            extender.scorer = own
            for pod in pods:  # its members assumed nowhere again
                extender.cluster.settle(pod["metadata"]["uid"], None)
        asked[JOINT], took = joint(extender, pods, free, job)
        if all(nodes is not None for nodes in asked.values()):
            for name, nodes in asked.items():
                assert nodes is not None
                at = [where[n] for n in nodes]
                out.seconds.setdefault(name, []).append(gang_seconds(cluster, job, at))
                products = [str(cluster.gpu[i]) for i in at]
                out.gpus.setdefault(name, []).append(Counter(sorted(products)).most_common(1)[0][0])
            out.shapes.append((job.replicas, job.gpus_per_replica, MAX_PEER_DISTANCE in pods[0]["metadata"][
                "annotations"]))
        return asked[JOINT], took

    run_arm(cluster, world_.make(), world_.jobs, world_.arrivals, world_.pods, every_arm)
    return out


# ---- the probe: what the joint search does when its walks' values share one time scale -----------------
class OneTimeScale:
    """The model scorer with each candidate's model part read against one reference time per decision
    (the best predicted time of the gang's first scoring call) instead of the best of each call, so that
    sums over different walks compare predicted times. A bench-only probe of why joint loses; the
    extender's own scorer is unchanged."""

    def __init__(self, inner: NodeScorer):
        self.inner = inner
        self.name = inner.name
        self.reference: float | None = None

    def score(self, req: Request, idx: np.ndarray) -> Scored:
        scored = self.inner.score(req, idx)
        seconds = scored.factors.get("predicted_seconds")
        if seconds is None or not len(seconds):  # the heuristic answered: nothing to rescale
            return scored
        if self.reference is None:
            self.reference = float(seconds.min())
        per_call = np.clip(1 - (seconds / seconds.min() - 1) / SLOWDOWN_AT_ZERO, 0, 1)
        value = scored.value + (1 - HEURISTIC_SHARE) * (np.minimum(1.0, self.reference / seconds) - per_call)
        return Scored(value, value, scored.factors, scored.scorer)


def one_scale(extender: Extender) -> Extender:
    extender.scorer = OneTimeScale(extender.scorer)
    return extender


def joint_one_scale(extender: Extender, pods: list[dict], free: np.ndarray,
                    job: Job) -> tuple[list[str] | None, float]:
    assert isinstance(extender.scorer, OneTimeScale)
    extender.scorer.reference = None  # a decision of its own
    return joint(extender, pods, free, job)


# ---- report -----------------------------------------------------------------------------------------
def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} / {np.percentile(values, 90) * 1000:.1f} ms"


def report(args: argparse.Namespace, runs: dict[int, dict[str, ArmResult]], pairs: dict[int, Paired],
           load: tuple[float, float], wall: float) -> str:
    rows = []
    for seed, arms in runs.items():
        base = arms[POD_BY_POD].mean(jct)
        for name, arm in arms.items():
            one, split = arm.split_one_node
            rows.append(f"| {seed} | {name} | {arm.mean(jct):,.0f} s | {arm.mean(from_arrival):,.0f} s | "
                        f"{arm.mean(jct) / base:.3f} | {arm.split:.1%} ({split}/{one}) | "
                        f"{arm.mean(nodes_used):.2f} | {ms([g.decide for g in arm.placed])} |")
    names = list(next(iter(runs.values())))
    ratio = {name: [arms[name].mean(jct) / arms[POD_BY_POD].mean(jct) for arms in runs.values()]
             for name in names}
    every = {name: [g for arms in runs.values() for g in arms[name].placed] for name in names}
    unplaced = {name: sum(arms[name].unplaced for arms in runs.values()) for name in names}
    mean_ratio = statistics.mean(ratio[JOINT])
    verdict = ("met" if max(ratio[JOINT]) <= 1 else "met on the mean, not on every seed" if mean_ratio <= 1
               else "missed")
    scorer = ("the shipped model (models/current.json)" if args.scorer == "model"
              else "the topology heuristic")
    seeds = ",".join(str(s) for s in args.seeds)
    flags = (f"--nodes {args.nodes} --gangs {args.gangs} --seeds {seeds} --load {args.load:g} "
             f"--limited {args.limited:g} --scorer {args.scorer} --paired '{','.join(map(str, args.paired))}'"
             + (" --no-probe" if not args.probe else ""))
    lines = [
        SECTION, "",
        f"Command: `nice -n 15 python bench/gang_jct.py {flags}` ({time.strftime('%Y-%m-%d')}, 2 cores "
        f"shared with other work: load average {load[0]:.1f} at the start, {load[1]:.1f} at the end; "
        f"{wall:.0f} s).", "",
        f"The real extender (read model, filters, {scorer}, shortlist 1) over the simulator's cluster of "
        f"{args.nodes} nodes (default profile, racks of about 24 nodes), every node pair's link in its "
        f"telemetry store (measured once, 8% noise). {args.gangs} training gangs (telemetry_scale's "
        f"`gang_jobs`: 2, 4 or 8 replicas of 4 or 8 GPUs, data in a zone; {args.limited:.0%} with "
        f"`max-peer-distance: rack`) arrive as one Poisson stream at {args.load:.0%} of the GPUs, first come "
        "first placed. Joint: `decide_gang` (POST /gang), room by free GPUs. Pod by pod: each member through "
        "`Extender.filter` over the nodes with room, the members before it bound as pods of its job, on "
        "filter's node (prioritize's best if it passes more). JCT: the simulator's law without noise, from "
        "start (the gang ends with its slowest replica); from arrival adds the wait. Split: on more nodes "
        "than the free GPUs required then (in brackets: of the gangs one node could hold, how many went to "
        "more than one / how many). Decision: the /gang call, or the sum of a gang's filter (+ prioritize) "
        "calls, median / p90, in process.", "",
        "| seed | arm | mean JCT | from arrival | JCT / pod by pod | split | nodes per gang | decision |",
        "|---|---|---|---|---|---|---|---|",
        *rows, "",
        f"- Joint against pod by pod, mean JCT over the seeds: **{mean_ratio:.3f}** (target <= 1: {verdict}; "
        f"per seed {', '.join(f'{r:.3f}' for r in ratio[JOINT])}).",
    ]
    for name in names:
        gangs = every[name]
        split = statistics.mean(nodes_used(g) > g.fewest for g in gangs)
        refused = sum(arms[name].refused for arms in runs.values())
        waited = statistics.mean(g.waited for g in gangs)
        lines.append(f"- {name}, all seeds: split {split:.1%}, "
                     f"{statistics.mean(nodes_used(g) for g in gangs):.2f} nodes per gang, decision "
                     f"{ms([g.decide for g in gangs])}; {refused} attempts placed nothing although the free "
                     f"GPUs held the gang (it waited on), mean wait {waited:,.0f} s; {unplaced[name]} gangs "
                     "left out (no room on an idle cluster).")
    if ONE_SCALE in ratio:
        lines.append(f"- Probe (not the extender's code): the joint search with every walk's model part read "
                     f"against one reference time: {statistics.mean(ratio[ONE_SCALE]):.3f} of pod by pod "
                     f"(per seed {', '.join(f'{r:.3f}' for r in ratio[ONE_SCALE])}).")
    for seed, pair in pairs.items():
        lines += ["", *paired_report(seed, pair)]
    return "\n".join([*lines, ""])


def paired_report(seed: int, pair: Paired) -> list[str]:
    """Gang by gang on the same states: the arms' mean JCT, by gang shape, and where joint lost most."""
    base = np.array(pair.seconds[POD_BY_POD])
    others = [name for name in pair.seconds if name != POD_BY_POD]
    shapes = sorted(set(pair.shapes))
    rows = []
    for shape_ in shapes:
        at = np.array([s == shape_ for s in pair.shapes])
        cells = " | ".join(f"{np.mean(np.array(pair.seconds[n])[at]) / np.mean(base[at]):.3f}"
                           for n in others)
        rows.append(f"| {shape_[0]} x {shape_[1]} GPUs{', rack-limited' if shape_[2] else ''} | {at.sum()} | "
                    f"{np.mean(base[at]):,.0f} s | {cells} |")
    ratio = np.array(pair.seconds[JOINT]) / base
    lost = [(pair.gpus[JOINT][k], pair.gpus[POD_BY_POD][k]) for k in np.flatnonzero(ratio > 1.1)]
    swaps = Counter(lost).most_common(4)
    return [
        f"Seed {seed}, gang by gang: the joint arm's stream, and at each of its {len(base)} decisions the "
        "other arms asked first on the same cluster state (their bindings undone), so the choices compare "
        "without the streams diverging. Mean JCT over those decisions, against pod by pod's:", "",
        "| gangs | decisions | pod by pod | " + " | ".join(others) + " |",
        "|---|---|---|" + "---|" * len(others),
        f"| all | {len(base)} | {base.mean():,.0f} s | "
        + " | ".join(f"{np.mean(pair.seconds[n]) / base.mean():.3f}" for n in others) + " |",
        *rows, "",
        f"- Joint slower than pod by pod by more than 10% on {len(lost)} of {len(base)} gangs, faster by "
        f"more than 10% on {int((ratio < 1 / 1.1).sum())}; where slower, the GPU it mostly ran on (joint "
        "against pod by pod): " + (", ".join(f"{a} against {b} ({n})" for (a, b), n in swaps) or "none")
        + ".",
    ]


def jct(g: Placed) -> float:
    return g.seconds


def from_arrival(g: Placed) -> float:
    return g.seconds + g.waited


def nodes_used(g: Placed) -> float:
    return float(len(set(g.nodes)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--gangs", type=int, default=300)
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",") if x],
                        default=[2027, 2028, 2029])
    parser.add_argument("--load", type=float, default=0.7)
    parser.add_argument("--limited", type=float, default=0.25,
                        help="share of gangs with max-peer-distance rack")
    parser.add_argument("--no-probe", dest="probe", action="store_false",
                        help="leave out the probe arm (joint with one time scale per decision)")
    parser.add_argument("--scorer", choices=("model", "topology"), default="model")
    parser.add_argument("--paired", type=lambda s: [int(x) for x in s.split(",") if x], default=[2029],
                        help="seeds whose joint stream also asks the other arms at each decision "
                        "('' for none)")
    parser.add_argument("--no-publish", action="store_true", help="print the section, leave the docs alone")
    args = parser.parse_args()
    exit_on_sigterm()
    load_start, started = os.getloadavg()[0], time.monotonic()
    probe = args.probe and args.scorer == "model"  # the heuristic's values need no common scale
    shape_ = (args.nodes, args.gangs)
    runs = {seed: run_seed(stream(*shape_, seed, args.load, args.limited, args.scorer), seed, probe)
            for seed in args.seeds}
    pairs = {}
    for seed in args.paired:
        print(f"seed {seed}: paired ...", file=sys.stderr, flush=True)
        pairs[seed] = paired(stream(*shape_, seed, args.load, args.limited, args.scorer), probe)
    section = report(args, runs, pairs, (load_start, os.getloadavg()[0]), time.monotonic() - started)
    return publish_unless(args.no_publish, section)


if __name__ == "__main__":
    raise SystemExit(main())
