"""Filter: a job's first pod goes to a node with room for the whole job, where a candidate has it.

A first pod placed where only part of its job fits bets that the rest finds room close by. In a burst
that bet is lost often: between the first pod and the next, other pods take the room nearby (only the
first node's room is held, netsched.extender.holds), and the job ends split across racks or zones,
on the slowest of the GPUs it got. So where the whole job fits on some candidate, the others are
rejected; the model and the heuristic then choose among those that hold it. Where none does, nothing
is rejected and scoring weighs how close the rest would be (job_room). GPUs held for other jobs'
replicas are not room. A job of unknown size, a pod whose job has pods placed already, and preemption
are left alone."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Request
from netsched.extender.plugins.job_room.annotation import job_gpus, job_size


class WholeJob:
    name = "whole_job"
    reads = ()  # its annotations are job_room's, parsed there

    def binds(self, req: Request) -> bool:
        return False  # a preference among candidates: with none that holds the job, any will do

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        snap, pod = req.snapshot, req.pod
        if req.preempting or not pod.job or snap.peers:
            return {}
        size = req.need(job_gpus) or job_size(pod.annotations, pod.gpus)
        if size is None or size <= pod.gpus:
            return {}
        room = snap.unheld(idx)
        whole = room >= size
        if not whole.any() or whole.all():
            return {}
        names = snap.table.names
        return {int(pos): (f"netsched: {names[idx[pos]]} has room for {int(room[pos])} of the "
                           f"{size} GPUs of job {pod.namespace}/{pod.job}; its first pod goes to a "
                           "node with room for all of them while there is one")
                for pos in np.flatnonzero(~whole)}
