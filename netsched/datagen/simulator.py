"""A cluster simulator for training data at scale: every job's completion time on every candidate node.

A real cluster runs a job once, on one node; evaluation needs the time it would have taken
on each candidate. The simulator gives both, from a performance model the learned model
never sees: it learns from the rows this module writes, like from any other source.

Cluster: `nodes` nodes filling `zones` x `racks_per_zone` racks (netsched.devcluster.topology
naming); each rack has one GPU model (relative speed GPU_SPEED, drawn from the profile's mix,
PROFILES) and NICs of NIC_MBPS (times the profile's nic_scale); every
link has a persistent quality factor (a node's own, lognormal(0, 0.2), times one per rack pair
or rack-to-data-site path, lognormal(0, 0.15-0.2)), so two equally placed nodes differ and only
measurement tells them apart. In the default profile zones are joined
by 3-12 Gbit/s links with 1-8 ms RTT; three external endpoints reach each zone at
0.8-8 Gbit/s, 4-40 ms.

Completion time of job j on candidate node n, in seconds:

    T = (STARTUP_S + pull + compute + exchange) * e_job * e_node
    pull     = (input_gb / replicas) * 8000 / (bw(n, data) * c)
    compute  = work_s * speed(gpu of n) ** -GPU_EXPONENT[kind] * (1 + CPU_SENSITIVITY[kind] * cpu_load(n))
    exchange = 2 (r-1)/r * volume_gb * 8000 / (min bw(n, peer) * c)
               + (work_s / STEP_S) * 2 (r-1) * max rtt(n, peer) / 1000     (only with peers)
    c        = 1 - CONTENTION * nic_util(n)   (1 for data on n's own disk or a peer on n itself)

where bw and rtt are the true link values, volume_gb = gb_per_hour * work_s / 3600 (gb_per_hour
drawn around its level's COMM_LEVELS, lognormal(0, COMM_SIGMA)), STEP_S its step_seconds,
and e_job ~ lognormal(0, job_noise) is shared by all candidates of a job while
e_node ~ lognormal(0, node_noise) is drawn per candidate. The job's other replicas (its
peers) are already placed (PEER_STYLES: all on one node where they fit, as netsched places a gang
that has a node with room, else packed in a rack or a zone, or scattered); the candidate hosts the
last one, as the extender scores it. NIC load follows a daily cycle per node; CPU/memory load and
free GPUs are drawn per job, a peer's node keeping no more free than its peers leave. Every peer's
node with room for the last replica is among the candidates, as it is among the nodes
kube-scheduler hands the extender: the rows show the candidates that hold some or all of the
job's peers in the share a scheduler meets them.

What a row shows is what telemetry would: bandwidth and RTT measured with lognormal(0,
measure_noise) error, NIC utilisation +-0.02, and with probability `unmeasured` no link
measurement at all for a candidate. `chosen` marks the node kube-scheduler's default
scoring would pick, so the data also mirror what a cluster without netsched records.
Deterministic for a given SimConfig (seed included).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from netsched.api.topology import DEFAULT
from netsched.datagen import laws
from netsched.devcluster.topology import gpu_nodes
from netsched.models.features import (
    COMM_LEVELS,
    DATA_SCOPES,
    SCHEMA_VERSION,
    TARGET,
    WORKLOAD_KINDS,
    kind_features,
    peer_features,
    weakest_link,
)
from netsched.models.gpus import gpu_features
from netsched.training.policies import least_allocated_balanced

# The simulator's own truth about each GPU (relative speed, the NIC it ships with): hidden from the
# learned model, which sees only the capability table (netsched.models.gpus) or nothing.
GPU_SPEED = {"NVIDIA-H100-80GB-HBM3": 1.0, "NVIDIA-A100-SXM4-80GB": 0.6, "NVIDIA-L40S": 0.45,
             "Tesla-V100-SXM2-32GB": 0.3, "NVIDIA-H200": 1.15, "NVIDIA-A100-SXM4-40GB": 0.55,
             "NVIDIA-L4": 0.17, "NVIDIA-A10": 0.2, "NVIDIA-A40": 0.27, "Tesla-T4": 0.08}
NIC_MBPS = {"NVIDIA-H100-80GB-HBM3": 100_000, "NVIDIA-A100-SXM4-80GB": 100_000, "NVIDIA-L40S": 25_000,
            "Tesla-V100-SXM2-32GB": 25_000, "NVIDIA-H200": 200_000, "NVIDIA-A100-SXM4-40GB": 100_000,
            "NVIDIA-L4": 25_000, "NVIDIA-A10": 25_000, "NVIDIA-A40": 25_000, "Tesla-T4": 10_000}
GPUS_PER_NODE = 8
DISTANCES = DEFAULT.distances  # the simulated world is zones of racks: netsched's own levels
NVLINK_MBPS, NVLINK_RTT_MS = 400_000.0, 0.005
LOCAL_DISK_MBPS, LOCAL_DISK_RTT_MS = 24_000.0, 0.02
RACK_STORE_MBPS, ZONE_STORE_MBPS = 40_000.0, 20_000.0
RACK_RTT_MS, ZONE_RTT_MS = 0.05, 0.25
SPINE_SHARE = 0.4  # of a NIC's rate left between racks of a zone (oversubscribed spine)
ENDPOINTS = 3
CONTENTION = 0.85
STARTUP_S = 30.0



@dataclass(frozen=True)
class ClusterProfile:
    """What makes one simulated cluster unlike another: its shape, GPUs (share of racks), NICs
    (scaled), links between zones and to endpoints (Mbit/s ranges), and its job mix."""
    nodes: int
    zones: int
    racks_per_zone: int
    gpus: tuple[tuple[str, float], ...]
    nic_scale: float = 1.0
    zone_mbps: tuple[float, float] = (3_000, 12_000)
    endpoint_mbps: tuple[float, float] = (800, 8_000)
    # share of training, inference, etl and batch jobs
    kind_share: tuple[float, float, float, float] = (0.45, 0.15, 0.25, 0.15)
    law: str = "physics"  # how completion time comes about (netsched.datagen.laws)


# Clusters that differ in GPUs (several found in one cluster only), link speeds, topology and job
# mix: the leave-one-cluster-out benchmark (bench/loco.py) trains on all but one.
PROFILES = {
    "default": ClusterProfile(64, 4, 4, (("NVIDIA-H100-80GB-HBM3", 0.3), ("NVIDIA-A100-SXM4-80GB", 0.35),
                                         ("NVIDIA-L40S", 0.2), ("Tesla-V100-SXM2-32GB", 0.15))),
    "inference-edge": ClusterProfile(48, 2, 4,
                                     (("NVIDIA-L4", 0.4), ("NVIDIA-A10", 0.3), ("NVIDIA-L40S", 0.3)),
                                     nic_scale=0.5, zone_mbps=(1_000, 4_000),
                                     kind_share=(0.15, 0.45, 0.25, 0.15)),
    "training-hpc": ClusterProfile(96, 3, 8, (("NVIDIA-H200", 0.4), ("NVIDIA-H100-80GB-HBM3", 0.4),
                                             ("NVIDIA-A100-SXM4-80GB", 0.2)),
                                   nic_scale=2.0, zone_mbps=(10_000, 40_000),
                                   kind_share=(0.7, 0.05, 0.15, 0.1)),
    "legacy": ClusterProfile(64, 4, 4, (("Tesla-V100-SXM2-32GB", 0.4), ("Tesla-T4", 0.3),
                                        ("NVIDIA-A100-SXM4-40GB", 0.3)),
                             nic_scale=0.4, zone_mbps=(1_000, 6_000), endpoint_mbps=(400, 3_000),
                             kind_share=(0.3, 0.2, 0.2, 0.3)),
    "mixed": ClusterProfile(80, 5, 4, (("NVIDIA-H100-80GB-HBM3", 0.2), ("NVIDIA-A40", 0.3),
                                       ("NVIDIA-A100-SXM4-80GB", 0.2), ("NVIDIA-L40S", 0.3)),
                            zone_mbps=(2_000, 8_000)),
    # worlds whose completion-time law differs in form from the above (netsched.datagen.laws)
    "affinity": ClusterProfile(64, 4, 4, (("NVIDIA-H100-80GB-HBM3", 0.25), ("NVIDIA-A100-SXM4-80GB", 0.25),
                                          ("NVIDIA-L40S", 0.2), ("NVIDIA-A40", 0.15), ("NVIDIA-L4", 0.15)),
                               kind_share=(0.3, 0.3, 0.25, 0.15), law="affinity"),
    "cliff": ClusterProfile(64, 4, 4, (("NVIDIA-H100-80GB-HBM3", 0.4), ("NVIDIA-A100-SXM4-80GB", 0.4),
                                       ("NVIDIA-L40S", 0.2)),
                            nic_scale=0.5, zone_mbps=(1_000, 6_000), kind_share=(0.6, 0.1, 0.2, 0.1),
                            law="cliff"),
    "cached": ClusterProfile(64, 4, 4, (("NVIDIA-A100-SXM4-80GB", 0.4), ("NVIDIA-L40S", 0.3),
                                        ("Tesla-V100-SXM2-32GB", 0.3)),
                             endpoint_mbps=(400, 4_000), kind_share=(0.3, 0.15, 0.4, 0.15), law="cached"),
    "stragglers": ClusterProfile(64, 4, 4, (("NVIDIA-H100-80GB-HBM3", 0.3), ("NVIDIA-A40", 0.3),
                                            ("NVIDIA-A100-SXM4-80GB", 0.2), ("Tesla-T4", 0.2)),
                                 law="stragglers"),
}
REPLICAS = {"training": ((1, 2, 4, 8), (0.3, 0.3, 0.25, 0.15)), "inference": ((1,), (1.0,)),
            "etl": ((1, 2, 4), (0.5, 0.3, 0.2)), "batch": ((1, 2), (0.7, 0.3))}
GPUS_PER_REPLICA = {"training": ((2, 4, 8), (0.3, 0.4, 0.3)), "inference": ((1, 2), (0.7, 0.3)),
                    "etl": ((1, 2), (0.6, 0.4)), "batch": ((1, 2, 4), (0.4, 0.4, 0.2))}
INPUT_GB = {"training": (200, 1.0), "inference": (5, 0.8), "etl": (800, 0.8),  # median, sigma
            "batch": (100, 1.0)}
COMM = {"training": ("medium", "high"), "inference": ("low",), "etl": ("low", "medium"), "batch": ("low",)}
DATA_SCOPE_SHARE = (0.15, 0.25, 0.4, 0.2)  # node, rack, zone, endpoint
# the placed replicas: on one node (where they fit), in a rack, in a zone, anywhere
PEER_STYLES = (0.3, 0.35, 0.2, 0.15)
GPU_EXPONENT = {"training": 1.0, "inference": 0.8, "etl": 0.4, "batch": 0.7}
CPU_SENSITIVITY = {"training": 0.15, "inference": 0.1, "etl": 0.5, "batch": 0.3}
COMM_SIGMA = 0.6  # a job's GB/h: lognormal around its level's COMM_LEVELS


def step_seconds(gb_per_hour: float) -> float:
    """Seconds between synchronisations: more exchange goes with more frequent steps (30 s at 10 GB/h,
    ~4 s at 100, ~1 s at 600)."""
    return 30.0 * (gb_per_hour / 10.0) ** -0.85
WORK_S = (1500.0, 0.8)  # compute seconds per replica on an H100: median, sigma


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 64
    zones: int = 4
    racks_per_zone: int = 4
    jobs: int = 3000
    candidates: int = 8
    seed: int = 0
    profile: str = "default"  # PROFILES: GPUs, NICs, links and job mix (nodes, zones, racks stay as given)
    start_unix: float = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    mean_gap_s: float = 300.0
    job_noise: float = 0.10
    node_noise: float = 0.04
    measure_noise: float = 0.08
    unmeasured: float = 0.05

    def __post_init__(self):
        if self.nodes < 2 or self.candidates < 2 or self.jobs < 1:
            raise ValueError("the simulator needs at least 2 nodes, 2 candidates and 1 job")
        if self.profile not in PROFILES:
            raise ValueError(f"unknown cluster profile {self.profile!r}; one of {', '.join(PROFILES)}")
        if self.candidates > self.nodes:
            raise ValueError(f"{self.candidates} candidates per job need at least as many nodes, "
                             f"not {self.nodes}")


def profile_config(profile: str, jobs: int, seed: int, **kwargs) -> SimConfig:
    """A SimConfig of the shape (nodes, zones, racks) the profile names."""
    shape = PROFILES[profile]
    return SimConfig(nodes=shape.nodes, zones=shape.zones, racks_per_zone=shape.racks_per_zone, jobs=jobs,
                     seed=seed, profile=profile, **kwargs)


class Cluster:
    """Static facts: where nodes are, their GPUs and NICs, and every link's true bandwidth and RTT."""

    def __init__(self, cfg: SimConfig, rng: np.random.Generator):
        nodes = gpu_nodes(cfg.nodes, cfg.zones, cfg.racks_per_zone, GPUS_PER_NODE)
        self.names = [n.name for n in nodes]
        self.zone_names = sorted({n.zone for n in nodes})
        rack_names = sorted({n.rack for n in nodes})
        self.zone = np.array([self.zone_names.index(n.zone) for n in nodes])
        self.rack = np.array([rack_names.index(n.rack) for n in nodes])
        self.racks = len(rack_names)
        self.rack_zone = np.zeros(self.racks, dtype=int)
        self.rack_zone[self.rack] = self.zone
        profile = PROFILES[cfg.profile]
        self.law = profile.law
        products, shares = zip(*profile.gpus, strict=True)
        rack_gpu = rng.choice(products, size=len(rack_names), p=shares)
        self.gpu = rack_gpu[self.rack]
        self.nic = np.array([NIC_MBPS[g] for g in self.gpu], dtype=float) * profile.nic_scale
        self.nic[rng.random(len(nodes)) < 0.2] = 25_000.0 * profile.nic_scale  # some nodes kept an older NIC
        self.base_nic = rng.beta(2, 5, len(nodes))
        self.nic_phase = rng.uniform(0, 2 * math.pi, len(nodes))
        z = len(self.zone_names)
        self.zone_bw = _symmetric(rng.uniform(*profile.zone_mbps, (z, z)))
        self.zone_rtt = _symmetric(rng.uniform(1, 8, (z, z)))
        self.endpoint_bw = rng.uniform(*profile.endpoint_mbps, (ENDPOINTS, z))
        self.endpoint_rtt = rng.uniform(4, 40, (ENDPOINTS, z))
        self.node_quality = rng.lognormal(0, 0.2, len(nodes))
        self.rack_pair_quality = _symmetric(rng.lognormal(0, 0.15, (self.racks, self.racks)))
        sites = self.racks + z + ENDPOINTS  # rack stores, zone stores, endpoints
        self.site_quality = rng.lognormal(0, 0.2, (self.racks, sites))

    def node_link(self, i: int, j: int) -> tuple[float, float]:
        if i == j:
            return NVLINK_MBPS, NVLINK_RTT_MS
        q = (math.sqrt(self.node_quality[i] * self.node_quality[j])
             * self.rack_pair_quality[self.rack[i], self.rack[j]])
        if self.rack[i] == self.rack[j]:
            return min(self.nic[i], self.nic[j]) * 0.9 * q, RACK_RTT_MS / math.sqrt(q)
        if self.zone[i] == self.zone[j]:
            return min(self.nic[i], self.nic[j]) * SPINE_SHARE * q, ZONE_RTT_MS / math.sqrt(q)
        return self._cross_zone(i, self.zone[j], q)

    def data_link(self, i: int, scope: str, where: int) -> tuple[float, float]:
        """True bandwidth and RTT from node i to data at a node, rack store, zone store or endpoint."""
        if scope == "node":
            return (LOCAL_DISK_MBPS, LOCAL_DISK_RTT_MS) if i == where else self.node_link(i, where)
        site = where + {"rack": 0, "zone": self.racks, "endpoint": self.racks + len(self.zone_names)}[scope]
        q = self.node_quality[i] * self.site_quality[self.rack[i], site]
        if scope == "endpoint":
            zone = self.zone[i]
            return self.endpoint_bw[where, zone] * q, self.endpoint_rtt[where, zone] / math.sqrt(q)
        zone = self.rack_zone[where] if scope == "rack" else where
        if scope == "rack" and self.rack[i] == where:
            return min(self.nic[i], RACK_STORE_MBPS) * q, RACK_RTT_MS / math.sqrt(q)
        if self.zone[i] == zone:
            return min(self.nic[i] * SPINE_SHARE, ZONE_STORE_MBPS) * q, ZONE_RTT_MS / math.sqrt(q)
        return self._cross_zone(i, zone, q)

    def _cross_zone(self, i: int, zone: int, q: float) -> tuple[float, float]:
        return self.zone_bw[self.zone[i], zone] * q, self.zone_rtt[self.zone[i], zone] / math.sqrt(q)

    def distance(self, i: int, j: int) -> int:
        """Distance level (the default topology's scale, netsched.api.topology) between nodes i and j."""
        if i == j:
            return DISTANCES["node"]
        if self.rack[i] == self.rack[j]:
            return DISTANCES["rack"]
        return DISTANCES["zone"] if self.zone[i] == self.zone[j] else DISTANCES["far"]

    def data_distance(self, i: int, scope: str, where: int) -> float:
        if scope == "endpoint":
            return math.nan
        if scope == "node" and i == where:
            return float(DISTANCES["node"])
        rack = where if scope == "rack" else self.rack[where] if scope == "node" else -1
        zone = where if scope == "zone" else self.rack_zone[rack]
        level = "rack" if self.rack[i] == rack else "zone" if self.zone[i] == zone else "far"
        return float(DISTANCES[level])


