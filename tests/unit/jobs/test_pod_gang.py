"""A pod gang read through the workload seam: one member pod stands for all, the size is the workload's."""

import pytest

from netsched.jobs.capacity import gang_fit, node_room
from netsched.jobs.kinds.batch_job import members
from netsched.jobs.pod_gang import PodGang
from netsched.jobs.pod_gangs import GangRef
from netsched.jobs.validation import problems
from netsched.jobs.workload import NetworkNeeds
from netsched.testing.builders import make_node, make_pod

REF = GangRef("Job", "ml", "train", None)


def gang(size=4, annotations=None, **pod):
    member = make_pod("train-0", gpus=4, annotations=annotations, requests={"cpu": "2"}, **pod)
    return PodGang(REF, size, member)


@pytest.mark.parametrize("job, size", [
    pytest.param({"spec": {"parallelism": 4, "completions": 4}}, 4, id="indexed-4"),
    pytest.param({"spec": {"parallelism": 4, "completions": 8}, "status": {"succeeded": 6}}, 2,
                 id="two-completions-left"),
    pytest.param({"spec": {"parallelism": 4}}, 4, id="work-queue"),
    pytest.param({"spec": {}}, 1, id="parallelism-unset"),
    pytest.param({"spec": {"parallelism": 0}}, 0, id="scaled-to-zero"),
    pytest.param({"spec": {"parallelism": 2, "completions": 2}, "status": {"succeeded": 2}}, 0, id="done"),
])
def test_a_jobs_size_is_its_parallelism_capped_by_completions_left(job, size):
    assert members(job) == size


def test_member_pod_stands_for_all():
    g = gang(priorityClassName="high", nodeSelector={"pool": "a"})
    assert (g.size, g.min_available, g.gpus_per_member) == (4, 4, 4)
    assert g.member_request == {"nvidia.com/gpu": 4, "cpu": 2}
    assert g.member_spec["nodeSelector"] == {"pool": "a"}
    assert g.priority_class_name == "high"
    assert (g.workload_kind, g.expected_seconds) == ("training", None)


def test_to_release_is_what_must_fit_when_some_members_already_run():
    assert PodGang(REF, 4, make_pod(), to_release=1).min_available == 1


@pytest.mark.parametrize("annotations, needs", [
    pytest.param({}, NetworkNeeds(), id="none"),
    pytest.param({"netsched.io/max-peer-distance": "rack"}, NetworkNeeds("rack"), id="peer-rack"),
    pytest.param({"netsched.io/max-data-distance": "zone", "netsched.io/data-source": "zone:zone-a"},
                 NetworkNeeds(None, "zone", ("zone", "zone-a")), id="near-data"),
    pytest.param({"netsched.io/data-source": "endpoint:10.0.0.5:9000"},
                 NetworkNeeds(data=("endpoint", "10.0.0.5:9000")), id="endpoint"),
])
def test_needs_come_from_the_templates_annotations(annotations, needs):
    assert gang(annotations=annotations).needs == needs


def test_hints_for_the_forecast():
    g = gang(annotations={"netsched.io/workload-kind": "batch",
                          "netsched.io/expected-duration-seconds": "90"})
    assert (g.workload_kind, g.expected_seconds) == ("batch", 90.0)


@pytest.mark.parametrize("written, kind, seconds", [
    ({}, "training", None),
    ({"netsched.io/workload-kind": "", "netsched.io/expected-duration-seconds": ""}, "training", None),
    ({"netsched.io/workload-kind": "Shuffle", "netsched.io/expected-duration-seconds": "soon"},
     "Shuffle", None),
    # the pod gang takes any number float() reads, as it always has (the model refuses these as hints)
    ({"netsched.io/expected-duration-seconds": "-5"}, "training", -5.0),
    ({"netsched.io/expected-duration-seconds": "1e3"}, "training", 1000.0),
])
def test_hints_are_read_as_written(written, kind, seconds):
    g = gang(annotations=written)
    assert (g.workload_kind, g.expected_seconds) == (kind, seconds)


def test_a_bad_distance_is_named_without_gpujob_fields():
    g = gang(annotations={"netsched.io/max-peer-distance": "galaxy"})
    [found] = problems(g, g.annotations, [], spec_fields=False)
    assert ("annotations[netsched.io/max-peer-distance]: 'galaxy' is not a topology level of this cluster: "
            "write one of node") in found
    assert "spec.network" not in found


def test_fits_in_one_rack_as_a_gpujob_would():
    nodes = [node_room(make_node(f"n{i}", rack=f"rack-{i // 2}", gpus=8)) for i in range(4)]
    used = {"n0": {"nvidia.com/gpu": 8}}  # rack-0 has 8 GPUs left, rack-1 16
    fit = gang_fit(nodes, used, [], gang(annotations={"netsched.io/max-peer-distance": "rack"}))
    assert fit.fits and fit.domain == ("netsched.io/rack", "rack-1")
