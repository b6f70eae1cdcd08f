"""gang_of over pods carrying exactly the labels each kind's controller documents."""

import pytest

from netsched.jobs.pod_gangs import GangRef, gang_of


def pod(labels=None, annotations=None, owner=None):
    meta = {"name": "p", "namespace": "ml", "labels": labels or {}, "annotations": annotations or {}}
    if owner:
        api_version, kind, name = owner
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name, "uid": "u1",
                                    "controller": True, "blockOwnerDeletion": True}]
    return {"metadata": meta, "spec": {}}


def native_pod(labels=None, owner=None):
    """A pod in the native PodGroup `grp` (spec.schedulingGroup, Kubernetes 1.37)."""
    body = pod(labels, owner=owner)
    body["spec"] = {"schedulingGroup": {"podGroupName": "grp"}}
    return body


JOB_POD = pod({"batch.kubernetes.io/job-name": "train", "batch.kubernetes.io/controller-uid": "u1",
               "batch.kubernetes.io/job-completion-index": "2", "job-name": "train", "controller-uid": "u1"},
              {"batch.kubernetes.io/job-completion-index": "2"}, owner=("batch/v1", "Job", "train"))
JOBSET_LABELS = {"jobset.sigs.k8s.io/jobset-name": "llm", "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                 "jobset.sigs.k8s.io/replicatedjob-replicas": "2", "jobset.sigs.k8s.io/job-index": "1"}
LWS_LABELS = {"leaderworkerset.sigs.k8s.io/name": "serve", "leaderworkerset.sigs.k8s.io/group-index": "3",
              "leaderworkerset.sigs.k8s.io/worker-index": "1",
              "leaderworkerset.sigs.k8s.io/group-key": "689ce1b5"}
KUBEFLOW_LABELS = {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker",
                   "training.kubeflow.org/replica-index": "0"}
KUEUE_LABELS = {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/pod-group-name": "pod-group"}


@pytest.mark.parametrize("body, gang", [
    pytest.param(JOB_POD, GangRef("Job", "ml", "train", None), id="batch-job"),
    pytest.param(pod({"batch.kubernetes.io/job-name": "train"}), None, id="job-label-without-its-job"),
    pytest.param(pod({"batch.kubernetes.io/job-name": "train"}, owner=("example.com/v1", "Job", "train")),
                 None, id="job-of-another-api-group"),
    pytest.param(pod({**JOBSET_LABELS, "batch.kubernetes.io/job-name": "llm-workers-1"},
                     {**JOBSET_LABELS}, owner=("batch/v1", "Job", "llm-workers-1")),
                 GangRef("JobSet", "ml", "llm-workers-1", None), id="jobset-pod-is-also-a-job-pod"),
    pytest.param(pod({k: v for k, v in JOBSET_LABELS.items() if not k.endswith("job-index")}), None,
                 id="jobset-without-job-index"),
    pytest.param(pod(LWS_LABELS, {"leaderworkerset.sigs.k8s.io/size": "4"}),
                 GangRef("LeaderWorkerSet", "ml", "serve-3", 4), id="leaderworkerset-group"),
    pytest.param(pod(LWS_LABELS), GangRef("LeaderWorkerSet", "ml", "serve-3", None), id="lws-without-size"),
    pytest.param(pod(KUBEFLOW_LABELS, owner=("kubeflow.org/v1", "PyTorchJob", "bert")),
                 GangRef("KubeflowJob", "ml", "bert", None), id="kubeflow-pytorchjob"),
    pytest.param(pod({"training.kubeflow.org/job-name": "bert", "scheduling.x-k8s.io/pod-group": "bert"}),
                 GangRef("PodGroup", "ml", "bert", None), id="kubeflow-with-its-podgroup"),
    pytest.param(pod({"scheduling.x-k8s.io/pod-group": "pg1"}), GangRef("PodGroup", "ml", "pg1", None),
                 id="scheduler-plugins-podgroup"),
    pytest.param(pod(KUEUE_LABELS, {"kueue.x-k8s.io/pod-group-total-count": "3"}),
                 GangRef("KueuePodGroup", "ml", "pod-group", 3), id="kueue-plain-pod-group"),
    pytest.param(pod({**KUEUE_LABELS, **LWS_LABELS}, {"kueue.x-k8s.io/pod-group-total-count": "4",
                                                       "leaderworkerset.sigs.k8s.io/size": "4"}),
                 GangRef("KueuePodGroup", "ml", "pod-group", 4), id="kueue-admitted-lws"),
    pytest.param(pod(KUEUE_LABELS, {"kueue.x-k8s.io/pod-group-total-count": "three"}),
                 GangRef("KueuePodGroup", "ml", "pod-group", None), id="size-not-a-number"),
    pytest.param(pod(KUEUE_LABELS, {"kueue.x-k8s.io/pod-group-total-count": "0"}),
                 GangRef("KueuePodGroup", "ml", "pod-group", None), id="size-zero"),
    pytest.param(pod({"netsched.io/job": "train", "netsched.io/replica": "0"}), None, id="gpujob-labels"),
    pytest.param(pod({"batch.kubernetes.io/job-name": "train"},
                     owner=("netsched.io/v1alpha1", "GPUJob", "t")), None, id="owned-by-a-gpujob"),
    pytest.param(pod({"netsched.io/job": "train", "batch.kubernetes.io/job-name": "train"},
                     owner=("batch/v1", "Job", "train")),
                 GangRef("Job", "ml", "train", None), id="job-label-by-hand-on-a-job-pod"),
    pytest.param(native_pod({"app": "web"}), GangRef("NativePodGroup", "ml", "grp", None),
                 id="native-podgroup-by-its-pod-field"),
    pytest.param(native_pod(JOB_POD["metadata"]["labels"], owner=("batch/v1", "Job", "train")),
                 GangRef("NativePodGroup", "ml", "grp", None), id="native-podgroup-of-a-job-pod"),
    pytest.param(native_pod(KUEUE_LABELS), GangRef("NativePodGroup", "ml", "grp", None),
                 id="native-podgroup-before-kueue-labels"),
    pytest.param({**pod(), "spec": {"schedulingGroup": {}}}, None, id="scheduling-group-without-a-name"),
    pytest.param(pod({"app": "web"}), None, id="no-gang"),
    pytest.param({"metadata": {}}, None, id="no-labels"),
])
def test_gang_of(body, gang):
    assert gang_of(body) == gang
