"""The HTTP layer through its ASGI interface: every input gets a protocol answer, never a 500."""

import asyncio
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netsched.extender.access import Access
from netsched.extender.config import ExtenderConfig
from netsched.extender.engine import Extender
from netsched.extender.read_model import ReadModel
from netsched.extender.server import BadTLS, _serve_both, check_tls, make_app, make_ops_app
from netsched.testing.extender import CLUSTER, FakeReviewer, cache_of, call, node

FIXTURES = Path(__file__).parents[2] / "fixtures" / "extender-v1"
# the captured requests name kwok-gpu-0..2
CAPTURED = [node(f"kwok-gpu-{i}", rack=f"rack-{i}") for i in range(3)]


def app(cache=None, **kwargs):
    return make_app(Extender(cache or cache_of(CAPTURED + CLUSTER), **kwargs))


# a caller the fake API server lets read everything the metrics port serves
ADMIN = FakeReviewer(tokens={"t": "admin"}, pods={"admin": {""}},
                     paths={"admin": {"/metrics", "/debug/decisions", "/debug/decisions/*"}})


def both(cache=None, reviewer=ADMIN, **kwargs):
    """The scheduling port's app and the metrics port's, over one extender."""
    extender = Extender(cache or cache_of(CAPTURED + CLUSTER), **kwargs)
    return make_app(extender), make_ops_app(extender, Access(reviewer))


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_filter_on_a_captured_request_returns_a_subset_of_its_names():
    status, doc = call(app(), "POST", "/filter", fixture("filter-args.nodeCacheCapable-true.json"))
    sent = orjson.loads(fixture("filter-args.nodeCacheCapable-true.json"))["NodeNames"]
    assert status == 200 and doc["Error"] == "" and doc["Nodes"] is None
    assert len(doc["NodeNames"]) == 1 and set(doc["NodeNames"]) <= set(sent)


def test_filter_without_node_cache_returns_the_chosen_node_objects():
    status, doc = call(app(), "POST", "/filter", fixture("filter-args.nodeCacheCapable-false.json"))
    assert status == 200 and doc["NodeNames"] is None
    assert [n["metadata"]["name"] for n in doc["Nodes"]["items"]] in (["kwok-gpu-0"], ["kwok-gpu-1"],
                                                                     ["kwok-gpu-2"])


def test_prioritize_on_a_captured_request_scores_each_node_0_to_10():
    status, doc = call(app(shortlist=0), "POST", "/prioritize",
                       fixture("prioritize-args.nodeCacheCapable-true.json"))
    assert status == 200 and doc and all(0 < h["Score"] <= 10 and h["Host"].startswith("kwok-gpu-")
                                         for h in doc)


def test_malformed_input_gets_a_clear_error_in_the_protocol():
    status, doc = call(app(), "POST", "/filter", b"{not json")
    assert status == 200 and doc["NodeNames"] == []
    assert doc["Error"].startswith("netsched: bad filter request")
    status, doc = call(app(), "POST", "/filter", b'{"Pod": {"metadata": {}}, "NodeNames": []}')
    assert "Pod.metadata.name is missing" in doc["Error"]
    status, doc = call(app(), "POST", "/prioritize", b"[1, 2]")
    assert status == 400 and "must be a JSON object" in doc["Error"]


def test_a_huge_body_is_refused_with_413():
    status, doc = call(make_app(Extender(cache_of(CLUSTER)), max_body=1000), "POST", "/filter", b" " * 1001)
    assert status == 413 and "larger than 1000 bytes" in doc["Error"]


def test_a_stale_cache_makes_filter_answer_error_and_prioritize_and_preempt_abstain():
    stale = app(ReadModel())
    _, doc = call(stale, "POST", "/filter", fixture("filter-args.nodeCacheCapable-true.json"))
    assert "not synced with the apiserver yet" in doc["Error"]
    body = fixture("prioritize-args.nodeCacheCapable-true.json")
    assert call(stale, "POST", "/prioritize", body) == (200, [])
    victims = {"kwok-gpu-0": {"Pods": [], "NumPDBViolations": 0}}
    preempt = orjson.dumps({"Pod": orjson.loads(body)["Pod"], "NodeNameToVictims": victims})
    assert call(stale, "POST", "/preempt", preempt) == (200, {"NodeNameToMetaVictims": victims})
    status, doc = call(both(ReadModel())[1], "GET", "/readyz")
    assert status == 503 and doc["ready"] is False
    assert doc["sources"] == {"nodes": "waiting", "pods": "waiting", "packingplans": "waiting"}


def test_readyz_says_which_source_is_absent_while_the_extender_serves_without_it():
    cache = ReadModel()
    cache.replace("nodes", CLUSTER)
    cache.replace("pods", [])
    cache.absent("packingplans")
    status, doc = call(both(cache)[1], "GET", "/readyz")
    assert status == 200 and doc["sources"]["packingplans"] == "absent"


