"""LeaderWorkerSets (leaderworkerset.x-k8s.io): each replica is a group of one leader and its
workers, labelled with the set's name and the group's index; every pod of the group carries the
group's size (leader included) as an annotation. One group is one gang."""

from typing import Any

from netsched.jobs.kinds.kind import Answered, GangKind
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

PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME, GROUP, SIZE = PREFIX + "name", PREFIX + "group-index", PREFIX + "size"


def lws_gangs(spec: dict[str, Any], name: str, namespace: str) -> list[GangTemplate]:
    """A LeaderWorkerSet's `replicas` groups, each a gang of its leader and size - 1 workers."""
    lwt = required_map(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
    size = whole(lwt.get("size", 1), "spec.leaderWorkerTemplate.size")
    groups = whole(spec.get("replicas", 1), "spec.replicas")
    if not size or not groups:
        raise NotAGang("spec.replicas or spec.leaderWorkerTemplate.size is 0: the LeaderWorkerSet runs no "
                       "pods")
    worker = required_map(lwt.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
    leader = lwt.get("leaderTemplate")
    template, note = "spec.leaderWorkerTemplate.workerTemplate", ""
    if isinstance(leader, dict) and size > 1 and shape(leader) != shape(worker):
        # the gang's members are counted as one shape: the larger one, so a "fits" holds for the leader too
        if shape(leader) > shape(worker):
            worker, template = leader, "spec.leaderWorkerTemplate.leaderTemplate"
        note = ("the leader's template differs from the workers': every member is counted as the larger, "
                f"{template.rsplit('.', 1)[1]}")
    pod = member(worker, namespace, {NAME: name, GROUP: "0"}, ("apps/v1", "StatefulSet", name),
                 {SIZE: str(size)})
    return [GangTemplate(pod, size, groups, template, note)]


def made(body: dict[str, Any]) -> list[Made]:
    """A pod per template, leader's and workers'."""
    group = as_map(as_map(body.get("spec")).get("leaderWorkerTemplate"))
    return [pod_made(f"spec.leaderWorkerTemplate.{name}", group[name])
            for name in ("leaderTemplate", "workerTemplate") if name in group]


LEADER_WORKER_SET = GangKind(
    "LeaderWorkerSet", 30, (NAME, GROUP), size_annotation=SIZE,
    fields=pod_gang_fields("spec.leaderWorkerTemplate.size", "spec.leaderWorkerTemplate.size",
                           "spec.leaderWorkerTemplate.workerTemplate.spec"),
    answered=Answered("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", lws_gangs, pod_label=NAME,
                      short_names=("lws",), made=made))
