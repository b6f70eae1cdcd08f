"""Failover on the installed chart: 2 extender, 2 operator and 2 kube-scheduler replicas on the real
node, and during a burst of gangs (GPUJobs, an indexed batch Job gated by the admission webhook) and
single pods on the KWOK nodes, SIGKILL the extender replica kube-scheduler is talking to, then the
operator replica that leads, then the kube-scheduler holding the Lease. Afterwards every workload
ran once and finished, no node ever had more GPUs bound than it has, every hard limit held (peers
within their rack or zone, data within its zone). That 95% of the gangs that had a node with room
for them at their start landed on one node is checked last and is an expected failure for now (the
test says why when it falls short).

Kills go through the node's containerd (`ctr tasks kill -s SIGKILL`): no Lease released, no
connection closed in order; the kubelet restarts the container in the same pod. Recovery times are
printed as `[e2e]` lines, never asserted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client

from netsched.api import labels
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.devcluster.pods import gpu_pod, indexed_job
from netsched.devcluster.wait import poll
from netsched.jobs.replica_pods import pod_name
from netsched.testing import chart, extender_http
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import free_gpus, scratch_namespace

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "tests/e2e/values.yaml"
DOUBLED = ("operator", "extender", "scheduler")
REPLICAS = dict.fromkeys(DOUBLED, 2) | {"agent": 1}
DURATION = "20s"  # each workload's run time on its KWOK node
WAVES = 5  # of 47 GPUs each, on 64: the queue never empties while a component is down
JOB_NAME = "batch.kubernetes.io/job-name"
DATA_ZONE = "zone-a"
ONE_NODE_SHARE = 0.95


@dataclass
class Burst:
    """What the burst created: GPUJob -> (replicas, the node label its peers share, if any), batch
    Jobs, bare pods, and the GPUJobs and pods whose data is in DATA_ZONE."""
    gpujobs: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    batch_jobs: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    data_bound: list[str] = field(default_factory=list)
    waves: list[set[str]] = field(default_factory=list)  # the workloads of each wave
    refused: list[float] = field(default_factory=list)  # when the admission webhook could not answer

    def create(self, call: Callable, *args) -> None:
        """Creates an object as a controller would: again while the admission webhook (failurePolicy
        Fail; the namespace is opted in) cannot be reached, each refusal noted."""
        deadline = time.monotonic() + 60
        while True:
            try:
                call(*args)
                return
            except client.ApiException as exc:
                if exc.status != 500 or "failed calling webhook" not in (exc.body or "") or (
                        time.monotonic() > deadline):
                    raise
                self.refused.append(time.monotonic())
                time.sleep(0.5)


GANG_GPUS = {"pair": 8, "wide": 16, "data": 4, "duo": 4, "batch": 8}  # by the name's prefix


def submit_wave(core: client.CoreV1Api, custom: client.CustomObjectsApi, batch: client.BatchV1Api, ns: str,
                w: int, plan: Burst) -> None:
    """A 2x4 gang within a rack, a 2x8 gang within a zone, a 2x2 gang next to its data, two 2x2 gangs,
    a 2x4 batch Job gang, two 1-GPU pods and a 1-GPU pod next to its data: 47 GPUs."""
    jobs = {
        f"pair-{w}": make_gpujob(f"pair-{w}", replicas=2, gpus=4, manifest=True, duration=DURATION,
                                 gang={"minAvailable": 2}, network={"maxPeerDistance": "rack"}),
        f"wide-{w}": make_gpujob(f"wide-{w}", replicas=2, gpus=8, manifest=True, duration=DURATION,
                                 gang={"minAvailable": 2}, network={"maxPeerDistance": "zone"}),
        f"data-{w}": make_gpujob(f"data-{w}", replicas=2, gpus=2, manifest=True, duration=DURATION,
                                 gang={"minAvailable": 2}, network={"maxDataDistance": "zone"},
                                 dataSources=[{"name": "input", "kind": "zone", "location": DATA_ZONE}]),
        **{f"duo-{w}-{i}": make_gpujob(f"duo-{w}-{i}", replicas=2, gpus=2, manifest=True, duration=DURATION,
                                       gang={"minAvailable": 2}) for i in range(2)},
    }
    for body in jobs.values():
        plan.create(custom.create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, body)
    plan.gpujobs |= {name: (2, {"pair": labels.RACK_LABEL, "wide": labels.ZONE_LABEL}.get(name.split("-")[0]))
                     for name in jobs}
    plan.data_bound.append(f"data-{w}")
    job = indexed_job(f"batch-{w}", 2, 4, duration=DURATION)
    job["spec"]["template"]["spec"]["schedulerName"] = chart.SCHEDULER_NAME
    # the label that tells the extender which pods are one job (GPUJob pods get it from the operator)
    job["spec"]["template"]["metadata"]["labels"] = {labels.JOB_LABEL: f"batch-{w}"}
    plan.create(batch.create_namespaced_job, ns, job)
    plan.batch_jobs.append(f"batch-{w}")
    near_data = {labels.DATA_SOURCE: f"zone:{DATA_ZONE}", labels.MAX_DATA_DISTANCE: "zone"}
    for name, notes in ((f"single-{w}-0", {}), (f"single-{w}-1", {}), (f"near-data-{w}", near_data)):
        pod = gpu_pod(name, 1, duration=DURATION, scheduler=chart.SCHEDULER_NAME, annotations=notes)
        plan.create(core.create_namespaced_pod, ns, pod)
        plan.pods.append(name)
    plan.data_bound.append(f"near-data-{w}")
    plan.waves.append({*jobs, f"batch-{w}", f"single-{w}-0", f"single-{w}-1", f"near-data-{w}"})


def pinned_node(pod: client.V1Pod) -> str | None:
    """The node a released, unbound, live pod was pinned to as its gang's gates lifted."""
    live = not pod.spec.node_name and pod.status.phase == "Pending" and not pod.metadata.deletion_timestamp
    pinned = (pod.metadata.annotations or {}).get(labels.PINNED_NODE)
    return pinned if live and not pod.spec.scheduling_gates else None


