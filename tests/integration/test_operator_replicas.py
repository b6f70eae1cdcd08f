"""Operator replicas on one real control plane, electing their leader through a Lease: one acts (GPUJobs,
the forecast), all answer the admission webhook; when the leader is SIGKILLed the other takes over and
runs the next GPUJob, and in a rolling update a new replica stands by until the old leader stops and
gives the Lease up; a leader frozen (SIGSTOP) past the Lease's duration is replaced and, thawed, acts no
more."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.api import conditions as c
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import SCHEDULER_NAME
from netsched.devcluster import processes
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.wait import poll
from netsched.jobs.kinds.batch_job import BATCH_JOB
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import running
from netsched.testing.operators import Replica, lease_holder, operator_replicas

LEASE_SECONDS = 6  # short, so the takeover is seen soon; the chart's default is 15
LEASE = "netsched-operator"


@pytest.fixture(scope="module")
def dev_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    # no operator of the dev-cluster's own: the test runs its replicas
    cluster = DevCluster(directory=tmp_path_factory.mktemp("replicas-cluster"), nodes=4, run_operator=False,
                         progress=lambda _: None)
    with running(cluster):
        yield cluster


@pytest.fixture(scope="module")
def core(dev_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(dev_cluster.api_client())


def one_leader(cluster: DevCluster, replicas: list[Replica]) -> tuple[Replica, list[Replica]]:
    """The replica whose gauge says it leads and that holds the Lease, once exactly one does."""
    def look() -> tuple[Replica, list[Replica]] | None:
        alive = [r for r in replicas if r.process.alive()]
        leading = [r for r in alive if r.leads()]
        if len(leading) != 1 or lease_holder(cluster, LEASE) != leading[0].identity:
            return None
        return leading[0], [r for r in alive if r is not leading[0]]
    return poll(look, 60, "exactly one replica to lead and hold the Lease")


def lease_transitions(cluster: DevCluster) -> int:
    lease = client.CoordinationV1Api(cluster.api_client()).read_namespaced_lease(LEASE, "default")
    return int(lease.spec.lease_transitions or 0)


def run_job(custom, core, namespace: str, name: str) -> None:
    """A 2x4-GPU GPUJob, until Running."""
    body = make_gpujob(name, replicas=2, gpus=4, duration="600s", manifest=True,
                       workload={"expectedDurationSeconds": 600})  # a run time: the forecast has a finish
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    poll(lambda: (custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status")
                  or {}).get("phase") == "Running", 120, f"GPUJob {name} to run")


def pods_created_events(core, namespace: str, job: str) -> list:
    return core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={job},reason={c.PODS_CREATED}").items


def forecast_on(replica: Replica, namespace: str, job: str) -> float | None:
    series = f'netsched_gpujob_predicted_remaining_seconds{{gpujob="{job}",namespace="{namespace}"}}'
    return replica.metric(series)


def forecast_passes(leader: Replica, standby: Replica, namespace: str, job: str, passes: int = 3) -> list:
    """What the standby shows of the job's forecast while the leader forecasts it `passes` times over (its
    time left, written at each pass, moves): the standby has had as long to forecast it too."""
    seen, standby_shows = set(), []

    def look() -> bool:
        standby_shows.append(forecast_on(standby, namespace, job))
        seen.add(forecast_on(leader, namespace, job))
        return len(seen - {None}) > passes
    poll(look, 120, f"the leader to forecast {job} {passes} times over")
    return standby_shows


def job_pod(name: str) -> dict:
    """A pod of batch Job `name`, as its controller creates it: the webhook gates such pods."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{name}-0", "namespace": "default", "labels": {BATCH_JOB.name_labels[0]: name},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "u1",
                             "controller": True}]},
        "spec": {"schedulerName": SCHEDULER_NAME, "containers": [{"name": "main", "image": "trainer:1"}]}}


