"""A filter's post-steps: the plugins' `explain` hooks reach the decision, and the steps run whatever
the outcome, in order."""

import numpy as np
import pytest

from netsched.extender.engine import Extender
from netsched.extender.plugin import Filter, Request
from netsched.extender.plugins import FILTERS
from netsched.extender.reservations import Placement
from netsched.testing.extender import CLUSTER, NAMES, args, cache_of, pod


class Says(Filter):
    """A filter that rejects nothing and says how many candidates passed."""

    name = "says"
    reads = ()

    def binds(self, req: Request) -> bool:
        return False

    def reject(self, req: Request, idx: np.ndarray) -> dict[int, str]:
        return {}

    def explain(self, req: Request, passed: np.ndarray, candidates: int) -> str:
        return f"{len(passed)} of {candidates} passed"


def test_a_plugins_explain_words_reach_the_decision_after_those_of_the_plugins_before_it():
    ext = Extender(cache_of(CLUSTER), filters=(*FILTERS, Says()))
    alone = pod("p", gpus=2)
    ext.filter(args(alone, NAMES))
    assert ext.decisions.find("ml", "p").room == f"{len(NAMES)} of {len(NAMES)} passed"
    first = pod("r0", job="train", gpus=2, annotations={"netsched.io/job-gpus": "8"})
    ext.filter(args(first, NAMES))
    # p took 2 GPUs of one node, which whole_job then rejects: its words, then these
    assert ext.decisions.find("ml", "r0").room == ("room for all 8 GPUs of the job on 3 of 4 candidates; "
                                                   "3 of 4 passed")


def test_without_a_plugin_that_explains_the_decision_has_no_words():
    ext = Extender(cache_of(CLUSTER))
    ext.filter(args(pod("p", gpus=2), NAMES))
    assert ext.decisions.find("ml", "p").room == ""


def test_a_failing_post_step_makes_the_filter_fail_and_the_later_steps_see_no_outcome():
    cache = cache_of(CLUSTER)
    ext = Extender(cache, shortlist=1)
    p = pod("p", gpus=2)
    cache.settle(p["metadata"]["uid"], Placement(None, "a1-0", 2))  # an earlier filter's assumption

    def fails(pod, done):
        raise RuntimeError("explaining failed")

    seen = []
    ext.post_steps = (fails, lambda pod, done: seen.append(done), ext._reserve)
    with pytest.raises(RuntimeError, match="explaining failed"):
        ext.filter(args(p, NAMES))
    assert seen == [None]
    assert not cache.reservations.reserved(cache.clock()).assumed  # assumed nowhere: the answer was an error
