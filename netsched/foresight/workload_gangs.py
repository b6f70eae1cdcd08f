"""The gangs of a workload manifest that is not a GPUJob (a batch Job, a JobSet, a LeaderWorkerSet: the
kinds of netsched.jobs.kinds that declare what whatif needs), as the `PodGang`s (netsched.jobs.pod_gang)
the gang controller would make of its pods once they exist.

Each gang's member is the pod its controller would make from the template (the kind's own reader),
with the labels that controller documents, so `gang_of` names it as it will name the real pods (a Job
whose template carries JobSet's labels is a JobSet's gang). Its size comes from the manifest, as the
operator reads it from the workload: a Job's parallelism capped by its completions, a LeaderWorkerSet's
group size.
Identical gangs (the Jobs of one replicated job, the groups of a LeaderWorkerSet) are one `GangSet`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from netsched.jobs.kinds.pod_templates import GangTemplate, NotAGang, required_map
from netsched.jobs.kinds.registry import answered
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.pod_gangs import GangRef, gang_of

# the kinds whatif and why take besides GPUJob (those of netsched.jobs.kinds that declare `answered`)
WORKLOADS = answered()


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
    """The gangs of the workload `body` (of a kind in WORKLOADS) in `namespace`."""
    kind, name = body.get("kind"), (body.get("metadata") or {}).get("name") or "(no name)"
    spec = required_map(body.get("spec"), "spec")
    reader = WORKLOADS.get(str(kind))
    if reader is None:
        raise NotAGang(f"kind {kind}: netsched does not gang its pods")
    return [_gang_set(t) for t in reader.gangs(spec, name, namespace)]


def _gang_set(t: GangTemplate) -> GangSet:
    ref = gang_of(t.member)
    assert ref is not None, t.member  # the member carries its controller's labels
    return GangSet(ref, t.count, PodGang(ref, t.size, t.member), t.template, t.note)
