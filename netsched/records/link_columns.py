"""The links a GPUJob had when it started: a snapshot for its training record.

Taken once, when the job first runs with every replica placed, from the telemetry store
(fed from Prometheus, `netsched operator --prometheus-url`), and kept in
`status.placementTelemetry` so it survives operator restarts and is the record's
`telemetry` when the job finishes. Keys are completion-time model features
(netsched.models.features), for the job's last replica as the extender scored it: the
lowest measured bandwidth and highest RTT to the nodes of its peers, the link to the data
source when that is a node or an endpoint, and its node's NIC utilisation. A link with no fresh measurement is
left out (unknown), never guessed.
"""

from __future__ import annotations

from typing import Any

from netsched.api.gpujob import Phase
from netsched.jobs.gpujob import GPUJob
from netsched.models.features import weakest_link
from netsched.telemetry.store import TelemetryStore

FIELD = "placementTelemetry"


def placement_telemetry(job: GPUJob, status: dict[str, Any], store: TelemetryStore) -> dict[str, float]:
    placements = sorted(status.get("placements") or [], key=lambda p: p["replica"])
    if not placements:
        return {}
    last = placements[-1]["node"]
    out: dict[str, float] = {}
    peers = sorted({p["node"] for p in placements[:-1]} - {last})
    links = [s for s in (store.link(last, peer) for peer in peers) if s is not None]
    if links:
        out["peer_bw_mbps"], out["peer_rtt_ms"] = weakest_link([s.bandwidth_mbps for s in links],
                                                               [s.rtt_ms for s in links])
    nic = store.nic(last)
    if nic is not None:
        out["nic_util"] = nic
    data = job.data_sources[0] if job.data_sources else None
    if data and data.kind in ("node", "endpoint") and data.location != last:
        link = store.link(last, data.location)
        if link is not None:
            out["data_bw_mbps"], out["data_rtt_ms"] = link.bandwidth_mbps, link.rtt_ms
    return out


def needs_snapshot(job: GPUJob, status: dict[str, Any]) -> bool:
    """Running with every replica placed, and not taken yet."""
    return (status.get("phase") == Phase.RUNNING and FIELD not in status
            and len(status.get("placements") or []) == job.replicas)
