"""Tie-break: using a node's free GPUs exactly, which keeps whole nodes free for large pods. It
weighs WEIGHT of the score, outside the network value, so it never outweighs a step of
proximity. GPUs held for another job's replicas do not count as free."""

from __future__ import annotations

import numpy as np

from netsched.extender.plugin import Request, Scorer
from netsched.models.heuristic import tightness

WEIGHT = 0.1  # of a score: using a node's free GPUs exactly


class BinPacking(Scorer):
    name = "packing"  # the factor explanations show, as before the folder's rename
    weight = WEIGHT
    reads = ()

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray:
        snap = req.snapshot
        return tightness(snap.table.allocatable[idx], snap.unheld(idx), req.pod.gpus)
