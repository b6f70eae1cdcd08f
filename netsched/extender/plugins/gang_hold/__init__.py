"""Filter: keeps a pod off GPUs held for another job's replicas (netsched.extender.holds.Hold: the
rest of the room on a job's first node, for a few seconds), where it has somewhere else to go.
Scoring already steers pods away from held room; this makes it hold when kube-scheduler's own
plugins rank the candidates too (`--shortlist 0`). A pod that fits nowhere else may take held
GPUs: a hold delays nobody who has no other choice. Preemption ignores holds."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Filter, Request


class GangHold(Filter):
    name = "gang_hold"
    reads = ()

    def binds(self, req: Request) -> bool:
        return False  # a soft rule: a pod with nowhere else to go takes held GPUs

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        snap = req.snapshot
        if snap.held is None or req.preempting:
            return {}
        fits = snap.free[idx] >= req.pod.gpus
        short = fits & (snap.unheld(idx) < req.pod.gpus)
        if not short.any() or not (fits & ~short).any():
            return {}
        names = snap.table.names
        return {int(pos): (f"netsched: the free GPUs of {names[idx[pos]]} are held for the other replicas "
                           f"of job {snap.holders.get(int(idx[pos]), '?')} for a few seconds")
                for pos in np.flatnonzero(short)}
