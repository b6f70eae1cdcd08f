from dataclasses import replace
from datetime import timedelta

import pytest

from netsched.api import conditions as c
from netsched.api.labels import RACK_LABEL
from netsched.api.plans import Eviction
from netsched.api.topology import Topology
from netsched.operator.gpujobs.reconcile import create_backoff, created_events, reconcile
from netsched.operator.pod_view import PodView
from netsched.testing.builders import LABELS, NOW, FitStub, ago, job, stamp
from netsched.testing.builders import pod_view as pod

GANG = job()  # 2 replicas of 4 GPUs, gang on
ADMITTED = {"phase": "Scheduling",
            "conditions": [{"type": "Admitted", "status": "True", "reason": "GangReleased", "message": "m"}]}
STARTED = ADMITTED | {"phase": "Running", "startTime": ago(600)}


def run(j=GANG, status=None, pods=(), fit=None, now=NOW):
    return reconcile(j, status or {}, list(pods), LABELS, fit or FitStub(), now)


def cond(actions, type_):
    return c.find(actions.status["conditions"], type_)


def reasons(actions) -> list[str]:
    return [reason for _, reason, _ in actions.events]


def test_first_tick_creates_every_replica_behind_the_gate_and_does_not_ask_for_room():
    fit = FitStub()
    out = run(fit=fit)
    assert out.create == [(0, 0, True), (1, 0, True)]
    assert out.ungate == [] and out.delete == [] and out.record is False and fit.calls == 0
    assert "PodsCreated" not in reasons(out)  # posted by the handler, once the pods are made
    assert out.status["phase"] == "Pending" and out.status["reason"] == "WaitingForCapacity"
    assert (out.status["gpus"], out.status["observedGeneration"], out.status["failures"]) == (8, 3, 0)
    assert cond(out, "Admitted") is None


def test_no_admission_while_a_pod_is_missing():
    fit = FitStub()
    out = run(pods=[pod(0, gated=True)], fit=fit)
    assert out.create == [(1, 0, True)] and out.ungate == [] and fit.calls == 0


def test_a_gang_that_does_not_fit_waits_and_says_why_once():
    pods = [pod(0, gated=True), pod(1, gated=True)]
    fit = FitStub(1, 2, "needs 2 replica(s) of 4 GPUs; 1 fit now")
    first = run(pods=pods, fit=fit)
    assert first.ungate == [] and first.create == []
    admitted = cond(first, "Admitted")
    assert (admitted["status"], admitted["reason"], admitted["message"]) == \
        ("False", "WaitingForCapacity", "needs 2 replica(s) of 4 GPUs; 1 fit now")
    assert ("Normal", "WaitingForCapacity", "needs 2 replica(s) of 4 GPUs; 1 fit now") in first.events
    assert ("Normal", "Pending", "GPUJob is Pending: needs 2 replica(s) of 4 GPUs; 1 fit now") in first.events
    second = run(pods=pods, status=first.status, fit=fit)
    assert second.events == [] and second.ungate == [] and fit.calls == 2
    assert cond(second, "Admitted") == admitted
    assert second.status["phase"] == "Pending"


