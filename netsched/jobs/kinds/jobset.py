"""JobSets (jobset.x-k8s.io): each replicated job runs `replicas` Jobs, and the JobSet controller
labels the pods of every one with the JobSet, the replicated job and the Job's index. One Job of a
replicated job is one gang, the unit JobSet itself places in one topology domain (its
exclusive-topology annotation); the gang's name is that Job's (`<jobset>-<replicated job>-<index>`)
and its size is the Job's parallelism, on the Job only (read with the Job's RBAC).

For `netsched whatif`, a manifest is read as JobSet's mutating webhook leaves it (its `Default`): each
replicated job's Job template gets completionMode Indexed and its pod template restartPolicy OnFailure
when they are unset, so a manifest written without them, as JobSet's own examples are, is accepted."""

import copy
from typing import Any

from netsched.jobs.kinds.batch_job import JOBS, job_gangs
from netsched.jobs.kinds.kind import Answered, GangKind
from netsched.jobs.kinds.pod_templates import GangTemplate, Made, NotAGang, as_map, required_map, whole
from netsched.jobs.workload import pod_gang_fields

# jobset name, replicated job, job index
NAME_LABELS = ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
               "jobset.sigs.k8s.io/job-index")


def jobset_gangs(spec: dict[str, Any], name: str, namespace: str) -> list[GangTemplate]:
    """One GangTemplate per replicated job: its `replicas` Jobs, each one gang."""
    replicated = spec.get("replicatedJobs")
    if not isinstance(replicated, list) or not replicated:
        raise NotAGang("spec.replicatedJobs is empty: a JobSet runs its replicated jobs; add one with a Job "
                       "template")
    found = []
    for i, rj in enumerate(replicated):
        at = f"spec.replicatedJobs[{i}]"
        rj = required_map(rj, at)
        rj_name, replicas = str(rj.get("name") or ""), whole(rj.get("replicas", 1), f"{at}.replicas")
        job_spec = required_map(required_map(rj.get("template"), f"{at}.template").get("spec"),
                                f"{at}.template.spec")
        labels = dict(zip(NAME_LABELS, (name, rj_name, "0"), strict=True))
        if replicas:
            found.append(job_gangs(job_spec, f"{name}-{rj_name}-0", namespace, replicas, labels,
                                   f"{at}.template.spec.template"))
    if not found:
        raise NotAGang("every spec.replicatedJobs[].replicas is 0: the JobSet runs no pods")
    return found


def defaulted(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with what JobSet's webhook defaults in every replicated job's templates."""
    out = copy.deepcopy(body)
    for rj in as_map(out.get("spec")).get("replicatedJobs") or ():
        job = as_map(as_map(rj).get("template")).get("spec")
        if not isinstance(job, dict):
            continue  # the API server names what is missing
        job.setdefault("completionMode", "Indexed")
        pod = as_map(job.get("template")).get("spec")
        if isinstance(pod, dict):
            pod.setdefault("restartPolicy", "OnFailure")
    return out


def made(body: dict[str, Any]) -> list[Made]:
    """A Job per replicated job."""
    found = []
    for i, rj in enumerate(as_map(body.get("spec")).get("replicatedJobs") or ()):
        template = as_map(as_map(rj).get("template"))
        found.append(Made(f"spec.replicatedJobs[{i}].template", "batch/v1", "jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "whatif-"},
            "spec": template.get("spec")}))
    return found


JOBSET = GangKind("JobSet", 40, NAME_LABELS, sized_by=JOBS,
                  fields=pod_gang_fields("spec.replicatedJobs[].template.spec.parallelism",
                                         "spec.replicatedJobs[].template.spec.parallelism",
                                         "spec.replicatedJobs[].template.spec.template.spec"),
                  answered=Answered("jobset.x-k8s.io", "v1alpha2", "jobsets", jobset_gangs,
                                    pod_label=NAME_LABELS[0], made=made, defaults=defaulted))