def test_one_replica_acts_all_admit_a_killed_leader_is_replaced_and_a_stopped_one_hands_over(
        dev_cluster, core, custom, namespace):
    cluster = dev_cluster
    args = (f"--lease-duration={LEASE_SECONDS}", "--forecast-interval=2")
    with operator_replicas(cluster, 2, *args) as replicas:
        leader, [standby] = one_leader(cluster, replicas.all)
        assert lease_transitions(cluster) == 1  # the first to start took it, the second never did
        assert "leads: the acting loops run here" in leader.log()
        poll(lambda: f"stands by: {leader.identity} leads" in standby.log(), 30,
             "the standby to say who leads")

        # the leader runs the job: its pods made once, its forecast the leader's alone
        run_job(custom, core, namespace, "first")
        assert len(pods_created_events(core, namespace, "first")) == 1
        assert sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items) == [
            "first-0", "first-1"]
        standby_forecasts = forecast_passes(leader, standby, namespace, "first")
        assert standby_forecasts == [None] * len(standby_forecasts)
        assert (leader.leads(), standby.leads()) == (True, False)

        # every replica serves the webhook
        for replica in replicas.all:
            answer = replica.admit(job_pod(f"gang-{replica.name}"))
            assert answer["allowed"] and answer["patch"] == [
                {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GANG_GATE}]}], replica.name
            assert replica.metric('netsched_webhook_requests_total{outcome="gated"}') == 1.0

        # a job deleted while both replicas' kopf run its timers goes
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "first")
        poll(lambda: not custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"],
             180, "GPUJob first to be deleted")

        # the leader SIGKILLed: the standby takes the Lease once it has gone unrenewed for its duration
        killed = time.monotonic()
        leader.kill()
        successor, _ = one_leader(cluster, replicas.all)
        took = time.monotonic() - killed
        assert successor is standby
        print(f"takeover {took:.1f} s after SIGKILL (lease {LEASE_SECONDS} s)")
        assert "leads: the acting loops run here" in successor.log()
        assert lease_transitions(cluster) == 2

        # and runs the next job
        run_job(custom, core, namespace, "second")
        assert len(pods_created_events(core, namespace, "second")) == 1
        assert sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items
                      if not p.metadata.deletion_timestamp) == ["second-0", "second-1"]
        poll(lambda: forecast_on(successor, namespace, "second") is not None, 60, "the new leader's forecast")

        # a rolling update: a new replica joins and stands by, the old leader stops (SIGTERM) and gives
        # the Lease up, and the new one leads without waiting for it to expire
        joined = replicas.add()
        poll(lambda: f"stands by: {successor.identity} leads" in joined.log(), 60,
             "the new replica to stand by")
        assert (successor.leads(), joined.leads(), lease_transitions(cluster)) == (True, False, 2)
        stopping = time.monotonic()
        processes.stop(successor.process.pid)
        assert "Lease default/netsched-operator given up" in successor.log()
        last, _ = one_leader(cluster, replicas.all)
        print(f"handover {time.monotonic() - stopping:.1f} s after SIGTERM")
        assert last is joined and lease_transitions(cluster) == 3


def test_a_frozen_leader_is_replaced_and_once_thawed_acts_no_more(dev_cluster, core, custom, namespace):
    """SIGSTOP stops a process without a word, as a hung node does; its monotonic clock runs on, so when it
    thaws it knows its renewal is too old before it acts, and finds the Lease held by another."""
    cluster = dev_cluster
    with operator_replicas(cluster, 2, f"--lease-duration={LEASE_SECONDS}") as replicas:
        leader, [standby] = one_leader(cluster, replicas.all)
        transitions = lease_transitions(cluster)
        frozen = time.monotonic()
        leader.pause()
        try:
            # a frozen leader cannot answer its /metrics: only the standby and the Lease are asked
            poll(lambda: standby.leads() and lease_holder(cluster, LEASE) == standby.identity, 60,
                 "the standby to take the Lease from the frozen leader")
            print(f"takeover {time.monotonic() - frozen:.1f} s after SIGSTOP (lease {LEASE_SECONDS} s)")
            run_job(custom, core, namespace, "while-frozen")
        finally:
            leader.resume()
        poll(lambda: f"stands by: {standby.identity} leads" in leader.log(), 60,
             "the thawed replica to stand by")
        assert (leader.leads(), standby.leads()) == (False, True)
        assert lease_transitions(cluster) == transitions + 1

        # the thawed replica makes nothing: each job's pods are made once, by the leader
        run_job(custom, core, namespace, "after-thaw")
        for job in ("while-frozen", "after-thaw"):
            assert len(pods_created_events(core, namespace, job)) == 1, job
        assert sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items) == [
            "after-thaw-0", "after-thaw-1", "while-frozen-0", "while-frozen-1"]
        assert lease_holder(cluster, LEASE) == standby.identity
