"""Filter: a job's first pod goes to a node with room for the whole job, where a candidate has it.

A first pod placed where only part of its job fits bets that the rest finds room close by. In a burst
that bet is lost often: between the first pod and the next, other pods take the room nearby (only the
first node's room is held, netsched.extender.holds), and the job ends split across racks or zones,
on the slowest of the GPUs it got. So where the whole job fits on some candidate, the others are
rejected; the model and the heuristic then choose among those that hold it. Where none does, nothing
is rejected and scoring weighs how close the rest would be (job_room). GPUs held for other jobs'
replicas are not room. A job of unknown size, a pod whose job has pods placed already and preemption
are left alone; a pod a PackingPlan places reaches this filter with its planned node alone left
(netsched.extender.engine.run_filters), so nothing here moves it."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Filter, Request
from netsched.extender.plugins.job_room.annotation import job_gpus, job_size


class WholeJob(Filter):
    name = "whole_job"
    reads = ()  # its annotations are job_room's, parsed there

    def binds(self, req: Request) -> bool:
        return False  # a preference among candidates: with none that holds the job, any will do

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        found = room_for_job(req, idx)
        if found is None:
            return {}
        room, size = found
        whole = room >= size
        if not whole.any() or whole.all():
            return {}
        names = req.snapshot.table.names
        return {int(pos): (f"netsched: {names[idx[pos]]} has room for {int(room[pos])} of the "
                           f"{size} GPUs of job {req.pod.namespace}/{req.pod.job}; its first pod goes to a "
                           "node with room for all of them while there is one")
                for pos in np.flatnonzero(~whole)}

    def explain(self, req: Request, passed: np.ndarray, candidates: int) -> str:
        return room_words(req, passed, candidates)


def room_for_job(req: Request, idx: np.ndarray) -> tuple[np.ndarray, int] | None:
    """For a job's first pod with more to come: each candidate's room (free GPUs not held for other
    jobs) and the job's GPUs; None for any other pod (of no job, of unknown size, with pods placed, or
    preempting)."""
    snap, pod = req.snapshot, req.pod
    if req.preempting or not pod.job or snap.peers:
        return None
    size = req.need(job_gpus) or job_size(pod.annotations, pod.gpus)
    if size is None or size <= pod.gpus:
        return None
    return snap.unheld(idx), size


def room_words(req: Request, passed: np.ndarray, candidates: int) -> str:
    """For a job's first pod's placement, how many of its `candidates` passed the filters with room for
    the whole job (`passed`: those that passed), or that none had (a split gang's pods say why); empty
    for any other pod."""
    found = room_for_job(req, passed)
    if found is None:
        return ""
    room, size = found
    count = int((room >= size).sum())
    return (f"room for all {size} GPUs of the job on {count} of {candidates} candidates" if count
            else f"no candidate had room for all {size} GPUs of the job, so its pods may be split")