def gang_of(pod: client.V1Pod) -> str | None:
    """The GPUJob or batch Job a pod belongs to."""
    on_pod = pod.metadata.labels or {}
    return on_pod.get(labels.JOB_LABEL) or on_pod.get(JOB_NAME)


class Watcher:
    """Looks at the cluster about twice a second while the burst runs: every node's bound GPUs against
    its capacity, when each pod was first seen bound, and for each gang every node's free GPUs at the
    look before its placement was decided: before its first pod was seen pinned to a node (its gang
    placed as one decision as its gates lifted), else before its first pod was bound. Free GPUs are
    those no live pod holds, bound or pinned to the node on its way (room promised to another gang)."""

    def __init__(self, core: client.CoreV1Api, ns: str) -> None:
        self.core, self.ns = core, ns
        self.overcommitted: list[dict[str, int]] = []
        # pod -> when first seen bound, its workload, its node
        self.bound_at: dict[str, tuple[float, str, str]] = {}
        self.free_before: dict[str, dict[str, int]] = {}  # gang -> free GPUs by node before it was placed
        self.looks = self.failed_looks = 0
        self._stop = threading.Event()
        self._free: dict[str, int] = {}
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._look()
            except Exception:  # noqa: BLE001 - an API server busy with the failover: counted, looked again
                self.failed_looks += 1

    def _look(self) -> None:
        free = free_gpus(self.core)
        pods = self.core.list_namespaced_pod(self.ns).items
        now = time.monotonic()
        self.looks += 1
        if any(gpus < 0 for gpus in free.values()):
            self.overcommitted.append(free)
        spoken = dict(free)
        for pod in pods:
            gang, pin = gang_of(pod), pinned_node(pod)
            if pin in spoken:
                spoken[pin] -= sum(int((c.resources.limits or {}).get(labels.GPU_RESOURCE, 0))
                                   for c in pod.spec.containers)
            if (pin or pod.spec.node_name) and gang and gang not in self.free_before and self._free:
                self.free_before[gang] = self._free
            if pod.spec.node_name and pod.metadata.name not in self.bound_at:
                self.bound_at[pod.metadata.name] = now, gang or pod.metadata.name, pod.spec.node_name
        self._free = spoken

    def first_bound(self, workloads: set[str]) -> float | None:
        """When the first pod of these workloads was seen bound."""
        seen = [t for t, workload, _ in self.bound_at.values() if workload in workloads]
        return min(seen) if seen else None


