"""The watch process: it relays what the cache reads, only when that changes, and the server applies it."""

from __future__ import annotations

import copy
import io
import sys
import time

import orjson

from netsched.extender.read_model import ReadModel, essentials
from netsched.extender.watcher import Relay, WatchProcess
from netsched.testing.builders import Clock
from netsched.testing.extender import CLUSTER, node, pod
from netsched.testing.kube import CacheSpy


def lines(out: io.BytesIO) -> list[list]:
    found = [orjson.loads(line) for line in out.getvalue().splitlines()]
    out.seek(0)
    out.truncate()
    return found


def heartbeat(n: dict, version: str) -> dict:
    beat = copy.deepcopy(n)
    beat["metadata"] |= {"resourceVersion": version, "managedFields": [{"manager": "kwok"}]}
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": version}]
    return beat


def test_heartbeats_reach_the_server_only_as_a_count_once_a_second():
    out, clock = io.BytesIO(), Clock()
    relay = Relay(out, clock)
    relay.replace("nodes", CLUSTER)
    assert [m[:2] for m in lines(out)] == [["replace", "nodes"]]
    for k in range(50):  # 50 heartbeats within the same second after the listing: nothing to write
        relay.apply("nodes", "MODIFIED", heartbeat(CLUSTER[0], str(k)))
    assert lines(out) == []
    clock.now += 1.0
    relay.apply("nodes", "MODIFIED", heartbeat(CLUSTER[1], "51"))
    assert lines(out) == [["heard", "nodes", 51]]
    relabelled = node("a1-0", rack="rack-a9")
    relay.apply("nodes", "MODIFIED", relabelled)  # what a request reads did change
    assert lines(out) == [["apply", "nodes", "MODIFIED", essentials("nodes", relabelled)]]
    relay.apply("nodes", "DELETED", relabelled)
    assert lines(out)[0][:3] == ["apply", "nodes", "DELETED"]


def test_a_pod_is_relayed_when_created_bound_or_its_phase_changes_not_on_other_status_updates():
    out, clock = io.BytesIO(), Clock()
    relay = Relay(out, clock)
    relay.replace("pods", [])
    lines(out)
    waiting = pod("r0", job="train")
    relay.apply("pods", "ADDED", waiting)
    bound = copy.deepcopy(waiting)
    bound["spec"]["nodeName"] = "a1-0"
    relay.apply("pods", "MODIFIED", bound)
    running = copy.deepcopy(bound)
    running["status"] = {"phase": "Running", "podIP": "10.0.0.1", "conditions": [{"type": "Ready"}]}
    relay.apply("pods", "MODIFIED", running)  # only the phase is read: Pending -> Running is a change
    relay.apply("pods", "MODIFIED", running | {"status": running["status"] | {"podIP": "10.0.0.2"}})
    relay.apply("pods", "MODIFIED", running | {"metadata": running["metadata"] | {"resourceVersion": "7"}})
    sent = lines(out)
    assert [(m[0], m[2], m[3]["spec"]["nodeName"], m[3]["status"]["phase"]) for m in sent] == [
        ("apply", "ADDED", None, "Pending"), ("apply", "MODIFIED", "a1-0", "Pending"),
        ("apply", "MODIFIED", "a1-0", "Running")]
    clock.now += 1
    relay.heard("pods")
    assert lines(out) == [["heard", "pods", 2]]


def test_a_claim_is_relayed_when_its_allocation_changes_not_when_its_reservations_do():
    from netsched.extender.watcher import watcher_argv
    from netsched.testing.builders import make_resource_claim

    assert watcher_argv(None, ("gpu.nvidia.com",))[-1] == "--dra-gpu-driver=gpu.nvidia.com"
    assert not any("dra" in a for a in watcher_argv(None))
    out = io.BytesIO()
    relay = Relay(out, Clock())
    relay.replace("resourceclaims", [])
    lines(out)
    claim = make_resource_claim("c", "a1-0", range(2))
    relay.apply("resourceclaims", "ADDED", claim)
    reserved = copy.deepcopy(claim)
    reserved["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u"}]
    relay.apply("resourceclaims", "MODIFIED", reserved)
    assert [(m[0], m[2]) for m in lines(out)] == [("apply", "ADDED")]


