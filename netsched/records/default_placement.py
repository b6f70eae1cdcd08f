"""The placement kube-scheduler's default profile would have made for recorded jobs, reconstructed from
the records alone, and the model features of both placements (for `netsched report`'s estimated gain,
netsched.records.gain).

What the default's placement is taken to be: kube-scheduler's default scoring (NodeResourcesFit's
LeastAllocated, BalancedAllocation, the system PodTopologySpread defaults) knows nothing of where a pod's
peers or its data are, nor of one GPU being faster than another: it spreads a job's replicas over the
emptiest nodes that fit them. Which node was emptiest at the time is not in the records, so each
replica's node is drawn uniformly from the nodes the records show can hold it (nodes that ran a replica
asking at least as many GPUs, in any record), the last replica's peers never on its own node. The drawn
nodes' domains and GPU products are theirs as the records saw them. Not modelled: that the default may
have started the job at another time (its queueing), or not at all (a gang it could not fit), or on a
node outside every record.

Both placements are described the same way, from what the records say of a node: its domains, its GPU
(netsched.models.gpus) and the data's distance from where the data is (a node's or a domain's wider
domains as the records saw them). The links and loads measured at the time (the record's `telemetry`)
are left unknown for both: no one measured them on the default's nodes. Features of the last replica,
as in training (netsched.records.features); jobs of one topology per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsched.api.topology import NODE, Topology
from netsched.models.features import FEATURE_NAMES, INDEX, kind_features
from netsched.models.gpus import GPU_FEATURES, gpu_features
from netsched.records.features import Record, job_features, record_places


class SeenCluster:
    """Every node the records placed a replica on (of one topology): for each level, narrowest first,
    its domain as an id (-1: none); its GPU's features; the largest replica it held."""

    def __init__(self, records: Sequence[Record], topology: Topology):
        self.topology = topology
        self.levels = list(reversed(topology.names))  # narrowest first: distance 1, 2, ...
        self.ids: dict[str, int] = {}
        self.domain_ids: list[dict[str, int]] = [{} for _ in self.levels]
        places: list[list[int]] = []
        largest: list[int] = []
        gpu: list[list[float]] = []
        unplaced: set[int] = set()  # nodes seen without a domain at some level so far
        for record in records:
            nodes = record.get("nodes") or []
            size = int(record.get("gpus_per_replica") or 0)
            fresh = False
            for name in nodes:
                k = self.ids.get(name)
                if k is None:
                    k = self.ids[name] = len(self.ids)
                    places.append([-1] * len(self.levels))
                    largest.append(0)
                    gpu.append([])
                    unplaced.add(k)
                fresh = fresh or k in unplaced
                largest[k] = max(largest[k], size)
            if fresh:  # a node's domains and GPU from the first records that name them
                self._describe(record, [self.ids[n] for n in nodes], places, gpu, unplaced)
        self.places = np.array(places, dtype=np.int64).reshape(len(self.ids), len(self.levels))
        self.largest = np.array(largest, dtype=np.int64)
        self.gpu = np.array(gpu, dtype=np.float64).reshape(len(self.ids), len(GPU_FEATURES))
        self.scale = np.array([topology.model_scale(d) for d in range(topology.far + 1)])
        self._data: dict[tuple[str, str], tuple[int, np.ndarray] | None] = {}

    def _describe(self, record: Record, ids: list[int], places: list[list[int]], gpu: list[list[float]],
                  unplaced: set[int]) -> None:
        where = record_places(record, self.topology)
        models, labels = record.get("gpu_models") or [], record.get("gpu_labels") or []
        for i, k in enumerate(ids):
            if k not in unplaced:
                continue
            if not gpu[k]:
                features = gpu_features(models[i] if i < len(models) else None,
                                        labels[i] if i < len(labels) else None)
                gpu[k] = [features[name] for name in GPU_FEATURES]
            for lv, level in enumerate(self.levels):
                value = where[level][i] if i < len(where[level]) else ""
                if value:
                    places[k][lv] = self.domain_ids[lv].setdefault(value, len(self.domain_ids[lv]))
            if min(places[k], default=0) >= 0:
                unplaced.discard(k)

    def distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Distance between nodes a[i] and b[i] (ids): 0 the same node, then the narrowest level whose
        domain both have, far past the widest."""
        d = np.full(len(a), self.topology.far)
        for lv in range(len(self.levels) - 1, -1, -1):  # widest first, so the narrowest shared one wins
            pa, pb = self.places[a, lv], self.places[b, lv]
            d = np.where((pa >= 0) & (pa == pb), lv + 1, d)
        return np.where(a == b, 0, d)

    def data_place(self, record: Record) -> tuple[int, np.ndarray] | None:
        """Where a record's data is: its kind's distance and its domain id at each level (-1 unknown; at
        node level the node's id), or None for no data, an endpoint or an unknown node."""
        kind, location = record.get("data_kind"), record.get("data_location")
        if kind not in self.topology.limits or not location:
            return None
        key = str(kind), str(location)
        if key not in self._data:
            self._data[key] = self._place(*key)
        return self._data[key]

    def _place(self, kind: str, location: str) -> tuple[int, np.ndarray] | None:
        if kind == NODE:
            node = self.ids.get(location)
            return None if node is None else (0, np.concatenate(([node], self.places[node])))
        lv = self.levels.index(kind)
        domain = self.domain_ids[lv].get(location, -1)
        holders = np.flatnonzero(self.places[:, lv] == domain) if domain >= 0 else np.empty(0, dtype=int)
        wider = self.places[holders[0]] if len(holders) else np.full(len(self.levels), -1)
        out = np.concatenate(([-1], wider))
        out[1:lv + 1] = -1  # the holder's narrower domains are not the data's
        out[lv + 1] = domain
        return lv + 1, out


@dataclass(frozen=True)
class Placements:
    """Feature rows, `draws` + 1 per job: netsched's placement first, then the default's draws."""
    rows: np.ndarray  # (jobs * (draws + 1), len(FEATURE_NAMES))
    jobs: list[int]  # the record index of each job estimated


def placement_rows(records: Sequence[Record], cluster: SeenCluster, picked: list[int], draws: int,
                   rng: np.random.Generator) -> Placements:
    """The feature rows of the picked records' jobs (indices into records, each with nodes recorded)."""
    per = draws + 1
    job_rows, lasts, peer_of, peers, data = [], [], [], [], []
    sizes: list[int] = []
    jobs: list[int] = []
    kinds: dict[str | None, dict[str, float]] = {}
    for i in picked:
        record = records[i]
        size = int(record.get("gpus_per_replica") or 0)
        row = dict.fromkeys(FEATURE_NAMES, math.nan)
        row.update(job_features(record, cluster.topology))
        kind = record.get("workload_kind")
        row.update(kinds.get(kind) or kinds.setdefault(kind, kind_features(kind)))
        ids = [cluster.ids[n] for n in record["nodes"]]
        j = len(jobs)
        jobs.append(i)
        job_rows.append([row[name] for name in FEATURE_NAMES])
        sizes.append(size)
        lasts.append(ids[-1])
        peer_of.extend([j] * (len(ids) - 1))
        peers.extend(ids[:-1])
        data.append(cluster.data_place(record))
    n = len(jobs)
    matrix = np.repeat(np.array(job_rows, dtype=np.float64).reshape(n, len(FEATURE_NAMES)), per, axis=0)
    last = np.empty((n, per), dtype=np.int64)
    last[:, 0] = lasts
    peer_job = np.array(peer_of, dtype=np.int64)
    peer_nodes = np.empty((len(peer_job), per), dtype=np.int64)
    peer_nodes[:, 0] = peers
    pools = _pools(cluster, np.array(sizes, dtype=np.int64))
    for k in range(1, per):
        last[:, k] = pools.draw(np.arange(n), rng)
        peer_nodes[:, k] = pools.draw(peer_job, rng, avoid=last[peer_job, k])
    lasts_flat = last.reshape(-1)
    matrix[:, [INDEX[name] for name in GPU_FEATURES]] = cluster.gpu[lasts_flat]
    _peer_columns(matrix, cluster, peer_job, peer_nodes, last, n, per)
    matrix[:, INDEX["data_distance"]] = _data_distance(cluster, data, last).reshape(-1)
    return Placements(matrix, jobs)


class _Pools:
    """For each replica size, the nodes that can hold it, as rows of one padded array."""

    def __init__(self, nodes: np.ndarray, lengths: np.ndarray, of_job: np.ndarray):
        self.nodes, self.lengths, self.of_job = nodes, lengths, of_job

    def draw(self, job: np.ndarray, rng: np.random.Generator, avoid: np.ndarray | None = None) -> np.ndarray:
        pool = self.of_job[job]
        out = self.nodes[pool, (rng.random(len(job)) * self.lengths[pool]).astype(np.int64)]
        if avoid is not None:  # a peer never on the last replica's node (where the pool has another)
            for _ in range(20):
                again = np.flatnonzero((out == avoid) & (self.lengths[pool] > 1))
                if not len(again):
                    break
                out[again] = self.nodes[pool[again],
                                        (rng.random(len(again)) * self.lengths[pool[again]]).astype(np.int64)]
        drawn: np.ndarray = out
        return drawn


def _pools(cluster: SeenCluster, sizes: np.ndarray) -> _Pools:
    wanted, of_job = np.unique(sizes, return_inverse=True)
    members = [np.flatnonzero(cluster.largest >= size) for size in wanted]
    width = max([len(m) for m in members] + [1])
    nodes = np.zeros((len(members), width), dtype=np.int64)
    for k, m in enumerate(members):
        nodes[k, :len(m)] = m
    return _Pools(nodes, np.array([len(m) for m in members], dtype=np.int64), of_job.reshape(-1))


def _peer_columns(matrix: np.ndarray, cluster: SeenCluster, peer_job: np.ndarray, peer_nodes: np.ndarray,
                  last: np.ndarray, n: int, per: int) -> None:
    """peer_count and the peer shares (netsched.models.features.peer_features) of every row."""
    count = np.bincount(peer_job, minlength=n).astype(np.float64)
    matrix[:, INDEX["peer_count"]] = np.repeat(count, per)
    has = np.repeat(count > 0, per)
    for k in range(per):
        d = cluster.scale[cluster.distance(peer_nodes[:, k], last[peer_job, k])]
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, within in (("peer_frac_node", d == 0), ("peer_frac_rack", d == 1),
                                 ("peer_frac_zone", (d > 1) & (d <= 2))):
                share = np.bincount(peer_job, weights=within, minlength=n) / count
                matrix[np.arange(n) * per + k, INDEX[name]] = share
    for name in ("peer_frac_node", "peer_frac_rack", "peer_frac_zone"):
        matrix[~has, INDEX[name]] = math.nan


def _data_distance(cluster: SeenCluster, data: list[tuple[int, np.ndarray] | None],
                   last: np.ndarray) -> np.ndarray:
    """The last replica's distance to the data on the model's scale, per job and placement (NaN: none)."""
    out = np.full(last.shape, math.nan)
    for kind in range(len(cluster.levels) + 1):
        jobs = np.array([j for j, d in enumerate(data) if d is not None and d[0] == kind], dtype=np.int64)
        if not len(jobs):
            continue
        # (jobs, 1 + levels): where each job's data is
        where = np.array([place[1] for place in (data[j] for j in jobs) if place is not None])
        nodes = last[jobs]
        d = np.full(nodes.shape, cluster.topology.far)
        for lv in range(len(cluster.levels) - 1, max(kind, 1) - 2, -1):
            mine, theirs = cluster.places[nodes, lv], where[:, lv + 1, None]
            d = np.where((theirs >= 0) & (mine == theirs), lv + 1, d)
        if kind == 0:
            d = np.where(nodes == where[:, :1], 0, d)
        out[jobs] = cluster.scale[d]
    return out
