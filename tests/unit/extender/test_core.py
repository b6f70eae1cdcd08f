import numpy as np
import pytest

from netsched.extender.engine import Extender, StaleCache, ranking
from netsched.extender.read_model import ReadModel
from netsched.extender.reservations import Placement
from netsched.extender.scorers import Scored, TopologyScorer
from netsched.testing.extender import CLUSTER, NAMES, args, assume, cache_of, pod


def test_filter_hands_back_the_single_best_node_and_the_next_replica_follows_it():
    ext = Extender(cache_of(CLUSTER), shortlist=1)
    first = ext.filter(args(pod("r0", job="train", gpus=2), NAMES))
    assert len(first.passed) == 1 and not first.failed and not first.unresolvable
    # kube-scheduler has not bound r0 yet, but the extender assumed it
    second = ext.filter(args(pod("r1", job="train", gpus=2), NAMES))
    assert second.passed == first.passed


def test_shortlist_keeps_only_the_best_network_tier():
    ext = Extender(cache_of(CLUSTER, [pod("r0", "a1-0", gpus=8, job="train")]), shortlist=3)
    # kube-scheduler does not offer a1-0: its GPUs are all taken
    out = ext.filter(args(pod("r1", job="train", gpus=2), ["a1-1", "a2-0", "b1-0"]))
    assert out.passed == ["a1-1"]  # the only node in the peer's rack; a2-0 is a tier below


def test_shortlist_zero_returns_every_feasible_node():
    ext = Extender(cache_of(CLUSTER), shortlist=0)
    out = ext.filter(args(pod("p"), NAMES + ["brand-new-node"]))
    assert sorted(out.passed) == sorted(NAMES + ["brand-new-node"])


def test_rejected_nodes_are_unresolvable_with_reasons_and_never_passed():
    ext = Extender(cache_of(CLUSTER, [pod("r0", "b1-0", job="train")]), shortlist=0)
    p = pod("r1", job="train", annotations={"netsched.io/max-peer-distance": "zone"})
    out = ext.filter(args(p, NAMES))
    assert out.passed == ["b1-0"]
    assert set(out.unresolvable) == {"a1-0", "a1-1", "a2-0"}
    assert all("netsched.io/max-peer-distance=zone" in why for why in out.unresolvable.values())


def test_unknown_nodes_fail_resolvably_when_the_pod_has_hard_needs():
    ext = Extender(cache_of(CLUSTER), shortlist=1)
    p = pod("r", annotations={"netsched.io/data-source": "zone:zone-a",
                              "netsched.io/max-data-distance": "zone"})
    out = ext.filter(args(p, ["a1-0", "ghost"]))
    assert out.passed == ["a1-0"]
    assert "node ghost is not in the extender's cache yet" in out.failed["ghost"]


def test_an_invalid_annotation_fails_every_node_with_the_fix():
    ext = Extender(cache_of(CLUSTER))
    out = ext.filter(args(pod("r", annotations={"netsched.io/max-peer-distance": "near"}), NAMES))
    assert out.passed == [] and set(out.unresolvable) == set(NAMES)
    want = ("pod ml/r: netsched.io/max-peer-distance=near: 'near' is not a topology level of this cluster: "
            "write one of")
    assert want in out.unresolvable["a1-0"]


def test_a_stale_cache_is_refused_not_used():
    ext = Extender(ReadModel())
    with pytest.raises(StaleCache, match="not synced with the apiserver yet"):
        ext.filter(args(pod("p"), NAMES))


def test_preempt_drops_candidates_on_nodes_the_network_needs_reject():
    ext = Extender(cache_of(CLUSTER, [pod("r0", "b1-0", job="train")]))
    p = pod("r1", job="train", annotations={"netsched.io/max-peer-distance": "zone"})
    victims = {n: {"Pods": [{"UID": "v"}], "NumPDBViolations": 0} for n in NAMES}
    assert set(ext.preempt(args(p, NAMES).pod, victims)) == {"b1-0"}


def test_every_filtered_pod_gets_a_decision_with_its_top_candidates():
    ext = Extender(cache_of(CLUSTER), shortlist=1)
    p = pod("r0", job="train")
    out = ext.filter(args(p, NAMES))
    decision = ext.decisions.find("ml", "r0")
    assert decision.candidates == 4 and decision.top[0].node == out.passed[0]
    assert set(decision.top[0].factors) == {"job_room", "packing"}
    decision.node = out.passed[0]
    assert decision.summary().startswith(f"netsched placed the pod on {out.passed[0]} (score ")


def test_a_pod_filtered_again_does_not_count_its_own_earlier_assumption():
    seen = []

    class Spy(TopologyScorer):
        def score(self, req, idx):
            seen.append(dict(zip(req.snapshot.table.names, req.snapshot.free.tolist(), strict=True)))
            return super().score(req, idx)

    ext = Extender(cache_of(CLUSTER), scorer=Spy(), shortlist=1)
    p = pod("r0", gpus=8)
    (node,) = ext.filter(args(p, NAMES)).passed  # assumed there until the watch shows the binding
    # kube-scheduler did not bind it there (another plugin refused the node) and asks again
    ext.filter(args(p, NAMES))
    assert seen[1][node] == 8, "its own GPUs, assumed on that node, made the node look full"


