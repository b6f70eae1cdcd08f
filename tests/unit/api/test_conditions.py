import pytest

from netsched.api import conditions as c


@pytest.fixture
def clock(monkeypatch):
    monkeypatch.setattr(c, "now_rfc3339", lambda: "2025-01-01T12:00:00Z")


def test_a_new_condition_is_appended_with_its_transition_time_and_generation(clock):
    conds = [{"type": "Other", "status": "True"}]
    assert c.set_condition(conds, c.ADMITTED, False, c.WAITING_FOR_CAPACITY, "1 of 2 fit", 7) is True
    assert conds[1] == {"type": "Admitted", "status": "False", "reason": "WaitingForCapacity",
                        "message": "1 of 2 fit", "lastTransitionTime": "2025-01-01T12:00:00Z",
                        "observedGeneration": 7}


@pytest.mark.parametrize("status, reason, changed, transition", [
    pytest.param(False, "WaitingForCapacity", False, "OLD", id="same-status-same-reason"),
    pytest.param(False, "SomethingElse", True, "OLD", id="reason-only-changes"),
    pytest.param(True, "WaitingForCapacity", True, "2025-01-01T12:00:00Z", id="status-flips"),
    pytest.param(True, "GangReleased", True, "2025-01-01T12:00:00Z", id="status-and-reason-change"),
])
def test_transition_time_moves_only_when_the_status_flips(clock, status, reason, changed, transition):
    conds = [{"type": "Admitted", "status": "False", "reason": "WaitingForCapacity", "message": "old",
              "lastTransitionTime": "OLD", "observedGeneration": 1}]
    assert c.set_condition(conds, c.ADMITTED, status, reason, "new", 2) is changed
    assert len(conds) == 1
    assert conds[0]["lastTransitionTime"] == transition
    assert conds[0]["message"] == "new" and conds[0]["reason"] == reason  # always updated
    assert conds[0]["status"] == ("True" if status else "False")
    assert conds[0]["observedGeneration"] == 2


@pytest.mark.parametrize("length, kept", [
    pytest.param(10, 10, id="short"),
    pytest.param(1024, 1024, id="exactly-the-limit"),
    pytest.param(5000, 1024, id="cut-at-1024"),
])
def test_messages_are_cut_at_1024_characters(clock, length, kept):
    conds: list[dict] = []
    c.set_condition(conds, c.FAILED, True, c.BACKOFF_LIMIT_EXCEEDED, "x" * length, 1)
    assert conds[0]["message"] == "x" * kept


def test_no_generation_leaves_observed_generation_alone(clock):
    conds: list[dict] = []
    c.set_condition(conds, c.RECORDED, True, c.RECORD_WRITTEN, "ok", None)
    assert "observedGeneration" not in conds[0]


@pytest.mark.parametrize("conds, expected", [
    pytest.param([], False, id="absent"),
    pytest.param([{"type": "Recorded", "status": "False"}], False, id="false"),
    pytest.param([{"type": "Recorded", "status": "Unknown"}], False, id="unknown"),
    pytest.param([{"type": "Other", "status": "True"}, {"type": "Recorded", "status": "True"}], True,
                 id="true"),
])
def test_is_true(conds, expected):
    assert c.is_true(conds, c.RECORDED) is expected
