"""Operator training records as the operator writes them (netsched.records.writer.job_record), on a
small cluster: for the tests of reading records and of training on a young cluster's records."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from netsched.api.events import rfc3339
from netsched.devcluster.topology import GPUNode
from netsched.jobs.gpujob import GPUJob
from netsched.records import writer

# rack-a1 (a1-0, a1-1) and rack-a2 (a2-0) in zone-a; rack-b1 (b1-0) in zone-b
NODES = [GPUNode("a1-0", "zone-a", "rack-a1", "NVIDIA-H100-80GB-HBM3", 8, "96", "1Ti"),
         GPUNode("a1-1", "zone-a", "rack-a1", "NVIDIA-H100-80GB-HBM3", 8, "96", "1Ti"),
         GPUNode("a2-0", "zone-a", "rack-a2", "NVIDIA-A100-SXM4-80GB", 8, "96", "1Ti"),
         GPUNode("b1-0", "zone-b", "rack-b1", "NVIDIA-L40S", 8, "96", "1Ti")]
LABELS = {n.name: n.manifest()["metadata"]["labels"] for n in NODES}
START = datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC)


def operator_record(nodes: list[str], data: dict | None = None, phase: str = "Succeeded", uid: str = "uid-1",
                    workload: dict | None = None, start: datetime = START, seconds: float = 3600,
                    gpus_per_replica: int = 4, priority_class: str | None = None,
                    labels: dict[str, dict[str, str]] = LABELS, queued: float = 30) -> dict:
    """A record of a GPUJob of one replica per node of `nodes`, exactly as the operator writes it
    (`labels`: every node's, LABELS's four nodes by default)."""
    spec = {"replicas": len(nodes), "gpusPerReplica": gpus_per_replica,
            "template": {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}},
            "workload": workload or {"kind": "training", "inputSizeGB": 120, "communicationIntensity": "high",
                                     "expectedDurationSeconds": 3000}}
    if data:
        spec["dataSources"] = [data]
    if priority_class:
        spec["priorityClassName"] = priority_class
    job = GPUJob.of({"apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob", "spec": spec,
                    "metadata": {"name": "train", "namespace": "ml", "uid": uid, "generation": 1,
                                 "creationTimestamp": rfc3339(start - timedelta(seconds=queued))}})
    status = {"phase": phase, "startTime": rfc3339(start),
              "completionTime": rfc3339(start + timedelta(seconds=seconds)),
              "conditions": [{"type": phase, "status": "True", "reason": "Done"}],
              "placements": [{"replica": i, "pod": f"train-{i}", "node": n} for i, n in enumerate(nodes)]}
    return writer.job_record(job, status, labels)


def young_cluster_records(path: Path, jobs: int) -> Path:
    """A records file of `jobs` Succeeded jobs an hour apart, of one or two replicas, the last one (the
    record's row) on each node in turn, and of varied lengths."""
    with open(path, "w") as f:
        for i in range(jobs):
            nodes = [NODES[(i + 1) % len(NODES)].name, NODES[i % len(NODES)].name][1 - i % 2:]  # both zones
            record = operator_record(nodes, uid=f"uid-{i}", start=START + timedelta(hours=i),
                                     seconds=1800 + 300 * (i % 7))
            f.write(json.dumps(record) + "\n")
    return path


# 32 nodes: zones a and b, 4 racks each, 4 nodes a rack; H100 in zone a, A100 and L40S in zone b
YEAR_NODES = [GPUNode(f"{z}{r}-{n}", f"zone-{z}", f"rack-{z}{r}", "NVIDIA-H100-80GB-HBM3" if z == "a"
                      else ("NVIDIA-A100-SXM4-80GB" if r < 3 else "NVIDIA-L40S"))
              for z in "ab" for r in range(1, 5) for n in range(4)]
YEAR_LABELS = {n.name: n.manifest()["metadata"]["labels"] for n in YEAR_NODES}
CLASSES = ("high", "batch", None)


def generated_records(path: Path, jobs: int, days: float = 365, seed: int = 0) -> Path:
    """A records file of `jobs` jobs spread over `days` on YEAR_NODES, placed as netsched would: a job's
    replicas in one rack beside its data where they fit, else over the zone; one in twenty failed. For
    `netsched report`'s tests and its bench (bench/report_scale.py); the figures it yields are no claim."""
    rng = random.Random(seed)
    racks = sorted({n.rack for n in YEAR_NODES})
    with open(path, "w") as f:
        for i in range(jobs):
            replicas = rng.choice((1, 1, 2, 4, 8))
            rack = rng.choice(racks)
            home = [n.name for n in YEAR_NODES if n.rack == rack]
            zone = [n.name for n in YEAR_NODES if n.zone == f"zone-{rack[5]}"]
            nodes = ([home[k % len(home)] for k in range(replicas)] if replicas <= 4
                     else rng.sample(zone, replicas))
            data = rng.choice((None, {"name": "d", "kind": "rack", "location": rack, "sizeGB": 200},
                               {"name": "d", "kind": "zone", "location": f"zone-{rack[5]}", "sizeGB": 50}))
            expected = rng.choice((600, 3600, 7200))
            workload = {"kind": rng.choice(("training", "training", "inference", "batch")),
                        "communicationIntensity": rng.choice(("low", "medium", "high")),
                        "expectedDurationSeconds": expected}
            record = operator_record(
                nodes, data, "Failed" if i % 20 == 19 else "Succeeded", f"uid-{i}", workload,
                START + timedelta(days=days * i / jobs), rng.uniform(0.5, 1.5) * expected,
                rng.choice((1, 2, 4, 8)), CLASSES[i % len(CLASSES)], YEAR_LABELS, rng.expovariate(1 / 120))
            f.write(json.dumps(record) + "\n")
    return path
