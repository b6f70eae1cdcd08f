import copy

import pytest

from netsched.api.labels import RACK_LABEL
from netsched.jobs.replica_pods import GANG_GATE, pin_patch, pod_name, replica_pod, ungate_patch
from netsched.testing.builders import job

TEMPLATE = {
    "metadata": {"labels": {"team": "vision"}, "annotations": {"owner": "ana"}},
    "spec": {"containers": [
        {"name": "main", "image": "trainer:1", "env": [{"name": "LR", "value": "0.1"}],
         "resources": {"limits": {"cpu": "8"}, "requests": {"memory": "64Gi"}}},
        {"name": "sidecar", "image": "logs:1"},
    ]},
}


@pytest.mark.parametrize("replica, attempt, name", [
    pytest.param(0, 0, "job-0", id="first-pod"),
    pytest.param(3, 0, "job-3", id="replica-3"),
    pytest.param(0, 2, "job-0-a2", id="second-replacement"),
])
def test_pod_names_are_deterministic(replica, attempt, name):
    assert pod_name("job", replica, attempt) == name
    assert replica_pod(job(name="job", replicas=4), replica, attempt, gated=False)["metadata"]["name"] == name


def test_labels_owner_and_namespace():
    meta = replica_pod(job(template=TEMPLATE), 1, 2, gated=False)["metadata"]
    assert meta["namespace"] == "ml"
    assert meta["labels"] == {"team": "vision", "netsched.io/job": "train", "netsched.io/replica": "1",
                              "netsched.io/attempt": "2"}
    assert meta["ownerReferences"] == [{"apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob",
                                        "name": "train", "uid": "uid-1", "controller": True,
                                        "blockOwnerDeletion": True}]


@pytest.mark.parametrize("gated, gates", [
    pytest.param(True, [{"name": GANG_GATE}], id="gated"),
    pytest.param(False, None, id="ungated"),
])
def test_scheduling_gate_only_when_gated(gated, gates):
    assert replica_pod(job(), 0, 0, gated)["spec"].get("schedulingGates") == gates


def test_gpus_go_on_the_first_container_only_and_template_resources_stay():
    main, sidecar = replica_pod(job(gpus=4, template=TEMPLATE), 0, 0, gated=False)["spec"]["containers"]
    assert main["resources"] == {"limits": {"cpu": "8", "nvidia.com/gpu": "4"},
                                 "requests": {"memory": "64Gi", "nvidia.com/gpu": "4"}}
    assert "resources" not in sidecar


def test_network_and_data_annotations_join_the_template_ones():
    j = job(replicas=3, gpus=4, template=TEMPLATE,
            network={"maxPeerDistance": "rack", "maxDataDistance": "zone", "maxPeerRttMs": 0.5},
            dataSources=[{"name": "imagenet", "kind": "zone", "location": "zone-b"},
                  {"name": "other", "kind": "rack", "location": "rack-a1"}])
    assert replica_pod(j, 0, 0, gated=True)["metadata"]["annotations"] == {
        "owner": "ana", "netsched.io/job-gpus": "12", "netsched.io/data-source": "zone:zone-b",
        "netsched.io/max-peer-distance": "rack", "netsched.io/max-data-distance": "zone",
        "netsched.io/max-peer-rtt-ms": "0.5", "netsched.io/replicas": "3"}


def test_without_network_data_or_workload_only_the_job_size_is_annotated():
    assert replica_pod(job(replicas=2, gpus=8), 0, 0, gated=False)["metadata"]["annotations"] == {
        "netsched.io/job-gpus": "16", "netsched.io/replicas": "2"}


