"""A finished GPUJob's training record carries the links its replicas had, measured end to end:
telemetry agents on a shaped network, a real Prometheus, and the dev-cluster's operator reading
it (`--prometheus-url`) while the real kube-scheduler places the job on two KWOK nodes named
like the agents. Needs root (ip netns, tc)."""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request

import pytest
from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import RACK_LABEL
from netsched.datagen.testbed import Testbed, start_prometheus, stop
from netsched.devcluster.devcluster import OPERATOR
from netsched.devcluster.processes import free_port
from netsched.devcluster.wait import poll
from netsched.records.reader import read_rows
from netsched.telemetry.prometheus import PrometheusFeed
from netsched.telemetry.store import TelemetryStore
from netsched.testing.builders import make_gpujob
from netsched.training.record_rows import record_row

SITES = ("x", "y", "data")
RATES = {("x", "y"): 20, ("x", "data"): 80, ("y", "data"): 10}  # Mbit/s, both directions


class Bed:
    """Agents for two of the cluster's nodes and a data endpoint, and Prometheus scraping them."""

    def __init__(self, tmp, nodes: dict[str, str]):  # site -> node name
        self.nodes = nodes
        self.net = Testbed(SITES, RATES, prefix="nsjt", subnet="10.77.12").up()
        self.data = f"{self.net.ip('data')}:9102"
        self.prometheus = None
        try:
            for site in SITES:
                self._agent(site, tmp)
            self.port = free_port()
            targets = [f"{self.net.ip(s)}:9101" for s in SITES]
            self.prometheus = start_prometheus(targets, tmp / "prometheus", self.port)
        except BaseException:
            self.close()
            raise
        self.url = f"http://127.0.0.1:{self.port}"

    def _agent(self, site: str, tmp) -> None:
        name = self.nodes.get(site, site)
        peers = [f"--peer={n}={self.net.ip(s)}:9102" for s, n in self.nodes.items() if s != site]
        extra = [*peers, f"--data={self.data}"] if site in self.nodes else []
        argv = [sys.executable, "-m", "netsched", "agent", f"--node-name={name}", "--port=9101",
                "--probe-port=9102", "--interval=2", "--budget-bytes-per-minute=536870912", *extra]
        self.net.start(site, argv, tmp / f"agent-{site}.log")

    def rate(self, node: str, other: str) -> float:
        site = {n: s for s, n in self.nodes.items()}
        return self.net.rate(site.get(node, "data"), site.get(other, "data"))

    def measured_mbps(self, since: float, src: str | None, dst: str) -> list[float]:
        """Every bandwidth Prometheus held for src -> dst (any src when None) since `since`, in Mbit/s."""
        selector = f'dst="{dst}"' + (f',src="{src}"' if src else "")
        query = {"query": f"netsched_link_bandwidth_bytes_per_second{{{selector}}}",
                 "start": since, "end": time.time(), "step": 1}
        with urllib.request.urlopen(f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(query)}",
                                    timeout=10) as resp:
            result = json.load(resp)["data"]["result"]
        return [float(v) * 8 / 1e6 for series in result for _, v in series["values"]]

    def close(self) -> None:
        if self.prometheus:
            stop(self.prometheus)
        self.net.down()


@pytest.fixture(scope="module")
def bed(dev_cluster, core, tmp_path_factory):
    """The bed, and the dev-cluster's operator reading its Prometheus (back to plain after the module)."""
    rack: dict[str, list[str]] = {}
    for node in core.list_node().items:
        rack.setdefault(node.metadata.labels[RACK_LABEL], []).append(node.metadata.name)
    pair = sorted(next(names for names in rack.values() if len(names) >= 2))[:2]
    b = Bed(tmp_path_factory.mktemp("job-telemetry"), dict(zip(("x", "y"), pair, strict=True)))
    try:
        store = TelemetryStore()
        # every link probed three times (the first only sizes the next) and in Prometheus
        poll(lambda: PrometheusFeed(b.url, store).refresh() >= 4 and all(
            (link := store.link(src, dst)) is not None and link.bandwidth_mbps > 0
            for src in pair for dst in (*pair, b.data) if dst != src), 90, "Prometheus to hold every link")
        dev_cluster.restart(OPERATOR, (f"--prometheus-url={b.url}",))
        yield b
    finally:
        b.close()
        dev_cluster.restart(OPERATOR)


def test_a_finished_jobs_record_holds_the_links_its_last_replica_had(dev_cluster, bed, namespace):
    jobs = client.CustomObjectsApi(dev_cluster.api_client())
    hosts = {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(bed.nodes.values())}]}
    job = make_gpujob("linked", replicas=2, gpus=8, duration="6s", manifest=True,
                      dataSources=[{"name": "shards", "kind": "endpoint", "endpoint": bed.data}])
    job["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [hosts]}}}
    since = time.time() - 300  # the links as they were measured before and while the job ran
    created = jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, job)
    uid = created["metadata"]["uid"]
    record = poll(lambda: next((r for r in read_rows(dev_cluster.records_file) if r["uid"] == uid), None),
                  90, "the job's record")
    assert record["outcome"] == "Succeeded" and sorted(record["nodes"]) == sorted(bed.nodes.values())
    telemetry = record["telemetry"]
    assert telemetry, f"no telemetry in the record; the operator's log: {dev_cluster.log(OPERATOR)}"
    last, other = record["nodes"][-1], record["nodes"][0]
    # The record holds what the agents measured on these very links and the operator read from
    # Prometheus (a value of one of the link's series, not of another link). How close a measurement
    # comes to the shaped rate depends on how busy the machine is, so only its ceiling is checked here.
    peer = bed.measured_mbps(since, last, other) + bed.measured_mbps(since, other, last)
    assert any(v == pytest.approx(telemetry["peer_bw_mbps"], rel=1e-6) for v in peer), (telemetry, peer)
    data = bed.measured_mbps(since, None, bed.data)
    assert any(v == pytest.approx(telemetry["data_bw_mbps"], rel=1e-6) for v in data), (telemetry, data)
    assert 0 < telemetry["peer_bw_mbps"] <= 1.25 * bed.rate(last, other), telemetry
    assert 0 < telemetry["data_bw_mbps"] <= 1.25 * bed.rate(last, bed.data), telemetry
    assert 0 < telemetry["peer_rtt_ms"] < 50 and 0 < telemetry["data_rtt_ms"] < 50
    assert 0 <= telemetry["nic_util"] <= 1
    row = record_row(record)  # and the model's training row reads them as its network features
    assert row["node"] == last and row["peer_bw_mbps"] == telemetry["peer_bw_mbps"]
    assert row["data_bw_mbps"] == telemetry["data_bw_mbps"]
