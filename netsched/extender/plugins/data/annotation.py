"""`netsched.io/data-source`: `node:<n>`, `<level>:<domain>` for a configured topology level (`rack:<r>`,
`zone:<z>` by default) or `endpoint:<host:port>`, where the job's input lives. The data filters
(data_distance, network_limits) and the model read it too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from netsched.api.labels import DATA_SOURCE
from netsched.api.topology import DEFAULT, NODE, Topology
from netsched.extender.locality import Place, place_of
from netsched.extender.plugin import InvalidNeeds
from netsched.extender.snapshot import NodeTable

ENDPOINT = "endpoint"


@dataclass(frozen=True)
class DataSource:
    kind: str  # node, a topology level's name, or endpoint
    name: str

    @property
    def endpoint(self) -> str | None:
        return self.name if self.kind == ENDPOINT else None

    def place(self, table: NodeTable) -> Place | None:
        """Where the data is in the cluster; None for an endpoint or a name the cluster does not have."""
        return None if self.kind == ENDPOINT else place_of(table, self.kind, self.name)


def data_source(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> DataSource | None:
    if DATA_SOURCE not in annotations:
        return None
    value = annotations[DATA_SOURCE]
    kind, _, name = value.partition(":")
    kinds = (NODE, *reversed(topology.names), ENDPOINT)
    if kind not in kinds or not name:
        unknown = f" ({kind!r} is not a topology level of this cluster)" if name and kind not in kinds else ""
        raise InvalidNeeds(
            f"annotation {DATA_SOURCE}={value!r} must be <kind>:<name> with kind one of {', '.join(kinds)}"
            f"{unknown}, e.g. {topology.names[0]}:{topology.names[0]}-a or endpoint:10.0.0.5:9000"
        )
    return DataSource(kind, name)