def _symmetric(m: np.ndarray) -> np.ndarray:
    upper = np.triu(m)
    return upper + np.triu(m, 1).T


@dataclass(frozen=True)
class Job:
    id: str
    start: float
    kind: str
    replicas: int
    gpus_per_replica: int
    work_s: float
    input_gb: float
    comm: str
    comm_gb_per_hour: float  # continuous exchange volume; `comm` is its level, as a GPUJob may state it
    scope: str
    where: int  # data node, rack, zone or endpoint index
    expected_s: float
    peers: tuple[int, ...]


def simulate(cfg: SimConfig) -> Iterator[dict]:
    """Dataset rows (netsched.training.dataset.COLUMNS), candidate set by candidate set, in time order."""
    for _, rows in runs(cfg):
        yield from rows


def runs(cfg: SimConfig) -> Iterator[tuple[Job, list[dict]]]:
    """Each simulated job, in arrival order, with its candidate rows (the one it ran on has chosen=1)."""
    cluster_seq, jobs_seq = np.random.SeedSequence(cfg.seed).spawn(2)
    cluster = Cluster(cfg, np.random.default_rng(cluster_seq))
    rng = np.random.default_rng(jobs_seq)
    start = cfg.start_unix
    for k in range(cfg.jobs):
        start += rng.exponential(cfg.mean_gap_s)
        job = _job(cluster, rng, f"sim-{cfg.seed}-{k:06d}", start, PROFILES[cfg.profile].kind_share)
        yield job, list(_candidate_rows(cluster, cfg, rng, job))