def extender_answers(cluster, core: client.CoreV1Api) -> dict[str, float]:
    """Filter and prioritize requests each live extender container answered (a restarted container
    starts again from 0 under its new id)."""
    answers = {}
    for pod in chart.component_pods(core, "extender"):
        [status] = pod.status.container_statuses or [None]
        if status is None or not status.container_id or not status.ready:
            continue
        try:
            # the metrics port, for a token the API server allows: the dev-cluster's admin
            metrics = chart.scrape(cluster, pod, 8889, https=True, token=extender_http.admin_token(cluster))
        except OSError:
            continue
        answers[status.container_id] = sum(chart.metric_sum(metrics, "netsched_extender_requests_total",
                                                            verb=verb) for verb in ("filter", "prioritize"))
    return answers


def serving_extender(cluster, core: client.CoreV1Api, last: dict[str, float]) -> client.V1Pod | None:
    """The extender replica kube-scheduler's connection reaches: the only one that answered since the
    counts in `last`, which move on to now."""
    now = extender_answers(cluster, core)
    serving = [c for c, n in now.items() if n > last.get(c, 0)]
    last.update(now)
    if len(serving) != 1:
        return None
    return next(p for p in chart.component_pods(core, "extender")
                if p.status.container_statuses[0].container_id == serving[0])


def operator_leaders(cluster, core: client.CoreV1Api) -> list[client.V1Pod]:
    """The operator replicas whose netsched_operator_leader gauge is 1."""
    leaders = []
    for pod in chart.component_pods(core, "operator"):
        try:
            metrics = chart.scrape(cluster, pod, 9090)
        except OSError:
            continue
        if chart.metric_sum(metrics, "netsched_operator_leader") == 1:
            leaders.append(pod)
    return leaders


def lease_holder(coordination: client.CoordinationV1Api) -> str:
    """kube-scheduler's holder identity in the chart's Lease: `<pod name>_<uuid of the process>`."""
    lease = coordination.read_namespaced_lease(f"{chart.RELEASE}-scheduler", chart.NAMESPACE)
    return lease.spec.holder_identity or ""


def restarted(core: client.CoreV1Api, pod: client.V1Pod) -> bool:
    """The pod's container restarted after a kill and is Ready again."""
    [before] = pod.status.container_statuses
    now = core.read_namespaced_pod(pod.metadata.name, chart.NAMESPACE)
    [status] = now.status.container_statuses
    return status.restart_count > before.restart_count and status.ready


def wait_done(core: client.CoreV1Api, custom: client.CustomObjectsApi, batch: client.BatchV1Api, ns: str,
              plan: Burst) -> None:
    def unfinished() -> list[str]:
        left = [j for j in plan.gpujobs if (custom.get_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, j).get("status") or {}).get("phase") != "Succeeded"]
        left += [j for j in plan.batch_jobs if (batch.read_namespaced_job(j, ns).status.succeeded or 0) < 2]
        pods = {p.metadata.name: p.status.phase for p in core.list_namespaced_pod(ns).items}
        return left + [p for p in plan.pods if pods.get(p) != "Succeeded"]

    last: list[list[str]] = [[]]

    def done() -> bool:
        last[0] = unfinished()
        return not last[0]

    try:
        poll(done, 420, "every workload of the burst to finish", interval=2)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; unfinished: {last[0]}") from exc


def not_run_once(core: client.CoreV1Api, ns: str, plan: Burst) -> list[str]:
    """Unless each GPUJob replica had one pod (its first attempt) and each batch Job one pod per index,
    what was lost or run twice."""
    pods = core.list_namespaced_pod(ns).items
    by_gang: dict[str, list[str]] = {}
    for pod in pods:
        if gang := gang_of(pod):
            by_gang.setdefault(gang, []).append(pod.metadata.name)
    problems = [f"GPUJob {job}: pods {sorted(by_gang.get(job, []))}, want one first attempt per replica"
                for job, (replicas, _) in plan.gpujobs.items()
                if sorted(by_gang.get(job, [])) != sorted(pod_name(job, r, 0) for r in range(replicas))]
    return problems + [f"batch Job {job}: pods {by_gang.get(job)}, want 2" for job in plan.batch_jobs
                       if len(by_gang.get(job, [])) != 2]


