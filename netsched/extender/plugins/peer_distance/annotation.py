"""`netsched.io/max-peer-distance`: node, rack or zone; every pod of the job that close to the others."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api.labels import MAX_PEER_DISTANCE
from netsched.extender.locality import distance_annotation


def max_peer_distance(annotations: Mapping[str, str]) -> str | None:
    return distance_annotation(annotations, MAX_PEER_DISTANCE)
