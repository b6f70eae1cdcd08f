"""What a filter or a scorer plugin is, and the request it reads.

A plugin is one object in one file under `plugins/`, registered in `plugins/__init__.py`.
Its `name` labels everything it does: the `netsched_extender_nodes_filtered{reason}` metric
for a filter, the factor shown in placement explanations for a scorer. Plugins compute over
arrays: `idx` holds the candidates' positions in the snapshot's node table, and a plugin
returns either reasons by position in `idx` (a filter) or one value per position (a scorer).

Filters run for filter and preempt alike, in registry order; the first reason a candidate
gets is the one reported. Preempt asks a filter too (`preempting=True`): a filter whose
rule depends on what preemption changes says so there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from netsched.extender.needs import NetworkNeeds
from netsched.extender.protocol import PodRef
from netsched.extender.snapshot import Snapshot


@dataclass(frozen=True)
class Request:
    """One pod's request: the pod, its parsed network needs and the snapshot it is decided on."""

    pod: PodRef
    needs: NetworkNeeds
    snapshot: Snapshot
    preempting: bool = False


class Refused(Exception):
    """The pod can go nowhere for this reason (e.g. its data source is not in the cluster): every
    candidate fails with the message, whatever the other filters say."""


class Filter(Protocol):
    name: str

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        """Reasons, by position in idx, for the candidates this filter does not allow."""
        ...


class Scorer(Protocol):
    name: str
    weight: float  # the share of the network value this scorer's part is worth, where it applies

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        """0..1 per candidate, higher is better; None when the scorer has nothing to say for this pod."""
        ...
