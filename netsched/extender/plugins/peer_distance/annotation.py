"""`netsched.io/max-peer-distance`: node or a topology level (rack, zone by default); every pod of the job
that close to the others."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api import annotations as read
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.plugin import InvalidNeeds


def max_peer_distance(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> str | None:
    try:
        return read.max_peer_distance(annotations, topology)
    except read.BadAnnotation as exc:
        raise InvalidNeeds(str(exc)) from exc
