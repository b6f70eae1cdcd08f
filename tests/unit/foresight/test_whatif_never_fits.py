"""whatif and why on a job that could never fit: the operator's words (capacity.never_fits), no ETA, no
packer dry run, and never the "pods with no predicted end" of a job that only waits."""

from __future__ import annotations

import pytest

from netsched.foresight.whatif import NEVER_STARTS, Cluster, render, what_if
from netsched.foresight.why import render_why, why
from netsched.jobs.capacity import never_fits, node_room
from netsched.jobs.gpujob import GPUJob
from netsched.testing.builders import CLUSTER, NOW, make_gpujob

EMPTY = Cluster(CLUSTER, [], [], [], [])  # four nodes of 8 GPUs; rack-a1 has two


def manifest(**shape) -> dict:
    body = make_gpujob("huge", manifest=True, **shape)
    body["metadata"] |= {"namespace": "ml", "uid": "whatif", "creationTimestamp": "2026-01-01T00:00:00Z"}
    return body


@pytest.mark.parametrize("shape, says", [
    pytest.param(dict(replicas=5, gpus=8), "needs 40 GPUs, the cluster has 32", id="cluster-too-small"),
    pytest.param(dict(replicas=2, gpus=16), "no node has 16 GPUs, the largest has 8",
                 id="no-node-big-enough"),
    pytest.param(dict(replicas=3, gpus=8, network={"maxPeerDistance": "rack"}),
                 "needs 3 replica(s) of 8 GPUs within one rack, the largest rack holds 2",
                 id="no-rack-big-enough"),
])
def test_whatif_says_never_fits_in_the_operator_s_words_with_no_eta(shape, says):
    answer = what_if(EMPTY, manifest(**shape), [], now=NOW)
    words = never_fits([node_room(n) for n in CLUSTER], GPUJob.of(make_gpujob("huge", **shape)))
    assert words and says in words
    assert answer["schedulable"] == {"fits": False, "reason": "NeverFits", "message": f"never fits: {words}"}
    assert answer["predictedStartTime"] is None and answer["predictedCompletionTime"] is None
    assert answer["waitsFor"] == [] and answer["packer"] == {}
    text = render(answer, NOW)
    assert f"Fits now: no (NeverFits): never fits: {words}" in text and NEVER_STARTS in text
    assert "no predicted end" not in text and "packer" not in text


def test_why_shows_the_condition_s_words_and_no_eta():
    message = ("never fits: no node has 16 GPUs, the largest has 8; lower spec.gpusPerReplica, or add a node "
               "with more")
    blocked = make_gpujob("huge", replicas=2, gpus=16)
    # as the operator writes it: PodsReady echoes the reason, Schedulable says why
    blocked["status"] = {"phase": "Blocked", "reason": "NeverFits", "conditions": [
        {"type": "PodsReady", "status": "False", "reason": "NeverFits", "message": "0 of 2 replicas running"},
        {"type": "Schedulable", "status": "False", "reason": "NeverFits", "message": message}]}
    answer = why(Cluster(CLUSTER, [], [], [blocked], []), "ml", "huge")
    assert (answer["phase"], answer["reason"], answer["message"]) == ("Blocked", "NeverFits", message)
    text = render_why(answer)
    assert text.splitlines()[:3] == ["GPUJob ml/huge: Blocked", f"Schedulable: NeverFits: {message}",
                                     NEVER_STARTS]
    assert "Predicted completion" not in text
