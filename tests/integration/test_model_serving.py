"""The extender serving a trained completion-time model to the real kube-scheduler.

A dev-cluster of its own (its extender runs with --model), with a model trained by
`netsched train` on simulated jobs, and again with the model the image ships (models/current.json).
Zone-a has H100 nodes, zone-b A100 nodes.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from kubernetes import client

from netsched.api.labels import GPU_PRODUCT_LABEL, JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.datagen.simulator import SimConfig, simulate
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.models.artifact import META_FILE, MODEL_FILE, artifact_dir
from netsched.models.features import DATA_SCOPES, FEATURE_NAMES, kind_features
from netsched.models.gpus import gpu_features
from netsched.models.predictor import Predictor
from netsched.testing import extender_http
from netsched.testing.cluster import free_gpus
from netsched.training.dataset import write_dataset
from netsched.training.train import train

# compute-heavy training with its (small) input in zone-b: the topology heuristic goes to the
# data, a model that knows GPU speed should not
HINTS = {"netsched.io/workload-kind": "training", "netsched.io/replicas": "1",
         "netsched.io/expected-duration-seconds": "3600", "netsched.io/input-size-gb": "2",
         "netsched.io/data-source": "zone:zone-b", "netsched.io/job-gpus": "2"}


SHIPPED = Path(__file__).resolve().parents[2] / "models" / "current.json"


@pytest.fixture(scope="module", params=["trained", "shipped"])
def model(request, tmp_path_factory):
    """A model `netsched train` wrote here, or a copy of the one the image ships (a copy: a test
    corrupts it)."""
    root = tmp_path_factory.mktemp("model")
    if request.param == "shipped":
        return Path(shutil.copytree(artifact_dir(SHIPPED), root / "default"))
    write_dataset(root / "sim.csv", simulate(SimConfig(nodes=32, zones=2, racks_per_zone=2, jobs=600)))
    return train([root / "sim.csv"], root / "models", name="served", log=lambda *_: None)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, model):
    cluster = DevCluster(directory=tmp_path_factory.mktemp("model-cluster"), nodes=8, run_operator=False,
                         extender_args=(f"--model={model}", "--model-reload-seconds=0.5"),
                         progress=lambda *_: None)
    cluster.up()
    api = client.CoreV1Api(cluster.api_client())
    # a node can still carry the not-ready taint for a moment after Ready; the test wants all 8
    poll(lambda: not any(n.spec.taints for n in api.list_node().items), 30,
         "the nodes' start-up taints to go")
    yield cluster
    cluster.down(quiet=True)


@pytest.fixture(scope="module")
def core(cluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api_client())


def decision_text(cluster: DevCluster, pod: str) -> str:
    """The extender's decision for default/<pod>, as JSON text."""
    status, decision = extender_http.decision(cluster, "default", pod)
    assert status == 200, decision
    return json.dumps(decision)


def metric(cluster: DevCluster, name: str) -> float:
    text = extender_http.metrics_text(cluster)
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def expected_fastest(model, nodes: list[client.V1Node]) -> tuple[str, np.ndarray]:
    """The node the model predicts fastest for one HINTS pod on an empty cluster, computed here
    from the nodes' labels, independently of the extender's feature code."""
    nodes = sorted(nodes, key=lambda n: n.metadata.name)  # the extender breaks ties by name
    labels = [n.metadata.labels for n in nodes]
    racks = [lab[RACK_LABEL] for lab in labels]
    rows = []
    for lab in labels:
        row = dict.fromkeys(FEATURE_NAMES, math.nan)
        row.update(job_gpus=2, replicas=1, gpus_per_replica=2, input_size_gb=2, expected_seconds=3600,
                   data_scope=DATA_SCOPES["zone"], node_gpus=8, node_free_gpus=8,
                   rack_free_gpus=8 * racks.count(lab[RACK_LABEL]), peer_count=0,
                   data_distance=2.0 if lab[ZONE_LABEL] == "zone-b" else 3.0,
                   **kind_features("training"), **gpu_features(lab[GPU_PRODUCT_LABEL]))
        rows.append([row[f] for f in FEATURE_NAMES])
    seconds = Predictor.load(model).predict(np.array(rows))
    return nodes[int(np.argmin(seconds))].metadata.name, seconds


def bound(core: client.CoreV1Api, name: str, namespace: str = "default") -> str:
    return poll(lambda: core.read_namespaced_pod(name, namespace).spec.node_name, 30, f"{name} to be bound")


def test_kube_scheduler_places_the_pod_where_the_model_predicts_it_finishes_first(cluster, core, model):
    assert metric(cluster, "netsched_extender_model_loaded") == 1
    nodes = core.list_node().items
    fastest, seconds = expected_fastest(model, nodes)
    zone = {n.metadata.name: n.metadata.labels[ZONE_LABEL] for n in nodes}
    assert zone[fastest] == "zone-a", f"the model should weigh H100s over data locality here: {seconds}"

    core.create_namespaced_pod("default", gpu_pod("fast", 2, annotations=HINTS))
    node = bound(core, "fast")
    failed = core.list_namespaced_event("default", field_selector="reason=FailedScheduling").items
    assert node == fastest, [e.message for e in failed]
    decision = decision_text(cluster, "fast")
    assert '"scorer":"model"' in decision.replace(" ", "") and "predicted_seconds" in decision


