"""batch/v1 Jobs: the Job controller labels each pod with its Job's name and makes the Job its
controller. A Job's size (spec.parallelism) is on the Job only, so the pods leave it unsaid."""

from collections.abc import Mapping
from typing import Any

from netsched.jobs.kinds import GangLabels, SizedBy


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


JOBS = SizedBy("batch", (("Job", "jobs"),), members)  # a JobSet's gang is one of its Jobs: sized the same
BATCH_JOB = GangLabels("Job", ("batch.kubernetes.io/job-name",), owner=("batch/v1", "Job"), sized_by=JOBS)
