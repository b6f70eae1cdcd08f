"""`netsched demo`: the main job, end to end on the dev-cluster.

It submits GPUJobs to the operator, which runs each as a gang of pods for the
`netsched` scheduler profile, whose extender places a job's replicas together and
near its data. It prints each job's phase and where its replicas went, why (the
extender's NetworkPlacement events), a gang that cannot fit waiting with its reason,
and the training records of the finished jobs. Beside them run indexed batch/v1 Jobs as they are
(netsched.demo.batch_jobs): one gated by netsched's webhook and released as one gang, and, when the
dev-cluster runs Kueue, one Kueue admits first; with the same explanations.

Then the cluster fills with a low-priority backfill job, and it shows foresight and
priorities: `whatif` for an urgent job before it is submitted (where it would wait, until
when, and what the packer would evict), a same-priority job waiting with its why-pending
message and predicted start, and the urgent job getting room through a PackingPlan. It
ends with a summary table.
"""

from __future__ import annotations

import time

from kubernetes import client

from netsched.api import conditions as c
from netsched.api import plans
from netsched.api.gpujob import GROUP, PLURAL, PREDICTED_START, TERMINAL, VERSION, Phase
from netsched.api.labels import GANG_OPT_IN_LABEL, GANG_OPT_IN_VALUE
from netsched.demo import batch_jobs as batch_jobs_
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.kueue import KUEUE
from netsched.devcluster.pods import DURATION_ANNOTATION
from netsched.devcluster.wait import poll
from netsched.foresight.whatif import Cluster, as_submitted, history, render, what_if
from netsched.foresight.why import render_why, why
from netsched.records.reader import read_rows

NAMESPACE = "netsched-demo"


def gpujob(name: str, replicas: int, gpus: int, duration: str, **spec) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUJob", "metadata": {"name": name},
        "spec": {"replicas": replicas, "gpusPerReplica": gpus, **spec, "template": {
            "metadata": {"annotations": {DURATION_ANNOTATION: duration}},
            "spec": {"containers": [{"name": "main", "image": "netsched/workload:dev"}]}}},
    }


# A 4x2-GPU training job whose data is in zone-b; a 2x4-GPU eval job that must stay
# in zone-a with its replicas in one rack; two single-replica jobs; and a 3x8-GPU gang
# that wants one rack, which holds only two 8-GPU nodes: it can never fit, is Blocked and says
# why, then fails at its scheduling timeout.
WORKLOAD = [
    gpujob("train", 4, 2, "6s", dataSources=[{"name": "corpus", "kind": "zone", "location": "zone-b"}],
           workload={"kind": "training", "inputSizeGB": 50, "communicationIntensity": "high"}),
    gpujob("eval", 2, 4, "4s", dataSources=[{"name": "eval-set", "kind": "zone", "location": "zone-a"}],
           network={"maxDataDistance": "zone", "maxPeerDistance": "rack"}, workload={"kind": "inference"}),
    gpujob("big-batch", 1, 8, "4s", workload={"kind": "batch"}),
    gpujob("notebook", 1, 1, "3s", workload={"kind": "inference"}),
    gpujob("rack-gang", 3, 8, "3s", network={"maxPeerDistance": "rack"},
           gang={"schedulingTimeoutSeconds": 20}),
]


