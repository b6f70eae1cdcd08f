"""Kubeflow training jobs (kubeflow.org PyTorchJob, TFJob, MPIJob, ... of the training operator): the
operator labels every pod of the job, whatever its replica type, with the job's name
(`training.kubeflow.org/job-name`, beside `operator-name`, `replica-type` and `replica-index`) and makes
the job the pod's controller. The size is on the job only: the replicas of all its replica types.
A job run with gang scheduling also labels its pods with its PodGroup, which then names the gang.

Kubeflow Trainer's TrainJob (trainer.kubeflow.org) runs its pods through a JobSet: they are JobSet gangs.
"""

from collections.abc import Mapping
from typing import Any

from netsched.jobs.kinds.kind import Access, GangKind, SizedBy
from netsched.jobs.workload import pod_gang_fields

# the training operator's kinds and their resources; each keeps its replica types in spec.<x>ReplicaSpecs
JOB_KINDS = (("PyTorchJob", "pytorchjobs"), ("TFJob", "tfjobs"), ("MPIJob", "mpijobs"),
             ("XGBoostJob", "xgboostjobs"), ("PaddleJob", "paddlejobs"), ("JAXJob", "jaxjobs"))


def replicas(job: Mapping[str, Any]) -> int | None:
    """The pods of a training job: `replicas` (1 when unset) summed over its replica types; None when
    it names none."""
    specs = [replica_spec for key, value in (job.get("spec") or {}).items() if key.endswith("ReplicaSpecs")
             for replica_spec in (value or {}).values()]
    if not specs:
        return None
    return sum(1 if (s or {}).get("replicas") is None else int(s["replicas"]) for s in specs)


KUBEFLOW = GangKind("KubeflowJob", 50, ("training.kubeflow.org/job-name",),
                    fields=pod_gang_fields("spec.*ReplicaSpecs.*.replicas", "spec.*ReplicaSpecs.*.replicas",
                                           "spec.*ReplicaSpecs.*.template.spec"),
                    sized_by=SizedBy("kubeflow.org", JOB_KINDS, replicas),
                    access=(Access("kubeflow.org", tuple(resource for _, resource in JOB_KINDS), ("get",),
                                   "a Kubeflow training job's replicas size its gang"),))
