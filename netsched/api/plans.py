"""PackingPlan objects as the operator (which carries them out) and the extender (which
enforces their pins) both read them. The CRD is netsched/crds/packingplans.netsched.io.yaml.

The packer tells each GPUJob whose pods a plan evicts why (`Eviction`, an annotation it writes on the
job before it evicts): the operator, which alone writes a GPUJob's status, turns it into the job's
Preempted condition and a Warning Event, and puts the job back in the queue.

A plan's *arrivals* are the pods it promises room to: each waiting pod it places, pinned
by name, and the replacement of each pod it moves, pinned by its controller's uid. An
arrival is outstanding until the operator lists it in `status.arrived`; while the plan is
active, an outstanding arrival's GPUs on its node are reserved for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

GROUP, VERSION, PLURAL, KIND = "netsched.io", "v1alpha1", "packingplans", "PackingPlan"


class Phase(StrEnum):
    """status.phase of a PackingPlan (the CRD's enum); each value is the string it shows."""
    PENDING = "Pending"  # made, nothing done yet
    EVICTING = "Evicting"
    PLACING = "Placing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"  # a budget forbade an eviction, the API server refused one, or a pod landed elsewhere
    TIMED_OUT = "TimedOut"  # past spec.deadlineSeconds
    ABANDONED = "Abandoned"  # the cluster changed before it started


ACTIVE = (Phase.PENDING, Phase.EVICTING, Phase.PLACING)
TERMINAL = (Phase.SUCCEEDED, Phase.FAILED, Phase.TIMED_OUT, Phase.ABANDONED)
UNFINISHED = (Phase.FAILED, Phase.TIMED_OUT, Phase.ABANDONED)  # ended without placing all it planned


@dataclass(frozen=True)
class Arrival:
    plan: str
    key: str  # namespace/name: the waiting pod, or the moved pod whose replacement this is
    namespace: str
    node: str
    gpus: int
    owner: str | None = None  # set for a move: its replacement is any new pod of this controller


def phase(plan: dict[str, Any]) -> str:
    value: str = (plan.get("status") or {}).get("phase") or Phase.PENDING
    return value


def is_active(plan: dict[str, Any]) -> bool:
    return phase(plan) in ACTIVE and not plan["metadata"].get("deletionTimestamp")


def arrivals(plan: dict[str, Any]) -> list[Arrival]:
    name, spec = plan["metadata"]["name"], plan.get("spec") or {}
    out = [Arrival(name, p["pod"], p["pod"].split("/")[0], p["node"], int(p.get("gpus") or 0))
           for p in spec.get("placements") or ()]
    out += [Arrival(name, m["pod"], m["pod"].split("/")[0], m["to"], int(m.get("gpus") or 0), m["owner"])
            for m in spec.get("moves") or ()]
    return out


def placing(plan: dict[str, Any]) -> dict[str, str]:
    """The waiting pods (namespace/name) an active plan places, each to the plan's name: their gang's
    controller leaves their gate to the plan."""
    if not is_active(plan):
        return {}
    return {p["pod"]: plan["metadata"]["name"] for p in (plan.get("spec") or {}).get("placements") or ()}


def outstanding(plan: dict[str, Any]) -> list[Arrival]:
    done = set((plan.get("status") or {}).get("arrived") or ())
    return [a for a in arrivals(plan) if a.key not in done]


def moving(plan: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(namespace, controller uid) of each pod an active plan moves and whose replacement has not arrived,
    to the plan's name: the replacement's gang controller leaves its gate to the plan, which lifts it
    pinned to the node the move goes to."""
    if not is_active(plan):
        return {}
    return {(a.namespace, a.owner): a.plan for a in outstanding(plan) if a.owner}


def reserved_gpus(plans: Iterable[dict[str, Any]]) -> dict[str, int]:
    """node -> the GPUs active plans hold there for their outstanding arrivals: the room the extender's
    filter keeps for them (netsched.extender.pins), which gang admission must not give to another gang."""
    held: dict[str, int] = {}
    for plan in plans:
        if is_active(plan):
            for a in outstanding(plan):
                if a.gpus > 0:
                    held[a.node] = held.get(a.node, 0) + a.gpus
    return held


@dataclass(frozen=True)
class Eviction:
    """Which PackingPlan evicted some of a GPUJob's pods, and the job it made room for: the value of
    the job's `netsched.io/evicted-by` annotation (JSON)."""
    plan: str
    pods: tuple[str, ...]  # names of the evicted pods (the job's namespace)
    preemptor: str  # what it made room for, e.g. "GPUJob ml/urgent"
    priority_class: str | None  # the preemptor's PriorityClass (None: no class, priority 0)
    priority: int

    def annotation(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def of(cls, value: str | None) -> Eviction | None:
        """The eviction an annotation value says, or None (unset, or not written by the packer)."""
        try:
            said = json.loads(value or "")
            return cls(str(said["plan"]), tuple(map(str, said["pods"])), str(said["preemptor"]),
                       said.get("priority_class"), int(said["priority"]))
        except (ValueError, TypeError, KeyError):
            return None

    @property
    def message(self) -> str:
        priority = f"priority {self.priority_class}, {self.priority}" if self.priority_class else \
            f"priority {self.priority}"
        return (f"PackingPlan {self.plan} evicted {', '.join(self.pods)} to make room for {self.preemptor} "
                f"({priority}); the job waits for room again")
