"""Operator training records as the operator writes them (netsched.records.writer.job_record), on a
small cluster: for the tests of reading records and of training on a young cluster's records."""

from __future__ import annotations

import json
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
                    workload: dict | None = None, start: datetime = START, seconds: float = 3600) -> dict:
    """A record of a GPUJob of one replica per node of `nodes`, exactly as the operator writes it."""
    spec = {"replicas": len(nodes), "gpusPerReplica": 4,
            "template": {"spec": {"containers": [{"name": "main", "image": "trainer:1"}]}},
            "workload": workload or {"kind": "training", "inputSizeGB": 120, "communicationIntensity": "high",
                                     "expectedDurationSeconds": 3000}}
    if data:
        spec["dataSources"] = [data]
    job = GPUJob.of({"apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob", "spec": spec,
                    "metadata": {"name": "train", "namespace": "ml", "uid": uid, "generation": 1,
                                 "creationTimestamp": rfc3339(start - timedelta(seconds=30))}})
    status = {"phase": phase, "startTime": rfc3339(start),
              "completionTime": rfc3339(start + timedelta(seconds=seconds)),
              "conditions": [{"type": phase, "status": "True", "reason": "Done"}],
              "placements": [{"replica": i, "pod": f"train-{i}", "node": n} for i, n in enumerate(nodes)]}
    return writer.job_record(job, status, LABELS)


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
