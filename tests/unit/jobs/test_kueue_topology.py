"""Which pods Kueue's topology-aware scheduling places: its gate, or an annotation asking for it."""

import pytest

from netsched.jobs.kueue_topology import placed_by_kueue
from netsched.jobs.replica_pods import GANG_GATE
from netsched.testing.builders import make_pod


@pytest.mark.parametrize("gates, annotations, expected", [
    pytest.param(["kueue.x-k8s.io/topology", GANG_GATE], {}, "scheduling gate kueue.x-k8s.io/topology",
                 id="kueue-gate"),
    pytest.param(["kueue.x-k8s.io/topology", GANG_GATE], {"kueue.x-k8s.io/podset-required-topology": "rack"},
                 "annotation kueue.x-k8s.io/podset-required-topology: rack",
                 id="annotation-outlasts-the-gate"),
    pytest.param([], {"kueue.x-k8s.io/podset-required-topology": "netsched.io/rack"},
                 "annotation kueue.x-k8s.io/podset-required-topology: netsched.io/rack", id="required"),
    pytest.param([GANG_GATE], {"kueue.x-k8s.io/podset-preferred-topology": "zone"},
                 "annotation kueue.x-k8s.io/podset-preferred-topology: zone", id="preferred"),
    pytest.param([], {"kueue.x-k8s.io/podset-unconstrained-topology": "true"},
                 "annotation kueue.x-k8s.io/podset-unconstrained-topology: true", id="implicit-tas"),
    pytest.param([GANG_GATE], {"kueue.x-k8s.io/workload": "job-train-1a2b3"}, None,
                 id="kueue-admitted-without-tas"),
    pytest.param([GANG_GATE], {"netsched.io/max-peer-distance": "rack"}, None, id="netsched-alone"),
])
def test_placed_by_kueue(gates, annotations, expected):
    pod = make_pod(annotations=annotations, schedulingGates=[{"name": g} for g in gates])
    assert placed_by_kueue(pod) == expected