def _job(cluster: Cluster, rng: np.random.Generator, job_id: str, start: float,
         kind_share: tuple[float, ...]) -> Job:
    kind = str(rng.choice(WORKLOAD_KINDS, p=kind_share))
    replicas = int(_pick(rng, REPLICAS[kind]))
    gpus = int(_pick(rng, GPUS_PER_REPLICA[kind]))
    work = float(rng.lognormal(math.log(WORK_S[0]), WORK_S[1]))
    scope = str(rng.choice(list(DATA_SCOPES), p=DATA_SCOPE_SHARE))
    places = {"node": len(cluster.names), "rack": cluster.racks, "zone": len(cluster.zone_names),
              "endpoint": ENDPOINTS}
    median, sigma = INPUT_GB[kind]
    hint = work * rng.lognormal(0, 0.3) if rng.random() < 0.8 else math.nan
    comm = str(rng.choice(COMM[kind]))
    return Job(job_id, start, kind, replicas, gpus, work,
               float(rng.lognormal(math.log(median), sigma)), comm,
               float(COMM_LEVELS[comm] * rng.lognormal(0, COMM_SIGMA)), scope,
               int(rng.integers(places[scope])), hint, _peers(cluster, rng, replicas - 1, gpus))


def _pick(rng: np.random.Generator, options: tuple[tuple, tuple]):
    values, shares = options
    return values[rng.choice(len(values), p=shares)]


