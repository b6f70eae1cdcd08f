"""A gang that never fits: phase Blocked with reason NeverFits, one Warning per new message, no
predicted times; Pending again once the cluster grows; Failed after --never-fits-timeout if one is set."""

from __future__ import annotations

from datetime import timedelta

from netsched.api import conditions as c
from netsched.api.events import rfc3339
from netsched.operator.gpujobs.reconcile import reconcile
from netsched.testing.builders import LABELS, NOW, FitStub, ago, job
from netsched.testing.builders import pod_view as pod

GANG = job()  # 2 replicas of 4 GPUs
PODS = [pod(0, gated=True), pod(1, gated=True)]
FIX = "lower spec.replicas or spec.gang.minAvailable, or add nodes"
NEVER = f"never fits: needs 80 GPUs, the cluster has 64; {FIX}"
NEVER_FIT = FitStub(0, 2, NEVER, why=c.NEVER_FITS)
PREDICTED = {"predictedStartTime": ago(-60), "predictedAfter": ["ml/other"],
             "predictedCompletionTime": ago(-600)}


def run(status=None, fit=NEVER_FIT, now=NOW, timeout=0.0):
    return reconcile(GANG, status or {}, PODS, LABELS, fit, now, never_fits_timeout=timeout)


def blocked():
    return run({"phase": "Pending", **PREDICTED})


def test_a_gang_that_never_fits_is_blocked_with_a_warning_and_no_predicted_times():
    out = blocked()
    assert (out.status["phase"], out.status["reason"]) == ("Blocked", "NeverFits")
    for type_ in (c.SCHEDULABLE, c.ADMITTED):
        cond = c.find(out.status["conditions"], type_)
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "NeverFits", NEVER)
    assert out.events == [("Warning", "NeverFits", NEVER)]  # the Warning says it; no phase Event beside it
    assert all(out.status[k] is None for k in PREDICTED)  # a merge patch deletes them
    assert out.status["blockedSince"] == rfc3339(NOW)
    assert out.ungate == [] and out.delete == []


def test_the_warning_is_said_once_per_message():
    first = blocked()
    again = run(first.status, now=NOW + timedelta(seconds=5))
    assert again.events == [] and again.status["blockedSince"] == first.status["blockedSince"]
    other = f"never fits: needs 80 GPUs, the cluster has 72; {FIX}"
    grown = run(again.status, fit=FitStub(0, 2, other, why=c.NEVER_FITS))
    assert grown.events == [("Warning", "NeverFits", other)]


def test_once_the_cluster_could_hold_it_the_job_is_pending_again():
    first = blocked()
    waiting = run(first.status, fit=FitStub(1, 2, "needs 2 replica(s) of 4 GPUs; 1 fit now",
                                             why=c.INSUFFICIENT_RESOURCES))
    assert (waiting.status["phase"], waiting.status["reason"]) == ("Pending", "WaitingForCapacity")
    assert waiting.status["blockedSince"] is None
    assert ("Normal", "WaitingForCapacity", "needs 2 replica(s) of 4 GPUs; 1 fit now") in waiting.events
    released = run(first.status, fit=FitStub())
    assert released.ungate == ["train-0", "train-1"] and released.status["phase"] == "Scheduling"
    assert released.status["blockedSince"] is None


def test_without_a_timeout_it_stays_blocked():
    first = blocked()
    later = run(first.status, now=NOW + timedelta(days=30))
    assert later.status["phase"] == "Blocked" and later.delete == [] and not later.record


def test_after_the_timeout_it_fails_with_the_reason_and_its_pods_go():
    first = blocked()
    still = run(first.status, now=NOW + timedelta(seconds=3600), timeout=3600)
    assert still.status["phase"] == "Blocked"
    failed = run(still.status, now=NOW + timedelta(seconds=3601), timeout=3600)
    assert (failed.status["phase"], failed.status["reason"]) == ("Failed", "NeverFits")
    cond = c.find(failed.status["conditions"], c.FAILED)
    assert (cond["status"], cond["reason"]) == ("True", "NeverFits")
    assert cond["message"] == f"Blocked longer than the operator's --never-fits-timeout (3600 s); {NEVER}"
    assert failed.events == [("Warning", "NeverFits", f"GPUJob failed: {cond['message']}")]
    assert failed.delete == ["train-0", "train-1"] and failed.record


def test_the_timeout_counts_from_when_it_became_blocked_not_from_creation():
    first = run({"phase": "Pending"}, now=NOW + timedelta(days=2))
    assert run(first.status, now=NOW + timedelta(days=2, seconds=10), timeout=60).status["phase"] == "Blocked"
