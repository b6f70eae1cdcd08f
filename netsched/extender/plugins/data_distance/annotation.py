"""`netsched.io/max-data-distance`: node or a topology level; the node must be that close to the data
source (`netsched.io/data-source`, which must name a node or a level's domain)."""

from __future__ import annotations

from collections.abc import Mapping

from netsched.api import annotations as read
from netsched.api.labels import DATA_SOURCE, MAX_DATA_DISTANCE
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.plugin import InvalidNeeds
from netsched.extender.plugins.data.annotation import data_source


def max_data_distance(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> str | None:
    try:
        distance = read.max_data_distance(annotations, topology)
    except read.BadAnnotation as exc:
        raise InvalidNeeds(str(exc)) from exc
    if distance and ((source := data_source(annotations, topology)) is None or source.endpoint):
        raise InvalidNeeds(
            f"annotation {MAX_DATA_DISTANCE} needs {DATA_SOURCE} to name a node or a domain of "
            f"{', '.join(topology.limits[1:])}; "
            "for an endpoint use max-data-rtt-ms or min-data-bandwidth-mbps"
        )
    return distance
