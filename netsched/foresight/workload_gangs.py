"""The gangs of a workload manifest that is not a GPUJob (a batch Job, a JobSet, a LeaderWorkerSet), as
the `PodGang`s (netsched.jobs.pod_gang) the gang controller would make of its pods once they exist.

Each gang's member is the pod its controller would make from the template, with the labels that
controller documents, so `gang_of` names it as it will name the real pods (a Job whose template
carries JobSet's labels is a JobSet's gang). Its size comes from the manifest, as the operator reads it
from the workload: a Job's parallelism capped by its completions, a LeaderWorkerSet's group size.
Identical gangs (the Jobs of one replicated job, the groups of a LeaderWorkerSet) are one `GangSet`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from netsched.api.labels import GPU_RESOURCE
from netsched.api.resources import pod_requests
from netsched.jobs.kinds.batch_job import BATCH_JOB, members
from netsched.jobs.kinds.jobset import JOBSET
from netsched.jobs.kinds.leaderworkerset import LEADER_WORKER_SET
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.pod_gangs import GangRef, gang_of

# the kinds whatif and why take besides GPUJob: kind -> (group, version, plural) where they are served
WORKLOADS = {
    "Job": ("batch", "v1", "jobs"),
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
}
JOB_NAME_LABEL = BATCH_JOB.name_labels[0]
JOBSET_LABELS = JOBSET.name_labels  # jobset name, replicated job, job index
LWS_NAME, LWS_GROUP = LEADER_WORKER_SET.name_labels
LWS_SIZE = LEADER_WORKER_SET.size_annotation or ""


class NotAGang(ValueError):
    """The manifest has no gang netsched could read; the message names the field and the fix."""


@dataclass(frozen=True)
class GangSet:
    """`count` identical gangs of a workload, made from the pod template at `template` (a path)."""
    first: GangRef  # the first of them, as gang_of names it
    count: int
    gang: PodGang
    template: str
    note: str = ""  # what the answer should also say of these gangs

    def refs(self) -> list[GangRef]:
        """Each of its gangs, named as gang_of will name them: by the index its last name label counts
        (a JobSet's Job index, a LeaderWorkerSet's group index), from the first's 0."""
        base = self.first.name.removesuffix("0")
        return [self.first, *(replace(self.first, name=f"{base}{i}") for i in range(1, self.count))]

    @property
    def label(self) -> str:
        name = f"{self.first.kind} {self.first.namespace}/{self.first.name}"
        return name if self.count == 1 else f"{name} (and {self.count - 1} more like it)"


def gang_sets(body: dict[str, Any], namespace: str) -> list[GangSet]:
    """The gangs of the workload `body` (Job, JobSet or LeaderWorkerSet) in `namespace`."""
    kind, name = body.get("kind"), (body.get("metadata") or {}).get("name") or "(no name)"
    spec = _map(body.get("spec"), "spec")
    if kind == "Job":
        return [_job_gangs(spec, name, namespace, 1, {}, "spec.template")]
    if kind == "JobSet":
        return _jobset_gangs(spec, name, namespace)
    if kind == "LeaderWorkerSet":
        return [_lws_gangs(spec, name, namespace)]
    raise NotAGang(f"kind {kind}: netsched does not gang its pods")


def _job_gangs(spec: dict[str, Any], name: str, namespace: str, count: int, labels: dict[str, str],
               template: str) -> GangSet:
    """`count` Jobs like the one of `spec`, the first named `name`, their pods labelled `labels` too."""
    pod_template = _map(spec.get("template"), template)
    member = _member(pod_template, namespace, {**labels, JOB_NAME_LABEL: name}, ("batch/v1", "Job", name))
    at = template.removesuffix(".template")
    for field in ("parallelism", "completions"):
        if spec.get(field) is not None:
            _count(spec[field], f"{at}.{field}")
    size = members({"spec": spec})
    if size < 1:
        raise NotAGang(f"{at}.parallelism is 0: the Job runs no pods; "
                       "set it to the gang's size")
    return _gang_set(member, size, count, template)