def limits_broken(core: client.CoreV1Api, ns: str, plan: Burst) -> list[str]:
    """Peers outside their rack or zone; GPUJob and bare pods with data in DATA_ZONE outside it."""
    of_node = {n.metadata.name: n.metadata.labels for n in core.list_node().items}
    pods = core.list_namespaced_pod(ns).items
    problems = []
    for job, (_, level) in plan.gpujobs.items():
        nodes = [p.spec.node_name for p in pods if gang_of(p) == job]
        if level and len(domains := {of_node[n][level] for n in nodes}) > 1:
            problems.append(f"GPUJob {job} spans {level} {sorted(domains)} (nodes {nodes})")
    for name in plan.data_bound:
        nodes = [p.spec.node_name for p in pods if gang_of(p) == name or p.metadata.name == name]
        if (zones := {of_node[n][labels.ZONE_LABEL] for n in nodes}) != {DATA_ZONE}:
            problems.append(f"{name}: data in {DATA_ZONE}, placed in {sorted(zones)} (nodes {nodes})")
    return problems


def split_gangs(core: client.CoreV1Api, ns: str, watcher: Watcher, events: list[client.CoreV1Event]
                ) -> tuple[list[str], dict[str, str], list[str], list[str]]:
    """Gangs of at most one node's GPUs that had a node with room for them when their first pod was
    placed, and those of them that did not land on one node, each with what explains it: its nodes,
    the room seen, when it was bound and the extender's NetworkPlacement messages; and the gangs the
    look before showed room for that had none by then; and the split ones no extender placed (kube-
    scheduler skipped it). Room when placed: the look before the gang
    was placed (Watcher) showed a node with room (up to half a second old, and gangs placed in the same
    look may have taken it first), and the extender, where it placed the first pod, did not find every
    candidate short of it (its message says so). `events`: the namespace's NetworkPlacement Events."""
    nodes: dict[str, set[str]] = {}
    for pod in core.list_namespaced_pod(ns).items:
        if gang := gang_of(pod):
            nodes.setdefault(gang, set()).add(pod.spec.node_name)
    node_labels = {n.metadata.name: n.metadata.labels for n in core.list_node().items}

    def room(gang: str) -> int:
        """The most free GPUs a node the gang may use had: in the rack its pods were pinned to, in
        the data's zone, or anywhere."""
        on = next(iter(nodes[gang]))
        kind = gang.split("-")[0]
        keep = {"pair": lambda n: node_labels[n][labels.RACK_LABEL] == node_labels[on][labels.RACK_LABEL],
                "data": lambda n: node_labels[n][labels.ZONE_LABEL] == DATA_ZONE}.get(kind, lambda n: True)
        return max((free for n, free in watcher.free_before[gang].items() if keep(n)), default=0)

    looked = [g for g in watcher.free_before if GANG_GPUS[g.split("-")[0]] <= min(8, room(g))]
    taken = sorted({g for g in looked for e in events if e.involved_object.name.startswith(g + "-")
                    and "no candidate had room for all" in e.message})
    roomy = [g for g in looked if g not in taken]
    split, unplaced = {}, []
    for gang in (g for g in roomy if len(nodes[g]) > 1):
        times = sorted((t, node) for t, of, node in watcher.bound_at.values() if of == gang)
        (first, node), last = times[0], times[-1][0]
        # what took the room its first pod's node had for the rest of it: kube-scheduler may have
        # assumed a pod there before the gang's next pod and bound it after, so a few seconds on
        meanwhile = {pod: t for pod, (t, of, on) in watcher.bound_at.items()
                     if on == node and of != gang and first - 0.5 <= t <= last + 5.0}
        # which extender replica placed each pod: the Event's reporting instance is its pod's name
        said = [f"{e.reporting_instance}: {e.message}" for e in events
                if e.involved_object.name.startswith(gang + "-")]
        theirs = [f"{e.reporting_instance}: {e.message}" for e in events
                  if e.involved_object.name in meanwhile]
        seen = [f"{pod} at {t - watcher.started:.1f} s" for pod, t in sorted(meanwhile.items())]
        if not said:  # placed while kube-scheduler skipped the extender
            unplaced.append(gang)
        split[gang] = (f"nodes {sorted(nodes[gang])}, room {room(gang)} before, bound at "
                       f"{[f'{t - watcher.started:.1f}' for t, _ in times]} s; bound on {node} "
                       f"meanwhile: {seen or 'nothing seen'}; extender: {said or 'no placement event'}; "
                       f"extender on what was bound there: {theirs or 'none'}")
    return roomy, split, taken, unplaced


