"""Scorer for a job's first pod (no peers placed yet): room for the whole job on the candidate
node, then in its domain at the narrowest topology level, a rack by default
(netsched.models.heuristic.job_room: 1 where the whole job fits on the node, 0.4 where it fits only
in that domain). The job's GPUs come from `netsched.io/job-gpus`, else
`netsched.io/replicas` times the pod's GPUs; a labelled pod of unknown size counts as a job that
fills a node. GPUs held for other jobs' replicas are not room."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Request, Scorer
from netsched.extender.plugins.job_room.annotation import job_gpus, job_size
from netsched.extender.plugins.peers import WEIGHT as PEERS_WEIGHT
from netsched.models.heuristic import job_room


class JobRoom(Scorer):
    name = "job_room"
    weight = PEERS_WEIGHT  # stands in for the peers' closeness until the job has peers
    reads = (job_gpus,)

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        snap, pod = req.snapshot, req.pod
        if snap.peers:
            return None
        size = req.need(job_gpus) or job_size(pod.annotations, pod.gpus)
        whole: int | np.ndarray = pod.gpus if size is None else size
        if size is None and pod.job:
            whole = np.maximum(snap.table.allocatable[idx], pod.gpus)
        return job_room(snap.unheld(idx), snap.domain_free(idx), whole)