def test_a_gangs_second_pod_joins_its_peer_rather_than_an_empty_rack_mate(cluster, core, model):
    """The first pod of a 2-pod job bound to a node with room for the second, whose rack-mate is empty:
    kube-scheduler, asking the extender with the model, binds the second pod beside the first."""
    free = free_gpus(core)
    rack = {n.metadata.name: n.metadata.labels[RACK_LABEL] for n in core.list_node().items}
    pairs = [(a, b) for a in sorted(free) for b in sorted(free)
             if a != b and rack[a] == rack[b] and free[a] >= 8 and free[b] == 8]
    assert pairs, f"no two empty nodes in one rack: {free}"
    peer_node, rack_mate = pairs[0]
    notes = {"netsched.io/replicas": "2", "netsched.io/workload-kind": "training"}
    first = gpu_pod("gang-0", 4, labels={JOB_LABEL: "gang"}, annotations=notes)
    first["spec"]["nodeName"] = peer_node  # bound as if scheduled: the peer is where it is
    core.create_namespaced_pod("default", first)
    poll(lambda: core.read_namespaced_pod("gang-0", "default").status.phase == "Running", 30, "gang-0 to run")
    core.create_namespaced_pod("default", gpu_pod("gang-1", 4, labels={JOB_LABEL: "gang"}, annotations=notes))
    node = bound(core, "gang-1")
    decision = decision_text(cluster, "gang-1")
    assert node == peer_node, f"bound to {node}, its peer on {peer_node}, empty {rack_mate}: {decision}"
    assert '"scorer":"model"' in decision.replace(" ", "")


def test_a_gangs_first_pod_goes_where_the_whole_gang_fits(cluster, core, model):
    """Every node but one has room for one 4-GPU pod only: the first pod of a 2 x 4 job is bound to the
    one node its peer can join (the model predicts the job's time, peers to come included). That node
    is an H100 one: on zone-b's A100s the model may rightly prefer H100s apart to A100s together."""
    free = free_gpus(core)
    zone = {n.metadata.name: n.metadata.labels[ZONE_LABEL] for n in core.list_node().items}
    whole = sorted(n for n, f in free.items() if f >= 8 and zone[n] == "zone-a")[0]
    fillers = [n for n in sorted(free) if n != whole and free[n] > 4]
    for i, node in enumerate(fillers):
        filler = gpu_pod(f"filler-{i}", free[node] - 4)
        filler["spec"]["nodeName"] = node
        core.create_namespaced_pod("default", filler)
    try:
        poll(lambda: all(f <= 4 for n, f in free_gpus(core).items() if n != whole), 30, "the fillers")
        notes = {"netsched.io/replicas": "2", "netsched.io/workload-kind": "training"}
        core.create_namespaced_pod("default", gpu_pod("pair-0", 4, labels={JOB_LABEL: "pair"},
                                                      annotations=notes))
        node = bound(core, "pair-0")
        decision = decision_text(cluster, "pair-0")
        assert node == whole, f"bound to {node}, no room for its peer; room for both on {whole}: {decision}"
    finally:
        made = {"pair-0", *(f"filler-{i}" for i in range(len(fillers)))}
        for name in made:
            with contextlib.suppress(client.ApiException):  # one the test failed before making
                core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        poll(lambda: not made & {p.metadata.name for p in core.list_namespaced_pod("default").items}, 60,
             "the test's pods to go")


def test_a_corrupt_model_degrades_to_the_heuristic_without_failing_a_request(cluster, core, model):
    # what the extender loads: the serving files netsched train wrote, else the pickle
    meta = json.loads((model / META_FILE).read_text())
    served = [model / name for name in meta.get("serving", [MODEL_FILE])]
    backup = model.parent / "backup"
    shutil.copytree(model, backup)
    for path in served:
        path.write_bytes(b"\x80corrupt")
    poll(lambda: metric(cluster, "netsched_extender_model_loaded") == 0, 10,
         "the extender to refuse the model")
    try:
        for i in range(3):
            core.create_namespaced_pod("default", gpu_pod(f"degraded-{i}", 2, annotations=HINTS))
        placed = {bound(core, f"degraded-{i}") for i in range(3)}
        zone = {n.metadata.name: n.metadata.labels[ZONE_LABEL] for n in core.list_node().items}
        assert {zone[n] for n in placed} == {"zone-b"}  # the heuristic takes them to their data
        assert metric(cluster, 'netsched_extender_model_fallbacks_total{reason="no_model"}') >= 3
        assert metric(cluster, 'netsched_extender_requests_total{verb="filter",outcome="error"}') == 0
        failed = core.list_namespaced_event("default", field_selector="reason=FailedScheduling").items
        assert not [e.message for e in failed if e.involved_object.name.startswith("degraded-")]
    finally:
        for path in served:
            shutil.copy(backup / path.name, path)
    poll(lambda: metric(cluster, "netsched_extender_model_loaded") == 1, 10, "the restored model to load")