@pytest.fixture
def failover_chart(cluster, image) -> Iterator[client.ApiClient]:
    """The chart with every component doubled but the agent, uninstalled afterwards with its
    namespace (the scheduler's Lease of a killed holder goes with it)."""
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    t = time.monotonic()
    chart.helm(cluster, "install", chart.RELEASE, ROOT / "charts/netsched", "-n", chart.NAMESPACE,
               "--create-namespace", "-f", VALUES, *(f"--set={c}.replicas={REPLICAS[c]}" for c in DOUBLED),
               "--wait", "--timeout", "6m")
    poll(lambda: chart.all_pods_ready(core, REPLICAS), 180, f"the netsched pods ({REPLICAS}) Ready")
    chart.timed("helm install --wait with 2 extender, 2 operator and 2 kube-scheduler replicas", t)
    try:
        yield api
    finally:
        chart.helm(cluster, "uninstall", chart.RELEASE, "-n", chart.NAMESPACE, "--wait", "--timeout", "3m")
        core.delete_namespace(chart.NAMESPACE)
        poll(lambda: chart.NAMESPACE not in {n.metadata.name for n in core.list_namespace().items}, 180,
             f"namespace {chart.NAMESPACE} to go")


def kill_and_time(what: str, kill: Callable[[], float], recovered: Callable[[], object], plan: Burst,
                  watcher: Watcher) -> None:
    """Runs `kill` (which submits the next wave after killing, and returns when it killed), waits for
    `recovered`, then for a pod of that wave to be bound; prints both delays."""
    killed = kill()
    print(f"[e2e] {what} SIGKILLed at {killed - watcher.started:.1f} s", flush=True)
    poll(recovered, 180, f"{what} to recover", interval=0.5)
    took = time.monotonic() - killed
    wave = len(plan.waves) - 1
    bound = poll(lambda: watcher.first_bound(plan.waves[wave]), 180, f"a pod of wave {wave} bound")
    print(f"[e2e] {what}: recovered in {took:.1f} s; the first pod of the wave submitted after the "
          f"kill bound {bound - killed:.1f} s after it", flush=True)


def test_a_burst_survives_killing_the_serving_extender_the_operator_leader_and_the_scheduler_leader(
        cluster, failover_chart):
    api = failover_chart
    core, custom, batch = client.CoreV1Api(api), client.CustomObjectsApi(api), client.BatchV1Api(api)
    plan = Burst()
    started = time.monotonic()
    with scratch_namespace(core, "e2e-failover") as ns:
        opt_in = {labels.GANG_OPT_IN_LABEL: labels.GANG_OPT_IN_VALUE}  # the batch Jobs' pods get the gate
        core.patch_namespace(ns, {"metadata": {"labels": opt_in}})
        with Watcher(core, ns) as watcher:
            burst_with_kills(cluster, api, ns, plan, watcher)
            t = time.monotonic()
            wait_done(core, custom, batch, ns, plan)
            chart.timed(f"the rest of the burst finished ({WAVES} waves: {len(plan.gpujobs)} GPUJobs, "
                  f"{len(plan.batch_jobs)} batch Jobs, {len(plan.pods)} pods)", t)
        if plan.refused:
            print(f"[e2e] creations refused while the admission webhook could not answer: "
                  f"{len(plan.refused)}, over {plan.refused[-1] - plan.refused[0]:.1f} s", flush=True)
        print(f"[e2e] {watcher.looks} looks at the cluster ({watcher.failed_looks} failed under load), "
              f"{len(watcher.bound_at)} pods seen bound", flush=True)
        placements = core.list_namespaced_event(ns, field_selector="reason=NetworkPlacement").items
        unexplained = sorted(set(watcher.bound_at) - {e.involved_object.name for e in placements})
        print(f"[e2e] pods bound with no placement event (kube-scheduler skipped the extender, or a "
              f"killed replica had not written it yet): {len(unexplained)}: {unexplained}", flush=True)
        problems = [f"GPUs over-committed: {free}" for free in watcher.overcommitted[:3]]
        problems += not_run_once(core, ns, plan) + limits_broken(core, ns, plan)
        roomy, split, taken, unplaced = split_gangs(core, ns, watcher, placements)
        print(f"[e2e] gangs of one node's GPUs with a node that had room when placed: "
              f"{len(roomy) - len(split)} of {len(roomy)} on one node; {len(taken)} more had room at the "
              f"look before but none when the extender placed their first pod: {taken}", flush=True)
        for gang, why in split.items():
            print(f"[e2e]   {gang} split: {why}", flush=True)
        assert watcher.looks > 0 and roomy
        assert not problems, "\n".join(problems)
        chart.timed("failover burst in all (after install)", started)
        # Known short of the target: a gang whose pods kube-scheduler placed without the extender
        # (its call to the killed replica was in flight; ignorable, so skipped; no placement event)
        # is placed by kube-scheduler's own scores alone. The gangs the extender placed must meet it.
        allowed = (1 - ONE_NODE_SHARE) * len(roomy)
        by_extender = sorted(set(split) - set(unplaced))
        assert len(by_extender) <= allowed, (
            f"{len(by_extender)} of {len(roomy)} gangs the extender placed split although a node had "
            f"room (target: at most {1 - ONE_NODE_SHARE:.0%}): "
            + "; ".join(f"{g}: {split[g]}" for g in by_extender))
        if len(split) > allowed:
            # CI shows only this line
            pytest.xfail(f"{len(split)} of {len(roomy)} gangs that had a node with room split "
                         f"(target: at most {1 - ONE_NODE_SHARE:.0%}), {len(unplaced)} of them placed while "
                         f"kube-scheduler skipped the killed extender: {unplaced}")


