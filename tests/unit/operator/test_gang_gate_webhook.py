"""The admission webhook's mutation: the gang gate on pods of recognised gangs, nothing else touched."""

import copy

import kopf
import pytest

from netsched.api.labels import SCHEDULER_NAME
from netsched.jobs.replica_pods import GANG_GATE, replica_pod
from netsched.operator.metrics import OperatorMetrics
from netsched.operator.webhook import gang_gate
from netsched.operator.webhook.configurations import match_conditions, webhook_configuration
from netsched.operator.webhook.gang_gate import admit, gated
from netsched.testing.builders import job, make_pod

OTHER_GATE = {"name": "example.com/quota"}
GATE = {"name": GANG_GATE}
NAME_LABEL = "kubernetes.io/metadata.name"
JOB_OWNER = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u", "controller": True}]
GANGS = {  # each kind's pod as its documented controller labels it
    "batch-job": {"labels": {"batch.kubernetes.io/job-name": "train",
                             "batch.kubernetes.io/job-completion-index": "0"}, "owners": JOB_OWNER},
    "jobset": {"labels": {"jobset.sigs.k8s.io/jobset-name": "js",
                          "jobset.sigs.k8s.io/replicatedjob-name": "w", "jobset.sigs.k8s.io/job-index": "0"}},
    "leaderworkerset": {"labels": {"leaderworkerset.sigs.k8s.io/name": "lws",
                                   "leaderworkerset.sigs.k8s.io/group-index": "0"},
                        "annotations": {"leaderworkerset.sigs.k8s.io/size": "4"}},
    "kubeflow": {"labels": {"training.kubeflow.org/job-name": "pt"}},
    "podgroup": {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}},
    "kueue-pod-group": {"labels": {"kueue.x-k8s.io/pod-group-name": "kg"},
                        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
}


def gang_pod(kind: str, *, scheduler: str = SCHEDULER_NAME, gates: list | None = None) -> dict:
    case = GANGS[kind]
    pod = make_pod("", labels=case["labels"], annotations=case.get("annotations"), scheduler=scheduler)
    pod["metadata"]["generateName"] = "train-"
    if "owners" in case:
        pod["metadata"]["ownerReferences"] = case["owners"]
    if gates is not None:
        pod["spec"]["schedulingGates"] = gates
    return pod


@pytest.mark.parametrize("kind", GANGS)
def test_a_pod_of_each_recognised_gang_gets_the_gang_gate(kind):
    assert gated(gang_pod(kind), SCHEDULER_NAME) == [GATE]


def test_the_gang_gate_is_added_after_the_gates_the_pod_has():
    assert gated(gang_pod("batch-job", gates=[OTHER_GATE]), SCHEDULER_NAME) == [OTHER_GATE, GATE]


@pytest.mark.parametrize("pod", [
    pytest.param(gang_pod("batch-job", gates=[GATE]), id="gated-already"),
    pytest.param(gang_pod("batch-job", gates=[OTHER_GATE, GATE]), id="gated-already-among-others"),
    pytest.param(gang_pod("batch-job", scheduler="default-scheduler"), id="another-scheduler"),
    pytest.param(gang_pod("jobset", scheduler="volcano"), id="another-scheduler-jobset"),
    pytest.param(make_pod("plain"), id="no-gang"),
    pytest.param(make_pod("stray", labels={"batch.kubernetes.io/job-name": "x"}), id="job-label-no-owner"),
    pytest.param(replica_pod(job(), 0, 0, gated=False), id="gpujob-pod-ungated"),
    pytest.param(replica_pod(job(), 1, 0, gated=True), id="gpujob-pod-gated"),
])
def test_other_pods_are_left_as_they_are(pod):
    assert gated(pod, SCHEDULER_NAME) is None


def test_the_configured_scheduler_name_is_the_one_gated():
    assert gated(gang_pod("kubeflow", scheduler="gpu-sched"), "gpu-sched") == [{"name": GANG_GATE}]
    assert gated(gang_pod("kubeflow"), "gpu-sched") is None


def test_gating_never_changes_the_pod_it_reads():
    pod = gang_pod("batch-job", gates=[OTHER_GATE])
    before = copy.deepcopy(pod)
    gated(pod, SCHEDULER_NAME)
    assert pod == before


def test_each_answer_is_counted_by_outcome():
    metrics = OperatorMetrics()
    admit(gang_pod("podgroup"), SCHEDULER_NAME, metrics)
    admit(make_pod("plain"), SCHEDULER_NAME, metrics)
    admit(gang_pod("podgroup", gates=[{"name": GANG_GATE}]), SCHEDULER_NAME, metrics)
    assert counts(metrics) == {"gated": 1, "passed": 2, "error": 0}


def test_a_pod_it_cannot_read_is_refused_naming_it_and_counted(monkeypatch):
    def broken(pod):
        raise KeyError("metadata")
    monkeypatch.setattr(gang_gate, "gang_of", broken)
    metrics = OperatorMetrics()
    refusal = r"pod ml/train-\* belongs to a gang .*KeyError.*create it again"
    with pytest.raises(kopf.AdmissionError, match=refusal):
        admit(gang_pod("batch-job"), SCHEDULER_NAME, metrics)
    assert counts(metrics) == {"gated": 0, "passed": 0, "error": 1}


def test_the_configuration_scopes_by_namespace_and_skips_other_pods():
    config = webhook_configuration("netsched", {"url": "https://127.0.0.1:9443/gang-gate"}, "netsched",
                                   exclude_namespaces=("kube-system", "netsched-system"))
    hook = config["webhooks"][0]
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": NAME_LABEL, "operator": "NotIn", "values": ["kube-system", "netsched-system"]},
        {"key": "netsched.io/gang-scheduling", "operator": "In", "values": ["enabled"]}]
    assert (hook["failurePolicy"], hook["timeoutSeconds"], hook["sideEffects"]) == ("Fail", 5, "None")
    assert hook["rules"][0]["operations"] == ["CREATE"]
    everywhere = webhook_configuration("n", {}, "netsched", opt_in=False)["webhooks"][0]
    assert [e["key"] for e in everywhere["namespaceSelector"]["matchExpressions"]] == [NAME_LABEL]


def test_the_match_conditions_name_the_scheduler_and_the_gpujob_kind():
    expressions = " ".join(c["expression"] for c in match_conditions("gpu-sched"))
    assert "object.spec.schedulerName == 'gpu-sched'" in expressions
    assert "o.kind == 'GPUJob' && o.apiVersion.startsWith('netsched.io/')" in expressions


def counts(metrics: OperatorMetrics) -> dict[str, float]:
    sample = metrics.registry.get_sample_value
    return {outcome: sample("netsched_webhook_requests_total", {"outcome": outcome})
            for outcome in ("gated", "passed", "error")}
