"""The training dataset: one row per finished GPUJob, appended to a JSON Lines file.

Each row holds what was known when the job was placed (its spec's hints, GPUs,
where its replicas ran, how far that was from its data) and what happened
(outcome, real duration). The completion-time model trains from this file.

- Location: `--records` of `netsched operator` (default
  `$XDG_STATE_HOME/netsched/job-records.jsonl`; in a cluster, a file on a PVC).
- Append-only: a row is written, flushed and fsynced before the job's `Recorded`
  condition is True (while the file cannot be written, the condition says so, reason
  RecordsUnavailable, and the row waits); rows are keyed by the job's uid and a uid already in the file
  is never written again, so a restart between the two steps cannot duplicate a job.
- A torn last line (a crash mid-write) is skipped on reading and never glued to the next row.
- Schema (version 1): netsched.records.format.ROW_FIELDS; `telemetry` is null unless the operator
  reads Prometheus.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from netsched.api.conditions import find
from netsched.api.errors import RecordsUnavailable
from netsched.api.events import now_rfc3339, parse_rfc3339
from netsched.api.gpujob import FIRST_FORECAST
from netsched.api.labels import GPU_LABELS, GPU_PRODUCT_LABEL
from netsched.api.topology import DEFAULT, NODE, Topology
from netsched.jobs.gpujob import DataSource, GPUJob
from netsched.records.format import SCHEMA_VERSION
from netsched.records.reader import read_rows

log = logging.getLogger(__name__)

def default_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "netsched" / "job-records.jsonl"


class JobRecords:
    """Append-only rows keyed by job uid; safe to share between handler threads.

    A file that cannot be read or written (the volume missing, full or read-only) never stops
    the operator: `append` raises RecordsUnavailable, the job says so in its `Recorded`
    condition, and the row is written at a later tick, once the file can be read again (the
    uids already in it are read first, so nothing is written twice)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._uids: set[str] | None = None  # None until the file has been read
        try:
            self._known()
        except RecordsUnavailable as exc:
            log.error("%s", exc)

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.path)

    def stamp(self) -> tuple[int, int, int] | None:
        """Changes whenever the file does (inode, size, modification time); None while it is missing."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def append(self, row: dict[str, Any]) -> bool:
        """Write the row unless its uid is already recorded; True if written."""
        with self._lock:
            uids = self._known()
            if row["uid"] in uids:
                return False
            data = json.dumps(row, sort_keys=True) + "\n"
            try:
                with open(self.path, "a+b") as f:
                    if f.tell() > 0:
                        f.seek(-1, os.SEEK_END)
                        if f.read(1) != b"\n":
                            data = "\n" + data  # end a torn line first
                    f.write(data.encode())
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                raise self._unavailable("written to", exc) from exc
            uids.add(row["uid"])
            return True

    def _known(self) -> set[str]:
        if self._uids is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._uids = {row["uid"] for row in self.rows()}
            except OSError as exc:
                raise self._unavailable("read from", exc) from exc
        return self._uids

    def _unavailable(self, what: str, exc: OSError) -> RecordsUnavailable:
        return RecordsUnavailable(
            f"job records cannot be {what} {self.path}: {exc.strerror or exc}; the record is written "
            "once the file is writable (check the operator's records volume, --records)")


def job_record(job: GPUJob, status: dict[str, Any], node_labels: dict[str, dict[str, str]],
               topology: Topology = DEFAULT) -> dict[str, Any]:
    """The record of a finished job; `topology`: the levels its placements' domains are of."""
    placements = sorted(status.get("placements") or [], key=lambda p: p["replica"])
    nodes = [p["node"] for p in placements]
    domains = {lv.name: [_domain(p, lv.name, lv.label, node_labels) for p in placements]
               for lv in topology.levels}
    racks, zones = domains[topology.names[-1]], domains[topology.names[0]]  # the narrowest, the widest
    start, end = status.get("startTime"), status.get("completionTime")
    data = job.data_sources[0] if job.data_sources else None
    cond = find(status.get("conditions") or [], status.get("phase") or "") or {}
    return {
        "schema_version": SCHEMA_VERSION, "uid": job.uid, "namespace": job.namespace, "name": job.name,
        "recorded_at": now_rfc3339(), "outcome": status.get("phase"), "reason": cond.get("reason"),
        "created": job.created, "start_time": start, "completion_time": end,
        "duration_seconds": _seconds(start, end), "queue_seconds": queue_seconds(job, status),
        "replicas": job.replicas, "gpus_per_replica": job.gpus_per_replica, "gpus": job.gpus,
        "min_available": job.min_available, "priority_class": job.priority_class,
        "failures": status.get("failures", 0),
        "workload_kind": job.workload_kind,
        "input_size_gb": job.workload.get("inputSizeGB"),
        "communication_intensity": job.workload.get("communicationIntensity"),
        "communication_gb_per_hour": job.workload.get("communicationGBPerHour"),
        "expected_duration_seconds": job.workload.get("expectedDurationSeconds"),
        "expected_steps": job.workload.get("expectedSteps"),
        "data_kind": data.kind if data else None, "data_location": data.location if data else None,
        "data_size_gb": data.size_gb if data else None,
        "data_distance": _data_distance(data, nodes, node_labels, topology),
        "nodes": nodes, "racks": racks, "zones": zones, "topology": str(topology), "domains": domains,
        "gpu_models": [node_labels.get(n, {}).get(GPU_PRODUCT_LABEL, "") for n in nodes],
        "gpu_labels": [{k: v for k, v in node_labels.get(n, {}).items() if k in GPU_LABELS} for n in nodes],
        "distinct_nodes": len(set(nodes)), "distinct_racks": len(set(racks)),
        "distinct_zones": len(set(zones)),
        "telemetry": status.get("placementTelemetry"),
        "first_forecast": status.get(FIRST_FORECAST),
    }


def queue_seconds(job: GPUJob, status: dict[str, Any]) -> float | None:
    """Seconds from the job's creation to its gang running (status.startTime); None before it runs."""
    return _seconds(job.created, status.get("startTime"))


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (parse_rfc3339(end) - parse_rfc3339(start)).total_seconds()


def _domain(placement: dict[str, Any], level: str, label: str, node_labels: dict[str, dict[str, str]]) -> str:
    """A placement's domain at a level: as the operator recorded it (placements before `domains` were
    recorded with netsched's own levels: rack and zone), else from the node's label now."""
    recorded = placement["domains"] if "domains" in placement else {
        "rack": placement.get("rack"), "zone": placement.get("zone")}
    return recorded.get(level) or node_labels.get(placement["node"], {}).get(label, "")


def _data_distance(data: DataSource | None, nodes: list[str], node_labels: dict[str, dict[str, str]],
                   topology: Topology) -> str | None:
    """The finest level (node or a topology level) at which every replica shares a place with the data."""
    if data is None or data.kind not in topology.limits or not nodes:
        return None
    levels = topology.limits

    def group(name: str, level: str) -> str:
        return name if level == NODE else node_labels.get(name, {}).get(topology.label_of(level), "")

    holders = [n for n in node_labels if group(n, data.kind) == data.location]
    for level in levels[levels.index(data.kind):]:
        data_groups = {group(h, level) for h in holders} - {""}
        if all(group(n, level) in data_groups for n in nodes):
            return level
    return "far"
