"""Extender v1 wire format, checked against requests captured from a real kube-scheduler."""

import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from netsched.extender.protocol import (
    BadRequest,
    filter_result,
    host_priority_list,
    parse_args,
    priority_heads,
)

GOLDEN = Path(__file__).parents[2] / "fixtures" / "extender-v1"


def golden(name: str):
    return json.loads((GOLDEN / name).read_text())


@pytest.mark.parametrize("name, want_nodes", [
    ("filter-args.nodeCacheCapable-true.json", ["kwok-gpu-0", "kwok-gpu-1", "kwok-gpu-2"]),
    ("filter-args.nodeCacheCapable-false.json", ["kwok-gpu-0", "kwok-gpu-1", "kwok-gpu-2"]),
    ("prioritize-args.nodeCacheCapable-true.json", ["kwok-gpu-1", "kwok-gpu-2"]),
    ("prioritize-args.nodeCacheCapable-false.json", ["kwok-gpu-1", "kwok-gpu-2"]),
])
def test_parses_captured_requests(name, want_nodes):
    args = parse_args(golden(name))
    assert args.node_names == want_nodes
    assert (args.pod.namespace, args.pod.name, args.pod.gpus) == ("default", "gpu-pod-1", 2)
    assert args.pod.uid


def test_filter_result_has_the_shape_the_scheduler_accepted():
    accepted = golden("filter-result.nodeCacheCapable-true.accepted.json")
    ours = filter_result(["kwok-gpu-1", "kwok-gpu-2"], {"kwok-gpu-0": "excluded by test extender"})
    assert {k: ours[k] for k in accepted} == accepted
    assert set(ours) <= {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def test_priority_list_uses_go_field_names_and_omits_zero_scores():
    accepted = golden("prioritize-result.accepted.json")
    heads = priority_heads(["kwok-gpu-1", "kwok-gpu-2"])
    sent = orjson.loads(orjson.dumps(host_priority_list(heads, np.array([0, 10]))))
    assert sent == [h for h in accepted if h["Score"]]


def test_priority_list_encodes_names_as_json_and_every_score():
    odd = ["node-\"quoted\"", "node-ü", *[f"n{s}" for s in range(11)]]
    scores = np.array([3, 7, *range(11)])
    sent = orjson.loads(orjson.dumps(host_priority_list(priority_heads(odd), scores)))
    assert sent == [{"Host": h, "Score": int(s)} for h, s in zip(odd, scores, strict=True) if s]


def _pod(**meta):
    return {"metadata": {"name": "p", **meta}, "spec": {}}


@pytest.mark.parametrize("doc, message", [
    pytest.param([], "must be a JSON object", id="array"),
    pytest.param({"NodeNames": ["a"]}, "field Pod is missing", id="no-pod"),
    pytest.param({"Pod": {"metadata": {}}, "NodeNames": ["a"]}, "Pod.metadata.name", id="no-name"),
    pytest.param({"Pod": _pod()}, "neither NodeNames nor Nodes.items", id="no-nodes"),
    pytest.param({"Pod": _pod(), "NodeNames": "a"}, "list of node names", id="names-not-list"),
    pytest.param({"Pod": _pod(), "NodeNames": ["a", 3]}, "list of node names", id="name-not-string"),
    pytest.param({"Pod": _pod(), "NodeNames": ["a", ""]}, "list of node names", id="empty-name"),
    pytest.param({"Pod": _pod(), "NodeNames": [""]}, "list of node names", id="only-empty-name"),
    pytest.param({"Pod": _pod(), "NodeNames": ["", "a"]}, "list of node names", id="empty-name-first"),
    pytest.param({"Pod": _pod(), "NodeNames": ["a", "b\nc"]}, "list of node names", id="newline-in-name"),
    pytest.param({"Pod": _pod(), "NodeNames": ["a", None]}, "list of node names", id="null-name"),
    pytest.param({"Pod": _pod(labels={"a": 1}), "NodeNames": []}, "Pod.metadata.labels", id="bad-labels"),
    pytest.param({"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1.5"}}}]}}, "NodeNames": []},
        "whole number", id="fractional-gpu"),
])
def test_malformed_requests_name_the_field(doc, message):
    with pytest.raises(BadRequest, match=message):
        parse_args(doc)


def test_gpus_fall_back_to_limits_and_sum_over_containers():
    spec = {"containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
        {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}},
    ]}
    args = parse_args({"Pod": {"metadata": {"name": "p", "labels": {"netsched.io/job": "j"}}, "spec": spec},
                       "NodeNames": ["n"]})
    assert args.pod.gpus == 3 and args.pod.job == "j"
