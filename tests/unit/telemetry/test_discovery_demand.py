"""A node's demand from the API's lists, without an API server: the nodes of the active PackingPlans
that place a pod on it, beside its gangs' nodes and their data."""

from __future__ import annotations

from netsched.api import plans
from netsched.api.labels import DATA_SOURCE, JOB_LABEL
from netsched.telemetry.discovery import ClusterDiscovery


def _plan(name: str, phase: str, nodes: list[str]) -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase},
            "spec": {"placements": [{"pod": f"ml/w-{i}", "node": n} for i, n in enumerate(nodes)]}}


def _pod(name: str, node: str, labels: dict | None = None, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": "ml", "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def test_demand_holds_the_gangs_nodes_their_data_and_the_active_plans_that_place_a_pod_here(monkeypatch):
    lists = {
        "/api/v1/pods": [_pod("train-0", "me", {JOB_LABEL: "train"}, {DATA_SOURCE: "node:store"})],
        "/api/v1/namespaces/ml/pods": [_pod("train-0", "me", {JOB_LABEL: "train"}), _pod("train-1", "gang")],
        f"/apis/{plans.GROUP}/{plans.VERSION}/{plans.PLURAL}": [
            _plan("here", plans.ACTIVE[0], ["me", "planned"]),
            _plan("elsewhere", plans.ACTIVE[0], ["a", "b"]),
            _plan("ended", "Failed", ["me", "gone"])],
    }
    discovery = ClusterDiscovery(None, "netsched", "app=agent", 9102, "me")
    monkeypatch.setattr(discovery, "_list", lambda path, *_, **__: lists[path])
    discovery._read_demand()
    assert discovery._demand == {"gang", "store", "planned"}
