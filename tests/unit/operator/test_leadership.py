"""The operator replicas' election through a Lease: the decision, and replicas taking turns on a fake API
server with a hand-moved clock."""

from __future__ import annotations

import logging

import pytest

from netsched.operator.leadership import RENEW_SHARE, RETRY_SHARE, Election, LeaseView, Move, next_move
from netsched.testing.builders import Clock
from netsched.testing.kube import FakeKube

DURATION = 15.0
RETRY = RETRY_SHARE * DURATION


def lease(holder: str, duration: float = DURATION) -> LeaseView:
    return LeaseView(holder, duration, version="7")


@pytest.mark.parametrize("found, unchanged_for, move", [
    (None, 0, Move.CREATE),
    (lease("me"), 0, Move.RENEW),
    (lease("me"), 100, Move.RENEW),  # its own, even if it could not renew for a while
    (lease(""), 0, Move.TAKE),  # given up by a replica that stopped
    (lease("other"), 0, Move.WAIT),
    (lease("other"), DURATION - 0.1, Move.WAIT),
    (lease("other"), DURATION, Move.TAKE),  # its holder stopped renewing
    (lease("other", duration=60), DURATION, Move.WAIT),  # the holder's duration counts, not this one's
], ids=["none", "mine", "mine-stale", "given-up", "held", "held-nearly-expired", "expired",
        "holders-duration"])
def test_next_move(found, unchanged_for, move):
    assert next_move(found, "me", unchanged_for) is move


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def replica(kube: FakeKube, clock: Clock, name: str) -> tuple[Election, list[bool]]:
    election = Election(kube, "netsched-system", "netsched-operator", DURATION, identity=name, clock=clock)
    told: list[bool] = []
    election.on_change(told.append)
    return election, told


def rounds(clock: Clock, *replicas: Election, seconds: float) -> None:
    """Every replica takes its turn every retry period for `seconds`."""
    end = clock.now + seconds
    while clock.now < end:
        clock.now += RETRY
        for r in replicas:
            r.round()


def holder(kube: FakeKube) -> str | None:
    found = kube.get("leases", "netsched-system", "netsched-operator")
    return found and found["spec"]["holderIdentity"]


def test_the_first_replica_makes_the_lease_and_leads_the_second_stands_by(kube, clock):
    a, told_a = replica(kube, clock, "a")
    b, told_b = replica(kube, clock, "b")
    a.round()
    b.round()
    assert (a.leads(), b.leads(), holder(kube)) == (True, False, "a")
    assert (told_a, told_b) == ([True], [False])
    spec = kube.get("leases", "netsched-system", "netsched-operator")["spec"]
    assert spec["leaseDurationSeconds"] == 15 and spec["renewTime"].endswith("Z")


def test_the_incumbent_keeps_leading_while_it_renews_however_long_a_new_replica_waits(kube, clock):
    a, _ = replica(kube, clock, "a")
    a.round()
    b, told_b = replica(kube, clock, "b")  # joins later, as in a rolling update
    rounds(clock, a, b, seconds=10 * DURATION)
    assert (a.leads(), b.leads(), holder(kube), told_b) == (True, False, "a", [False])


def test_a_killed_leader_stops_leading_before_another_takes_over_within_the_lease_duration(kube, clock):
    a, _ = replica(kube, clock, "a")
    b, told_b = replica(kube, clock, "b")
    a.round()
    b.round()
    killed = clock.now
    while not b.leads():  # a renews no more
        rounds(clock, b, seconds=RETRY)
        if clock.now - killed >= RENEW_SHARE * DURATION:
            assert not a.leads()  # never two at once: a has stopped before b may take over
    assert DURATION <= clock.now - killed <= DURATION + 2 * RETRY
    assert holder(kube) == "b" and told_b == [False, True]
    spec = kube.get("leases", "netsched-system", "netsched-operator")["spec"]
    assert spec["leaseTransitions"] == 1


def test_a_leader_paused_past_its_lease_finds_another_leading_and_stands_by(kube, clock):
    a, told_a = replica(kube, clock, "a")
    b, _ = replica(kube, clock, "b")
    a.round()
    rounds(clock, b, seconds=DURATION + 2 * RETRY)  # a is paused (SIGSTOP) meanwhile
    assert b.leads() and not a.leads()  # at once on waking, before its next round
    a.round()
    assert (a.leads(), b.leads(), holder(kube), told_a) == (False, True, "b", [True, False])


def test_a_replica_that_stops_gives_the_lease_up_and_the_next_takes_it_at_its_next_round(kube, clock):
    a, told_a = replica(kube, clock, "a")
    b, _ = replica(kube, clock, "b")
    a.round()
    b.round()
    a.release()
    assert not a.leads() and told_a == [True, False] and holder(kube) is None
    clock.now += RETRY
    b.round()
    assert b.leads() and holder(kube) == "b"
    assert kube.get("leases", "netsched-system", "netsched-operator")["spec"]["leaseTransitions"] == 1


def test_of_two_replicas_taking_a_free_lease_at_once_only_the_first_write_wins(kube, clock):
    a, _ = replica(kube, clock, "a")
    b, _ = replica(kube, clock, "b")
    a.round()
    a.release()
    racing = []

    def b_writes_between_a_read_and_a_write(call) -> None:
        if call.verb == "get" and not racing:
            racing.append(call)
            b.round()  # reads the same free Lease and writes it first

    kube.on_call = b_writes_between_a_read_and_a_write
    a2, _ = replica(kube, clock, "a2")
    a2.round()
    assert (a2.leads(), b.leads(), holder(kube)) == (False, True, "b")
    tried = [c.body["spec"]["holderIdentity"] for c in kube.made("replace", "leases")]
    assert tried[-2:] == ["b", "a2"]  # a2 wrote too, and was refused: its resourceVersion was b's to change


def test_a_leader_that_cannot_reach_the_api_server_stops_leading_and_says_so_once(kube, clock, caplog):
    a, told = replica(kube, clock, "a")
    a.round()
    kube.fail("get", "leases", 503, "the server is currently unable to handle the request", times=100)
    with caplog.at_level(logging.INFO, "netsched.operator.leadership"):
        rounds(clock, a, seconds=DURATION)
    assert not a.leads() and told == [True, False]
    failures = [r.getMessage() for r in caplog.records if "unable to handle" in r.getMessage()]
    assert len(failures) == 1 and "Lease netsched-system/netsched-operator" in failures[0]
    assert any("stands by: it has not renewed the Lease in time" in r.getMessage() for r in caplog.records)
