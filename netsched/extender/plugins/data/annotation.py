"""`netsched.io/data-source`: `node:<n>`, `rack:<r>`, `zone:<z>` or `endpoint:<host:port>`, where the
job's input lives. The data filters (data_distance, network_limits) and the model read it too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from netsched.api.labels import DATA_SOURCE
from netsched.extender.locality import Place, place_of
from netsched.extender.plugin import InvalidNeeds
from netsched.extender.snapshot import NodeTable

DATA_KINDS = ("node", "rack", "zone", "endpoint")


@dataclass(frozen=True)
class DataSource:
    kind: str  # one of DATA_KINDS
    name: str

    @property
    def endpoint(self) -> str | None:
        return self.name if self.kind == "endpoint" else None

    def place(self, table: NodeTable) -> Place | None:
        """Where the data is in the cluster; None for an endpoint or a name the cluster does not have."""
        return None if self.kind == "endpoint" else place_of(table, self.kind, self.name)


def data_source(annotations: Mapping[str, str]) -> DataSource | None:
    if DATA_SOURCE not in annotations:
        return None
    kind, _, name = annotations[DATA_SOURCE].partition(":")
    if kind not in DATA_KINDS or not name:
        raise InvalidNeeds(
            f"annotation {DATA_SOURCE}={annotations[DATA_SOURCE]!r} must be <kind>:<name> with kind "
            f"one of {', '.join(DATA_KINDS)}, e.g. zone:zone-a or endpoint:10.0.0.5:9000"
        )
    return DataSource(kind, name)