def burst_with_kills(cluster, api: client.ApiClient, ns: str, plan: Burst, watcher: Watcher) -> None:
    """Waves 0 and 1, then each kill followed at once by the next wave, so that pods wait while the
    component is down."""
    core, custom, batch = client.CoreV1Api(api), client.CustomObjectsApi(api), client.BatchV1Api(api)
    coordination = client.CoordinationV1Api(api)
    poll(lambda: len(operator_leaders(cluster, core)) == 1, 120,
         "exactly one operator replica leading (netsched_operator_leader 1)")
    answers: dict[str, float] = extender_answers(cluster, core)
    submit_wave(core, custom, batch, ns, 0, plan)
    submit_wave(core, custom, batch, ns, 1, plan)

    # 1. the extender replica kube-scheduler is connected to
    serving = poll(lambda: serving_extender(cluster, core, answers), 120,
                   "one extender replica answering kube-scheduler")
    gone = serving.status.container_statuses[0].container_id

    def kill_extender() -> float:
        answers.update(extender_answers(cluster, core))
        chart.kill_container(cluster, serving)
        killed = time.monotonic()
        submit_wave(core, custom, batch, ns, 2, plan)
        return killed

    kill_and_time(f"extender {serving.metadata.name} (serving)", kill_extender,
                  lambda: any(n > answers.get(c, 0) for c, n in extender_answers(cluster, core).items()
                              if c != gone), plan, watcher)
    poll(lambda: restarted(core, serving), 180, f"extender {serving.metadata.name} to restart")

    # 2. the operator replica that leads
    [leader] = poll(lambda: (x := operator_leaders(cluster, core)) and len(x) == 1 and x, 120,
                    "exactly one operator replica leading")

    def kill_operator() -> float:
        chart.kill_container(cluster, leader)
        killed = time.monotonic()
        submit_wave(core, custom, batch, ns, 3, plan)
        return killed

    def new_leader_made_pods() -> bool:
        return len(operator_leaders(cluster, core)) == 1 and bool(
            core.list_namespaced_pod(ns, label_selector=f"{labels.JOB_LABEL}=pair-3").items)

    kill_and_time(f"operator leader {leader.metadata.name}", kill_operator, new_leader_made_pods, plan,
                  watcher)
    poll(lambda: restarted(core, leader), 180, f"operator {leader.metadata.name} to restart")
    poll(lambda: len(operator_leaders(cluster, core)) == 1, 60, "one operator leader with both replicas up")

    # 3. the kube-scheduler that holds the Lease
    holder = poll(lambda: lease_holder(coordination), 60, "the scheduler Lease's holder")
    [scheduler] = [p for p in chart.component_pods(core, "scheduler")
                   if holder.startswith(p.metadata.name + "_")]

    def kill_scheduler() -> float:
        chart.kill_container(cluster, scheduler)
        killed = time.monotonic()
        submit_wave(core, custom, batch, ns, 4, plan)
        return killed

    kill_and_time(f"kube-scheduler leader {scheduler.metadata.name}", kill_scheduler,
                  lambda: lease_holder(coordination) not in ("", holder), plan, watcher)
    print(f"[e2e] the scheduler Lease is now held by {lease_holder(coordination).split('_')[0]}", flush=True)
    poll(lambda: restarted(core, scheduler), 180, f"kube-scheduler {scheduler.metadata.name} to restart")
