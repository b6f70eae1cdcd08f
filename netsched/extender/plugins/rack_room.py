"""Scorer for a job's first pod (no peers placed yet): whether the rest of the job fits in the
candidate's rack: its free GPUs over the job's GPUs (`netsched.io/job-gpus`, else the pod's),
capped at 1."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Request
from netsched.models.heuristic import PEER_WEIGHT, rack_room


class RackRoom:
    name = "rack_room"
    weight = PEER_WEIGHT  # stands in for the peers' closeness until the job has peers

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        if req.snapshot.peers:
            return None
        return rack_room(req.snapshot.rack_free(idx), req.needs.job_gpus or req.pod.gpus)