def test_metrics_count_requests_by_verb_and_outcome():
    a, ops = both()
    call(a, "POST", "/filter", fixture("filter-args.nodeCacheCapable-true.json"))
    call(a, "POST", "/filter", b"oops")
    status, text = call(ops, "GET", "/metrics", token="t")
    assert status == 200
    assert 'netsched_extender_requests_total{outcome="ok",verb="filter"} 1.0' in text
    assert 'netsched_extender_requests_total{outcome="bad_request",verb="filter"} 1.0' in text
    assert 'netsched_extender_request_seconds_count{verb="filter"} 2.0' in text


def test_debug_endpoint_explains_a_filtered_pod():
    a, ops = both()
    call(a, "POST", "/filter", fixture("filter-args.nodeCacheCapable-true.json"))
    pod = orjson.loads(fixture("filter-args.nodeCacheCapable-true.json"))["Pod"]["metadata"]
    status, doc = call(ops, "GET", f"/debug/decisions/{pod['namespace']}/{pod['name']}", token="t")
    assert status == 200 and doc["candidates"] == 3 and doc["top"][0]["node"].startswith("kwok-gpu-")
    assert call(ops, "GET", "/debug/decisions/x/y", token="t")[0] == 404
    assert call(a, "DELETE", "/filter")[0] == 405 and call(a, "GET", "/nope")[0] == 404


@pytest.mark.parametrize("path", ["/metrics", "/debug/decisions", "/debug/decisions/ns/pod", "/readyz"])
def test_the_scheduling_port_serves_neither_metrics_nor_decisions_nor_readiness(path):
    status, doc = call(app(), "GET", path)
    assert status == 404 and "metrics port (--metrics-port)" in doc["Error"]
    assert call(app(), "GET", "/healthz") == (200, {"status": "ok"})


def test_the_metrics_port_answers_no_verb_and_its_probes_need_no_token():
    _, ops = both()
    assert call(ops, "POST", "/filter", fixture("filter-args.nodeCacheCapable-true.json"))[0] == 405
    assert call(ops, "GET", "/healthz") == (200, {"status": "ok"})
    assert call(ops, "GET", "/readyz")[0] == 200
    assert call(ops, "GET", "/nope", token="t")[0] == 404


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(["Pod", "NodeNames", "Nodes", "NodeNameToMetaVictims", "NodeNameToVictims",
                        "metadata", "name", "spec", "containers", "resources", "limits", "nvidia.com/gpu",
                        "annotations", "netsched.io/max-peer-distance", "kwok-gpu-0", "Pods"])
SHAPED = st.recursive(JSON, lambda inner: st.dictionaries(KEYS, inner, max_size=5), max_leaves=25)
FUZZ_APP = app(cache_of(CAPTURED + CLUSTER, clock=lambda: 0.0))  # never ages, however slow the run


def _assert_protocol_answer(verb: str, body: bytes) -> None:
    status, doc = call(FUZZ_APP, "POST", f"/{verb}", body)
    assert status in (200, 400), (status, doc)
    if verb == "filter":
        assert status == 200 and isinstance(doc, dict) and isinstance(doc["Error"], str)
    if status == 400:
        assert doc["Error"].startswith(f"netsched: bad {verb} request")  # never an internal error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verb=st.sampled_from(["filter", "prioritize", "preempt"]), doc=SHAPED)
def test_random_documents_never_crash_the_server(verb, doc):
    _assert_protocol_answer(verb, json.dumps(doc).encode())


@settings(max_examples=200, deadline=None)
@given(verb=st.sampled_from(["filter", "prioritize", "preempt"]), body=st.binary(max_size=200))
def test_random_bytes_never_crash_the_server(verb, body):
    _assert_protocol_answer(verb, body)


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.text(max_size=12), max_size=8), annotations=st.dictionaries(
    st.sampled_from(["netsched.io/max-peer-distance", "netsched.io/data-source", "netsched.io/job-gpus",
                     "netsched.io/max-data-distance", "netsched.io/max-peer-rtt-ms"]), st.text(max_size=10)))
def test_a_valid_pod_with_random_nodes_and_annotations_gets_an_answer(names, annotations):
    base = orjson.loads(fixture("filter-args.nodeCacheCapable-true.json"))
    base["Pod"]["metadata"]["annotations"] = annotations
    base["NodeNames"] = names
    for verb in ("filter", "prioritize"):
        _assert_protocol_answer(verb, orjson.dumps(base))
    status, doc = call(FUZZ_APP, "POST", "/filter", orjson.dumps(base))
    assert set(doc["NodeNames"] or []) <= set(names)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(["NodeNames", "Nodes", "NodeNameToVictims", "NodeNameToMetaVictims"]),
       value=st.dictionaries(st.sampled_from(["kwok-gpu-0", "a1-0", "x"]), SHAPED, max_size=3) | SHAPED)