class Counting(TopologyScorer):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def score(self, req, idx):
        self.calls += 1
        return super().score(req, idx)


def test_prioritize_answers_with_its_filters_scores_once():
    now = [0.0]
    cluster = cache_of(CLUSTER, [pod("r0", "a1-0", job="train")], clock=lambda: now[0])
    scorer = Counting()
    ext = Extender(cluster, scorer=scorer, shortlist=0)
    r1 = pod("r1", job="train")
    request = args(r1, ["b1-0", "a2-0", "a1-1"])
    ext.filter(request)
    reused = ext.prioritize(request).as_dict()
    assert scorer.calls == 1
    fresh = ext.prioritize(request).as_dict()  # used once: a second prioritize scores again
    assert scorer.calls == 2 and reused == fresh and reused["a1-1"] > reused["a2-0"] > reused["b1-0"]
    ext.filter(request)  # then kube-scheduler's own filters drop a node and the rest come in another order
    subset = ext.prioritize(args(r1, ["a1-1", "b1-0"]))
    assert scorer.calls == 3 and subset.as_dict() == {"a1-1": fresh["a1-1"], "b1-0": fresh["b1-0"]}
    samples = {s.labels["scores"]: s.value for s in ext.metrics.prioritized.collect()[0].samples
               if s.name.endswith("_total")}
    assert samples == {"reused": 2.0, "fresh": 1.0}


def test_a_filter_that_passes_one_node_keeps_no_scores():
    scorer = Counting()
    ext = Extender(cache_of(CLUSTER), scorer=scorer, shortlist=1)
    request = args(pod("r1", job="train"), NAMES)
    assert len(ext.filter(request).passed) == 1  # kube-scheduler binds it without scoring
    assert not ext._filtered
    ext.prioritize(request)  # asked anyway: scored afresh
    assert scorer.calls == 2


@pytest.mark.parametrize("later, names", [
    (3.0, ["a1-1", "a2-0"]),  # the filter is older than REUSE_SECONDS
    (0.5, ["a1-1", "b1-0"]),  # the filter rejected b1-0, so never scored it
])
def test_prioritize_scores_afresh_what_its_filter_did_not_score_or_long_ago(later, names):
    now = [0.0]
    cluster = cache_of(CLUSTER, [pod("r0", "a1-0", job="train")], clock=lambda: now[0])
    scorer = Counting()
    ext = Extender(cluster, scorer=scorer, shortlist=0)
    p = pod("r1", job="train", annotations={"netsched.io/max-peer-distance": "zone"})
    assert ext.filter(args(p, ["a1-1", "a2-0", "b1-0"])).passed == ["a1-1", "a2-0"]
    now[0] = later
    out = ext.prioritize(args(p, names))
    assert scorer.calls == 2 and out.hosts == names


@pytest.mark.parametrize("top", [1, 3, 7, 40])
def test_the_top_of_the_ranking_is_the_top_of_the_full_ranking(top):
    rng = np.random.default_rng(top)
    value = rng.integers(0, 4, size=30) / 4  # many ties
    value[::7] = np.nan
    scored = Scored(value, value)
    idx = rng.permutation(100)[:30]
    assert ranking(scored, idx, top) == ranking(scored, idx)[:top]
    assert set(ranking(scored, idx)[-5:]) == set(range(0, 30, 7))  # NaN last


def test_single_pods_between_a_jobs_replicas_leave_the_room_its_first_replica_chose():
    """a1-0 has 2 GPUs free, the rest are empty: packing sends single pods to the fullest node
    that fits, which after the job's first replica is the job's own node; the hold sends them
    elsewhere, so all four replicas share one node."""
    cache = cache_of(CLUSTER, [pod("x", "a1-0", gpus=6)])
    ext = Extender(cache, shortlist=1)
    nodes = []
    for r in range(4):
        replica = pod(f"r{r}", job="train", gpus=2, annotations={"netsched.io/job-gpus": "8"})
        cache.apply("pods", "ADDED", replica)
        nodes.append(ext.filter(args(replica, NAMES)).passed[0])
        for s in range(2):
            single = ext.filter(args(pod(f"s{r}-{s}", gpus=1), NAMES)).passed[0]
            assert single not in nodes[:1]
    assert len(set(nodes)) == 1 and nodes[0] != "a1-0", nodes


def test_with_every_node_handed_back_held_room_is_filtered_unless_there_is_no_other():
    cache = cache_of(CLUSTER, [pod("x", "a1-0", gpus=7), pod("y", "a2-0", gpus=7), pod("z", "b1-0", gpus=7)])
    ext = Extender(cache, shortlist=0)
    first = pod("r0", job="train", gpus=2)
    assume(cache, first["metadata"]["uid"], Placement("ml/train", "a1-1", 2))
    out = ext.filter(args(pod("single", gpus=1), NAMES))
    assert "a1-1" not in out.passed
    assert "held for the other replicas of job ml/train" in out.unresolvable["a1-1"]
    out = ext.filter(args(pod("big", gpus=4), NAMES))  # fits only where the job holds room
    assert "a1-1" in out.passed and not out.unresolvable
