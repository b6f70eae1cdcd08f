"""The extender scoring by a trained completion-time model: features, ranking, reload and fallback."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from netsched.datagen.simulator import SimConfig, simulate
from netsched.devcluster.topology import GPUNode
from netsched.extender.engine import Extender
from netsched.extender.learned import ModelScorer, ModelSource
from netsched.extender.metrics import Metrics
from netsched.extender.model_features import feature_values
from netsched.extender.plugin import Request
from netsched.extender.protocol import parse_args
from netsched.extender.scorers import TopologyScorer
from netsched.jobs.gpujob import GPUJob
from netsched.models.artifact import META_FILE, MODEL_FILE
from netsched.models.features import FEATURE_NAMES, INDEX, feature_matrix
from netsched.models.predictor import Predictor
from netsched.records.link_columns import placement_telemetry
from netsched.telemetry.store import TelemetryStore
from netsched.testing.extender import CLUSTER, args, cache_of, pod
from netsched.testing.extender import NAMES as CLUSTER_NAMES
from netsched.training.dataset import write_dataset
from netsched.training.train import train

H100, V100 = "NVIDIA-H100-80GB-HBM3", "Tesla-V100-SXM2-32GB"
NODES = [GPUNode(name, zone, rack, gpu).manifest() for name, zone, rack, gpu in (
    ("h-0", "zone-a", "rack-a1", H100), ("h-1", "zone-a", "rack-a1", H100),
    ("v-0", "zone-b", "rack-b1", V100), ("v-1", "zone-b", "rack-b1", V100))]
NAMES = ["h-0", "h-1", "v-0", "v-1"]
TRAINING = {"netsched.io/workload-kind": "training", "netsched.io/replicas": "1",
            "netsched.io/expected-duration-seconds": "3000", "netsched.io/input-size-gb": "1"}


def features(pod, snapshot, idx, store):
    """The model's feature values for candidates idx, as the extender computes them for a request."""
    return feature_values(Request(pod, replace(snapshot, telemetry=store.snapshot())), idx)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """A model trained by `netsched train` on a small simulated dataset."""
    root = tmp_path_factory.mktemp("models")
    data = root / "sim.csv"
    write_dataset(data, simulate(SimConfig(nodes=16, zones=2, racks_per_zone=2, jobs=300, candidates=4)))
    return train([data], root / "out", name="tiny", log=lambda *_: None)


@pytest.fixture
def copy(artifact, tmp_path):
    return shutil.copytree(artifact, tmp_path / "tiny")


def scorer_for(path, metrics=None):
    metrics = metrics or Metrics()
    source = ModelSource(path, metrics, reload_seconds=3600)
    source.poll()
    return ModelScorer(source, TopologyScorer(), metrics), source, metrics


def sample(metrics: Metrics, name: str, **labels) -> float:
    return metrics.registry.get_sample_value(name, labels or None) or 0.0