def test_a_valid_pod_with_random_candidates_never_crashes_any_verb(field, value):
    base = orjson.loads(fixture("filter-args.nodeCacheCapable-true.json"))
    del base["NodeNames"], base["Nodes"]
    base[field] = value
    for verb in ("filter", "prioritize", "preempt"):
        _assert_protocol_answer(verb, json.dumps(base).encode())


def test_a_body_that_does_not_arrive_in_time_is_answered_408_and_holds_nothing_open():
    sent: list[dict] = []
    parts = [b'{"Pod": ', None]  # the client sends half a body, then stalls

    async def receive() -> dict:
        part = parts.pop(0)
        if part is None:
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": part, "more_body": True}

    async def send(message: dict) -> None:
        sent.append(message)

    stalled = make_app(Extender(cache_of(CLUSTER)), body_seconds=0.05)
    request = {"type": "http", "method": "POST", "path": "/filter"}
    asyncio.run(asyncio.wait_for(stalled(request, receive, send), 5))
    assert sent[0]["status"] == 408 and b"did not arrive within 0.05 s" in sent[1]["body"]


@pytest.mark.parametrize("cert, key, said", [
    pytest.param("cert.pem", None, "--tls-cert-file needs --tls-private-key-file too", id="cert-only"),
    pytest.param(None, "key.pem", "--tls-private-key-file needs --tls-cert-file too", id="key-only"),
    pytest.param("cert.pem", "gone.pem", "--tls-private-key-file", id="missing-file"),
])
def test_half_a_tls_setting_is_refused_before_anything_starts_naming_the_flag(tmp_path, cert, key, said):
    (tmp_path / "cert.pem").write_text("x")
    (tmp_path / "key.pem").write_text("x")
    settings = ExtenderConfig(tls_cert_file=cert and tmp_path / cert,
                              tls_private_key_file=key and tmp_path / key)
    with pytest.raises(BadTLS, match=said):
        check_tls(settings)


@pytest.mark.parametrize("flags, said", [
    pytest.param({"client_ca_file": "ca.pem"}, "--client-ca-file needs --tls-cert-file", id="ca-without-tls"),
    pytest.param({"tls": True, "client_ca_file": "gone.pem"}, "--client-ca-file", id="ca-missing"),
    pytest.param({"tls": True, "client_ca_file": "junk.pem"}, "no PEM CA certificate", id="ca-not-pem"),
    pytest.param({"tls": "junk"}, "not a PEM certificate and its key", id="cert-not-pem"),
    pytest.param({"metrics_port": 8888}, "--metrics-port 8888 is --port's too", id="same-port"),
])
def test_a_client_ca_or_port_that_cannot_work_is_refused_naming_the_flag(tmp_path, flags, said):
    from netsched.devcluster.pki import serving_certificate

    ca, cert, key = serving_certificate("127.0.0.1", ["localhost"])
    for name, pem in (("ca.pem", ca), ("cert.pem", cert), ("key.pem", key), ("junk.pem", b"junk")):
        (tmp_path / name).write_bytes(pem)
    tls = flags.pop("tls", None)
    if tls:
        cert_name = "junk.pem" if tls == "junk" else "cert.pem"
        flags |= {"tls_cert_file": cert_name, "tls_private_key_file": "key.pem"}
    settings = ExtenderConfig(**{k: tmp_path / v if isinstance(v, str) else v for k, v in flags.items()})
    with pytest.raises(BadTLS, match=said):
        check_tls(settings)


class FakeServer:
    """uvicorn.Server's part that _serve_both uses: serve() until should_exit."""

    def __init__(self, port_taken: bool = False):
        self.should_exit, self.port_taken = False, port_taken

    async def serve(self):
        if self.port_taken:
            raise SystemExit(1)  # what uvicorn does when it cannot bind
        while not self.should_exit:
            await asyncio.sleep(0.005)


def test_the_two_servers_end_together_never_one_left_serving():
    with pytest.raises(SystemExit):  # the metrics port taken: the process ends, scheduling port and all
        asyncio.run(_serve_both(FakeServer(), FakeServer(port_taken=True)))
    scheduling, ops = FakeServer(), FakeServer()

    async def stop_scheduling_soon():
        asyncio.get_running_loop().call_later(0.02, setattr, scheduling, "should_exit", True)
        await _serve_both(scheduling, ops)

    asyncio.run(stop_scheduling_soon())  # a signal stops the scheduling server: the metrics one follows
    assert ops.should_exit
    scheduling, ops = FakeServer(), FakeServer()

    async def stop_ops_soon():
        asyncio.get_running_loop().call_later(0.02, setattr, ops, "should_exit", True)
        await _serve_both(scheduling, ops)

    asyncio.run(stop_ops_soon())
    assert scheduling.should_exit
