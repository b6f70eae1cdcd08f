"""PackingPlan pins and reservations, as the filter enforces them.

While a plan is active (Pending, Evicting, Placing):
- a pod the plan places passes only on its planned node;
- a new pod of a controller whose pod the plan moves passes only on the nodes the moves
  go to (until every such replacement has arrived);
- every other pod passes a node only if its GPUs fit beside the GPUs reserved there for
  the plan's outstanding arrivals, so the room the plan frees goes to the pods it is for.

Both kinds of rejection are unresolvable: preempting more pods would not lift them.
Reservations count GPUs, the resource the extender manages; CPU and memory are left to
kube-scheduler's own fit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from netsched.api.objects import KubeObject
from netsched.api.plans import Arrival, is_active, outstanding
from netsched.extender.protocol import PodRef


@dataclass(frozen=True)
class Pins:
    by_pod: dict[str, Arrival] = field(default_factory=dict)
    by_owner: dict[tuple[str, str], list[Arrival]] = field(default_factory=dict)
    reserved: dict[str, tuple[int, list[str]]] = field(default_factory=dict)  # node -> (GPUs, plans)

    @classmethod
    def of(cls, plans: Iterable[KubeObject]) -> Pins:
        by_pod: dict[str, Arrival] = {}
        by_owner: dict[tuple[str, str], list[Arrival]] = defaultdict(list)
        gpus: dict[str, int] = defaultdict(int)
        holders: dict[str, set[str]] = defaultdict(set)
        for plan in plans:
            if not is_active(plan):
                continue
            for a in outstanding(plan):
                if a.owner:
                    by_owner[(a.namespace, a.owner)].append(a)
                else:
                    by_pod[a.key] = a
                gpus[a.node] += a.gpus
                holders[a.node].add(a.plan)
        reserved = {n: (g, sorted(holders[n])) for n, g in gpus.items() if g > 0}
        return cls(by_pod, dict(by_owner), reserved)

    def __bool__(self) -> bool:
        return bool(self.by_pod or self.by_owner or self.reserved)

    def check(self, pod: PodRef, names: list[str], index: dict[str, int], idx: np.ndarray,
              free: np.ndarray) -> dict[int, str]:
        """Positions in `idx` (table indices of the candidates) the pod may not use, with why."""
        pinned = self.pinned(pod)
        if pinned:
            allowed = {index[a.node] for a in pinned if a.node in index}
            plan = pinned[0].plan
            where = ", ".join(sorted({a.node for a in pinned}))
            return {pos: f"netsched: PackingPlan {plan} places pod {pod.key} on {where}, not {names[i]}"
                    for pos, i in enumerate(idx.tolist()) if i not in allowed}
        out = {}
        for node, (gpus, plans) in self.reserved.items():
            i = index.get(node)
            if i is None or free[i] - gpus >= pod.gpus:
                continue
            for pos in np.flatnonzero(idx == i).tolist():
                out[pos] = (f"netsched: node {node}: {gpus} of its {free[i]} free GPUs are reserved by "
                            f"PackingPlan {', '.join(plans)} for the pods it makes room for")
        return out

    def pinned(self, pod: PodRef) -> list[Arrival]:
        if pod.key in self.by_pod:
            return [self.by_pod[pod.key]]
        return self.by_owner.get((pod.namespace, pod.owner), []) if pod.owner else []
