"""The completion-time model's feature rows (netsched.models.features) for a pod's candidate nodes.

Built from what the extender already holds: the pod's annotations (job size and the
operator's workload hints), the node table and free GPUs, where the job's other pods sit,
and fresh link measurements from the telemetry store. What the extender does not track
stays NaN (unknown), as the schema allows: CPU and memory load of a node and NIC
utilisation. Distances are read on the model's fixed scale whatever levels the cluster has
(Topology.model_scale): 0 same node, 1 the narrowest level, 2 the widest, 3 farther, levels between
in between; the free GPUs "in the rack" are those of the node's narrowest-level domain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from netsched.api import annotations as read
from netsched.api.labels import (
    COMMUNICATION_GB_PER_HOUR,
    EXPECTED_SECONDS,
    INPUT_SIZE_GB,
    REPLICAS,
)
from netsched.api.topology import NODE, Topology
from netsched.extender.locality import Place, distance_levels, model_distances
from netsched.extender.plugin import Request
from netsched.extender.plugins import ENDPOINT, DataSource, data_source, job_gpus
from netsched.extender.protocol import PodRef
from netsched.extender.snapshot import Snapshot
from netsched.models.features import comm_gb_per_hour, data_scope, kind_features, peer_features, weakest_link

NAN = math.nan


def feature_values(req: Request, idx: np.ndarray) -> dict[str, float | np.ndarray]:
    """Feature name -> a scalar (job features) or an array over idx (node and network features)."""
    snap = req.snapshot
    source = req.need(data_source)
    topology = snap.table.topology
    job = _job(req.pod, req.need(job_gpus), source, topology)
    peers = _peers(snap, idx) if snap.peers else _peers_to_come(snap, idx, req.pod, job["job_gpus"])
    return {**job, **_node(snap, idx), **_data(source, snap, idx), **peers, "nic_util": snap.nic(idx)}


def _job(pod: PodRef, gpus: int | None, source: DataSource | None, topology: Topology) -> dict[str, float]:
    notes = pod.annotations
    replicas = _number(notes, REPLICAS)
    return {
        "job_gpus": float(gpus or pod.gpus * (replicas if replicas > 0 else 1)),
        "replicas": replicas, "gpus_per_replica": float(pod.gpus),
        "input_size_gb": _number(notes, INPUT_SIZE_GB),
        "comm_gb_per_hour": comm_gb_per_hour(_number(notes, COMMUNICATION_GB_PER_HOUR),
                                             read.ignoring_bad(read.communication, notes)),
        **kind_features(read.workload_kind(notes)),
        "expected_seconds": _number(notes, EXPECTED_SECONDS),
        "data_scope": _scope(source, topology),
    }


def _scope(source: DataSource | None, topology: Topology) -> float:
    """How widely the data is placed, on the model's scale: a node 0, a level's domain by its distance,
    an endpoint outside the cluster."""
    return data_scope(source.kind if source else None, topology)


def _number(annotations: Mapping[str, str], key: str) -> float:
    """An annotation's number; NaN when absent or bad (the model then treats it as unknown: a hint is
    never worth failing a request over)."""
    try:
        number = read.hint_number(annotations, key)
    except read.BadAnnotation:
        return NAN
    return NAN if number is None else number


def _node(snap: Snapshot, idx: np.ndarray) -> dict[str, np.ndarray]:
    table = snap.table
    names, capability = table.gpu_capability
    return {
        **{name: capability[idx, j] for j, name in enumerate(names)},
        "node_gpus": table.allocatable[idx].astype(float), "node_free_gpus": snap.free[idx].astype(float),
        "rack_free_gpus": snap.domain_free(idx),
        "node_cpu_load": _load(snap, 0, table.cpu, idx), "node_mem_load": _load(snap, 1, table.memory, idx),
    }


def _load(snap: Snapshot, row: int, allocatable: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Requested over allocatable, 0..1; NaN where the node reports none (or the snapshot has no requests)."""
    if snap.requested is None:
        return np.full(len(idx), NAN)
    alloc = allocatable[idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(alloc > 0, np.clip(snap.requested[row, idx] / alloc, 0, 1), NAN)


def _data(source: DataSource | None, snap: Snapshot, idx: np.ndarray) -> dict[str, np.ndarray]:
    unknown = np.full(len(idx), NAN)
    place = None if source is None else source.place(snap.table)
    distance = unknown if place is None else model_distances(snap.table.topology,
                                                             distance_levels(snap.table, idx, place))
    bw, rtt = unknown, unknown
    if source is not None and source.kind in (NODE, ENDPOINT):  # an agent's node, or an endpoint
        links = snap.measured(idx, source.name)
        if links is not None:
            bw, rtt = links.bw, links.rtt
        if place is not None:  # data on the candidate itself crosses no link
            here = idx == place.node
            bw, rtt = np.where(here, NAN, bw), np.where(here, NAN, rtt)
    return {"data_distance": distance, "data_bw_mbps": bw, "data_rtt_ms": rtt}


def _peers_to_come(snap: Snapshot, idx: np.ndarray, pod: PodRef,
                   job_gpus: float) -> dict[str, float | np.ndarray]:
    """A job's first pod, with replicas still to come: its peers as they would be placed if it went to
    each candidate, at the nearest place with room for the whole job (the node, else its domain at the
    narrowest level that holds it, else far). The model predicts the job's time, so a node with room
    for the first pod alone must read as a job split across nodes, not as a one-pod job; links to the
    peers to come are unknown."""
    others = round(job_gpus / pod.gpus) - 1 if pod.job and pod.gpus else 0
    if others < 1:
        return _peers(snap, idx)
    topology = snap.table.topology
    levels = np.full(len(idx), topology.far, dtype=np.int64)
    for k, name in enumerate(topology.names):  # widest first: a narrower level that holds it overwrites
        levels[snap.domain_free(idx, name) >= job_gpus] = topology.depth - k
    levels[snap.unheld(idx) >= job_gpus] = 0
    on_scale = model_distances(topology, np.tile(levels, (others, 1)))
    unknown = np.full(len(idx), NAN)
    return {**peer_features(on_scale), "peer_bw_mbps": unknown, "peer_rtt_ms": unknown}


def _peers(snap: Snapshot, idx: np.ndarray) -> dict[str, float | np.ndarray]:
    table = snap.table
    known = [p for p in snap.peers if p in table.index]
    unknown = np.full(len(idx), NAN)
    distances, bandwidths, rtts = [], [], []
    for peer in sorted(set(known)):
        at = table.index[peer]
        distances += [distance_levels(table, idx, Place.of_node(table, at))] * known.count(peer)
        links = snap.measured(idx, peer)
        if links is not None:
            remote = idx != at  # a peer on the candidate itself crosses no link
            bandwidths.append(np.where(remote, links[0], NAN))
            rtts.append(np.where(remote, links[1], NAN))
    bw, rtt = weakest_link(bandwidths, rtts) if bandwidths else (unknown, unknown)
    on_scale = model_distances(table.topology, np.array(distances, dtype=np.int64))
    return {**peer_features(on_scale), "peer_bw_mbps": bw, "peer_rtt_ms": rtt}