def run_demo(cluster: DevCluster, keep: bool = False) -> int:
    started_here = len(cluster.running_components()) < len(cluster.components())
    if started_here:
        cluster.up()
    else:
        print(f"using the dev-cluster already running in {cluster.directory}")
    try:
        api = cluster.api_client()
        core, jobs, batch = client.CoreV1Api(api), client.CustomObjectsApi(api), client.BatchV1Api(api)
        _fresh_namespace(core)
        batch_jobs = [(batch_jobs_.PLAIN, "gated by netsched's webhook as the Job controller makes its pods")]
        if KUEUE in cluster.running_components():
            batch_jobs_.make_queue(api, NAMESPACE)
            batch_jobs.append((batch_jobs_.QUEUED, f"queued in Kueue LocalQueue gpus "
                               f"({batch_jobs_.QUEUE_GPUS} GPUs of quota): Kueue admits, netsched places"))
        t0 = time.monotonic()
        for job in WORKLOAD:
            jobs.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, job)
        for job, _ in batch_jobs:
            batch.create_namespaced_job(NAMESPACE, job)
        print(f"submitted {len(WORKLOAD)} GPUJobs in namespace {NAMESPACE} (kubectl -n {NAMESPACE} get "
              f"gpujobs), and {len(batch_jobs)} indexed batch Job(s) as they are: "
              f"{', '.join(batch_jobs_.name(j) for j, _ in batch_jobs)} (kubectl -n {NAMESPACE} get jobs)")
        if len(batch_jobs) == 1:
            print("skipped the Kueue-admitted Job: this dev-cluster runs no Kueue (its binary is not built: "
                  "run hack/kueue/build.sh once, about 14 minutes, then `make demo` again)")
        poll(lambda: all(_phase(j) in (Phase.RUNNING, *TERMINAL) or _waiting(j) for j in _jobs(jobs))
             and all(batch_jobs_.placed_or_said(core, NAMESPACE, j) for j, _ in batch_jobs), 90,
             "every job to run or to say why it waits")

        def finished() -> bool:
            return (all(_phase(j) in TERMINAL for j in _jobs(jobs))
                    and all(batch_jobs_.ended(batch, NAMESPACE, j) for j, _ in batch_jobs))
        # on a cold machine the jobs (seconds long) may all have ended by the first look: the tables
        # once, not the same tables twice
        def tables(last: bool) -> None:
            ended_ = " (every job has ended)" if last else ""
            _print_jobs(jobs, f"after {time.monotonic() - t0:.1f} s{ended_}")
            for job, how in batch_jobs:
                batch_jobs_.print_job(core, batch, NAMESPACE, job, how)
                if last and job is batch_jobs_.QUEUED:
                    print(f"  {batch_jobs_.kueue_admission(api, NAMESPACE, batch_jobs_.name(job))}")
        ended = finished()
        tables(ended)
        _print_explanations(core)
        if not ended:
            poll(finished, 120, "the demo jobs to finish")
            tables(True)
        _print_records(cluster, {j["metadata"]["uid"] for j in _jobs(jobs)})
        _priorities(cluster, api)
    finally:
        if started_here and not keep:
            cluster.down(quiet=True)
            print("dev-cluster stopped (pass --keep-cluster to leave it running)")
    if started_here and keep:
        print(f"dev-cluster left running: kubectl --kubeconfig {cluster.kubeconfig} -n {NAMESPACE} get gj")
    return 0


URGENT_CLASS = "netsched-demo-urgent"
QUEUED = gpujob("queued", 2, 8, "20s", workload={"kind": "training", "expectedDurationSeconds": 20})
URGENT = gpujob("urgent", 2, 8, "20s", priorityClassName=URGENT_CLASS,
                workload={"kind": "training", "expectedDurationSeconds": 20})


def _priorities(cluster: DevCluster, api: client.ApiClient) -> None:
    """A full cluster: whatif before submitting, a waiting job's why and ETA, and the packer making room."""
    core, jobs = client.CoreV1Api(api), client.CustomObjectsApi(api)
    try:
        client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": URGENT_CLASS},
                                                            "value": 100000})
    except client.ApiException as exc:
        if exc.status != 409:  # made by an earlier demo on this cluster
            raise
    gpus = sum(int((n.status.allocatable or {}).get("nvidia.com/gpu", 0)) for n in core.list_node().items)
    backfill = gpujob("backfill", gpus // 8, 8, "120s",
                      workload={"kind": "batch", "expectedDurationSeconds": 120})
    jobs.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, backfill)
    poll(lambda: _phase(_job(jobs, "backfill")) == Phase.RUNNING, 60, "the backfill job to fill the cluster")
    print(f"\nthe cluster is full: backfill runs {gpus // 8} x 8 GPUs at priority 0 for 120 s")

    state = Cluster.read(api)
    manifest = as_submitted(URGENT, NAMESPACE)
    print("\n$ netsched whatif -f urgent.yaml   (before submitting it; nothing is created)")
    print(_indent(render(what_if(state, manifest, history(state, cluster.records_file)))))

    jobs.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, QUEUED)
    poll(lambda: (_job(jobs, "queued").get("status") or {}).get(PREDICTED_START)
         and _condition(_job(jobs, "queued"), c.SCHEDULABLE), 30, "the waiting job's reason and ETA")
    print("\n$ netsched why queued   (submitted at priority 0: it waits)")
    print(_indent(render_why(why(Cluster.read(api), NAMESPACE, "queued"))))

    jobs.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, URGENT)
    print(f"\nsubmitted urgent (PriorityClass {URGENT_CLASS}): the packer makes room")
    plan = poll(lambda: _ended_plan(jobs) or {}, 90, "the PackingPlan to end")
    spec = plan["spec"]
    evicted = sorted(e["pod"].split("/")[1] for e in spec["evictions"])
    placed = [f"{p['pod'].split('/')[1]} on {p['node']}" for p in spec["placements"]]
    print(f"  PackingPlan {plan['metadata']['name']}: {plans.phase(plan)}; evicted {', '.join(evicted)}; "
          f"placed {', '.join(placed)}")
    poll(lambda: _phase(_job(jobs, "urgent")) in (Phase.RUNNING, *TERMINAL), 60, "the urgent job to run")
    _summary(jobs)