def test_features_describe_each_candidate_from_the_cache_and_annotations():
    peer = pod("peer", "h-0", gpus=4, job="train")
    peer["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "48", "memory": "256Gi"}
    cache = cache_of(NODES, [peer])
    p = parse_args({"Pod": pod("next", gpus=2, job="train", annotations={
        **TRAINING, "netsched.io/data-source": "zone:zone-b", "netsched.io/communication-intensity": "high"}),
        "NodeNames": NAMES}).pod
    view = cache.snapshot(p.namespace, p.job)
    idx = np.arange(4)
    values = features(p, view, idx, TelemetryStore())
    X = feature_matrix(values, 4)
    col = {name: X[:, INDEX[name]] for name in FEATURE_NAMES}
    assert col["gpu_tflops16"].tolist() == [989, 989, 125, 125]  # H100, H100, V100, V100 (the GPU table)
    assert col["gpu_mem_bw_gbps"].tolist() == [3350, 3350, 900, 900]
    assert col["node_free_gpus"].tolist() == [4, 8, 8, 8]
    assert col["rack_free_gpus"].tolist() == [12, 12, 16, 16]
    assert col["peer_count"].tolist() == [1] * 4
    assert col["peer_frac_node"].tolist() == [1, 0, 0, 0] and col["peer_frac_rack"].tolist() == [0, 1, 0, 0]
    assert col["data_distance"].tolist() == [3, 3, 2, 2]  # zone-b data: farther for zone-a nodes
    assert col["comm_gb_per_hour"][0] == 600 and col["kind_training"][0] == 1  # "high" stands for 600 GB/h
    assert col["expected_seconds"][0] == 3000
    assert col["node_cpu_load"].tolist() == [0.5, 0, 0, 0]  # 48 of 96 cores requested
    assert col["node_mem_load"].tolist() == [0.25, 0, 0, 0]  # 256Gi of 1024Gi
    assert all(math.isnan(v) for v in col["nic_util"])  # no telemetry: unknown
    store = TelemetryStore()
    store.record_nic("v-0", 0.4)
    values = features(p, view, idx, store)
    nic = feature_matrix(values, 4)[:, INDEX["nic_util"]]
    assert nic[2] == 0.4 and np.isnan(nic[[0, 1, 3]]).all()


def test_a_jobs_record_holds_the_network_features_the_extender_served_for_its_last_replica():
    """Training rows (records/link_columns) and serving rows (model_features) apply one
    rule: the weakest link to the peers' nodes, the link to the data, the node's NIC."""
    endpoint = "10.0.0.5:9000"
    store = TelemetryStore()
    for src, dst, rtt, bw in (("h-1", "h-0", 4.0, 400), ("h-1", "v-0", 2.0, 900), ("h-1", endpoint, 7.5, 250),
                              ("v-1", "h-0", 9.0, 50), ("v-1", endpoint, 1.0, 999)):
        store.record(src, dst, rtt_ms=rtt, bandwidth_mbps=bw)
    store.record_nic("h-1", 0.35)
    cache = cache_of(NODES, [pod("r0", "h-0", job="train"), pod("r1", "v-0", job="train")])
    notes = {"netsched.io/data-source": f"endpoint:{endpoint}"}
    p = parse_args({"Pod": pod("r2", job="train", annotations=notes), "NodeNames": NAMES}).pod
    view = cache.snapshot(p.namespace, p.job)
    served = features(p, view, np.array([1]), store)  # h-1
    job = GPUJob.of({"metadata": {"namespace": "ml", "name": "train", "uid": "u"}, "spec": {
        "replicas": 3, "gpusPerReplica": 2, "template": {"spec": {"containers": [{"name": "c"}]}},
        "dataSources": [{"name": "d", "kind": "endpoint", "endpoint": endpoint}]}})
    placed = {"placements": [{"replica": i, "node": n} for i, n in enumerate(("h-0", "v-0", "h-1"))]}
    recorded = placement_telemetry(job, placed, store)
    assert recorded == {"peer_bw_mbps": 400, "peer_rtt_ms": 4.0, "data_bw_mbps": 250, "data_rtt_ms": 7.5,
                        "nic_util": 0.35}
    assert {name: float(served[name][0]) for name in recorded} == recorded


def test_the_model_prefers_the_faster_gpus_for_compute_heavy_work(artifact):
    scorer, _, metrics = scorer_for(artifact)
    extender = Extender(cache_of(NODES), scorer=scorer, shortlist=0)
    scores = extender.prioritize(args(pod("job", gpus=2, annotations=TRAINING), NAMES)).as_dict()
    assert min(scores["h-0"], scores["h-1"]) > max(scores["v-0"], scores["v-1"]), scores
    assert sample(metrics, "netsched_extender_model_loaded") == 1


def test_filter_hands_back_the_node_the_model_predicts_fastest(artifact):
    scorer, source, _ = scorer_for(artifact)
    extender = Extender(cache_of(NODES, [pod("busy", "h-0", gpus=6)]), scorer=scorer)
    p = pod("job", gpus=2, annotations=TRAINING)
    passed = extender.filter(args(p, NAMES)).passed
    ref = parse_args({"Pod": p, "NodeNames": NAMES}).pod
    view = extender.cluster.snapshot(ref.namespace, None)
    values = features(ref, view, np.arange(4), TelemetryStore())
    X = feature_matrix(values, 4)
    assert passed == [NAMES[int(np.argmin(source.predictor.predict(X)))]]
    assert extender.decisions.find("ml", "job").scorer == "model"


def test_a_corrupt_model_file_falls_back_to_the_heuristic_and_every_request_is_answered(copy):
    for name in [MODEL_FILE, *json.loads((copy / META_FILE).read_text()).get("serving", [])]:
        (copy / name).write_bytes(b"not a model")  # the pickle and the files the extender serves
    scorer, source, metrics = scorer_for(copy)
    assert source.predictor is None
    assert sample(metrics, "netsched_extender_model_loads_total", result="refused") == 1
    assert sample(metrics, "netsched_extender_model_loaded") == 0
    extender = Extender(cache_of(NODES), scorer=scorer)
    heuristic = Extender(cache_of(NODES))
    request = args(pod("job", gpus=2, annotations=TRAINING), NAMES)
    # prioritize first: after a filter it would answer with the filter's scores
    assert extender.prioritize(request).as_dict() == heuristic.prioritize(request).as_dict()
    assert extender.filter(request).passed == heuristic.filter(request).passed != []
    assert sample(metrics, "netsched_extender_model_fallbacks_total", reason="no_model") == 2


def test_a_model_of_another_schema_is_refused_and_a_fixed_one_is_picked_up(copy, caplog):
    meta = json.loads((copy / META_FILE).read_text())
    (copy / META_FILE).write_text(json.dumps({**meta, "schema_version": 99}))
    _, source, metrics = scorer_for(copy)
    assert source.predictor is None
    assert "schema version 99" in caplog.text and "netsched train" in caplog.text
    (copy / META_FILE).write_text(json.dumps(meta))  # fixed: the next check loads it
    source.poll()
    assert source.predictor is not None
    assert sample(metrics, "netsched_extender_model_loads_total", result="loaded") == 1


def test_a_manifest_repointed_to_a_new_artifact_is_reloaded(artifact, tmp_path):
    manifest = tmp_path / "current.json"
    manifest.write_text(json.dumps({"artifact": str(artifact)}))
    _, source, _ = scorer_for(manifest)
    first = source.predictor
    second = shutil.copytree(artifact, tmp_path / "second")
    manifest.write_text(json.dumps({"artifact": "second"}) + " ")  # another size: a new stamp
    source.poll()
    assert source.predictor is not first and source.predictor.path == second
    source.poll()  # nothing changed: no reload
    assert source.predictor.path == second


def test_rows_the_screen_drops_never_outrank_the_screened_ones(artifact, monkeypatch):
    monkeypatch.setattr("netsched.models.predictor.SCREEN_ROWS", 3)
    predictor = Predictor.load(artifact)
    values = features(parse_args({"Pod": pod("j", annotations=TRAINING), "NodeNames": NAMES}).pod,
                      cache_of(NODES).snapshot("ml", None), np.arange(4), TelemetryStore())
    values = {k: v if np.ndim(v) == 0 else np.tile(v, 3) for k, v in values.items()}  # 12 candidates
    values["node_free_gpus"] = np.arange(12.0) % 9
    X = feature_matrix(values, 12)
    seconds = predictor.predict_candidates(values, 12)
    screen = predictor.screen.predict_values(values, 12)
    np.testing.assert_allclose(screen, predictor.screen.predict(X), rtol=1e-12)
    screened = np.argpartition(screen, 2)[:3]
    assert np.allclose(seconds[screened], predictor.predict(X[screened]))  # the job part once = per row
    rest = np.setdiff1d(np.arange(len(X)), screened)
    assert seconds[rest].min() >= seconds[screened].max()


SHIPPED = Path(__file__).resolve().parents[3] / "models" / "current.json"
GANG_HINTS = {"netsched.io/replicas": "2", "netsched.io/workload-kind": "training",
              "netsched.io/expected-duration-seconds": "1800"}


@pytest.mark.parametrize("annotations", [
    {}, {**GANG_HINTS, "netsched.io/communication-intensity": "low"},
    {**GANG_HINTS, "netsched.io/communication-intensity": "high"}], ids=["no-hints", "low", "high"])
@pytest.mark.parametrize("gpus", [2, 4])
def test_the_shipped_model_puts_a_gangs_second_pod_beside_its_peer_not_on_an_empty_rack_mate(
        annotations, gpus):
    """a1-0 holds the first pod and has room for the second; a1-1, its rack-mate, is empty; a2-0 and
    b1-0 are farther. As kube-scheduler asks: filter (the chart's shortlist of 1), then prioritize."""
    scorer, _, metrics = scorer_for(SHIPPED)
    cluster = cache_of(CLUSTER, [pod("r0", "a1-0", gpus=gpus, job="train", annotations=annotations)])
    second = pod("r1", job="train", gpus=gpus, annotations=annotations)
    passed = Extender(cluster, scorer=scorer, shortlist=1).filter(args(second, CLUSTER_NAMES)).passed
    scores = Extender(cluster, scorer=scorer, shortlist=0).prioritize(args(second, CLUSTER_NAMES)).as_dict()
    assert passed == ["a1-0"] and scores["a1-0"] > max(scores["a1-1"], scores["a2-0"], scores["b1-0"]), scores
    assert sample(metrics, "netsched_extender_model_loaded") == 1


@pytest.mark.parametrize("annotations", [
    {"netsched.io/replicas": "2"}, GANG_HINTS, {**GANG_HINTS, "netsched.io/communication-intensity": "high"}],
    ids=["size-only", "hints", "high"])
@pytest.mark.parametrize("gpus", [2, 4])
def test_the_shipped_model_sends_a_gangs_first_pod_where_the_whole_gang_fits(annotations, gpus):
    """a1-0 has room for the first pod alone, its rack-mate a1-1 and the farther nodes for the whole
    gang: the first pod goes where its peer can join it, as kube-scheduler's shortlist of 1 sees it."""
    scorer, _, _ = scorer_for(SHIPPED)
    cluster = cache_of(CLUSTER, [pod("other", "a1-0", gpus=8 - gpus)])
    first = pod("r0", job="train", gpus=gpus, annotations=annotations)
    passed = Extender(cluster, scorer=scorer, shortlist=1).filter(args(first, CLUSTER_NAMES)).passed
    scores = Extender(cluster, scorer=scorer, shortlist=0).prioritize(args(first, CLUSTER_NAMES)).as_dict()
    assert passed != ["a1-0"] and scores["a1-0"] < max(scores.values()), scores


def test_a_jobs_first_pod_reads_its_peers_to_come_where_the_whole_job_would_fit():
    """h-0 has room for the first pod alone, so its peer would land in the rack; elsewhere on the node
    itself. A pod of no job has no peers to come."""
    cache = cache_of(NODES, [pod("other", "h-0", gpus=6)])
    idx = np.arange(4)

    def columns(p: dict) -> dict:
        ref = parse_args({"Pod": p, "NodeNames": NAMES}).pod
        X = feature_matrix(features(ref, cache.snapshot(ref.namespace, ref.job), idx, TelemetryStore()), 4)
        return {name: X[:, INDEX[name]] for name in FEATURE_NAMES}
    first = columns(pod("r0", gpus=2, job="train", annotations={"netsched.io/replicas": "2"}))
    assert first["peer_count"].tolist() == [1] * 4
    assert first["peer_frac_node"].tolist() == [0, 1, 1, 1]
    assert first["peer_frac_rack"].tolist() == [1, 0, 0, 0]
    assert np.isnan(first["peer_bw_mbps"]).all()  # links to pods not yet placed are unknown
    lone = columns(pod("lone", gpus=2, annotations={"netsched.io/replicas": "2"}))
    assert lone["peer_count"].tolist() == [0] * 4


class _Predicts:
    """A model source whose model predicts 1000 s everywhere but `slower` more where the job's first pod
    is at `where` (peer_frac_node: on the node itself; peer_frac_rack: a rack-mate)."""

    def __init__(self, slower: float, where: str = "peer_frac_node"):
        self.predictor = self
        self.slower = slower
        self.where = where

    def predict_candidates(self, values: dict, n: int) -> np.ndarray:
        return 1000.0 * (1 + self.slower * np.broadcast_to(values[self.where], (n,)))


@pytest.mark.parametrize("slower", [0.0, 0.01, 0.05], ids=["tie", "within-noise", "clearly-slower"])
def test_a_gangs_second_pod_stays_beside_its_peer_whose_pace_the_job_keeps_wherever_it_goes(slower):
    """a1-0 holds the job's first pod and has room for the second; a1-1 is its empty rack-mate. Even
    predicted clearly slower there, the job runs at its first pod's pace on a1-0 wherever the second
    goes: no node is faster for it, and closeness to the peer decides."""
    metrics = Metrics()
    scorer = ModelScorer(_Predicts(slower), TopologyScorer(), metrics)
    cluster = cache_of(CLUSTER, [pod("r0", "a1-0", gpus=2, job="train")])
    second = pod("r1", job="train", gpus=2, annotations={"netsched.io/replicas": "2"})
    passed = Extender(cluster, scorer=scorer, shortlist=1).filter(args(second, CLUSTER_NAMES)).passed
    assert passed == ["a1-0"]
    assert sample(metrics, "netsched_extender_model_fallbacks_total", reason="predict_error") == 0


@pytest.mark.parametrize(("slower", "chosen"), [(0.0, "a1-1"), (0.05, "a2-0")], ids=["tie", "clearly-slower"])
def test_beyond_the_peers_pace_a_clear_gap_stays_the_models(slower, chosen):
    """a1-0, the peer's node, is not among the candidates (full): a rack-mate predicted alike goes
    first (closest to the peer); predicted clearly slower than the peer's pace it loses to a farther
    node that keeps that pace."""
    scorer = ModelScorer(_Predicts(slower, "peer_frac_rack"), TopologyScorer(), Metrics())
    cluster = cache_of(CLUSTER, [pod("r0", "a1-0", gpus=2, job="train")])
    second = pod("r1", job="train", gpus=2, annotations={"netsched.io/replicas": "2"})
    others = [n for n in CLUSTER_NAMES if n != "a1-0"]
    assert Extender(cluster, scorer=scorer, shortlist=1).filter(args(second, others)).passed == [chosen]
