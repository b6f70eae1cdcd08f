"""`netsched why KIND/NAME`: what the gangs of a batch Job, JobSet or LeaderWorkerSet (the kinds of
netsched.jobs.kinds that declare `answered`) wait for.

Read from the live cluster: the workload and its pods (grouped by `gang_of`, as the gang controller
groups them), the controller's last Event on each gang's workload (GangReleased, or why it waits:
WaitingForPods, InsufficientResources, NoDomainLargeEnough, NeverFits, InvalidSpec, ...), where its
pods run, the room per domain now, and its predicted start and finish from the workload's
`netsched.io/predicted-start|finish` annotations. A JobSet or LeaderWorkerSet whose CRD is not served
is found by the labels its controller puts on its pods. A bare NAME is a GPUJob (netsched.foresight.why).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from netsched.api import conditions as c
from netsched.api.connect import call, listed_together
from netsched.api.gpujob import KIND as GPUJOB
from netsched.api.gpujob import PREDICTED_FINISH_RANGE as FINISH_RANGE
from netsched.api.gpujob import PREDICTED_START_RANGE as START_RANGE
from netsched.api.labels import (
    GANG_BLOCKED,
    PREDICTED_FINISH,
    PREDICTED_FINISH_RANGE,
    PREDICTED_START,
    PREDICTED_START_RANGE,
)
from netsched.api.pods import DONE
from netsched.foresight.whatif import (
    NEVER_STARTS,
    Cluster,
    WhatIfError,
    between,
    placement_rows,
    placement_text,
    room_lines,
    room_table,
)
from netsched.foresight.why_kinds import WHY_KINDS
from netsched.foresight.workload_gangs import WORKLOADS
from netsched.jobs.kinds.batch_job import members
from netsched.jobs.kinds.registry import kind_named
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.pod_gangs import GangRef, controller, gang_of
from netsched.jobs.replica_pods import GANG_GATE
from netsched.jobs.stale_pins import pinned_node

# what `why` takes before the slash, as kubectl spells kinds (case does not matter)
KIND_NAMES = {
    **dict.fromkeys(("gpujob", "gpujobs", "gpujob.netsched.io", "gpujobs.netsched.io"), GPUJOB),
    **{name: kind for kind, a in WHY_KINDS.items() for name in a.names(kind)},
}
# what the gang controller says on a gang's workload (netsched.operator.pod_gangs)
GANG_REASONS = {c.GANG_RELEASED, c.WAITING_FOR_PODS, c.INVALID_SPEC, c.INSUFFICIENT_RESOURCES,
                c.NO_DOMAIN_LARGE_ENOUGH, c.DATA_TOO_FAR, c.NEVER_FITS}
NO_PREDICTION = "no prediction yet"


class UnknownKind(WhatIfError):
    """`why` was given a kind it does not know: bad input."""


def target(text: str) -> tuple[str, str]:
    """(kind, name) of `why`'s argument: NAME (a GPUJob) or KIND/NAME."""
    kind, slash, name = text.rpartition("/")
    if not slash:
        return GPUJOB, text
    known = KIND_NAMES.get(kind.lower())
    if known is None or not name:
        raise UnknownKind(f"{text!r}: {'no name after the kind' if known else f'unknown kind {kind!r}'}; "
                          f"write KIND/NAME (KIND: {', '.join(a.names(k)[0] for k, a in WORKLOADS.items())}) "
                          "or a GPUJob's NAME")
    return known, name


@dataclass(frozen=True)
class Live:
    """What `why` reads of a workload besides the cluster: the object (None: not found, or its kind not
    served), the Jobs and the Events of its namespace."""
    body: dict[str, Any] | None
    jobs: list[dict[str, Any]]
    events: list[dict[str, Any]]

    @classmethod
    def read(cls, api: client.ApiClient, kind: str, namespace: str, name: str) -> Live:
        """Plain GETs, asked at once (no API class of the client: each builds hundreds of model classes)."""
        where = WHY_KINDS[kind]
        jobs, events = listed_together(api, [f"/apis/batch/v1/namespaces/{namespace}/jobs",
                                             f"/api/v1/namespaces/{namespace}/events"])
        try:
            body: dict[str, Any] | None = call(api, "GET", f"/apis/{where.group}/{where.version}/namespaces/"
                                                          f"{namespace}/{where.plural}/{name}")
        except client.ApiException as exc:
            if exc.status != 404:  # 404: no such object, or no such kind served
                raise
            body = None
        return cls(body, jobs, events)