def _jobset_gangs(spec: dict[str, Any], name: str, namespace: str) -> list[GangSet]:
    """One GangSet per replicated job: its `replicas` Jobs, each one gang."""
    replicated = spec.get("replicatedJobs")
    if not isinstance(replicated, list) or not replicated:
        raise NotAGang("spec.replicatedJobs is empty: a JobSet runs its replicated jobs; add one with a Job "
                       "template")
    found = []
    for i, rj in enumerate(replicated):
        at = f"spec.replicatedJobs[{i}]"
        rj = _map(rj, at)
        rj_name, replicas = str(rj.get("name") or ""), _count(rj.get("replicas", 1), f"{at}.replicas")
        job_spec = _map(_map(rj.get("template"), f"{at}.template").get("spec"), f"{at}.template.spec")
        labels = dict(zip(JOBSET_LABELS, (name, rj_name, "0"), strict=True))
        if replicas:
            found.append(_job_gangs(job_spec, f"{name}-{rj_name}-0", namespace, replicas, labels,
                                    f"{at}.template.spec.template"))
    if not found:
        raise NotAGang("every spec.replicatedJobs[].replicas is 0: the JobSet runs no pods")
    return found


def _lws_gangs(spec: dict[str, Any], name: str, namespace: str) -> GangSet:
    """A LeaderWorkerSet's `replicas` groups, each a gang of its leader and size - 1 workers."""
    lwt = _map(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = _count(lwt.get("size", 1), "spec.leaderWorkerTemplate.size")
    groups = _count(spec.get("replicas", 1), "spec.replicas")
    if not size or not groups:
        raise NotAGang("spec.replicas or spec.leaderWorkerTemplate.size is 0: the LeaderWorkerSet runs no "
                       "pods")
    worker = _map(lwt.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
    leader = lwt.get("leaderTemplate")
    template, note = "spec.leaderWorkerTemplate.workerTemplate", ""
    if isinstance(leader, dict) and size > 1 and _shape(leader) != _shape(worker):
        # the gang's members are counted as one shape: the larger one, so a "fits" holds for the leader too
        if _shape(leader) > _shape(worker):
            worker, template = leader, "spec.leaderWorkerTemplate.leaderTemplate"
        note = ("the leader's template differs from the workers': every member is counted as the larger, "
                f"{template.rsplit('.', 1)[1]}")
    labels = {LWS_NAME: name, LWS_GROUP: "0"}
    member = _member(worker, namespace, labels, ("apps/v1", "StatefulSet", name), {LWS_SIZE: str(size)})
    return _gang_set(member, size, groups, template, note)


def _gang_set(member: dict[str, Any], size: int, count: int, template: str, note: str = "") -> GangSet:
    ref = gang_of(member)
    assert ref is not None, member  # the member carries its controller's labels
    return GangSet(ref, count, PodGang(ref, size, member), template, note)


def _member(template: dict[str, Any], namespace: str, labels: dict[str, str], owner: tuple[str, str, str],
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The pod its controller would make from `template`."""
    meta = template.get("metadata") or {}
    version, kind, name = owner
    return {"metadata": {"name": f"{name}-0", "namespace": namespace,
                         "labels": {**(meta.get("labels") or {}), **labels},
                         "annotations": {**(meta.get("annotations") or {}), **(annotations or {})},
                         "ownerReferences": [{"apiVersion": version, "kind": kind, "name": name,
                                              "controller": True}]},
            "spec": template.get("spec") or {}}


def _shape(template: dict[str, Any]) -> tuple[float, ...]:
    request = pod_requests(template.get("spec") or {})
    return tuple(request.get(k, 0.0) for k in (GPU_RESOURCE, "cpu", "memory"))


def _map(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotAGang(f"{where} is not set (or not a map); write it as the kind's API reference says")
    return value


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise NotAGang(f"{where}: {value!r} is not a whole number; write e.g. 2")
    return value
