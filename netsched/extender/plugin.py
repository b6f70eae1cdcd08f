"""What a filter or a scorer plugin is, and the request it reads.

A plugin is one folder under `plugins/` (the plugin, the annotations it reads, its weight, a
README), registered in `plugins/__init__.py`. Its `name` labels everything it does: the
`netsched_extender_nodes_filtered{reason}` metric for a filter, the factor shown in placement
explanations for a scorer. Plugins compute over arrays: `idx` holds the candidates' positions in
the snapshot's node table, and a plugin returns either reasons by position in `idx` (a filter) or
one value per position (a scorer).

A plugin lists the annotation parsers it `reads`; a request runs every registered parser in
registry order before any filter (netsched.extender.engine.check_needs), so an annotation
netsched cannot use fails the pod with the first one's message, and a plugin reads the parsed
value with `req.need(parse)`. A parser is given the cluster's topology too: level names in
annotations are the configured ones.

Filters run for filter and preempt alike, in registry order; the first reason a candidate
gets is the one reported. Preempt asks a filter too (`preempting=True`): a filter whose
rule depends on what preemption changes says so there.

A plugin subclasses `Filter` or `Scorer` for the hooks a filter's post-steps run after its
stages (netsched.extender.engine), each a no-op unless the plugin has something to add:
`explain`, words for the pod's placement explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import numpy as np

from netsched.api.topology import Topology
from netsched.extender.protocol import PodRef
from netsched.extender.snapshot import Snapshot

T = TypeVar("T")
Parse = Callable[[Mapping[str, str], Topology], Any]  # a pod's annotations -> what a plugin reads of them


class InvalidNeeds(ValueError):
    """An annotation has a value netsched cannot use; the message names it and the fix."""


@dataclass(frozen=True)
class Request:
    """One pod's request: the pod and the snapshot it is decided on. `annotations` are what the
    plugins' parsers read: the pod's own unless given (empty, to decide on topology alone)."""

    pod: PodRef
    snapshot: Snapshot
    preempting: bool = False
    annotations: Mapping[str, str] | None = None
    _needs: dict[Parse, Any] = field(default_factory=dict, repr=False, compare=False)

    def need(self, parse: Callable[[Mapping[str, str], Topology], T]) -> T:
        """What `parse` reads of the pod's annotations, parsed once per request."""
        if parse not in self._needs:
            annotations = self.pod.annotations if self.annotations is None else self.annotations
            self._needs[parse] = parse(annotations, self.snapshot.table.topology)
        return cast(T, self._needs[parse])


class Refused(Exception):
    """The pod can go nowhere for this reason (e.g. its data source is not in the cluster): every
    candidate fails with the message, whatever the other filters say."""


class Plugin(Protocol):
    name: str

    @property
    def reads(self) -> tuple[Parse, ...]:
        """The parsers of the annotations this plugin reads (the plugin folder's annotation.py)."""
        ...

    def explain(self, req: Request, passed: np.ndarray, candidates: int) -> str:
        """Words for the pod's placement explanation, given the candidates that passed the filters
        (`passed`: their table indices) of the `candidates` kube-scheduler asked about; empty for none."""
        return ""


class Filter(Plugin, Protocol):
    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        """Reasons, by position in idx, for the candidates this filter does not allow."""
        ...

    def binds(self, req: Request) -> bool:
        """Whether the pod has a rule here that a node missing from the snapshot cannot be shown to
        meet (such a node then fails rather than passes unchecked)."""
        ...


class Scorer(Plugin, Protocol):
    weight: float  # the share of the network value this scorer's part is worth, where it applies

    def score(self, req: Request, idx: np.ndarray) -> np.ndarray | None:
        """0..1 per candidate, higher is better; None when the scorer has nothing to say for this pod."""
        ...