def _peers(cluster: Cluster, rng: np.random.Generator, count: int, gpus: int) -> tuple[int, ...]:
    """Nodes of the job's `count` replicas of `gpus` GPUs already placed, in a style of PEER_STYLES:
    at most GPUS_PER_NODE GPUs on any node."""
    if count == 0:
        return ()
    anchor, style = int(rng.integers(len(cluster.names))), int(rng.choice(len(PEER_STYLES), p=PEER_STYLES))
    if style == 0 and count * gpus <= GPUS_PER_NODE:
        return (anchor,) * count
    pool = (np.flatnonzero(cluster.rack == cluster.rack[anchor]) if style <= 1
            else np.flatnonzero(cluster.zone == cluster.zone[anchor]) if style == 2
            else np.arange(len(cluster.names)))
    room = np.full(len(cluster.names), GPUS_PER_NODE // gpus)
    placed = []
    for _ in range(count):  # a node full of the job's replicas takes no more; a full pool spills over
        open_nodes = pool[room[pool] > 0]
        node = int(rng.choice(open_nodes if len(open_nodes) else np.flatnonzero(room > 0)))
        room[node] -= 1
        placed.append(node)
    return tuple(placed)


def _candidate_rows(cluster: Cluster, cfg: SimConfig, rng: np.random.Generator, job: Job) -> Iterator[dict]:
    n = len(cluster.names)
    day = 2 * math.pi * job.start / 86_400
    nic = np.clip(cluster.base_nic + 0.15 * np.sin(day + cluster.nic_phase) + rng.normal(0, 0.05, n), 0, 0.95)
    cpu = np.clip(rng.beta(2, 3, n), 0, 1)
    mem = np.clip(0.6 * cpu + 0.4 * rng.beta(2, 3, n), 0, 1)
    free = rng.integers(0, GPUS_PER_NODE + 1, n)
    peer_nodes, held = np.unique(np.array(job.peers, dtype=int), return_counts=True)
    free[peer_nodes] = np.minimum(free[peer_nodes], GPUS_PER_NODE - held * job.gpus_per_replica)
    feasible = np.flatnonzero(free >= job.gpus_per_replica)
    if len(feasible) < cfg.candidates:  # a busy moment: make room so every job has a full candidate set
        busy = np.setdiff1d(np.arange(n), np.union1d(feasible, peer_nodes))  # peers keep their GPUs
        extra = rng.choice(busy, cfg.candidates - len(feasible), replace=False)
        free[extra] = GPUS_PER_NODE
        feasible = np.flatnonzero(free >= job.gpus_per_replica)
    roomy_peers = np.intersect1d(peer_nodes, feasible)[: cfg.candidates]
    others = np.setdiff1d(feasible, roomy_peers)
    candidates = np.concatenate([roomy_peers, rng.choice(others, size=min(cfg.candidates - len(roomy_peers),
                                                                          len(others)), replace=False)])
    rack_free = np.bincount(cluster.rack, weights=free, minlength=cluster.racks)
    e_job = rng.lognormal(0, cfg.job_noise)
    picked = candidates[np.argmax(least_allocated_balanced(cpu[candidates], mem[candidates]))]
    for i in candidates:
        row = _row(cluster, cfg, rng, job, int(i), nic[i], cpu[i])
        row.update(node_cpu_load=cpu[i], node_mem_load=mem[i], node_free_gpus=float(free[i]),
                   rack_free_gpus=float(rack_free[cluster.rack[i]]), chosen=int(i == picked))
        row[TARGET] *= e_job
        yield row


def _row(cluster: Cluster, cfg: SimConfig, rng: np.random.Generator, job: Job, i: int, nic: float,
         cpu: float) -> dict:
    measured = rng.random() >= cfg.unmeasured

    def seen(bw: float, rtt: float) -> tuple[float, float]:
        if not measured:
            return math.nan, math.nan
        return bw * rng.lognormal(0, cfg.measure_noise), rtt * rng.lognormal(0, cfg.measure_noise)

    data_bw, data_rtt = cluster.data_link(i, job.scope, job.where)
    local_data = job.scope == "node" and job.where == i
    _, peer = _exchange(cluster, job, i, 1 - CONTENTION * nic)
    duration = completion_seconds(cluster, job, i, nic, cpu) * rng.lognormal(0, cfg.node_noise)
    if cluster.law == "stragglers":  # drawn only there: the other worlds keep their draws
        factor = laws.straggle(rng, cpu, nic)
        # without noise, the expected run: the node's chance of straggling, never the run's draw
        duration *= factor if cfg.node_noise > 0 else laws.expected_straggle(cpu, nic)
    remote = [p for p in job.peers if p != i]
    peer_bw, peer_rtt = seen(peer[0], peer[1]) if remote else (math.nan, math.nan)
    shown_data = seen(data_bw, data_rtt) if not local_data else (math.nan, math.nan)
    return {
        "schema_version": SCHEMA_VERSION, "source": "simulator", "job_id": job.id, "candidate_set": job.id,
        "node": cluster.names[i], "site": cluster.zone_names[cluster.zone[i]],
        "start_unix": round(job.start, 3),
        "job_gpus": float(job.replicas * job.gpus_per_replica), "replicas": float(job.replicas),
        "gpus_per_replica": float(job.gpus_per_replica), "input_size_gb": job.input_gb,
        "comm_gb_per_hour": job.comm_gb_per_hour, **kind_features(job.kind),
        "expected_seconds": job.expected_s, "data_scope": DATA_SCOPES[job.scope],
        **gpu_features(cluster.gpu[i]), "node_gpus": float(GPUS_PER_NODE),
        "data_distance": cluster.data_distance(i, job.scope, job.where),
        "data_bw_mbps": shown_data[0], "data_rtt_ms": shown_data[1],
        **_peer_shares(cluster, job, i), "peer_bw_mbps": peer_bw, "peer_rtt_ms": peer_rtt,
        "nic_util": float(np.clip(nic + rng.normal(0, 0.02), 0, 1)),
        TARGET: duration,
    }


def completion_seconds(cluster: Cluster, job: Job, i: int, nic: float = 0.0, cpu: float = 0.0) -> float:
    """T of the module docstring without its noise terms: the job with its last replica on node i, its
    peers on job.peers, node i's NIC utilisation and CPU load as given."""
    data_bw, _ = cluster.data_link(i, job.scope, job.where)
    local_data = job.scope == "node" and job.where == i
    c = 1 - CONTENTION * nic
    pull = job.input_gb / job.replicas * 8000 / (data_bw * (1.0 if local_data else c))
    compute = (job.work_s * GPU_SPEED[cluster.gpu[i]] ** -GPU_EXPONENT[job.kind]
               * (1 + CPU_SENSITIVITY[job.kind] * cpu))
    physics = STARTUP_S + pull + compute + _exchange(cluster, job, i, c)[0]
    if cluster.law == "physics":
        return physics
    data_mbps = data_bw * (1.0 if local_data else c)
    inputs = _law_inputs(cluster, job, i, c, cpu, compute, data_mbps)
    return laws.seconds(cluster.law, inputs, STARTUP_S, physics)


def _law_inputs(cluster: Cluster, job: Job, i: int, c: float, cpu: float, compute: float,
                data_mbps: float) -> laws.Inputs:
    peer_mbps = peer_rtt = math.nan
    if job.peers:
        links = [cluster.node_link(i, p) for p in job.peers]
        peer_mbps = min(b * (1.0 if p == i else c) for (b, _), p in zip(links, job.peers, strict=True))
        peer_rtt = max(r for _, r in links)
    far = job.scope == "endpoint" or cluster.data_distance(i, job.scope, job.where) == DISTANCES["far"]
    return laws.Inputs(gpu=str(cluster.gpu[i]), kind=job.kind, work_s=job.work_s, physics_compute_s=compute,
                       cpu_factor=1 + CPU_SENSITIVITY[job.kind] * cpu,
                       input_gb_per_replica=job.input_gb / job.replicas, data_mbps=data_mbps, data_far=far,
                       replicas=job.replicas, volume_gb=job.comm_gb_per_hour * job.work_s / 3600,
                       peer_mbps=peer_mbps, peer_rtt_ms=peer_rtt,
                       steps=job.work_s / step_seconds(job.comm_gb_per_hour))


def _exchange(cluster: Cluster, job: Job, i: int, c: float) -> tuple[float, tuple[float, float]]:
    """Seconds spent exchanging with the peers, and the weakest remote link (bw, rtt) it went over."""
    if not job.peers:
        return 0.0, (math.nan, math.nan)
    links = [cluster.node_link(i, p) for p in job.peers]
    bw = min(b * (1.0 if p == i else c) for (b, _), p in zip(links, job.peers, strict=True))
    rtt = max(r for _, r in links)
    r = job.replicas
    volume = job.comm_gb_per_hour * job.work_s / 3600
    steps = job.work_s / step_seconds(job.comm_gb_per_hour)
    seconds = 2 * (r - 1) / r * volume * 8000 / bw + steps * 2 * (r - 1) * rtt / 1000
    remote = [link for link, p in zip(links, job.peers, strict=True) if p != i]
    return seconds, weakest_link([b for b, _ in remote], [t for _, t in remote])


def _peer_shares(cluster: Cluster, job: Job, i: int) -> dict:
    return peer_features(np.array([cluster.distance(i, p) for p in job.peers]))
