"""`netsched.io/data-source`: `node:<n>`, `<level>:<domain>` for a configured topology level (`rack:<r>`,
`zone:<z>` by default) or `endpoint:<host:port>`, where the job's input lives. The data filters
(data_distance, network_limits) and the model read it too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from netsched.api import annotations as read
from netsched.api.topology import DEFAULT, Topology
from netsched.extender.locality import Place, place_of
from netsched.extender.plugin import InvalidNeeds
from netsched.extender.snapshot import NodeTable

ENDPOINT = read.ENDPOINT


@dataclass(frozen=True)
class DataSource(read.DataSource):
    def place(self, table: NodeTable) -> Place | None:
        """Where the data is in the cluster; None for an endpoint or a name the cluster does not have."""
        return None if self.kind == ENDPOINT else place_of(table, self.kind, self.name)


def data_source(annotations: Mapping[str, str], topology: Topology = DEFAULT) -> DataSource | None:
    try:
        source = read.data_source(annotations, topology)
    except read.BadAnnotation as exc:
        raise InvalidNeeds(str(exc)) from exc
    return DataSource(source.kind, source.name) if source else None