def _ended_plan(jobs: client.CustomObjectsApi) -> dict | None:
    listed = jobs.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)["items"]
    return next((p for p in listed if plans.phase(p) in plans.TERMINAL), None)


def _summary(jobs: client.CustomObjectsApi) -> None:
    print("\nsummary:")
    print(f"  {'job':<10} {'phase':<10} {'GPUs':>4}  {'started':<20} {'predicted finish':<20} how")
    for job in sorted(_jobs(jobs), key=lambda j: j["metadata"]["creationTimestamp"]):
        status = job.get("status") or {}
        admitted = _condition(job, c.ADMITTED)
        how = (f"{admitted.get('reason')}" if admitted else "-") + (
            f" (waiting: {_condition(job, c.SCHEDULABLE).get('reason')})"
            if _phase(job) == Phase.PENDING else "")
        finish = status.get("predictedCompletionTime") or "-"
        print(f"  {job['metadata']['name']:<10} {status.get('phase', '-'):<10} {status.get('gpus', '-'):>4}  "
              f"{status.get('startTime') or '-':<20} {finish:<20} {how}")


def _job(jobs: client.CustomObjectsApi, name: str) -> dict:
    return jobs.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _fresh_namespace(core: client.CoreV1Api) -> None:
    try:
        core.delete_namespace(NAMESPACE)
        poll(lambda: not _namespace_exists(core), 120, f"namespace {NAMESPACE} to be deleted")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    # opted in to netsched's admission webhook: the pods of a Job, JobSet, ... here are gated as made
    core.create_namespace({"metadata": {"name": NAMESPACE, "labels": {GANG_OPT_IN_LABEL: GANG_OPT_IN_VALUE}}})
    poll(lambda: core.read_namespaced_service_account("default", NAMESPACE), 60,
         f"the default ServiceAccount in {NAMESPACE}")


def _namespace_exists(core: client.CoreV1Api) -> bool:
    try:
        core.read_namespace(NAMESPACE)
        return True
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise


def _jobs(jobs: client.CustomObjectsApi) -> list[dict]:
    return jobs.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]


def _phase(job: dict) -> str | None:
    return (job.get("status") or {}).get("phase")


def _condition(job: dict, type_: str) -> dict:
    return c.find((job.get("status") or {}).get("conditions") or [], type_) or {}


def _waiting(job: dict) -> bool:
    return _condition(job, c.ADMITTED).get("reason") == c.WAITING_FOR_CAPACITY


def _print_jobs(jobs: client.CustomObjectsApi, when: str) -> None:
    print(f"\nGPUJobs {when}:")
    print(f"  {'job':<10} {'phase':<10} {'ready':>5} {'GPUs':>4}  placement")
    for job in sorted(_jobs(jobs), key=lambda j: j["metadata"]["name"]):
        status = job.get("status") or {}
        placed = status.get("placements") or []
        racks = sorted({p["rack"] for p in placed})
        zones = sorted({p["zone"] for p in placed})
        where = (f"{len(placed)} replicas on {len({p['node'] for p in placed})} node(s), "
                 f"rack(s) {', '.join(racks)} in {', '.join(zones)}") if placed else "-"
        if _phase(job) in (Phase.FAILED, Phase.BLOCKED) or (_phase(job) == Phase.PENDING and _waiting(job)):
            cond = _condition(job, c.FAILED) or _condition(job, c.ADMITTED)
            where = f"{cond.get('reason')}: {cond.get('message')}"
        print(f"  {job['metadata']['name']:<10} {status.get('phase', '-'):<10} {status.get('ready', '-'):>5} "
              f"{status.get('gpus', '-'):>4}  {where}")


def _print_explanations(core: client.CoreV1Api) -> None:
    """The extender's NetworkPlacement events: why each pod went where it did."""
    events = poll(lambda: core.list_namespaced_event(NAMESPACE, field_selector="reason=NetworkPlacement")
                  .items, 30, "the extender's placement events")
    print("\nwhy (NetworkPlacement events from the netsched extender):")
    for e in sorted(events, key=lambda e: e.involved_object.name):
        print(f"  {e.involved_object.name:<12} {e.message}")


def _print_records(cluster: DevCluster, uids: set[str]) -> None:
    rows = [r for r in read_rows(cluster.records_file) if r["uid"] in uids]
    print(f"\ntraining records written by the operator ({cluster.records_file}):")
    for r in sorted(rows, key=lambda r: r["name"]):
        took = f"{r['duration_seconds']:.0f} s" if r["duration_seconds"] is not None else "never ran"
        print(f"  {r['name']:<10} {r['outcome']:<9} {took:>9}  {r['gpus']:>2} GPUs on "
              f"{r['distinct_nodes']} node(s) / {r['distinct_racks']} rack(s), data distance "
              f"{r['data_distance'] or '-'}")