def test_a_waiting_gang_is_not_schedulable_for_a_constant_reason_until_it_fits():
    pods = [pod(0, gated=True), pod(1, gated=True)]
    why = ("needs 2 replica(s) of 4 GPUs in one rack; 1 fit now; "
           "all 2 would fit now with maxPeerDistance: zone")
    waiting = run(pods=pods, fit=FitStub(1, 2, why, "NoDomainLargeEnough"))
    schedulable = cond(waiting, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == \
        ("False", "NoDomainLargeEnough", why)
    assert [e for e in waiting.events if e[1] == "Schedulable"] == []  # Admitted's Event says it once
    released = run(pods=pods, status=waiting.status, fit=FitStub(2, 2, "2 of 2 fit"))
    fits = cond(released, "Schedulable")
    assert (fits["status"], fits["reason"]) == ("True", "Fits")


def test_when_the_gang_fits_every_gated_pod_is_released():
    pods = [pod(0, gated=True), pod(1, gated=True)]
    waiting = run(pods=pods, fit=FitStub(1, 2, "1 fit")).status
    out = run(pods=pods, status=waiting, fit=FitStub(2, 2, "2 of 2 fit"))
    assert out.ungate == ["train-0", "train-1"]
    admitted = cond(out, "Admitted")
    assert (admitted["status"], admitted["reason"], admitted["message"]) == \
        ("True", "GangReleased", "released the gang: 2 of 2 fit")
    assert ("Normal", "GangReleased", "released the gang: 2 of 2 fit") in out.events
    assert out.status["phase"] == "Scheduling" and out.status["reason"] == "WaitingForPods"


def test_without_gang_scheduling_pods_are_created_ungated_and_room_is_never_checked():
    fit = FitStub(0, 2, "nothing fits")
    out = run(job(gang={"enabled": False}), fit=fit)
    assert out.create == [(0, 0, False), (1, 0, False)] and fit.calls == 0
    admitted = cond(out, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("True", "NotGangScheduled")
    assert out.status["phase"] == "Scheduling"


def test_a_restarted_operator_that_finds_the_gate_lifted_treats_the_gang_as_admitted():
    fit = FitStub(0, 2, "nothing fits")
    out = run(pods=[pod(0, node="a1-0"), pod(1)], fit=fit)
    assert fit.calls == 0 and out.ungate == [] and out.create == []
    admitted = cond(out, "Admitted")
    assert (admitted["status"], admitted["reason"], admitted["message"]) == \
        ("True", "GangReleased", "the gang's gate is lifted")
    assert "GangReleased" not in reasons(out)


@pytest.mark.parametrize("phases, min_available, phase, ready", [
    pytest.param(["Pending"] * 3, None, "Scheduling", "False", id="none-running"),
    pytest.param(["Running", "Running", "Pending"], None, "Scheduling", "False", id="below-replicas"),
    pytest.param(["Running", "Pending", "Pending"], 2, "Scheduling", "False", id="below-min-available"),
    pytest.param(["Running", "Running", "Pending"], 2, "Running", "True", id="min-available-running"),
    pytest.param(["Running", "Succeeded", "Pending"], 2, "Running", "True", id="succeeded-count-too"),
    pytest.param(["Succeeded", "Succeeded", "Pending"], 2, "Scheduling", "False", id="needs-one-running"),
    pytest.param(["Running"] * 3, None, "Running", "True", id="all-running"),
])
def test_phase_follows_min_available(phases, min_available, phase, ready):
    j = job(replicas=3, gang={"minAvailable": min_available} if min_available else None)
    out = run(j, ADMITTED, [pod(i, phase=p, node="a1-0") for i, p in enumerate(phases)])
    assert out.status["phase"] == phase
    assert cond(out, "PodsReady")["status"] == ready
    assert ("startTime" in out.status) is (phase == "Running")
    assert out.status["ready"] == f"{phases.count('Running')}/3"
    assert out.status["replicasSucceeded"] == phases.count("Succeeded")


def test_start_time_is_set_once():
    pods = [pod(0, phase="Running", node="a1-0"), pod(1, phase="Running", node="a1-1")]
    first = run(status=ADMITTED, pods=pods)
    assert first.status["startTime"] == "2025-01-01T12:00:00Z"
    running = "GPUJob is Running: 2 of 2 replicas running (minAvailable 2)"
    assert ("Normal", "Running", running) in first.events
    later = run(status=first.status, pods=pods, now=NOW + timedelta(hours=1))
    assert later.status["startTime"] == "2025-01-01T12:00:00Z" and later.events == []


def test_all_replicas_succeeded():
    pods = [pod(0, phase="Succeeded", node="a1-0"), pod(1, phase="Succeeded", node="a1-1")]
    out = run(status=STARTED, pods=pods)
    assert (out.status["phase"], out.status["reason"]) == ("Succeeded", "AllReplicasSucceeded")
    assert out.status["completionTime"] == stamp(NOW) and out.record is True
    assert cond(out, "Succeeded")["status"] == "True"
    assert out.events == [("Normal", "AllReplicasSucceeded", "GPUJob succeeded: all 2 replicas succeeded")]
    assert out.create == [] and out.delete == []


def test_a_failed_pod_is_replaced_by_its_next_attempt():
    pods = [pod(0, phase="Running", node="a1-0"),
            pod(1, phase="Failed", node="a1-1", message="OOMKilled")]
    out = run(status=STARTED, pods=pods)
    assert out.create == [(1, 1, False)]
    failed = "pod train-1 (replica 1) failed: OOMKilled; starting attempt 1"
    assert ("Warning", "PodFailed", failed) in out.events
    assert out.status["failures"] == 1 and out.status["phase"] == "Scheduling"


def test_only_the_newest_attempt_counts():
    pods = [pod(0, phase="Running", node="a1-0"), pod(1, 0, phase="Failed"),
            pod(1, 2, phase="Failed"), pod(1, 1, phase="Failed")]
    out = run(status=STARTED, pods=pods)
    assert out.create == [(1, 3, False)] and out.status["failures"] == 3  # backoffLimit 3 is not exceeded


def test_more_failures_than_the_backoff_limit_fail_the_job_and_stop_its_pods():
    pods = [pod(0, phase="Failed"), pod(0, 1, phase="Failed", message="exit 1"), pod(1, phase="Running"),
            pod(2, phase="Pending", deleting=True)]
    out = run(job(replicas=3, backoffLimit=1), STARTED, pods)
    assert (out.status["phase"], out.status["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert out.delete == ["train-1"] and out.create == [] and out.record is True
    assert out.events == [("Warning", "BackoffLimitExceeded", "GPUJob failed: 2 pod failures exceed "
                           "spec.backoffLimit 1; last: train-0-a1: exit 1")]


def test_failures_equal_to_the_backoff_limit_are_still_retried():
    out = run(job(backoffLimit=1), STARTED, [pod(0, phase="Failed"), pod(1, phase="Running")])
    assert out.status["phase"] != "Failed" and out.create == [(0, 1, False)]


@pytest.mark.parametrize("ran, failed", [
    pytest.param(601, True, id="over"),
    pytest.param(600, False, id="exactly-the-limit"),
])
def test_max_runtime(ran, failed):
    pods = [pod(0, phase="Running", node="a1-0"), pod(1, phase="Succeeded", node="a1-1")]
    out = run(job(maxRuntimeSeconds=600), STARTED | {"startTime": ago(ran)}, pods)
    assert (out.status["phase"] == "Failed") is failed
    if failed:
        assert out.status["reason"] == "MaxRuntimeExceeded" and out.delete == ["train-0"] and out.record
        assert out.events == [("Warning", "MaxRuntimeExceeded", "GPUJob failed: ran 601 s, longer than "
                               "spec.maxRuntimeSeconds 600; its pods were stopped")]
    else:
        assert out.delete == [] and out.record is False


def test_scheduling_timeout_before_the_job_starts():
    pods = [pod(0, gated=True), pod(1, gated=True)]
    j = job(created=ago(120), gang={"schedulingTimeoutSeconds": 60})
    waiting = run(j, pods=pods, fit=FitStub(1, 2, "1 of 2 fit"), now=NOW - timedelta(seconds=90)).status
    assert waiting["phase"] == "Pending"
    out = run(j, waiting, pods)
    assert (out.status["phase"], out.status["reason"]) == ("Failed", "SchedulingTimeout")
    assert out.delete == ["train-0", "train-1"] and out.ungate == [] and out.record is True
    assert out.events == [("Warning", "SchedulingTimeout", "GPUJob failed: not running 60 s after creation "
                           "(spec.gang.schedulingTimeoutSeconds); 1 of 2 fit")]


def test_no_scheduling_timeout_once_started():
    j = job(created=ago(3600), gang={"schedulingTimeoutSeconds": 60})
    out = run(j, STARTED, [pod(0, phase="Running", node="a1-0"), pod(1, phase="Running", node="a1-1")])
    assert out.status["phase"] == "Running"


@pytest.mark.parametrize("recorded, record", [
    pytest.param(None, True, id="not-recorded"),
    pytest.param("False", True, id="recorded-false"),
    pytest.param("True", False, id="recorded"),
])
def test_a_terminal_job_is_recorded_until_its_recorded_condition_is_true(recorded, record):
    conds = [{"type": "Failed", "status": "True", "reason": "MaxRuntimeExceeded"}]
    if recorded:
        conds.append({"type": "Recorded", "status": recorded, "reason": "RecordWritten"})
    status = {"phase": "Failed", "reason": "MaxRuntimeExceeded", "completionTime": ago(5),
              "conditions": conds}
    pods = [pod(0, phase="Running", node="a1-0"), pod(1, phase="Running", node="b1-0", deleting=True)]
    out = run(status=status, pods=pods, fit=FitStub(0, 2))
    assert out.record is record
    assert out.delete == ["train-0"] and out.create == [] and out.events == []
    assert out.status["phase"] == "Failed" and out.status["completionTime"] == ago(5)


def test_a_pod_deleted_by_hand_after_the_start_is_created_again():
    out = run(status=STARTED | {"podsCreated": 2}, pods=[pod(0, phase="Running", node="a1-0")])
    assert out.create == [(1, 0, False)] and out.status["podsCreated"] == 2


@pytest.mark.parametrize("known, recreated, first", [
    pytest.param(2, [1], 0, id="deleted"),
    pytest.param(1, [], 1, id="never-created-before-a-restart"),
])
def test_only_a_replica_that_had_a_pod_is_said_to_be_recreated(known, recreated, first):
    events = created_events(GANG, [(1, 0, True)], known)
    assert [m for r, m in events if r == "PodRecreated"] == \
        [f"replica {i} had no pod (deleted?); creating it again" for i in recreated]
    assert [m for r, m in events if r == "PodsCreated"] == \
        [f"created {first} pod(s) of 4 GPU(s) behind the gang gate until the whole gang fits"] * bool(first)


def test_a_status_written_before_pods_were_counted_counts_the_replicas_it_sees():
    assert run(status=STARTED, pods=[pod(1, phase="Running", node="a1-0")]).status["podsCreated"] == 2
    assert run().status["podsCreated"] == 0


REFUSED = {"phase": "Pending", "reason": "PodsRefused", "podsCreated": 0, "conditions": [
    {"type": "PodsReady", "status": "False", "reason": "PodsRefused", "message": "m"}]}


@pytest.mark.parametrize("retry_in, generation, creates", [
    pytest.param(30, 3, False, id="backing-off"),
    pytest.param(-1, 3, True, id="backoff-over"),
    pytest.param(30, 2, True, id="spec-changed-since"),
])
def test_a_refused_create_waits_for_its_backoff_or_a_new_spec(retry_in, generation, creates):
    status = REFUSED | {"podCreateBackoff": {"failures": 1, "generation": generation,
                                             "retryAt": stamp(NOW + timedelta(seconds=retry_in))}}
    out = run(status=status)
    assert bool(out.create) is creates and out.events == []
    if generation == GANG.generation:  # still the refused spec: the condition keeps saying why
        assert cond(out, "PodsReady")["reason"] == out.status["reason"] == "PodsRefused"
    else:
        assert out.status["podCreateBackoff"] is None  # deleted by the status merge patch


@pytest.mark.parametrize("permanent, delays", [
    pytest.param(True, [5, 10, 20, 40, 80, 160, 300, 300], id="refused"),
    pytest.param(False, [1, 2, 4, 8, 16, 30, 30, 30], id="no-answer"),
])
def test_the_create_backoff_doubles_up_to_its_cap(permanent, delays):
    backoff, seen = None, []
    for _ in delays:
        backoff = create_backoff(backoff, permanent, 3, NOW)
        seen.append(backoff["delaySeconds"])
    assert seen == delays and backoff["retryAt"] == stamp(NOW + timedelta(seconds=delays[-1]))
    assert create_backoff(backoff, permanent, 4, NOW)["failures"] == 1  # a new spec starts over


def test_placements_name_zone_and_rack_and_survive_the_pods():
    pods = [pod(1, phase="Running", node="b1-0"), pod(0, phase="Running", node="a2-0"),
            pod(2, phase="Pending"), pod(3, phase="Running", node="unknown")]
    out = run(job(replicas=4), STARTED, pods)
    assert out.status["placements"] == [
        {"replica": 0, "pod": "train-0", "node": "a2-0", "zone": "zone-a", "rack": "rack-a2",
         "domains": {"zone": "zone-a", "rack": "rack-a2"}},
        {"replica": 1, "pod": "train-1", "node": "b1-0", "zone": "zone-b", "rack": "rack-b1",
         "domains": {"zone": "zone-b", "rack": "rack-b1"}},
        {"replica": 3, "pod": "train-3", "node": "unknown", "zone": "", "rack": "", "domains": {}},
    ]
    done = run(job(replicas=4), out.status | {"phase": "Succeeded"}, [])
    assert done.status["placements"] == out.status["placements"]


def test_placements_record_the_domain_of_each_configured_level():
    levels = Topology.parse("block=example.com/block,subblock=example.com/subblock,host=example.com/host")
    labels = {"n0": {"example.com/block": "b1", "example.com/host": "h7", RACK_LABEL: "rack-x"}}
    out = reconcile(job(replicas=1), STARTED, [pod(0, phase="Running", node="n0")], labels, FitStub(),
                    now=NOW, topology=levels)
    assert out.status["placements"][0]["domains"] == {"block": "b1", "host": "h7"}  # no subblock label


@pytest.mark.parametrize("raw, view", [
    pytest.param({"metadata": {"name": "t-0", "labels": {"netsched.io/replica": "0"}}},
                 PodView("t-0", 0, 0, "Pending", None, False, False), id="bare"),
    pytest.param({"metadata": {"name": "t-1-a2", "deletionTimestamp": "x",
                               "labels": {"netsched.io/replica": "1", "netsched.io/attempt": "2"}},
                  "spec": {"nodeName": "a1-0", "schedulingGates": [{"name": "netsched.io/gang"}]},
                  "status": {"phase": "Failed", "reason": "Evicted"}},
                 PodView("t-1-a2", 1, 2, "Failed", "a1-0", True, True, "Evicted"),
                 id="gated-deleting-evicted"),
    pytest.param({"metadata": {"name": "t-0", "labels": {"netsched.io/replica": "0"}},
                  "spec": {"schedulingGates": [{"name": "other.io/gate"}]},
                  "status": {"phase": "Failed", "containerStatuses": [
                      {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}},
                 PodView("t-0", 0, 0, "Failed", None, False, False,
                         "container main exited with code 137 (OOMKilled)", ("other.io/gate",)),
                 id="other-gate-container-exit"),
])
def test_pod_view_of_a_pod(raw, view):
    assert PodView.of(raw) == view


@pytest.mark.parametrize("status", [
    pytest.param({}, id="restart-between-two-ungate-patches"),
    pytest.param(ADMITTED, id="ungate-patch-failed-status-written"),
])
def test_an_admitted_gang_releases_a_pod_left_behind_the_gate(status):
    out = run(status=status, pods=[pod(0, phase="Running", node="a1-0"), pod(1, gated=True)])
    assert out.ungate == ["train-1"]


def test_a_gang_a_packing_plan_released_says_so_in_its_condition_and_an_event():
    released = replace(pod(0, node="a1-0"), released_by="pack-1234")
    fit = FitStub(0, 2, "nothing fits")
    out = run(pods=[released, replace(pod(1), released_by="pack-1234")], fit=fit)
    assert out.ungate == [] and fit.calls == 0  # released: room is not checked again
    admitted = cond(out, "Admitted")
    message = "PackingPlan pack-1234 made room and lifted the gang's gate"
    assert (admitted["status"], admitted["reason"], admitted["message"]) == \
        ("True", "ReleasedByPackingPlan", message)
    assert ("Normal", "ReleasedByPackingPlan", message) in out.events


def test_a_predicted_start_is_dropped_once_the_gang_is_released_and_both_predictions_once_it_ends():
    predicted = {"predictedStartTime": stamp(NOW), "predictedCompletionTime": stamp(NOW + timedelta(hours=1)),
                 "predictedAfter": ["ml/big"]}
    gated = [pod(0, gated=True), pod(1, gated=True)]
    waiting = run(pods=gated, status=predicted, fit=FitStub(1, 2))
    assert waiting.status["predictedStartTime"] == predicted["predictedStartTime"]
    released = run(pods=gated, status=predicted)
    assert released.status["predictedStartTime"] is None  # a merge patch deletes it
    assert released.status["predictedAfter"] is None
    assert released.status["predictedCompletionTime"] == predicted["predictedCompletionTime"]
    again = run(pods=[pod(0, phase="Running", node="a1-0"), pod(1, phase="Running", node="a1-0")],
                status={k: v for k, v in released.status.items() if v is not None})
    assert "predictedStartTime" not in again.status  # nothing to delete: no patch every tick
    done = run(pods=[pod(0, phase="Succeeded"), pod(1, phase="Succeeded")], status=STARTED | predicted)
    assert done.status["predictedStartTime"] is None and done.status["predictedCompletionTime"] is None


EVICTION = Eviction("pack-7", ("train-0", "train-1"), "GPUJob ml/urgent", "high", 1000)
SAID = ("PackingPlan pack-7 evicted train-0, train-1 to make room for GPUJob ml/urgent "
        "(priority high, 1000); the job waits for room again")


@pytest.mark.parametrize("pods", [
    pytest.param([], id="pods-gone"),
    pytest.param([pod(0, phase="Running", node="a1-0", deleting=True),
                  pod(1, phase="Running", node="a1-1", deleting=True)], id="pods-going"),
    pytest.param([pod(0, phase="Running", node="a1-0"), pod(1, phase="Running", node="a1-1")],
                 id="told-before-evicted"),
])
def test_an_evicted_gang_is_told_who_evicted_it_for_whom_once_and_waits_for_room_again(pods):
    evicted = replace(GANG, evicted_by=EVICTION)
    before = STARTED | {"predictedCompletionTime": ago(-300), "podsCreated": 2, "conditions": [
        *STARTED["conditions"],
        {"type": "Schedulable", "status": "True", "reason": "Fits", "message": "64 free GPUs"}]}
    fit = FitStub(0, 2, "needs 2 replica(s) of 4 GPUs; 0 fit now", "InsufficientResources")
    out = run(evicted, before, pods, fit=fit)
    assert ("Warning", "EvictedByPackingPlan", SAID) in out.events
    preempted = cond(out, "Preempted")
    assert (preempted["status"], preempted["reason"], preempted["message"]) == \
        ("True", "EvictedByPackingPlan", SAID)
    assert out.status["predictedCompletionTime"] is None  # the run it predicted was cut short
    assert cond(out, "Schedulable")["reason"] != "Fits" and cond(out, "Admitted")["status"] == "False"
    assert out.status["phase"] == "Pending" and out.ungate == []
    assert out.create == ([(0, 0, True), (1, 0, True)] if not pods else [])  # back behind the gate
    again = run(evicted, out.status, [pod(0, gated=True), pod(1, gated=True)], fit=fit)
    assert "EvictedByPackingPlan" not in reasons(again) and again.status["phase"] == "Pending"
    assert cond(again, "Preempted")["message"] == SAID
    assert cond(again, "Schedulable")["reason"] == "InsufficientResources"  # worked out anew


def test_a_job_whose_pods_are_refused_for_good_is_blocked_without_predicted_times_until_they_are_made():
    refused = REFUSED | {"phase": "Blocked", "reason": "PodsRefused", "predictedStartTime": ago(60),
                         "predictedCompletionTime": ago(30),
                         "podCreateBackoff": {"failures": 1, "generation": 3, "permanent": True,
                                              "retryAt": stamp(NOW + timedelta(seconds=30))}}
    out = run(status=refused)
    assert (out.status["phase"], out.status["reason"]) == ("Blocked", "PodsRefused") and out.events == []
    assert out.status["predictedStartTime"] is None and out.status["predictedCompletionTime"] is None
    assert cond(out, "PodsReady")["message"] == "m"  # the API server's words stay
    made = run(status=out.status | {"podCreateBackoff": None, "podsCreated": 2},
               pods=[pod(0, gated=True), pod(1, gated=True)],
               fit=FitStub(0, 2, "no room", "InsufficientResources"))
    assert made.status["phase"] == "Pending"
    assert ("Normal", "Pending", "GPUJob is Pending: no room") in made.events


def test_an_evicted_job_no_longer_shows_the_placement_of_its_evicted_pods():
    evicted = replace(GANG, evicted_by=EVICTION)
    placed = [{"replica": i, "pod": f"train-{i}", "node": "a1-0", "zone": "zone-a", "rack": "rack-a1",
               "domains": {}} for i in range(2)]
    fit = FitStub(0, 2, "needs 2 replica(s) of 4 GPUs; 0 fit now", "InsufficientResources")
    out = run(evicted, STARTED | {"placements": placed, "podsCreated": 2}, [], fit=fit)
    assert out.status["phase"] == "Pending" and out.status["placements"] == []
    again = run(evicted, out.status, [pod(0, gated=True), pod(1, gated=True)], fit=fit)
    assert again.status["placements"] == []
