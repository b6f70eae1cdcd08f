import numpy as np
import pytest

from netsched.extender.plugin import InvalidNeeds
from netsched.extender.plugins.job_room import JobRoom
from netsched.extender.plugins.job_room.annotation import job_gpus, job_size
from netsched.testing.extender import plugin_request, pod

HALF_A1 = [pod("x", "a1-0", gpus=4)]  # a1-0 has 4 free, rack-a1 12, the other nodes 8 each


@pytest.mark.parametrize("annotations, pods, gpus, job, expected", [
    pytest.param({}, [pod("r0", "a1-0", job="train")], 2, "train", None, id="peers-placed-nothing-to-say"),
    pytest.param({"netsched.io/job-gpus": "8"}, HALF_A1, 2, "train", [0.5 + 0.4 * 0.5, 1.0, 1.0, 1.0],
                 id="job-gpus-on-the-node-then-in-the-rack"),
    pytest.param({"netsched.io/replicas": "3"}, HALF_A1, 4, "train",
                 [4 / 12 + 0.4 * 8 / 12, 8 / 12 + 0.4 * 4 / 12, 8 / 12, 8 / 12], id="replicas-times-gpus"),
    pytest.param({}, HALF_A1, 2, "train", [0.5 + 0.4 * 0.5, 1.0, 1.0, 1.0], id="unknown-size-fills-a-node"),
    pytest.param({}, HALF_A1, 2, None, [1.0, 1.0, 1.0, 1.0], id="a-single-pod-is-its-own-job"),
])
def test_job_room(annotations, pods, gpus, job, expected):
    req, idx, _ = plugin_request(annotations, pods, job=job, gpus=gpus)
    got = JobRoom().score(req, idx)
    assert got is None if expected is None else np.allclose(got, expected)


@pytest.mark.parametrize("annotations, gpus, expected", [
    pytest.param({"netsched.io/job-gpus": "16"}, 2, 16, id="job-gpus"),
    pytest.param({"netsched.io/replicas": "3"}, 2, 6, id="replicas-times-gpus"),
    pytest.param({"netsched.io/job-gpus": "\u00b2", "netsched.io/replicas": "2"}, 4, 8,
                 id="not-a-plain-number-is-unknown"),
    pytest.param({}, 2, None, id="neither"),
])
def test_job_size(annotations, gpus, expected):
    assert job_size(annotations, gpus) == expected


@pytest.mark.parametrize("value", ["2.5", "0", "\u00b2", "\u0663"])
def test_job_gpus_annotation_errors(value):
    with pytest.raises(InvalidNeeds, match="must be a whole number of GPUs"):
        job_gpus({"netsched.io/job-gpus": value})
