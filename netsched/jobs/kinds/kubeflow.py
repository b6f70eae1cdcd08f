"""Kubeflow training jobs (kubeflow.org PyTorchJob, TFJob, MPIJob, ... of the training operator): the
operator labels every pod of the job, whatever its replica type, with the job's name
(`training.kubeflow.org/job-name`, beside `operator-name`, `replica-type` and `replica-index`) and makes
the job the pod's controller. The size is on the job only: the replicas of all its replica types.
A job run with gang scheduling also labels its pods with its PodGroup, which then names the gang.

Kubeflow Trainer's TrainJob (trainer.kubeflow.org) runs its pods through a JobSet: they are JobSet gangs.

For `netsched whatif`, a manifest is read as the training operator's defaulting reads it (kubeflow.org/v1
`SetDefaults_*`): a replica type's `replicas` is 1 when unset and its `restartPolicy` the kind's default
(OnFailure for a PyTorchJob, Never for the others); each pod takes its replica type's policy (ExitCode
runs as Never).
"""

import copy
from collections.abc import Callable, Mapping
from typing import Any

from netsched.jobs.kinds.kind import Access, Answered, GangKind, SizedBy
from netsched.jobs.kinds.pod_templates import (
    GangTemplate,
    Made,
    NotAGang,
    as_map,
    member,
    pod_made,
    required_map,
    shape,
    whole,
)
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


GROUP, VERSION = "kubeflow.org", "v1"
PREFIX = "training.kubeflow.org/"
NAME_LABEL = PREFIX + "job-name"
# the replica types' field and the restart policy a replica type gets when it names none, by kind
REPLICA_SPECS = {"PyTorchJob": ("pytorchReplicaSpecs", "OnFailure"), "TFJob": ("tfReplicaSpecs", "Never"),
                 "MPIJob": ("mpiReplicaSpecs", "Never"), "XGBoostJob": ("xgbReplicaSpecs", "Never"),
                 "PaddleJob": ("paddleReplicaSpecs", "Never"), "JAXJob": ("jaxReplicaSpecs", "Never")}


def defaulted(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the training operator's defaulting leaves it: each replica type's `replicas` (1) and
    `restartPolicy` (the kind's) set when unset, and its pod template's restartPolicy the one its pods
    run with."""
    field, policy = REPLICA_SPECS.get(str(body.get("kind")), ("", ""))
    out = copy.deepcopy(body)
    for spec in as_map(as_map(out.get("spec")).get(field)).values():
        if not isinstance(spec, dict):
            continue
        spec.setdefault("replicas", 1)
        spec.setdefault("restartPolicy", policy)
        pod = as_map(spec.get("template")).get("spec")
        if isinstance(pod, dict) and "restartPolicy" not in pod:
            pod["restartPolicy"] = "Never" if spec["restartPolicy"] == "ExitCode" else spec["restartPolicy"]
    return out


def _replica_types(kind: str, spec: dict[str, Any]) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    field = REPLICA_SPECS[kind][0]
    types = spec.get(field)
    if not isinstance(types, dict) or not types:
        raise NotAGang(f"spec.{field} is empty: a {kind} runs the replica types it names; add one "
                       "(e.g. Worker) with replicas and a pod template")
    return field, [(str(t), required_map(s, f"spec.{field}.{t}")) for t, s in types.items()]


def gangs_of(kind: str) -> Callable[[dict[str, Any], str, str], list[GangTemplate]]:
    """The reader of a `kind` manifest: one gang of every replica of every type, each member counted as
    the largest of their templates (the training operator starts them together)."""
    def gangs(spec: dict[str, Any], name: str, namespace: str) -> list[GangTemplate]:
        field, types = _replica_types(kind, spec)
        size, largest, at, shapes = 0, None, "", set()
        for rtype, rspec in types:
            where = f"spec.{field}.{rtype}"
            count = whole(rspec.get("replicas", 1), f"{where}.replicas")
            template = required_map(rspec.get("template"), f"{where}.template")
            if not count:
                continue
            size += count
            shapes.add(shape(template))
            if largest is None or shape(template) > shape(largest):
                largest, at = template, f"{where}.template"
        if largest is None:
            raise NotAGang(f"every spec.{field}.*.replicas is 0: the {kind} runs no pods")
        rtype = at.split(".")[2]
        labels = {NAME_LABEL: name, PREFIX + "replica-type": rtype.lower(), PREFIX + "replica-index": "0"}
        pod = member(largest, namespace, labels, (f"{GROUP}/{VERSION}", kind, name))
        pod["metadata"]["name"] = f"{name}-{rtype.lower()}-0"
        note = ("its replica types' templates differ: every member is counted as the largest, "
                f"{rtype}'s") if len(shapes) > 1 else ""
        return [GangTemplate(pod, size, 1, at, note)]
    return gangs


def made(body: dict[str, Any]) -> list[Made]:
    """A pod per replica type."""
    field = REPLICA_SPECS.get(str(body.get("kind")), ("",))[0]
    return [pod_made(f"spec.{field}.{rtype}.template", as_map(rspec).get("template"))
            for rtype, rspec in as_map(as_map(body.get("spec")).get(field)).items()]


KUBEFLOW = GangKind("KubeflowJob", 50, (NAME_LABEL,),
                    fields=pod_gang_fields("spec.*ReplicaSpecs.*.replicas", "spec.*ReplicaSpecs.*.replicas",
                                           "spec.*ReplicaSpecs.*.template.spec"),
                    sized_by=SizedBy("kubeflow.org", JOB_KINDS, replicas),
                    access=(Access("kubeflow.org", tuple(resource for _, resource in JOB_KINDS), ("get",),
                                   "a Kubeflow training job's replicas size its gang"),),
                    answered=Answered(GROUP, VERSION, "pytorchjobs", gangs_of("PyTorchJob"),
                                      pod_label=NAME_LABEL, made=made, defaults=defaulted,
                                      api_kinds=tuple((k, r, gangs_of(k)) for k, r in JOB_KINDS)))
