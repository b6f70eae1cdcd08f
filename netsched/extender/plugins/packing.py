"""Tie-break: using a node's free GPUs exactly, which keeps whole nodes free for large pods. It
weighs PACKING_WEIGHT of the score, outside the network value, so it never outweighs a step of
proximity. GPUs held for another job's replicas do not count as free."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Request
from netsched.models.heuristic import tightness


class Packing:
    name = "packing"

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray:
        snap = req.snapshot
        return tightness(snap.table.allocatable[idx], snap.unheld(idx), req.pod.gpus)
