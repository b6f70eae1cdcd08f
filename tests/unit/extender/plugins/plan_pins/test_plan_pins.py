import pytest

from netsched.extender.plugins.plan_pins import PlanPins
from netsched.testing.extender import plugin_request


def plan(*placements: dict) -> dict:
    return {"metadata": {"name": "pack-1"},
            "spec": {"reason": "test", "evictions": [], "placements": list(placements), "moves": []},
            "status": {"phase": "Placing", "arrived": []}}


PIN_P = {"pod": "ml/p", "uid": "u", "node": "b1-0", "gpus": 8}  # the request's pod, ml/p
PIN_OTHER = {"pod": "ml/urgent-0", "uid": "u", "node": "b1-0", "gpus": 8}


@pytest.mark.parametrize("plans, gpus, preempting, rejected, binds", [
    pytest.param([], 2, False, set(), False, id="no-plan"),
    pytest.param([plan(PIN_P)], 8, False, {"a1-0", "a1-1", "a2-0"}, True, id="a-pinned-pod-goes-to-its-node"),
    pytest.param([plan(PIN_OTHER)], 1, False, {"b1-0"}, False, id="room-reserved-for-a-planned-pod"),
    pytest.param([plan({**PIN_OTHER, "gpus": 4})], 4, False, set(), False, id="room-beside-the-reservation"),
    pytest.param([plan(PIN_OTHER)], 1, True, set(), False, id="preemption-frees-reserved-room"),
    pytest.param([plan(PIN_P)], 8, True, {"a1-0", "a1-1", "a2-0"}, True, id="pins-hold-when-preempting"),
])
def test_plan_pins(plans, gpus, preempting, rejected, binds):
    req, idx, names = plugin_request(gpus=gpus, job=None, plans=plans, preempting=preempting)
    assert {names[pos] for pos in PlanPins().reject(req, idx)} == rejected
    assert PlanPins().binds(req) == binds
