"""Where a gang's size is when its pods leave it unsaid (size_object), and how each kind reads it from
its object, with the fields as the projects' own API types name them."""

import pytest

from netsched.jobs.kinds.kubeflow import replicas
from netsched.jobs.kinds.native_pod_group import min_count
from netsched.jobs.kinds.pod_group import min_member
from netsched.jobs.pod_gangs import gang_of, size_object


def pod(labels, owner=None):
    meta = {"name": "p", "namespace": "ml", "labels": labels}
    if owner:
        api_version, kind, name = owner
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": "u1",
                                    "controller": True}]
    return {"metadata": meta, "spec": {}}


JOBSET_LABELS = {"jobset.sigs.k8s.io/jobset-name": "llm", "jobset.sigs.k8s.io/replicatedjob-name": "w",
                 "jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-name": "llm-w-0"}


@pytest.mark.parametrize("body, where", [
    pytest.param(pod({"batch.kubernetes.io/job-name": "train"}, ("batch/v1", "Job", "train")),
                 ("batch", "v1", "jobs", "train"), id="batch-job"),
    pytest.param(pod(JOBSET_LABELS, ("batch/v1", "Job", "llm-w-0")), ("batch", "v1", "jobs", "llm-w-0"),
                 id="jobset-its-job"),
    pytest.param(pod({"training.kubeflow.org/job-name": "bert"}, ("kubeflow.org/v1", "PyTorchJob", "bert")),
                 ("kubeflow.org", "v1", "pytorchjobs", "bert"), id="pytorchjob"),
    pytest.param(pod({"training.kubeflow.org/job-name": "bert"}, ("kubeflow.org/v1", "TFJob", "bert")),
                 ("kubeflow.org", "v1", "tfjobs", "bert"), id="tfjob"),
    pytest.param(pod({"scheduling.x-k8s.io/pod-group": "pg"}),
                 ("scheduling.x-k8s.io", "v1alpha1", "podgroups", "pg"), id="podgroup-named-by-label"),
    pytest.param(pod({"training.kubeflow.org/job-name": "bert", "scheduling.x-k8s.io/pod-group": "bert"},
                     ("kubeflow.org/v1", "PyTorchJob", "bert")),
                 ("scheduling.x-k8s.io", "v1alpha1", "podgroups", "bert"), id="kubeflow-gang-its-podgroup"),
    pytest.param({"metadata": {"name": "p", "namespace": "ml"},
                  "spec": {"schedulingGroup": {"podGroupName": "g"}}},
                 ("scheduling.k8s.io", "v1beta1", "podgroups", "g"), id="native-podgroup-named-by-pod-field"),
    pytest.param(pod({"training.kubeflow.org/job-name": "bert"}), None, id="kubeflow-without-its-job"),
    pytest.param(pod({"training.kubeflow.org/job-name": "x"}, ("example.com/v1", "PyTorchJob", "x")), None,
                 id="kubeflow-kind-of-another-group"),
    pytest.param(pod({"training.kubeflow.org/job-name": "x"}, ("kubeflow.org/v1", "Notebook", "x")), None,
                 id="kubeflow-kind-unknown"),
])
def test_size_object(body, where):
    found = size_object(body, gang_of(body))
    assert (found and (found.group, found.version, found.plural, found.name)) == where
    if found:
        assert found.namespace == "ml"


@pytest.mark.parametrize("job, size", [
    pytest.param({"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}, 4,
                 id="master-and-workers"),
    pytest.param({"spec": {"tfReplicaSpecs": {"PS": {}, "Worker": {"replicas": 2}}}}, 3,
                 id="replicas-unset-is-1"),
    pytest.param({"spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 0}}}}, 1,
                 id="zero-workers"),
    pytest.param({"spec": {"runPolicy": {}}}, None, id="no-replica-specs"),
])
def test_kubeflow_size_is_the_replicas_of_all_types(job, size):
    assert replicas(job) == size


@pytest.mark.parametrize("group, size", [
    ({"spec": {"minMember": 4}}, 4), ({"spec": {}}, None), ({"spec": {"minMember": 0}}, None), ({}, None)])
def test_podgroup_size_is_min_member(group, size):
    assert min_member(group) == size


@pytest.mark.parametrize("group, size", [
    pytest.param({"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}, 4, id="gang-min-count"),
    pytest.param({"spec": {"schedulingPolicy": {"basic": {}}}}, 1, id="basic-is-no-gang"),
    pytest.param({"spec": {"schedulingPolicy": {"gang": {}}}}, None, id="gang-without-min-count"),
    pytest.param({"spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}, None, id="min-count-zero"),
    pytest.param({"spec": {}}, None, id="no-policy"),
])
def test_native_podgroup_size_is_its_gang_min_count(group, size):
    assert min_count(group) == size
