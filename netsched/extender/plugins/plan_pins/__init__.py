"""Filter: an active PackingPlan's pins and reservations (netsched.extender.pins). A planned pod
passes only where its plan puts it; every other pod keeps off the GPUs reserved for planned
pods. When preempting, only pins apply: evicting victims is what frees reserved room, so
judging reservations by the room free before the evictions would be wrong."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Filter, Request


class PlanPins(Filter):
    name = "packing_plan"  # the metric's reason label, as before the folder's rename
    reads = ()

    def binds(self, req: Request) -> bool:
        return bool(req.snapshot.pins and req.snapshot.pins.pinned(req.pod))

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        pins, table = req.snapshot.pins, req.snapshot.table
        if not pins or (req.preempting and not pins.pinned(req.pod)):
            return {}
        return pins.check(req.pod, table.names, table.index, idx, req.snapshot.free)
