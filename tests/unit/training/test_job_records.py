import json
import math

import pytest

from netsched.api.topology import Topology
from netsched.jobs.gpujob import GPUJob
from netsched.models.features import FEATURE_NAMES, TARGET, SchemaError
from netsched.records.format import ROW_FIELDS
from netsched.records.writer import job_record
from netsched.testing.builders import make_gpujob
from netsched.testing.records import operator_record
from netsched.training.dataset import read_dataset
from netsched.training.record_rows import record_row


class Reads(dict):
    """A record that remembers which fields were read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_a_real_operator_record_becomes_the_last_replicas_row():
    record = operator_record(["a1-0", "a2-0", "a1-0"],
                             {"name": "imagenet", "kind": "rack", "location": "rack-a1", "sizeGB": 150})
    assert record["data_distance"] == "zone"  # the record's: the finest level *every* replica shares
    row = record_row(record)
    features = {k: row[k] for k in FEATURE_NAMES}
    assert (row["node"], row["site"], row["job_id"], row["chosen"]) == ("a1-0", "zone-a", "uid-1", 1)
    assert row["start_unix"] == 1_767_261_630.0 and row[TARGET] == 3600.0
    assert {k: features[k] for k in ("job_gpus", "replicas", "gpus_per_replica", "input_size_gb",
                                     "comm_gb_per_hour", "kind_training", "expected_seconds", "data_scope",
                                     "gpu_tflops16", "peer_count", "peer_frac_node", "peer_frac_rack",
                                     "peer_frac_zone")} == {
        "job_gpus": 12, "replicas": 3, "gpus_per_replica": 4, "input_size_gb": 120.0,
        "comm_gb_per_hour": 600.0,
        "kind_training": 1.0, "expected_seconds": 3000.0, "data_scope": 1.0, "gpu_tflops16": 989.0,
        "peer_count": 2.0, "peer_frac_node": 0.5, "peer_frac_rack": 0.0, "peer_frac_zone": 0.5}
    assert features["data_distance"] == 1.0  # the last replica itself sits in the data's rack
    unknown = {k for k, v in features.items() if isinstance(v, float) and math.isnan(v)}
    assert unknown == {"node_gpus", "node_free_gpus", "rack_free_gpus", "node_cpu_load", "node_mem_load",
                       "data_bw_mbps", "data_rtt_ms", "peer_bw_mbps", "peer_rtt_ms", "nic_util"}


def test_every_field_read_is_one_the_operator_writes():
    record = Reads(operator_record(["a1-0", "b1-0"], {"name": "d", "kind": "node", "location": "a1-1"}))
    record_row(record)
    assert record.read <= set(ROW_FIELDS)


@pytest.mark.parametrize("kind, location, nodes, distance", [
    pytest.param("node", "a1-0", ["a1-0"], 0.0, id="node-on-it"),
    pytest.param("node", "a1-0", ["a1-0", "a1-1"], 1.0, id="node-same-rack-known-from-a-replica"),
    pytest.param("node", "a1-0", ["a1-0", "b1-0"], 3.0, id="node-other-zone-known-from-a-replica"),
    pytest.param("node", "a1-0", ["a2-0"], 2.0, id="node-alone-takes-the-records-level"),
    pytest.param("node", "a1-0", ["b1-0", "a2-0"], math.nan, id="node-rack-unknown"),
    pytest.param("rack", "rack-a1", ["a2-0", "a1-1"], 1.0, id="rack-in-it"),
    pytest.param("rack", "rack-a1", ["a1-0", "a2-0"], 2.0, id="rack-same-zone-known-from-a-replica"),
    pytest.param("rack", "rack-b1", ["a1-0"], 3.0, id="rack-other-zone-alone"),
    pytest.param("zone", "zone-b", ["a1-0", "b1-0"], 2.0, id="zone-in-it"),
    pytest.param("zone", "zone-b", ["b1-0", "a1-0"], 3.0, id="zone-out-of-it"),
    pytest.param("endpoint", "minio:9000", ["a1-0"], math.nan, id="endpoint"),
])
def test_data_distance_is_the_last_replicas_own(kind, location, nodes, distance):
    source = {"name": "d", "kind": kind, ("endpoint" if kind == "endpoint" else "location"): location}
    got = record_row(operator_record(nodes, source))["data_distance"]
    assert got == distance or (math.isnan(got) and math.isnan(distance))


def test_no_data_source_reads_nothing():
    row = record_row(operator_record(["a1-0"], workload={"kind": "inference"}))
    assert row["input_size_gb"] == 0.0 and math.isnan(row["data_scope"]) and math.isnan(row["data_distance"])
    assert math.isnan(row["comm_gb_per_hour"]) and row["kind_inference"] == 1.0


def write_records(path, records, torn=False):
    lines = [json.dumps(r) for r in records]
    if torn:
        lines.insert(1, lines[1][:40])  # a crash mid-write, then the operator's next row on a line of its own
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_records_file_reads_as_sets_of_one(tmp_path):
    records = [operator_record(["a1-0"], uid="u1"), operator_record(["a2-0"], uid="u2", phase="Failed"),
               operator_record(["b1-0", "a1-1"], uid="u3")]
    ds = read_dataset(write_records(tmp_path / "r.jsonl", records, torn=True))
    assert ds.job_id.tolist() == ["u1", "u3"]  # Failed skipped, the torn line skipped
    assert ds.node.tolist() == ["a1-0", "a1-1"] and ds.chosen.all() and [len(s) for s in ds.sets()] == [1, 1]
    assert ds.source.tolist() == ["operator", "operator"]


def test_telemetry_fills_features_and_refuses_unknown_names(tmp_path):
    record = operator_record(["a1-0"])
    record["telemetry"] = {"nic_util": 0.3, "data_bw_mbps": 9400}
    row = record_row(record)
    assert (row["nic_util"], row["data_bw_mbps"]) == (0.3, 9400.0)
    record["telemetry"] = {"nic_utilisation": 0.3}
    with pytest.raises(SchemaError, match=r"r.jsonl: line 1 \(uid 'uid-1'\): telemetry names nic_util"):
        read_dataset(write_records(tmp_path / "r.jsonl", [record]))


@pytest.mark.parametrize("change, message", [
    pytest.param({"schema_version": 2}, "line 2 .*records schema_version 2, this netsched reads version 1",
                 id="version"),
    pytest.param({"replicas": None, "gpus": None, "nodes": ["a1-0"], "start_time": "yesterday"},
                 r"line 2 \(uid 'uid-1'\): Invalid isoformat string", id="bad-time"),
])
def test_bad_records_name_the_line(tmp_path, change, message):
    good, bad = operator_record(["a1-0"], uid="u0"), operator_record(["a1-0"])
    bad.update(change)
    with pytest.raises(SchemaError, match=message):
        read_dataset(write_records(tmp_path / "r.jsonl", [good, bad]))


def test_a_record_without_a_field_the_model_needs(tmp_path):
    bad = operator_record(["a1-0"])
    del bad["gpus_per_replica"]
    with pytest.raises(SchemaError,
                       match="line 1 .* no field 'gpus_per_replica'; see netsched.records.format"):
        read_dataset(write_records(tmp_path / "r.jsonl", [bad]))


def test_a_file_with_no_usable_job_reads_as_no_rows(tmp_path):
    """Train and retrain then say how many jobs they need (test_model_cli.py)."""
    failed = operator_record(["a1-0"], phase="Failed")
    assert len(read_dataset(write_records(tmp_path / "r.jsonl", [failed]))) == 0


def test_a_record_reads_its_gb_per_hour_and_its_last_nodes_gpu_labels_and_older_records_still_read():
    record = operator_record(["a1-0", "a2-0"], workload={"kind": "training", "communicationIntensity": "high",
                                                         "communicationGBPerHour": 42})
    record["gpu_labels"] = [{}, {"netsched.io/gpu-tflops": "123"}]
    row = record_row(record)
    assert row["comm_gb_per_hour"] == 42.0 and row["gpu_tflops16"] == 123.0
    assert row["gpu_mem_bw_gbps"] == 2039.0  # the rest from its product, an A100 SXM4 80GB (LABELS)
    older = {k: v for k, v in record.items() if k not in ("gpu_labels", "communication_gb_per_hour")}
    assert record_row(older)["comm_gb_per_hour"] == 600.0 and record_row(older)["gpu_tflops16"] == 312.0


def test_a_record_of_three_levels_reads_on_the_models_scale_and_an_older_one_as_zone_and_rack():
    levels = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")
    labels = {"n0": {"example.com/block": "b1", "example.com/subblock": "s1", "example.com/host": "h0"},
              "n1": {"example.com/block": "b1", "example.com/subblock": "s1", "example.com/host": "h0"},
              "n2": {"example.com/block": "b1", "example.com/subblock": "s2", "example.com/host": "h2"},
              "n3": {"example.com/block": "b1", "example.com/subblock": "s1"}}
    source = {"name": "d", "kind": "subblock", "location": "s2"}
    job = GPUJob.of(make_gpujob(replicas=4, dataSources=[source]))
    nodes = ["n3", "n1", "n2", "n0"]
    status = {"phase": "Succeeded", "startTime": "2026-01-01T10:00:30Z",
              "completionTime": "2026-01-01T11:00:30Z",
              "placements": [{"replica": i, "pod": f"t-{i}", "node": n} for i, n in enumerate(nodes)]}
    row = record_row(job_record(job, status, labels, levels))
    # the last replica, n0: n3 shares its subblock only (n3 has no host), n1 its host, n2 its block only;
    # host is the narrowest of three levels (1 on the model's scale), subblock 1.5, block 2
    assert (row["peer_frac_node"], row["peer_frac_rack"], row["peer_frac_zone"]) == (0.0, 1 / 3, 2 / 3)
    assert (row["data_scope"], row["data_distance"]) == (1.5, 2.0)  # the data's subblock is not n0's: block
    older = {**operator_record(["a1-0", "a1-1"], {"name": "d", "kind": "rack", "location": "rack-a1"})}
    del older["topology"], older["domains"]
    assert record_row(older) == record_row(operator_record(["a1-0", "a1-1"], {"name": "d", "kind": "rack",
                                                                             "location": "rack-a1"}))
