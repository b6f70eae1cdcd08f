import pytest
from cluster_builders import CLUSTER, NAMES, args, cache_of, pod

from netsched.extender.cache import ClusterCache
from netsched.extender.core import Extender, StaleCache
from netsched.extender.scorers import TopologyScorer


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
    want = "pod ml/r: annotation netsched.io/max-peer-distance='near' must be one of"
    assert want in out.unresolvable["a1-0"]


def test_a_stale_cache_is_refused_not_used():
    ext = Extender(ClusterCache())
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
    assert set(decision.top[0].factors) == {"rack_room", "packing"}
    decision.node = out.passed[0]
    assert decision.summary().startswith(f"netsched placed the pod on {out.passed[0]} (score ")


def test_a_pod_filtered_again_does_not_count_its_own_earlier_assumption():
    seen = []

    class Spy(TopologyScorer):
        def score(self, pod, needs, view, idx, telemetry):
            seen.append(dict(zip(view.table.names, view.free.tolist(), strict=True)))
            return super().score(pod, needs, view, idx, telemetry)

    ext = Extender(cache_of(CLUSTER), scorer=Spy(), shortlist=1)
    p = pod("r0", gpus=8)
    (node,) = ext.filter(args(p, NAMES)).passed  # assumed there until the watch shows the binding
    # kube-scheduler did not bind it there (another plugin refused the node) and asks again
    ext.filter(args(p, NAMES))
    assert seen[1][node] == 8, "its own GPUs, assumed on that node, made the node look full"