def test_the_cache_fed_what_the_watcher_relays_reads_as_the_cache_fed_whole_objects():
    clock = Clock()
    pods = [pod("a", "a1-0", gpus=3, job="train", annotations={"netsched.io/replicas": "4"}, phase="Running",
                bound_at=clock.now), pod("b", "a2-0", gpus=1), pod("w", job="train")]
    pods[1]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1500m", "memory": "2Gi"}
    whole, relayed = ReadModel(clock=clock, wall=clock), ReadModel(clock=clock, wall=clock)
    out = io.BytesIO()
    relay = Relay(out, Clock())
    for cache in (whole, relayed):
        cache.replace("packingplans", [])
    whole.replace("nodes", CLUSTER)
    whole.replace("pods", pods)
    relay.replace("nodes", CLUSTER)
    relay.replace("pods", pods)
    feed = WatchProcess(relayed, [])
    for message in lines(out):
        feed._apply(message)
    for ns, job in (("ml", "train"), ("", None)):
        a, b = whole.snapshot(ns, job), relayed.snapshot(ns, job)
        assert a.table.names == b.table.names and a.peers == b.peers
        assert (a.free == b.free).all() and (a.requested == b.requested).all()
        assert (a.table.domains == b.table.domains).all() and a.table.gpu_labels == b.table.gpu_labels
        assert a.holders == b.holders and (a.held is None) == (b.held is None)
        assert a.held is None or (a.held == b.held).all()
    assert whole.snapshot("other").held is not None  # the job's hold, from the time of its binding


FAKE_WATCHER = """
import sys, orjson
for line in ([["replace", "nodes", []], ["absent", "packingplans"],
              ["apply", "pods", "MODIFIED", {"metadata": {"uid": "u1", "namespace": "ml", "name": "p"},
                                             "spec": {"nodeName": "a1-0", "containers": []},
                                             "status": {"phase": "Running"}}],
              ["heard", "nodes", 7]]):
    sys.stdout.buffer.write(orjson.dumps(line) + b"\\n")
"""


def test_the_server_applies_each_line_and_starts_a_watcher_that_exited_again():
    spy, events, counted = CacheSpy(), [], []
    feed = WatchProcess(spy, [sys.executable, "-c", FAKE_WATCHER],
                        lambda t, o: events.append((t, o["spec"]["nodeName"])),
                        lambda kind, what, n: counted.append((kind, what, n)), first_backoff=0.01)
    feed.start()
    deadline = time.monotonic() + 60
    while feed.starts < 3 and time.monotonic() < deadline:  # the second one's lines are all in by then
        time.sleep(0.05)
    feed.stop()
    once = [("replace", "nodes", []), ("absent", "packingplans"), ("MODIFIED", "pods", "p"),
            ("heard", "nodes")]
    assert feed.starts >= 2 and spy.log[:8] == once * 2  # it exited after its lines, and was started again
    assert events[:2] == [("MODIFIED", "a1-0")] * 2  # a binding reaches the explanation writer
    assert counted[:2] == [("pods", "changed", 1), ("nodes", "unchanged", 7)]


def test_a_line_the_server_cannot_apply_is_logged_and_the_watcher_started_afresh(caplog):
    spy = CacheSpy()
    feed = WatchProcess(spy, [sys.executable, "-c", "print('not json'); import time; time.sleep(60)"],
                        first_backoff=0.01)
    feed.start()
    deadline = time.monotonic() + 60
    while feed.starts < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    feed.stop()
    assert feed.starts >= 2 and spy.log == []
    assert "cannot apply" in caplog.text


def test_a_watcher_that_cannot_start_is_tried_again_after_a_backoff(caplog, tmp_path):
    feed = WatchProcess(CacheSpy(), [str(tmp_path / "no-such-python")], first_backoff=0.01)
    feed.start()
    deadline = time.monotonic() + 60
    while feed.starts < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    feed.stop()
    assert feed.starts >= 3 and "cannot start the watch process" in caplog.text
