"""batch/v1 Jobs: the Job controller labels each pod with its Job's name and makes the Job its
controller. A Job's size (spec.parallelism) is on the Job only, so the pods leave it unsaid."""

from collections.abc import Mapping
from typing import Any

from netsched.jobs.kinds.kind import Access, Answered, GangKind, SizedBy
from netsched.jobs.kinds.pod_templates import GangTemplate, NotAGang, member, required_map, whole
from netsched.jobs.workload import pod_gang_fields

NAME_LABEL = "batch.kubernetes.io/job-name"


def members(job: Mapping[str, Any]) -> int:
    """Pods a Job runs at once: spec.parallelism (1 when unset), capped by the completions it still
    needs (spec.completions minus status.succeeded) when it counts completions."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = spec.get("parallelism")
    size = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is not None:
        size = min(size, int(completions) - int(status.get("succeeded") or 0))
    return max(size, 0)


def job_gangs(spec: dict[str, Any], name: str, namespace: str, count: int, labels: dict[str, str],
              template: str) -> GangTemplate:
    """`count` Jobs like the one of `spec`, the first named `name`, their pods labelled `labels` too."""
    pod_template = required_map(spec.get("template"), template)
    pod = member(pod_template, namespace, {**labels, NAME_LABEL: name}, ("batch/v1", "Job", name))
    at = template.removesuffix(".template")
    for field in ("parallelism", "completions"):
        if spec.get(field) is not None:
            whole(spec[field], f"{at}.{field}")
    size = members({"spec": spec})
    if size < 1:
        raise NotAGang(f"{at}.parallelism is 0: the Job runs no pods; "
                       "set it to the gang's size")
    return GangTemplate(pod, size, count, template)


JOBS = SizedBy("batch", (("Job", "jobs"),), members)  # a JobSet's gang is one of its Jobs: sized the same
BATCH_JOB = GangKind(
    "Job", 90, (NAME_LABEL,), owner=("batch/v1", "Job"), sized_by=JOBS,
    fields=pod_gang_fields("spec.parallelism (and spec.completions)", "spec.parallelism",
                           "spec.template.spec"),
    access=(Access("batch", ("jobs",), ("get", "list", "patch"),
                   "a Job's parallelism sizes its gang (a JobSet's too); the forecast lists Jobs and patches "
                   "only their annotations (predicted start and finish)"),),
    answered=Answered("batch", "v1", "jobs", lambda spec, name, namespace: [
        job_gangs(spec, name, namespace, 1, {}, "spec.template")]))
