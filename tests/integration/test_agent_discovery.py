"""The agent's discovery against a real API server (the dev-cluster's, KWOK nodes): peer agents with
their nodes' topology labels, and this node's demand: its gangs' nodes and their data. On an API error
the last lists are kept. (A PackingPlan's nodes as demand: tests/unit/telemetry/test_discovery_demand.py;
a plan made up here would be ended by the dev-cluster's operator before discovery could see it.)"""

from __future__ import annotations

from kubernetes import client

from netsched.api.labels import DATA_SOURCE, JOB_LABEL, RACK_LABEL, ZONE_LABEL
from netsched.devcluster.wait import poll
from netsched.telemetry.agent import Agent, ProbePlan
from netsched.telemetry.discovery import ClusterDiscovery
from netsched.telemetry.nic import NicMonitor
from netsched.telemetry.targets import Found
from netsched.testing.cluster import scratch_namespace

AGENT = {"app.kubernetes.io/component": "agent"}
SELECTOR = "app.kubernetes.io/component=agent"


def _pod(name: str, node: str, labels: dict, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "c", "image": "busybox"}]}}


def test_discovery_finds_peers_with_their_domains_and_this_nodes_demand(dev_cluster, core):
    nodes = sorted(n.metadata.name for n in core.list_node().items)[:4]
    me, peer, gang_peer, data_node = nodes
    with scratch_namespace(core, "agents") as ns:
        for node in (me, peer, gang_peer):  # agents on three nodes
            core.create_namespaced_pod(ns, _pod(f"agent-{node}", node, AGENT))
        core.create_namespaced_pod(ns, _pod("train-0", me, {JOB_LABEL: "train"},
                                            {DATA_SOURCE: f"node:{data_node}"}))
        core.create_namespaced_pod(ns, _pod("train-1", gang_peer, {JOB_LABEL: "train"}))
        core.create_namespaced_pod(ns, _pod("reader", me, {}, {DATA_SOURCE: "endpoint:10.9.9.9:9102"}))
        core.create_namespaced_pod(ns, _pod("elsewhere", peer, {JOB_LABEL: "other"}))  # not this node's
        poll(lambda: all(p.status.pod_ip and p.status.phase == "Running"
                         for p in core.list_namespaced_pod(ns, label_selector=SELECTOR).items),
             60, "the agents to run with addresses")

        now = [0.0]
        discovery = ClusterDiscovery(dev_cluster.api_client(), ns, SELECTOR, 9102, me, clock=lambda: now[0])

        def everything_seen() -> Found | None:
            # discovery lists from the API server's watch cache (resourceVersion=0), which may trail
            # the writes above for a moment: list again until it has caught up
            now[0] += 1000  # every list due again
            found = discovery()
            return found if (set(found.endpoints) == {peer, gang_peer, "10.9.9.9:9102"}
                             and found.demand == {gang_peer, data_node, "10.9.9.9:9102"}) else None

        found = poll(everything_seen, 60, "discovery to list the agents and the gang")
        assert all(port == 9102 and host for host, port in found.endpoints.values())
        assert set(found.labels) == {me, peer, gang_peer}  # the nodes with agents, this one too
        assert all(found.labels[n].get(ZONE_LABEL) and found.labels[n].get(RACK_LABEL) for n in found.labels)

        # the agent takes demand first, among what answers probes (no data node runs an agent)
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
