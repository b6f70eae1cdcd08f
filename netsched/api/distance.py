"""How far apart two places are, on the one scale every component uses.

0 the same node, 1 another node of the same rack, 2 another rack of the same zone,
3 farther. Users name the first three in annotations and GPUJob specs
(`maxPeerDistance: rack`); the completion-time model reads the number as a feature;
the extender, the operator's admission and the job records compare with it.
"""

from __future__ import annotations

DISTANCES: dict[str, int] = {"node": 0, "rack": 1, "zone": 2, "far": 3}
LIMITS: tuple[str, ...] = ("node", "rack", "zone")  # the distances a job may ask to stay within
FAR = DISTANCES["far"]
