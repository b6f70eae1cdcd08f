"""How a pod's candidates are scored: the topology heuristic, composed from the scorer plugins,
or the completion-time model (netsched.extender.learned), which falls back to it.

Either returns a `Scored`: a 0..1 value per candidate, the network part alone (which the
filter's shortlist ranks by) and the named factors explanations show. Equal inputs give equal
scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from netsched.extender.plugin import Request, Scorer
from netsched.extender.plugins import SCORERS, TIE_BREAK
from netsched.extender.protocol import MAX_SCORE
from netsched.models.heuristic import network_value, with_packing


@dataclass
class Scored:
    value: np.ndarray  # 0..1 per candidate; higher is better
    network: np.ndarray  # the network part alone, which the shortlist ranks by
    factors: dict[str, np.ndarray] = field(default_factory=dict)  # named parts, for explanations
    scorer: str = "topology"  # which scorer produced it (a model scorer may fall back)

    def scores(self) -> np.ndarray:
        """0..MAX_SCORE integers, as kube-scheduler wants them."""
        scores: np.ndarray = np.rint(np.clip(self.value, 0, 1) * MAX_SCORE).astype(np.int64)
        return scores


class NodeScorer(Protocol):
    name: str

    def score(self, req: Request, idx: np.ndarray) -> Scored: ...


class TopologyScorer:
    """The heuristic: the weighted network value of the scorer plugins that apply, plus packing's
    tie-break. Factors are named by the plugins."""

    name = "topology"

    def __init__(self, scorers: Sequence[Scorer] = SCORERS):
        self.scorers = scorers

    def score(self, req: Request, idx: np.ndarray) -> Scored:
        factors: dict[str, np.ndarray] = {}
        parts = []
        for scorer in self.scorers:
            value = scorer.score(req, idx)
            if value is not None:
                factors[scorer.name] = value
                parts.append((scorer.weight, value))
        network = network_value(parts) if parts else np.zeros(len(idx))
        tight = factors[TIE_BREAK.name] = TIE_BREAK.score(req, idx)
        return Scored(with_packing(network, tight, TIE_BREAK.weight), network, factors)
