"""The agent's discovery against a real API server (the dev-cluster's, KWOK nodes): peer agents with
their nodes' topology labels, and this node's demand: its gangs' nodes, their data, the PackingPlans
that place a pod on it. On an API error the last lists are kept."""

from __future__ import annotations

from kubernetes import client

from netsched.api import plans
from netsched.api.labels import DATA_SOURCE, JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.devcluster.wait import poll
from netsched.telemetry.agent import Agent, ProbePlan
from netsched.telemetry.discovery import ClusterDiscovery
from netsched.telemetry.nic import NicMonitor
from netsched.testing.cluster import scratch_namespace

AGENT = {"app.kubernetes.io/component": "agent"}
SELECTOR = "app.kubernetes.io/component=agent"


def _pod(name: str, node: str, labels: dict, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "c", "image": "busybox"}]}}


def test_discovery_finds_peers_with_their_domains_and_this_nodes_demand(dev_cluster, core, custom):
    nodes = sorted(n.metadata.name for n in core.list_node().items)[:6]
    me, peer, gang_peer, data_node, plan_peer, _ = nodes
    with scratch_namespace(core, "agents") as ns:
        for node in (me, peer, gang_peer):  # agents on three nodes
            core.create_namespaced_pod(ns, _pod(f"agent-{node}", node, AGENT))
        core.create_namespaced_pod(ns, _pod("train-0", me, {JOB_LABEL: "train"},
                                            {DATA_SOURCE: f"node:{data_node}"}))
        core.create_namespaced_pod(ns, _pod("train-1", gang_peer, {JOB_LABEL: "train"}))
        core.create_namespaced_pod(ns, _pod("reader", me, {}, {DATA_SOURCE: "endpoint:10.9.9.9:9102"}))
        core.create_namespaced_pod(ns, _pod("elsewhere", peer, {JOB_LABEL: "other"}))  # not this node's
        custom.create_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL, {
            "apiVersion": f"{plans.GROUP}/{plans.VERSION}", "kind": plans.KIND,
            "metadata": {"name": f"p-{ns}"},
            "spec": {"reason": "test", "evictions": [], "moves": [], "placements": [
                {"pod": f"{ns}/w-0", "uid": "u0", "node": me},
                {"pod": f"{ns}/w-1", "uid": "u1", "node": plan_peer}]}})
        poll(lambda: all(p.status.pod_ip and p.status.phase == "Running"
                         for p in core.list_namespaced_pod(ns, label_selector=SELECTOR).items),
             60, "the agents to run with addresses")

        now = [0.0]
        discovery = ClusterDiscovery(dev_cluster.api_client(), ns, SELECTOR, 9102, me, clock=lambda: now[0])
        found = discovery()
        assert set(found.endpoints) == {peer, gang_peer, "10.9.9.9:9102"}
        assert all(port == 9102 and host for host, port in found.endpoints.values())
        assert set(found.labels) == {me, peer, gang_peer}  # the nodes with agents, this one too
        assert all(found.labels[n].get(ZONE_LABEL) and found.labels[n].get(RACK_LABEL) for n in found.labels)
        assert found.demand == {gang_peer, data_node, "10.9.9.9:9102", plan_peer}

        # the agent takes demand first, among what answers probes (no data node or plan node runs an agent)
        quiet = NicMonitor(read=dict, speed=lambda _: None)
        agent = Agent(me, discovery, ProbePlan(peers_per_round=2), quiet)
        chosen = [name for name, _ in agent.next_targets()]
        assert chosen[0] in {gang_peer, "10.9.9.9:9102"}
        assert set(chosen) <= set(found.endpoints)

        # the API server unreachable: the last lists stay
        nowhere = client.Configuration()
        nowhere.host = "http://127.0.0.1:1"  # nobody listens: every list fails
        discovery.api = client.ApiClient(nowhere)
        now[0] += 1000
        assert discovery() == found
