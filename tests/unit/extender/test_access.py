"""Who may read the metrics port: tokens and rights as the API server answers them (a fake), kept a
while, and decisions shown only for namespaces whose pods the caller may read."""

import pytest

from netsched.extender.access import Access, Caller, Forbidden, ReviewFailed, Unauthenticated
from netsched.extender.engine import Extender
from netsched.extender.explain import Decision
from netsched.extender.server import make_ops_app
from netsched.testing.extender import CLUSTER, FakeReviewer, cache_of, call

PATHS = {"/metrics", "/debug/decisions", "/debug/decisions/*"}


def reviewer() -> FakeReviewer:
    return FakeReviewer(
        tokens={"admin-token": "admin", "alice-token": "alice", "nobody-token": "nobody", "eve-token": "eve"},
        paths={"admin": PATHS, "alice": PATHS, "eve": {"/metrics"}},
        pods={"admin": {""}, "alice": {"team-a"}})


def ops(fake: FakeReviewer, namespaces=("team-a", "team-b", "team-c")):
    extender = Extender(cache_of(CLUSTER))
    for i, ns in enumerate(namespaces):
        extender.decisions.record(Decision(ns, "p", f"uid-{i}", None, "topology", 3, {}, 0, []))
    return make_ops_app(extender, Access(fake))


@pytest.mark.parametrize("token", [None, "", "forged"])
def test_no_token_or_one_the_api_server_refuses_is_401_with_a_bearer_challenge(token):
    app = ops(reviewer())
    for path in ("/metrics", "/debug/decisions", "/debug/decisions/team-a/p"):
        status, doc = call(app, "GET", path, token=token)
        assert status == 401 and "bearer token" in doc["Error"], (path, doc)


def test_a_caller_without_the_right_to_the_path_is_403_naming_the_right():
    app = ops(reviewer())
    for path in ("/metrics", "/debug/decisions"):
        status, doc = call(app, "GET", path, token="nobody-token")
        assert status == 403 and f'user "nobody" may not get {path}' in doc["Error"]
        assert f"nonResourceURL {path}" in doc["Error"]


def test_decisions_are_listed_only_for_namespaces_whose_pods_the_caller_may_list():
    app = ops(reviewer())
    _, mine = call(app, "GET", "/debug/decisions", token="alice-token")
    assert [d["namespace"] for d in mine] == ["team-a"]
    _, every = call(app, "GET", "/debug/decisions", token="admin-token")
    assert [d["namespace"] for d in every] == ["team-a", "team-b", "team-c"]


def test_one_pods_decision_needs_the_right_to_get_that_pod():
    app = ops(reviewer())
    assert call(app, "GET", "/debug/decisions/team-a/p", token="alice-token")[0] == 200
    # the path right alone is not enough: alice may not read team-b's pods
    status, doc = call(app, "GET", "/debug/decisions/team-b/p", token="alice-token")
    assert status == 403 and "may not get pod team-b/p" in doc["Error"]
    # and nothing says whether a pod it may not read had a decision
    assert call(app, "GET", "/debug/decisions/team-b/none", token="alice-token")[0] == 403
    # the pods right alone is not enough either: eve may get /metrics only
    status, doc = call(app, "GET", "/debug/decisions/team-a/p", token="eve-token")
    assert status == 403 and "/debug/decisions/team-a/p" in doc["Error"]


def test_metrics_are_served_to_a_caller_with_the_right():
    status, text = call(ops(reviewer()), "GET", "/metrics", token="alice-token")
    assert status == 200 and "netsched_extender_requests_total" in text


def test_answers_are_kept_a_while_then_asked_again_so_a_revoked_right_bites_once_they_expire():
    now = [0.0]
    fake = reviewer()
    access = Access(fake, ttl=10, clock=lambda: now[0])
    alice = access.caller("Bearer alice-token")
    access.require_path(alice, "/metrics")
    assert access.caller("bearer alice-token") == alice
    access.require_path(alice, "/metrics")
    assert len(fake.asked) == 2  # one token review, one access review
    fake.paths["alice"] = set()
    access.require_path(alice, "/metrics")  # still the kept answer
    now[0] = 10.5
    with pytest.raises(Forbidden):
        access.require_path(access.caller("Bearer alice-token"), "/metrics")
    assert len(fake.asked) == 4


def test_a_caller_who_may_list_pods_everywhere_costs_one_review_for_any_number_of_namespaces():
    fake = reviewer()
    access = Access(fake)
    admin = access.caller("Bearer admin-token")
    assert access.readable_namespaces(admin, {f"ns-{i}" for i in range(20)}) == {f"ns-{i}" for i in range(20)}
    assert len(fake.asked) == 2
    alice = access.caller("Bearer alice-token")
    assert access.readable_namespaces(alice, {"team-a", "team-b"}) == {"team-a"}


def test_the_subject_of_an_access_review_is_the_token_reviews_user():
    caller = Caller("alice", "u1", ("dev", "system:authenticated"), (("scopes", ("a",)),))
    assert caller.subject() == {"user": "alice", "uid": "u1", "groups": ["dev", "system:authenticated"],
                                "extra": {"scopes": ["a"]}}


class Unreachable(FakeReviewer):
    def review_token(self, token):
        raise ReviewFailed("POST /apis/authentication.k8s.io/v1/tokenreviews: connection refused")


def test_an_api_server_that_cannot_be_asked_is_503_and_the_probes_still_answer():
    app = ops(Unreachable())
    status, doc = call(app, "GET", "/metrics", token="alice-token")
    assert status == 503 and "could not ask the API server" in doc["Error"]
    assert call(app, "GET", "/healthz")[0] == 200


def test_malformed_authorization_headers_are_401_not_an_error():
    access = Access(reviewer())
    for header in (None, "Basic abc", "Bearer", "Bearer   "):
        with pytest.raises(Unauthenticated):
            access.caller(header)


class Broken(FakeReviewer):
    def allowed(self, caller, attributes):
        raise KeyError("status")


def test_a_failure_of_its_own_is_answered_not_a_dropped_connection():
    status, doc = call(ops(Broken(tokens={"t": "alice"})), "GET", "/metrics", token="t")
    assert status == 503 and "internal error in GET /metrics: KeyError" in doc["Error"]
