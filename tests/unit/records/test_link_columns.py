"""A job's links at start: taken once from the telemetry store, carried into its training record."""

import math

from netsched.api.topology import Topology
from netsched.records.link_columns import needs_snapshot, placement_telemetry
from netsched.records.writer import job_record
from netsched.telemetry.store import TelemetryStore
from netsched.testing.builders import LABELS, Clock, job
from netsched.training.record_rows import record_row


def placed(*nodes: str, phase: str = "Running") -> dict:
    return {"phase": phase, "placements": [{"replica": i, "pod": f"train-{i}", "node": n}
                                           for i, n in enumerate(nodes)]}


def store() -> TelemetryStore:
    s = TelemetryStore(max_age=60, clock=Clock(1000.0))
    s.record("b1-0", "a1-0", rtt_ms=2.0, bandwidth_mbps=900)  # the last replica's node to each peer
    s.record("b1-0", "a1-1", rtt_ms=4.0, bandwidth_mbps=400)
    s.record("b1-0", "10.0.0.5:9000", rtt_ms=7.5, bandwidth_mbps=250)
    s.record_nic("b1-0", 0.35)
    return s


def test_the_last_replicas_weakest_peer_link_and_its_data_link_are_taken():
    j = job(replicas=4, dataSources=[{"name": "s3", "kind": "endpoint", "endpoint": "10.0.0.5:9000"}])
    got = placement_telemetry(j, placed("a1-0", "a1-1", "a1-1", "b1-0"), store())
    assert got == {"peer_bw_mbps": 400, "peer_rtt_ms": 4.0, "data_bw_mbps": 250, "data_rtt_ms": 7.5,
                   "nic_util": 0.35}


def test_unmeasured_stale_or_local_links_are_left_out():
    s = store()
    s.clock.now += 61  # every measurement is now older than the bound
    assert placement_telemetry(job(replicas=2), placed("a1-0", "b1-0"), s) == {}
    on_data = job(replicas=1, dataSources=[{"name": "d", "kind": "node", "location": "b1-0"}])
    assert placement_telemetry(on_data, placed("b1-0"), store()) == {"nic_util": 0.35}  # data on its node
    assert placement_telemetry(job(replicas=2), placed("c1-0", "c1-0"), store()) == {}  # peer on the node


def test_taken_once_when_every_replica_runs():
    j = job(replicas=2)
    assert needs_snapshot(j, placed("a1-0", "b1-0"))
    assert not needs_snapshot(j, placed("a1-0"))  # one replica still unplaced
    assert not needs_snapshot(j, placed("a1-0", "b1-0", phase="Scheduling"))
    assert not needs_snapshot(j, placed("a1-0", "b1-0") | {"placementTelemetry": {}})


def test_the_snapshot_reaches_the_record_and_the_models_dataset_row():
    j = job(replicas=2)
    status = placed("a1-0", "b1-0", phase="Succeeded") | {
        "startTime": "2026-11-23T10:00:00Z", "completionTime": "2026-11-23T10:30:00Z",
        "placementTelemetry": placement_telemetry(j, placed("a1-0", "b1-0"), store())}
    record = job_record(j, status, LABELS)
    assert record["telemetry"] == {"peer_bw_mbps": 900, "peer_rtt_ms": 2.0, "nic_util": 0.35}
    row = record_row(record)
    assert (row["peer_bw_mbps"], row["peer_rtt_ms"], row["duration_seconds"]) == (900, 2.0, 1800)
    assert math.isnan(row["data_bw_mbps"])


def test_a_pair_never_probed_takes_the_median_between_the_nodes_domains():
    topology = Topology.parse("block=example.com/block,rack=example.com/rack")
    labels = {n: {"example.com/block": "b0", "example.com/rack": rack}
              for n, rack in (("x0", "r0"), ("x1", "r0"), ("x2", "r0"), ("y0", "r1"), ("y1", "r1"))}
    s = TelemetryStore(max_age=60, clock=Clock(1000.0))
    for src, bw in (("x0", 100), ("x1", 300), ("x2", 200)):  # rack r0 -> y0; x0 never probed y1
        s.record(src, "y0", rtt_ms=bw / 100, bandwidth_mbps=bw)
    got = placement_telemetry(job(replicas=2), placed("y1", "x0"), s, labels, topology)
    assert got == {"peer_bw_mbps": 200, "peer_rtt_ms": 2.0}  # rack r0 -> rack r1's median
    assert placement_telemetry(job(replicas=2), placed("y1", "x0"), s) == {}  # without labels: pairs only
