"""Real training data from the telemetry testbed: network-intensive jobs run through shaped links.

Five GPU "nodes" and a data site are network namespaces on one machine (the testbed of
netsched.datagen.testbed, needs root), with the node metadata of NODES and the link rates
of RATES (Mbit/s, both directions; slower across zones). Every site also has a NIC of
NIC_MBPS per direction that all of its flows share, so traffic to other sites competes
with a job's. A few background bulk flows between random site pairs are switched on and
off between jobs, so measured bandwidth and job times vary as on a shared network.

A job has 1-3 replicas; the others (its peers) are already placed and the candidate hosts
the last one, as the extender scores it. On a candidate node the replica
  1. pulls its input shard (input / replicas) from the data site,
  2. computes: a sleep of compute_s / GPU_SPEED[node's GPU] - GPU work cannot run here, so
     GPU speed is the one modelled part of a run,
  3. exchanges exchange_mb with every peer, both directions at once.
Before the job runs, the runner measures what a scheduler would know at that moment from
each candidate: NIC utilisation over a short window, then RTT and bandwidth probes to the
data site and to the peers' nodes (netsched.telemetry.probe, as the agents do). Then it runs
the job on each candidate in turn, in the same background state, and records the real
wall-clock time from the first pulled byte to the last exchanged one as duration_seconds.

Rows follow netsched.training.dataset: one candidate set per job, source "testbed". Node
CPU and memory load are unknown here (NaN); with unknown load kube-scheduler's default score
ties on every candidate, so `chosen` is the first candidate (candidates are in random order).

    python -m netsched.datagen.testbed_runs --jobs 100 --seed 0 --out data/testbed-runs.csv
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsched.datagen.simulator import GPU_SPEED
from netsched.datagen.testbed import Testbed, TestbedError, run_checked, stop
from netsched.datagen.testbed_worker import FLOOD_PORT, PROBE_PORT
from netsched.devcluster.wait import poll
from netsched.models.features import (
    COMM_LEVELS,
    DATA_SCOPES,
    DISTANCES,
    SCHEMA_VERSION,
    TARGET,
    kind_features,
    peer_features,
    weakest_link,
)
from netsched.models.gpus import gpu_features
from netsched.telemetry.probe import measure_rtt
from netsched.training.dataset import write_dataset


@dataclass(frozen=True)
class Node:
    zone: str
    rack: str
    gpu: str


NODES = {
    "n1": Node("zone-a", "rack-a1", "NVIDIA-H100-80GB-HBM3"),
    "n2": Node("zone-a", "rack-a1", "NVIDIA-A100-SXM4-80GB"),
    "n3": Node("zone-a", "rack-a2", "NVIDIA-L40S"),
    "n4": Node("zone-b", "rack-b1", "Tesla-V100-SXM2-32GB"),
    "n5": Node("zone-b", "rack-b1", "NVIDIA-H100-80GB-HBM3"),
}
DATA, DATA_ZONE = "data", "zone-a"  # a zone store: data_scope "zone"
SITES = (*NODES, DATA)
GPUS_PER_NODE = 8
NIC_MBPS = 100.0
# Fast GPUs do not always have the fast data link, so neither alone picks the best node.
RATES = {
    ("n1", "data"): 20, ("n2", "data"): 80, ("n3", "data"): 40, ("n4", "data"): 10, ("n5", "data"): 5,
    ("n1", "n2"): 80, ("n4", "n5"): 80,  # same rack
    ("n1", "n3"): 40, ("n2", "n3"): 40,  # same zone
    ("n1", "n4"): 10, ("n1", "n5"): 20, ("n2", "n4"): 5, ("n2", "n5"): 10, ("n3", "n4"): 20, ("n3", "n5"): 5,
}
PREFIX, SUBNET = "nsw", "10.79.0"  # the runner's own: a test on the same machine uses others
QUEUE_PACKETS = 30  # short FIFOs: no fq_codel/netem here, and a long one would hold seconds at 5 Mbit/s
NIC_CLASS, OTHER_CLASS = 0x1000, 0xFFF


@dataclass
class SharedNicTestbed(Testbed):
    """The telemetry Testbed, plus a NIC per site that all its flows share, and fair sharing
    between job and background traffic.

    Each site's egress: one class of nic_mbps that the per-destination classes (capped at the
    pair's rate) borrow from; the host side of each site's veth caps what enters the site at
    nic_mbps. Every such class is split into job traffic and background (FLOOD_PORT) that
    share it evenly when both are busy: per-flow fair queueing (fq_codel, sfq) is not available
    on these machines, and in one FIFO a long-running flow starves a new one (measured: a pull
    got 5 of 80 Mbit/s next to a background flow)."""

    __test__ = False
    nic_mbps: float = NIC_MBPS

    def _add_site(self, i: int, site: str) -> None:
        super()._add_site(i, site)
        self._share_egress(site)
        self._cap_ingress(f"{self.prefix}{i}h")

    def _share_egress(self, site: str) -> None:
        tc = ("ip", "netns", "exec", self.namespace(site), "tc")
        run_checked(*tc, "qdisc", "del", "dev", "eth0", "root")  # the Testbed's flat classes
        run_checked(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
                    "default", f"{OTHER_CLASS:x}")
        _class(tc, "eth0", "1:", OTHER_CLASS, self.other_rate_mbps, self.other_rate_mbps)
        _class(tc, "eth0", "1:", NIC_CLASS, self.nic_mbps, self.nic_mbps)
        for j, other in enumerate(self.sites):
            if other != site:
                pair, rate = 0x10 * (j + 1), self.rate(site, other)
                _class(tc, "eth0", f"1:{NIC_CLASS:x}", pair, 1, rate)
                _split(tc, "eth0", pair, rate, ("match", "ip", "dst", f"{self.ip(other)}/32"))

    def _cap_ingress(self, veth: str) -> None:
        tc = ("tc",)
        run_checked(*tc, "qdisc", "add", "dev", veth, "root", "handle", "1:", "htb",
                    "default", f"{0x10 + 1:x}")
        _class(tc, veth, "1:", 0x10, self.nic_mbps, self.nic_mbps)
        _split(tc, veth, 0x10, self.nic_mbps, ())


def _class(tc: tuple[str, ...], dev: str, parent: str, classid: int, rate: float, ceil: float) -> None:
    """An HTB class; a small rate and a larger ceil makes it borrow, evenly with its siblings."""
    run_checked(*tc, "class", "add", "dev", dev, "parent", parent, "classid", f"1:{classid:x}", "htb",
                "rate", f"{rate}mbit", "ceil", f"{ceil}mbit")


def _split(tc: tuple[str, ...], dev: str, parent: int, ceil: float, match: tuple[str, ...]) -> None:
    """Children parent+1 (jobs) and parent+2 (background, either port FLOOD_PORT, so its ACKs
    too), each with a short FIFO; packets reach them by u32 filters on `match` plus the port."""
    jobs, background = parent + 1, parent + 2
    for child in (jobs, background):
        _class(tc, dev, f"1:{parent:x}", child, 1, ceil)
        run_checked(*tc, "qdisc", "add", "dev", dev, "parent", f"1:{child:x}", "pfifo",
                    "limit", str(QUEUE_PACKETS))
    u32 = ("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip")
    for port in ("sport", "dport"):
        run_checked(*tc, *u32, "prio", "1", "u32", *match, "match", "ip", port, str(FLOOD_PORT), "0xffff",
                    "flowid", f"1:{background:x}")
    if match:  # the ingress side sends all else to its default class, `jobs`
        run_checked(*tc, *u32, "prio", "2", "u32", *match, "flowid", f"1:{jobs:x}")


class Bed:
    """The shaped sites, each answering probes and pulls, and commands run in a site's namespace."""

    def __init__(self, logs: Path, prefix: str, subnet: str):
        self.logs = logs
        self.net = SharedNicTestbed(SITES, RATES, prefix=prefix, subnet=subnet)

    def up(self) -> Bed:
        self.net.up()
        for site in SITES:
            self.net.start(site, _worker("serve", "--ip", self.ip(site)), self.logs / f"serve-{site}.log")
        for site in SITES:
            poll(lambda s=site: measure_rtt(self.ip(s), PROBE_PORT, samples=1) > 0, 20,
                 f"the testbed worker of site {site} to answer (log: {self.logs / f'serve-{site}.log'})")
        return self

    def ip(self, site: str) -> str:
        return self.net.ip(site)

    def call(self, site: str, *args: str, timeout: float = 120.0) -> dict:
        """Run a worker command in the site's namespace; its JSON answer."""
        argv = ["ip", "netns", "exec", self.net.namespace(site), *_worker(*args)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise TestbedError(f"testbed worker `{args[0]}` on site {site} failed: "
                               f"{done.stderr.strip() or done.stdout.strip()}")
        return json.loads(done.stdout)


def _worker(*args: str) -> list[str]:
    return [sys.executable, "-m", "netsched.datagen.testbed_worker", *args]


@contextmanager
def shaped_testbed(logs: Path | None = None, prefix: str = PREFIX, subnet: str = SUBNET) -> Iterator[Bed]:
    """The testbed, up; always torn down (Testbed.up also clears what a killed run left)."""
    own = logs is None
    logs = Path(tempfile.mkdtemp(prefix="netsched-testbed-")) if own else logs
    bed = Bed(logs, prefix, subnet)
    try:
        yield bed.up()
    except BaseException as exc:
        own = False
        exc.add_note(f"the testbed's process logs are kept in {logs}")
        raise
    finally:
        bed.net.down()
        if own:
            shutil.rmtree(logs, ignore_errors=True)


class Background:
    """Bulk flows between random site pairs, each as fast as the shaping lets it (its pair's rate,
    its share of both NICs). Between jobs each flow stops with probability 1/2 and new ones
    start, up to a freshly drawn count of at most max_flows."""

    def __init__(self, bed: Bed, rng: np.random.Generator, max_flows: int):
        self.bed, self.rng, self.max_flows = bed, rng, max_flows
        self.flows: dict[tuple[str, str], subprocess.Popen] = {}

    def shuffle(self) -> None:
        for pair in [p for p in self.flows if self.rng.random() < 0.5]:
            self._stop(pair)
        target = int(self.rng.integers(0, self.max_flows + 1)) if self.max_flows else 0
        started = False
        while len(self.flows) < target:
            src, dst = (str(s) for s in self.rng.choice(SITES, size=2, replace=False))
            if (src, dst) not in self.flows:
                self.start(src, dst)
                started = True
        if started:
            time.sleep(0.5)  # past TCP's ramp-up: jobs see a steady background

    def start(self, src: str, dst: str) -> None:
        argv = _worker("flood", "--to", self.bed.ip(dst))
        self.flows[(src, dst)] = self.bed.net.start(src, argv, self.bed.logs / f"flood-{src}-{dst}.log")

    def _stop(self, pair: tuple[str, str]) -> None:
        proc = self.flows.pop(pair)
        stop(proc)
        self.bed.net.procs.remove(proc)

    def describe(self) -> str:
        return ",".join(f"{a}>{b}" for a, b in self.flows) or "none"


@dataclass(frozen=True)
class Kind:
    share: float
    replicas: tuple[tuple[int, ...], tuple[float, ...]]
    input_mb: tuple[float, float]  # the whole job's, log-uniform
    comms: tuple[str, ...]
    compute_s: tuple[float, float]  # per replica on an H100, log-uniform


# Sized so a job runs in seconds on these links: the recorded runs took 0.15-23 s per candidate
# (median 1.33 s over the four data/testbed-runs*.csv), 150 jobs of 3 candidates 20-23 minutes.
KINDS = {
    "training": Kind(0.35, ((1, 2, 3), (0.2, 0.4, 0.4)), (1.0, 4.0), ("medium", "high"), (0.4, 1.2)),
    "inference": Kind(0.2, ((1,), (1.0,)), (0.1, 1.0), ("low",), (0.1, 0.5)),
    "etl": Kind(0.3, ((1, 2), (0.6, 0.4)), (1.0, 3.0), ("low", "medium"), (0.05, 0.3)),
    "batch": Kind(0.15, ((1, 2), (0.7, 0.3)), (0.5, 2.5), ("low",), (0.2, 0.8)),
}
EXCHANGE_MB = {"low": (0.05, 0.2), "medium": (0.2, 0.8), "high": (0.8, 2.0)}  # per peer, each way


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    replicas: int
    gpus_per_replica: int
    input_mb: float  # each replica pulls input_mb / replicas
    comm: str
    exchange_mb: float  # sent to and pulled from each peer
    compute_s: float  # on an H100
    expected_s: float  # the job's own duration hint; NaN: none given
    peers: tuple[str, ...]  # nodes of the replicas already placed
    candidates: tuple[str, ...]


def draw_jobs(count: int, seed: int, candidates: int = 3) -> list[Job]:
    rng = np.random.default_rng(seed)
    return [_draw_job(rng, f"testbed-{seed}-{k:04d}", candidates) for k in range(count)]


def _draw_job(rng: np.random.Generator, job_id: str, candidates: int) -> Job:
    kind = str(rng.choice(list(KINDS), p=[k.share for k in KINDS.values()]))
    spec = KINDS[kind]
    replicas = int(rng.choice(spec.replicas[0], p=spec.replicas[1]))
    comm = str(rng.choice(spec.comms))
    compute = _log_uniform(rng, spec.compute_s)
    hint = compute * 2 * rng.lognormal(0, 0.3) if rng.random() < 0.8 else math.nan  # a user's rough guess
    nodes = tuple(str(n) for n in rng.choice(list(NODES), candidates, replace=False))
    return Job(job_id, kind, replicas, int(rng.choice((1, 2))), _log_uniform(rng, spec.input_mb), comm,
               _log_uniform(rng, EXCHANGE_MB[comm]) if replicas > 1 else 0.0, compute, hint,
               _peers(rng, replicas - 1), nodes)


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    return float(math.exp(rng.uniform(math.log(bounds[0]), math.log(bounds[1]))))


def _peers(rng: np.random.Generator, count: int) -> tuple[str, ...]:
    """Mostly packed in one rack or zone, some scattered, as the simulator places them."""
    if count == 0:
        return ()
    anchor, style = NODES[str(rng.choice(list(NODES)))], rng.random()
    pool = [n for n, node in NODES.items()
            if (style < 0.5 and node.rack == anchor.rack) or (0.5 <= style < 0.8 and node.zone == anchor.zone)
            or style >= 0.8]
    return tuple(str(p) for p in rng.choice(pool, size=count))


PROBE_ATTEMPTS = 3  # a link whose probe failed (a busy machine can starve one) is probed again


def measure(bed: Bed, job: Job, node: str) -> dict:
    """The worker's telemetry from `node`: NIC rates, and RTT/bandwidth to the data site and remote peers.
    A link left unmeasured is probed again, as an agent would at its next round."""
    hosts = [DATA, *sorted({p for p in job.peers if p != node})]
    seen: dict = {}
    links: dict = {}
    for _ in range(PROBE_ATTEMPTS):
        todo = [site for site in hosts if links.get(site, {}).get("bw_mbps") is None]
        if not todo:
            break
        args = [arg for site in todo for arg in ("--host", bed.ip(site))]
        got = bed.call(node, "measure", *args, timeout=60)
        seen = seen or got  # NIC rates from the first look, before any re-probe added traffic
        links.update({site: got["links"][bed.ip(site)] for site in todo})
    seen["links"] = links
    return seen


def execute(bed: Bed, job: Job, node: str) -> dict:
    """Run the job's last replica on `node`; the worker's phase timings (seconds)."""
    args = ["--data", bed.ip(DATA), "--shard-bytes", str(int(job.input_mb / job.replicas * 1e6)),
            "--peer-bytes", str(int(job.exchange_mb * 1e6)),
            "--compute-seconds", f"{job.compute_s / GPU_SPEED[NODES[node].gpu]:.4f}"]
    for peer in job.peers:
        args += ["--peer", bed.ip(peer)]
    return bed.call(node, "run", *args, timeout=120)


def job_rows(bed: Bed, job: Job) -> list[dict]:
    """Measure from every candidate, then run the job on each in turn: the job's candidate set."""
    start = time.time()
    seen = {node: measure(bed, job, node) for node in job.candidates}
    rows = []
    for i, node in enumerate(job.candidates):
        row = features(job, node, seen[node])
        row.update(start_unix=round(start, 3), chosen=int(i == 0))
        row[TARGET] = execute(bed, job, node)["total_s"]
        rows.append(row)
    return rows


def features(job: Job, node: str, seen: dict) -> dict:
    """Every dataset column but start_unix, chosen and the duration, for `node` as the job's candidate."""
    here = NODES[node]
    data = seen["links"][DATA]
    remote = [seen["links"][p] for p in job.peers if p != node]
    return {
        "schema_version": SCHEMA_VERSION, "source": "testbed", "job_id": job.id, "candidate_set": job.id,
        "node": node, "site": here.zone,
        "job_gpus": float(job.replicas * job.gpus_per_replica), "replicas": float(job.replicas),
        "gpus_per_replica": float(job.gpus_per_replica), "input_size_gb": job.input_mb / 1000,
        "comm_gb_per_hour": COMM_LEVELS[job.comm], **kind_features(job.kind),  # a testbed job states a level
        "expected_seconds": job.expected_s,
        "data_scope": DATA_SCOPES["zone"], **gpu_features(here.gpu), "node_gpus": float(GPUS_PER_NODE),
        "node_free_gpus": float(_free_gpus(job, [node])),
        "rack_free_gpus": float(_free_gpus(job, [n for n, m in NODES.items() if m.rack == here.rack])),
        "node_cpu_load": math.nan, "node_mem_load": math.nan,  # nothing else runs on these nodes
        "data_distance": DISTANCES["zone"] if here.zone == DATA_ZONE else DISTANCES["far"],
        "data_bw_mbps": _value(data["bw_mbps"]), "data_rtt_ms": _value(data["rtt_ms"]),
        **peer_features(np.array([_distance(node, p) for p in job.peers])),
        **dict(zip(("peer_bw_mbps", "peer_rtt_ms"), weakest_link(
            [_value(link["bw_mbps"]) for link in remote], [_value(link["rtt_ms"]) for link in remote]),
            strict=True)),
        "nic_util": min(max(seen["nic_rx_mbps"], seen["nic_tx_mbps"]) / NIC_MBPS, 1.0),
    }


def _value(measured: float | None) -> float:
    return math.nan if measured is None else float(measured)


def _free_gpus(job: Job, nodes: Sequence[str]) -> int:
    """The testbed's only GPU users are the job's own placed replicas."""
    return sum(GPUS_PER_NODE - job.gpus_per_replica * job.peers.count(n) for n in nodes)


def _distance(node: str, peer: str) -> int:
    """Distance level (the model's scale, netsched.models.features.DISTANCES) between two testbed nodes."""
    here, there = NODES[node], NODES[peer]
    if node == peer:
        return DISTANCES["node"]
    if here.rack == there.rack:
        return DISTANCES["rack"]
    return DISTANCES["zone"] if here.zone == there.zone else DISTANCES["far"]


def run(jobs: Sequence[Job], out: Path, seed: int = 0, max_flows: int = 3,
        log: Callable[[str], None] = print, prefix: str = PREFIX, subnet: str = SUBNET) -> int:
    """Run the jobs on a fresh testbed, appending each job's rows to `out` as it finishes (a killed
    run keeps what it measured). Returns the number of rows written."""
    write_dataset(out, [])  # the header: a new file
    count, t0 = 0, time.monotonic()
    with shaped_testbed(prefix=prefix, subnet=subnet) as bed:
        background = Background(bed, np.random.default_rng([seed, 1]), max_flows)
        for k, job in enumerate(jobs, start=1):
            background.shuffle()
            rows = job_rows(bed, job)
            count += write_dataset(out, rows, append=True)
            elapsed = time.monotonic() - t0
            durations = " ".join(f"{r['node']}={r[TARGET]:.2f}s" for r in rows)
            log(f"job {k}/{len(jobs)} {job.kind} x{job.replicas} background={background.describe()} "
                f"{durations} elapsed {elapsed:.0f}s eta {elapsed / k * (len(jobs) - k):.0f}s")
    return count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netsched.datagen.testbed_runs",
                                description="Run jobs on the shaped testbed (root) and write dataset rows.")
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--candidates", type=int, default=3, help=f"nodes each job runs on (2-{len(NODES)})")
    p.add_argument("--max-flows", type=int, default=3, help="background flows at most (0: none)")
    p.add_argument("--out", type=Path, required=True, help="the dataset CSV to write")
    args = p.parse_args(argv)
    if not 2 <= args.candidates <= len(NODES) or args.jobs < 1:
        p.error(f"--candidates must be 2-{len(NODES)} and --jobs at least 1")
    rows = run(draw_jobs(args.jobs, args.seed, args.candidates), args.out, args.seed, args.max_flows,
               log=lambda line: print(line, flush=True))
    print(f"wrote {rows} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
