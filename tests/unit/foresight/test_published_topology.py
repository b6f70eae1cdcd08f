"""whatif and why read the topology levels the cluster publishes (the ConfigMap the chart and the
dev-cluster write beside the operator's --topology), and fall back to netsched's levels with a note that
says why and how to say them."""

from __future__ import annotations

import pytest

from netsched.api.topology import DEFAULT, PRESETS, Topology
from netsched.foresight.published_topology import published
from netsched.testing.kube import ApiServer


def test_the_published_levels_are_the_ones_used():
    api = ApiServer(200, {"data": {"topology": "gke"}})
    assert published(api, "netsched-system") == (Topology(PRESETS["gke"]), None)
    [(method, url, _)] = api.requests
    assert method == "GET" and url.endswith("/api/v1/namespaces/netsched-system/configmaps/netsched-topology")


@pytest.mark.parametrize(("status", "body", "said"), [
    (404, {"message": "not found"}, "ConfigMap ns/netsched-topology not found (is netsched installed in "
                                    "another namespace? set $NETSCHED_NAMESPACE)"),
    (403, {"message": "forbidden"}, "ConfigMap ns/netsched-topology not readable with your permissions"),
    (200, {"data": {"topology": "rack="}}, "ConfigMap ns/netsched-topology holds no topology (topology "
                                           "level 'rack='"),
], ids=["missing", "forbidden", "garbage"])
def test_without_published_levels_netscheds_are_assumed_and_said(status, body, said):
    topology, note = published(ApiServer(status, body), "ns")
    assert topology == DEFAULT
    assert note is not None and note.startswith(f"the cluster's topology levels: {said}")
    assert note.endswith("assumed netsched's levels (zone, rack); give --topology or set $NETSCHED_TOPOLOGY "
                         "to the operator's --topology")
