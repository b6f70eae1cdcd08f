import dataclasses

import numpy as np
import pytest

from netsched.models.features import INDEX
from netsched.packing.default_scheduler import _score as packing_score
from netsched.packing.problem import Node, Pod
from netsched.testing.models import sim_rows
from netsched.training.dataset import dataset_from_rows
from netsched.training.policies import heuristic_cost, least_allocated_balanced


def test_least_allocated_balanced_by_hand():
    cpu = np.array([0.2, 0.5, np.nan, 0.9])
    mem = np.array([0.4, 0.5, np.nan, 0.1])
    # (1-0.2 + 1-0.4)/2 + (1 - |0.2-0.4|/2) = 0.7 + 0.9; 0.5 + 1.0; unknown counts as 0: 1 + 1; 0.5 + 0.6
    np.testing.assert_allclose(least_allocated_balanced(cpu, mem), [1.6, 1.5, 2.0, 1.1])


def test_the_same_score_as_the_packers_kube_scheduler():
    node = Node(name="n", capacity={"cpu": 100, "memory": 1000})
    pod = Pod(name="p", requests={"cpu": 0, "memory": 0})
    free = {"cpu": 80, "memory": 600}  # 20% CPU and 40% memory requested
    assert least_allocated_balanced(np.array([0.2]), np.array([0.4]))[0] == pytest.approx(
        packing_score(node, free, pod))


def test_the_heuristic_prefers_the_node_in_the_peers_rack():
    ds = dataset_from_rows(sim_rows(jobs=1))
    X = ds.X.copy()
    X[:, INDEX["peer_count"]] = 2
    X[:, INDEX["peer_frac_node"]] = 0.0
    X[:, INDEX["peer_frac_rack"]] = 0.0
    X[:, INDEX["peer_frac_zone"]] = 0.0
    X[:, INDEX["data_scope"]] = np.nan
    X[3, INDEX["peer_frac_rack"]] = 1.0
    X[:, [INDEX["peer_bw_mbps"], INDEX["peer_rtt_ms"]]] = np.nan
    cost = heuristic_cost(dataclasses.replace(ds, X=X), ds.sets())
    assert int(np.argmin(cost)) == 3
