"""The links a GPUJob had when it started: a snapshot for its training record.

Taken once, when the job first runs with every replica placed, from the telemetry store
(fed from Prometheus, `netsched operator --prometheus-url`), and kept in
`status.placementTelemetry` so it survives operator restarts and is the record's
`telemetry` when the job finishes. Keys are completion-time model features
(netsched.models.features), for the job's last replica as the extender scored it: the
lowest measured bandwidth and highest RTT to the nodes of its peers, the link to the data
source when that is a node or an endpoint, and its node's NIC utilisation. A link's value is what the
extender would use: the fresh pair, else the reverse pair, else the median between the nodes' domains
(netsched.telemetry.aggregates; domains from the node labels and the topology); a link with none of
them is left out (unknown), never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netsched.api.gpujob import Phase
from netsched.api.topology import DEFAULT, Topology
from netsched.jobs.gpujob import GPUJob
from netsched.models.features import weakest_link
from netsched.telemetry.aggregates import NONE, node_domains
from netsched.telemetry.store import TelemetrySnapshot, TelemetryStore

FIELD = "placementTelemetry"


def placement_telemetry(job: GPUJob, status: dict[str, Any], store: TelemetryStore,
                        labels: Mapping[str, Mapping[str, str] | None] | None = None,
                        topology: Topology = DEFAULT) -> dict[str, float]:
    """labels: every node's labels, for the domains of the aggregates (None: pairs only)."""
    placements = sorted(status.get("placements") or [], key=lambda p: p["replica"])
    if not placements:
        return {}
    last = placements[-1]["node"]
    out: dict[str, float] = {}
    peers = sorted({p["node"] for p in placements[:-1]} - {last})
    snap = store.snapshot()
    link = _Links(snap, labels, topology)
    links = [s for s in (link(last, peer) for peer in peers) if s is not None]
    if links:
        out["peer_bw_mbps"], out["peer_rtt_ms"] = weakest_link([bw for bw, _ in links],
                                                               [rtt for _, rtt in links])
    nic = store.nic(last)
    if nic is not None:
        out["nic_util"] = nic
    data = job.data_sources[0] if job.data_sources else None
    if data and data.kind in ("node", "endpoint") and data.location != last:
        found = link(last, data.location)
        if found is not None:
            out["data_bw_mbps"], out["data_rtt_ms"] = found
    return out


class _Links:
    """Bandwidth and RTT from a node to a target, with the extender's fallbacks when labels are given."""

    def __init__(self, snap: TelemetrySnapshot, labels: Mapping[str, Mapping[str, str] | None] | None,
                 topology: Topology):
        self.snap = snap
        self.table = node_domains(labels, topology) if labels else None

    def __call__(self, src: str, dst: str) -> tuple[float, float] | None:
        if self.table is None or src not in self.table[0]:
            stats = self.snap.link(src, dst)
            return None if stats is None else (stats.bandwidth_mbps, stats.rtt_ms)
        index, domains = self.table
        answer = self.snap.answer(dst, index, domains)
        i = index[src]
        return None if answer.origin[i] == NONE else (float(answer.bw[i]), float(answer.rtt[i]))


def needs_snapshot(job: GPUJob, status: dict[str, Any]) -> bool:
    """Running with every replica placed, and not taken yet."""
    return (status.get("phase") == Phase.RUNNING and FIELD not in status
            and len(status.get("placements") or []) == job.replicas)