def test_workload_hints_are_annotated_for_the_model_with_the_data_size_as_input_size():
    j = job(workload={"kind": "etl", "communicationIntensity": "low", "expectedDurationSeconds": 600},
            dataSources=[{"name": "logs", "kind": "zone", "location": "zone-a", "sizeGB": 250}])
    notes = replica_pod(j, 0, 0, gated=False)["metadata"]["annotations"]
    hints = {k: v for k, v in notes.items() if k not in ("netsched.io/job-gpus", "netsched.io/data-source")}
    assert hints == {
        "netsched.io/replicas": "2", "netsched.io/workload-kind": "etl", "netsched.io/input-size-gb": "250",
        "netsched.io/communication-intensity": "low", "netsched.io/expected-duration-seconds": "600"}


def test_an_endpoint_data_source_is_annotated_with_its_host_and_port():
    j = job(dataSources=[{"name": "s3", "kind": "endpoint", "endpoint": "minio.data:9000"}])
    assert replica_pod(j, 0, 0, False)["metadata"]["annotations"]["netsched.io/data-source"] == \
        "endpoint:minio.data:9000"


@pytest.mark.parametrize("template_spec, operator_flag, scheduler", [
    pytest.param({}, None, "netsched", id="default"),
    pytest.param({}, "gpu-sched", "gpu-sched", id="operator-flag"),
    pytest.param({"schedulerName": "default-scheduler"}, "gpu-sched", "default-scheduler",
                 id="template-wins"),
])
def test_scheduler_name(template_spec, operator_flag, scheduler):
    template = {"spec": {"containers": [{"name": "main", "image": "x"}], **template_spec}}
    kwargs = {"scheduler": operator_flag} if operator_flag else {}
    spec = replica_pod(job(template=template), 0, 0, gated=False, **kwargs)["spec"]
    assert spec["schedulerName"] == scheduler
    assert spec["restartPolicy"] == "Never"


def test_priority_class_is_set_from_the_spec():
    assert replica_pod(job(priorityClassName="high"), 0, 0, False)["spec"]["priorityClassName"] == "high"
    assert "priorityClassName" not in replica_pod(job(), 0, 0, False)["spec"]


def test_every_container_gets_the_replica_env_after_its_own():
    main, sidecar = replica_pod(job(replicas=4, template=TEMPLATE), 2, 1, gated=False)["spec"]["containers"]
    netsched_env = [{"name": "NETSCHED_JOB", "value": "train"}, {"name": "NETSCHED_REPLICA", "value": "2"},
                    {"name": "NETSCHED_REPLICAS", "value": "4"}]
    assert main["env"] == [{"name": "LR", "value": "0.1"}, *netsched_env]
    assert sidecar["env"] == netsched_env


def test_the_job_template_is_not_changed():
    j = job(template=copy.deepcopy(TEMPLATE), network={"maxPeerDistance": "rack"})
    replica_pod(j, 0, 0, gated=True)
    replica_pod(j, 1, 0, gated=True)
    assert j.template == TEMPLATE


def test_the_templates_own_scheduling_gates_are_kept_beside_the_gang_gate():
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    gates = replica_pod(job(template=template), 0, 0, gated=True)["spec"]["schedulingGates"]
    assert gates == [{"name": "example.com/quota"}, {"name": GANG_GATE}]


def test_lifting_the_gang_gate_keeps_other_gates():
    assert ungate_patch(["netsched.io/gang", "example.com/quota"]) == {
        "op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "example.com/quota"}]}
    assert ungate_patch(["netsched.io/gang"]) == {"op": "remove", "path": "/spec/schedulingGates"}


@pytest.mark.parametrize("selector, ops", [
    pytest.param(None, [{"op": "add", "path": "/spec/nodeSelector", "value": {RACK_LABEL: "rack-a1"}}],
                 id="no-selector"),
    pytest.param({"gpu": "h100"}, [{"op": "add", "path": "/spec/nodeSelector/netsched.io~1rack",
                                    "value": "rack-a1"}], id="added-with-its-slash-escaped"),
    pytest.param({RACK_LABEL: "rack-a1"}, [], id="already-there"),
])
def test_the_pin_adds_the_domain_to_a_gated_pods_node_selector(selector, ops):
    assert pin_patch(selector, RACK_LABEL, "rack-a1") == ops