def why_workload(cluster: Cluster, live: Live, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """The answer for the workload `kind` `namespace`/`name`; WhatIfError when neither it nor a pod of
    it is found."""
    pods = [p for p in cluster.pods if p["metadata"].get("namespace") == namespace and _of(p, kind, name)]
    if live.body is None and not pods:
        raise WhatIfError(_not_found(kind, namespace, name))
    gangs: dict[GangRef, list[dict[str, Any]]] = {}
    for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
        ref = gang_of(p)
        if ref is not None:
            gangs.setdefault(ref, []).append(p)
    jobs = {j["metadata"]["name"]: j for j in live.jobs}
    rooms = cluster.rooms
    annotations = _predicted(live.body, pods, jobs)
    answer: dict[str, Any] = {
        "workload": f"{kind} {namespace}/{name}", "found": live.body is not None, "pods": len(pods),
        "gangs": [], "predictedStartTime": annotations.get(PREDICTED_START),
        "predictedCompletionTime": annotations.get(PREDICTED_FINISH), "domains": [],
        # the intervals under the names a GPUJob's status gives them
        **{field: annotations.get(note) for field, note in zip(
            (*START_RANGE, *FINISH_RANGE), (*PREDICTED_START_RANGE, *PREDICTED_FINISH_RANGE), strict=True)}}
    for ref, members_ in gangs.items():
        gated = [p for p in members_ if _gated(p)]
        size = ref.size if ref.size is not None else (_job_size(members_[0], jobs)
                                                      or _object_size(ref, live.body))
        running = {p["spec"]["nodeName"]: 0 for p in members_ if _runs(p)}
        for p in members_:
            if _runs(p):
                running[p["spec"]["nodeName"]] += 1
        pinned: dict[str, int] = {}
        for p in members_:
            if (node := pinned_node(p)) is not None:
                pinned[node] = pinned.get(node, 0) + 1
        answer["gangs"].append({
            "gang": f"{ref.kind} {ref.namespace}/{ref.name}", "size": size, "pods": len(members_),
            "gated": len(gated), "runsOn": placement_rows(running, rooms, cluster.topology),
            "pinnedTo": pinned, "event": _last_word(live.events, members_), "blocked": _blocked(gated),
            "evicted": _evicted(live.events, members_)})
        if gated and not answer["domains"]:
            gang = PodGang(ref, size or len(members_), gated[0], len(gated))
            answer["domains"] = room_table(gang, rooms, cluster.used, gang.needs.max_peer_distance,
                                           cluster.topology)
    return answer


def _of(pod: dict[str, Any], kind: str, name: str) -> bool:
    """Is `pod` one of the workload's: by the label its pods carry its name in, else by its controller."""
    where = WHY_KINDS[kind]
    if where.pod_label is None:  # the workload is the pod's controller
        owner = controller(pod) or {}
        return ((owner.get("apiVersion"), owner.get("kind")) == (f"{where.group}/{where.version}", kind)
                and owner.get("name") == name)
    return ((pod["metadata"].get("labels") or {}).get(where.pod_label)) == name


def _not_found(kind: str, namespace: str, name: str) -> str:
    where = WHY_KINDS[kind]
    if where.pod_label is None:
        return f"{kind} {namespace}/{name} not found (kubectl get {where.plural} -n {namespace})"
    return (f"{kind} {namespace}/{name} not found, and no pod in {namespace} is labelled "
            f"{where.pod_label}={name} (kubectl get {where.plural},pods -n {namespace})")


def _gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GANG_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def _runs(pod: dict[str, Any]) -> bool:
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    return bound and (pod.get("status") or {}).get("phase") not in DONE


def _predicted(body: dict[str, Any] | None, pods: list[dict[str, Any]],
               jobs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The annotations that carry the workload's predicted times (netsched.jobs.live_gangs): its own when
    they say one (a batch Job), else its pods' batch Job's (a JobSet's Jobs), else its first pod that
    carries them (an LWS group, a Kubeflow job, a PodGroup: objects netsched may not annotate)."""
    def said(meta: dict[str, Any] | None) -> dict[str, str]:
        notes: dict[str, str] = ((meta or {}).get("annotations") or {})
        return notes if notes.get(PREDICTED_START) or notes.get(PREDICTED_FINISH) else {}
    owners = [jobs.get(o.get("name", "")) for o in map(controller, pods) if o and o.get("kind") == "Job"]
    candidates = [(body or {}).get("metadata"), *((j or {}).get("metadata") for j in owners),
                  *(p["metadata"] for p in sorted(pods, key=lambda p: p["metadata"]["name"]))]
    return next((notes for meta in candidates if (notes := said(meta))), {})


def _object_size(ref: GangRef, body: dict[str, Any] | None) -> int | None:
    """The size of a gang its workload object says (a Kubeflow job's replicas, a PodGroup's minMember)."""
    gang_kind = kind_named(ref.kind)
    sized = gang_kind.sized_by if gang_kind else None
    if body is None or sized is None or body.get("kind") not in dict(sized.kinds):
        return None
    return sized.size(body)


def _job_size(pod: dict[str, Any], jobs: dict[str, dict[str, Any]]) -> int | None:
    """The size of a gang only its Job knows (a batch Job's, a JobSet's)."""
    owner = controller(pod) or {}
    job = jobs.get(owner.get("name", "")) if owner.get("kind") == "Job" else None
    return members(job) if job else None


def _blocked(gated: list[dict[str, Any]]) -> str | None:
    """Why the gang cannot go on as it is (never fits, bad annotations), as the gang controller noted it on
    its gated pods (GANG_BLOCKED: kept while the gang is Blocked, however old its Event)."""
    return next((note for p in gated if (note := (p["metadata"].get("annotations") or {}).get(GANG_BLOCKED))),
                None)


def _evicted(events: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last PackingPlan eviction of the gang's pods, said on its workload (the packer's Warning)."""
    targets = {(o.get("kind"), o.get("name")) for o in map(controller, pods) if o}
    said = [e for e in events if e.get("reason") == c.EVICTED_BY_PLAN and _about(e) in targets]
    if not said:
        return None
    last = max(said, key=_when)
    return {"message": last.get("message"), "time": _when(last)}


def _last_word(events: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The gang controller's last Event on the gang's workload (its pods' controller, else a pod)."""
    targets = {(o.get("kind"), o.get("name")) for o in map(controller, pods) if o}
    targets |= {("Pod", p["metadata"]["name"]) for p in pods}
    said = [e for e in events if e.get("reason") in GANG_REASONS and _about(e) in targets]
    if not said:
        return None
    last = max(said, key=_when)
    return {"type": last.get("type"), "reason": last["reason"], "message": last.get("message"),
            "time": _when(last)}


def _about(e: dict[str, Any]) -> tuple[str | None, str | None]:
    involved = e.get("involvedObject") or {}
    return involved.get("kind"), involved.get("name")


def _when(e: dict[str, Any]) -> str:
    return str(e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp") or "")


def render_why_workload(answer: dict[str, Any], now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    gated = sum(g["gated"] for g in answer["gangs"])
    lines = [f"{answer['workload']}: {answer['pods']} pod(s), {gated} gated"
             + ("" if answer["found"] else " (the object itself was not found: its pods were)")]
    if not answer["pods"]:
        lines.append("No pods yet: its controller has not made them, or they finished and are gone")
    for g in answer["gangs"]:
        size = g["size"] if g["size"] is not None else "unknown"
        lines.append(f"Gang {g['gang']} (size {size}): {g['pods']} pod(s), {g['gated']} gated")
        e = g["event"]
        if e:
            lines.append(f"  {e['reason']} ({e['type']}, {e['time']}): {e['message']}")
        elif g["gated"]:
            lines.append("  No word from netsched's gang controller yet: is the netsched operator running?")
        else:
            lines.append("  Not gated by netsched: its pods are scheduled one by one, not as a gang "
                         "(docs/workloads.md: the gate)")
        if g.get("blocked"):
            lines.append(f"  Blocked: {g['blocked']}")
        if g.get("evicted"):
            lines.append(f"  Evicted ({g['evicted']['time']}): {g['evicted']['message']}")
        if g["runsOn"]:
            lines.append("  Runs on: " + placement_text(g["runsOn"]))
        if g.get("pinnedTo"):
            where = ", ".join(f"{n} ×{k}" for n, k in sorted(g["pinnedTo"].items()))
            lines.append(f"  Pinned, not bound yet: {where} (their nodes were chosen with the whole gang's "
                         "as it was released; a node that can no longer take them shows as a PinStale "
                         "event, and they are made again)")
    start, finish = answer["predictedStartTime"], answer["predictedCompletionTime"]
    never = any((g.get("blocked") or "").startswith(f"{c.NEVER_FITS}:") for g in answer["gangs"])
    if never and not start:  # no wait makes room for it: nothing to predict
        lines.append(NEVER_STARTS)
    else:
        lines.append(f"Predicted start: {start or NO_PREDICTION}{between(answer, START_RANGE, now)}")
    lines.append(f"Predicted completion: {finish or NO_PREDICTION}{between(answer, FINISH_RANGE, now)}")
    return "\n".join(lines + room_lines(answer["domains"], "members of its waiting gang", now=" now"))
