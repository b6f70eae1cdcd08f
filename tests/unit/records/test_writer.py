import json

import pytest

from netsched.api.topology import Topology
from netsched.records.writer import JobRecords, default_path, job_record
from netsched.testing.builders import LABELS, job


def lines(path) -> list[str]:
    return path.read_text().split("\n")


def test_append_is_idempotent_per_uid_across_a_restart(tmp_path):
    path = tmp_path / "state" / "records.jsonl"  # the directory is created
    first = JobRecords(path)
    assert first.append({"uid": "u1", "n": 1}) is True
    assert first.append({"uid": "u1", "n": 2}) is False
    restarted = JobRecords(path)
    assert restarted.append({"uid": "u1", "n": 3}) is False
    assert restarted.append({"uid": "u2", "n": 4}) is True
    assert [(r["uid"], r["n"]) for r in JobRecords(path).rows()] == [("u1", 1), ("u2", 4)]
    assert lines(path) == ['{"n": 1, "uid": "u1"}', '{"n": 4, "uid": "u2"}', ""]


def test_a_torn_last_line_is_skipped_and_never_glued_to_the_next_row(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"uid": "u1"}\n{"uid": "u2", "outc')
    records = JobRecords(path)
    assert [r["uid"] for r in records.rows()] == ["u1"]
    assert records.append({"uid": "u2", "outcome": "Succeeded"}) is True  # the torn row never counted
    assert lines(path) == ['{"uid": "u1"}', '{"uid": "u2", "outc',
                           '{"outcome": "Succeeded", "uid": "u2"}', ""]
    assert [r["uid"] for r in JobRecords(path).rows()] == ["u1", "u2"]


def test_a_whole_row_missing_only_its_newline_still_counts(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"uid": "u1"}')
    records = JobRecords(path)
    assert records.append({"uid": "u1"}) is False
    assert records.append({"uid": "u2"}) is True
    assert lines(path) == ['{"uid": "u1"}', '{"uid": "u2"}', ""]


def test_rows_ignore_lines_that_are_not_job_rows(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('[1, 2]\n42\n{"no": "uid"}\n\n{"uid": "u1"}\n')
    assert JobRecords(path).rows() == [{"uid": "u1"}]


def test_default_path_follows_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_path() == tmp_path / "netsched" / "job-records.jsonl"


def finished(nodes: list[str], phase="Succeeded", reason="AllReplicasSucceeded", start="2025-01-01T10:00:30Z",
             placements=None) -> dict:
    return {"phase": phase, "failures": 1, "startTime": start, "completionTime": "2025-01-01T11:00:30Z",
            "conditions": [{"type": "Admitted", "status": "True", "reason": "GangReleased"},
                           {"type": phase, "status": "True", "reason": reason}],
            "placements": placements if placements is not None else [
                {"replica": i, "pod": f"train-{i}", "node": n, "zone": "", "rack": ""}
                for i, n in enumerate(nodes)]}


def test_job_record_row():
    j = job(replicas=3, gpus=4, created="2025-01-01T10:00:00Z", priorityClassName="high",
            workload={"kind": "training", "inputSizeGB": 120, "communicationIntensity": "high",
                      "communicationGBPerHour": 450},
            dataSources=[{"name": "imagenet", "kind": "rack", "location": "rack-a1", "sizeGB": 150}])
    row = job_record(j, finished(["a1-0", "a2-0", "a1-0"]), LABELS)
    assert json.loads(json.dumps(row)) == row
    expected = {
        "schema_version": 1, "uid": "uid-1", "namespace": "ml", "name": "train", "outcome": "Succeeded",
        "reason": "AllReplicasSucceeded", "created": "2025-01-01T10:00:00Z",
        "start_time": "2025-01-01T10:00:30Z",
        "completion_time": "2025-01-01T11:00:30Z", "duration_seconds": 3600.0, "queue_seconds": 30.0,
        "replicas": 3, "gpus_per_replica": 4, "gpus": 12, "min_available": 3, "priority_class": "high",
        "failures": 1, "workload_kind": "training", "input_size_gb": 120, "communication_intensity": "high",
        "communication_gb_per_hour": 450,
        "expected_duration_seconds": None, "expected_steps": None,
        "data_kind": "rack", "data_location": "rack-a1", "data_size_gb": 150, "data_distance": "zone",
        "nodes": ["a1-0", "a2-0", "a1-0"], "racks": ["rack-a1", "rack-a2", "rack-a1"],
        "zones": ["zone-a", "zone-a", "zone-a"], "gpu_models": ["NVIDIA-H100-80GB-HBM3"] * 3,
        "gpu_labels": [{}, {}, {}],
        "distinct_nodes": 2, "distinct_racks": 2, "distinct_zones": 1, "telemetry": None,
        "first_forecast": None,
        "topology": "zone=topology.kubernetes.io/zone,rack=netsched.io/rack",
        "domains": {"zone": ["zone-a", "zone-a", "zone-a"], "rack": ["rack-a1", "rack-a2", "rack-a1"]},
    }
    assert {k: v for k, v in row.items() if k != "recorded_at"} == expected
    assert row["recorded_at"].endswith("Z")


def test_placements_are_ordered_by_replica_and_their_own_rack_and_zone_win():
    placements = [{"replica": 1, "pod": "train-1", "node": "gone", "zone": "zone-x", "rack": "rack-x"},
                  {"replica": 0, "pod": "train-0", "node": "b1-0", "zone": "", "rack": ""}]
    row = job_record(job(), finished([], placements=placements), LABELS)
    assert (row["nodes"], row["racks"], row["zones"]) == (["b1-0", "gone"], ["rack-b1", "rack-x"],
                                                          ["zone-b", "zone-x"])
    assert row["gpu_models"] == ["NVIDIA-H100-80GB-HBM3", ""]
    assert (row["distinct_racks"], row["distinct_zones"]) == (2, 2)


def test_a_job_that_never_started_has_no_durations():
    j = job(created="2025-01-01T10:00:00Z", gang={"schedulingTimeoutSeconds": 60})
    row = job_record(j, finished([], "Failed", "SchedulingTimeout", start=None), LABELS)
    assert (row["outcome"], row["reason"]) == ("Failed", "SchedulingTimeout")
    assert (row["duration_seconds"], row["queue_seconds"], row["data_distance"]) == (None, None, None)
    assert (row["nodes"], row["distinct_nodes"], row["workload_kind"]) == ([], 0, "training")


@pytest.mark.parametrize("kind, location, nodes, distance", [
    pytest.param("node", "a1-0", ["a1-0"], "node", id="node-on-it"),
    pytest.param("node", "a1-0", ["a1-0", "a1-1"], "rack", id="node-same-rack"),
    pytest.param("node", "a1-0", ["a1-0", "a2-0"], "zone", id="node-same-zone"),
    pytest.param("node", "a1-0", ["a1-1", "b1-0"], "far", id="node-one-replica-far"),
    pytest.param("rack", "rack-a1", ["a1-0", "a1-1"], "rack", id="rack-in-it"),
    pytest.param("rack", "rack-a1", ["a2-0"], "zone", id="rack-same-zone"),
    pytest.param("rack", "rack-b1", ["a1-0"], "far", id="rack-other-zone"),
    pytest.param("zone", "zone-b", ["b1-0"], "zone", id="zone-in-it"),
    pytest.param("zone", "zone-a", ["a1-0", "b1-0"], "far", id="zone-one-replica-out"),
    pytest.param("zone", "zone-q", ["a1-0"], "far", id="zone-unknown"),
    pytest.param("endpoint", "minio:9000", ["a1-0"], None, id="endpoint"),
])
def test_data_distance(kind, location, nodes, distance):
    source = {"name": "d", "kind": kind, ("endpoint" if kind == "endpoint" else "location"): location}
    assert job_record(job(dataSources=[source]), finished(nodes), LABELS)["data_distance"] == distance


def test_no_data_source_no_distance():
    row = job_record(job(), finished(["a1-0"]), LABELS)
    assert (row["data_distance"], row["data_kind"], row["data_location"]) == (None, None, None)


LEVELS = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")
LEVEL_LABELS = {"n0": {"example.com/block": "b1", "example.com/subblock": "s1", "example.com/host": "h0"},
                "n1": {"example.com/block": "b1", "example.com/subblock": "s1"},
                "n2": {"example.com/block": "b1", "example.com/subblock": "s2"}}


def test_a_record_keeps_each_levels_domains_and_racks_and_zones_are_the_narrowest_and_widest():
    placements = [{"replica": 0, "pod": "t-0", "node": "n0", "zone": "", "rack": "",
                   "domains": {"block": "b1", "subblock": "s1", "host": "h0"}},
                  {"replica": 1, "pod": "t-1", "node": "n2", "zone": "", "rack": "",
                   "domains": {"block": "b1", "subblock": "s2"}}]
    source = {"name": "d", "kind": "subblock", "location": "s1"}
    row = job_record(job(dataSources=[source]), finished([], placements=placements), LEVEL_LABELS, LEVELS)
    assert row["domains"] == {"block": ["b1", "b1"], "subblock": ["s1", "s2"], "host": ["h0", ""]}
    assert (row["racks"], row["zones"], row["distinct_racks"]) == (["h0", ""], ["b1", "b1"], 2)
    assert row["topology"] == str(LEVELS) and row["data_distance"] == "block"
    near = job_record(job(dataSources=[source]), finished(["n0", "n1"]), LEVEL_LABELS, LEVELS)
    assert near["data_distance"] == "subblock" and near["domains"]["subblock"] == ["s1", "s1"]
