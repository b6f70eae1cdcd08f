"""`netsched agent`: the settings of one node's telemetry agent, its start and its entry in the CLI."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from netsched.api.settings import PORT, SECONDS, number, setting, topology_setting
from netsched.api.subcommand import Command
from netsched.api.topology import Topology

CHART_DISCOVERY = "the chart finds the agents as its own pods: the release's namespace and component label"
NOT_SET = "the chart keeps the default"
IN_CLUSTER = "in a cluster the pod's ServiceAccount is used"


@dataclass(frozen=True)
class AgentSettings:
    node_name: str | None = setting(flag="--node-name", fixed="the chart passes the pod's node name",
                                    help="the node this agent measures from (default: $NODE_NAME)")
    host: str = setting("0.0.0.0", flag="--host", fixed="hostNetwork: it listens on every node address",
                        help="address to listen on (default 0.0.0.0)")
    port: int = setting(9101, flag="--port", parse=PORT, helm="agent.port",
                        help="HTTP: /metrics, /matrix, /healthz (default 9101)")
    probe_port: int = setting(9102, flag="--probe-port", parse=PORT, helm="agent.probePort",
                              help="TCP port answering probes (default 9102)")
    peer: tuple[str, ...] = setting((), flag="--peer", metavar="NODE=HOST:PORT", fixed=CHART_DISCOVERY,
                                    help="a peer agent to probe (repeatable)")
    data: tuple[str, ...] = setting(
        (), flag="--data", metavar="HOST:PORT", fixed=NOT_SET,
        help="a data endpoint to probe; it must answer probes (another agent's probe port)")
    discover_namespace: str | None = setting(
        flag="--discover-namespace", fixed=CHART_DISCOVERY,
        help="find peer agents as pods in this namespace (needs the API)")
    discover_selector: str = setting(
        "app.kubernetes.io/component=agent", flag="--discover-selector", fixed=CHART_DISCOVERY,
        help="label selector of the agent pods (default app.kubernetes.io/component=agent)")
    kubeconfig: str | None = setting(flag="--kubeconfig", fixed=IN_CLUSTER,
                                     help="for discovery (default: in-cluster, then ~/.kube/config)")
    interval: float = setting(30.0, flag="--interval", metavar="SECONDS", parse=SECONDS,
                              helm="agent.interval",
                              help="seconds between probe rounds, jittered x0.8-1.2 (default 30)")
    peers_per_round: int = setting(8, flag="--peers-per-round", parse=number(at_least=1, kind=int),
                                   fixed=NOT_SET, help="targets probed per round (default 8)")
    budget_bytes_per_minute: int = setting(
        64 * 1024 * 1024, flag="--budget-bytes-per-minute", parse=number(at_least=0, kind=int),
        helm="agent.budgetBytesPerMinute",
        help="cap on bandwidth-probe bytes sent per minute (default 64 MiB)")
    max_age: float = setting(
        120.0, flag="--max-age", metavar="SECONDS", parse=SECONDS, helm="extender.telemetry.maxAgeSeconds",
        help="how long the extender uses a measurement: each domain pair is sampled once in it (default 120)")
    max_links: int = setting(
        16, flag="--max-links", parse=number(at_least=1, kind=int), helm="agent.maxLinks",
        help="destinations whose link metrics are exported, the most recently measured (default 16)")
    nic_speed_mbps: float | None = setting(
        flag="--nic-speed-mbps", parse=number(above=0), fixed=NOT_SET, metavar="MBPS",
        help="this node's NIC link speed, where the driver reports none or a wrong one (virtual NICs); "
             "default: /sys/class/net/<interface towards the peers>/speed")
    topology: Topology = topology_setting()


def main(settings: AgentSettings) -> int:
    from netsched.telemetry.agent import ProbePlan, run_agent
    from netsched.telemetry.discovery import BadTarget, ClusterDiscovery, static_targets, with_static
    from netsched.telemetry.nic import speed_towards

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    node = settings.node_name or os.environ.get("NODE_NAME")
    if not node:
        print("netsched: error: agent: --node-name (or $NODE_NAME) is required: the node it measures from",
              file=sys.stderr)
        return 2
    try:
        fixed = static_targets(list(settings.peer), list(settings.data))
    except BadTarget as exc:
        print(f"netsched: error: agent: {exc}", file=sys.stderr)
        return 2
    found = None
    if settings.discover_namespace:
        from netsched.api.connect import api_client

        found = ClusterDiscovery(api_client(settings.kubeconfig), settings.discover_namespace,
                                 settings.discover_selector, settings.probe_port, node)
    plan = ProbePlan(interval=settings.interval, peers_per_round=settings.peers_per_round,
                     budget_bytes_per_minute=settings.budget_bytes_per_minute, max_age=settings.max_age,
                     max_links=settings.max_links)
    speed = settings.nic_speed_mbps
    run_agent(node, with_static(found, fixed, list(settings.data)), settings.host, settings.port,
              settings.probe_port, plan, settings.topology,
              speed_towards if speed is None else lambda _host: speed)
    return 0


COMMAND = Command(
    "agent", "run the telemetry agent of one node", AgentSettings, main,
    "Probe RTT and bandwidth to peers and data endpoints on a bounded schedule and budget, read NIC "
    "counters, and serve /metrics, /matrix, /healthz.")
