"""`netsched.io/max-peer-distance`: node or a topology level (rack, zone by default); every pod of the job
that close to the others."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.locality import distance_annotation


def max_peer_distance(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> str | None:
    return distance_annotation(annotations, MAX_PEER_DISTANCE, topology)
