"""The API server's verdict asked the right way (a dry run, unknown fields refused) and told in one line;
kinds whatif does not answer for are refused before any call."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from netsched.foresight.admission import NotServed, admitted, defaulted, pods_admitted, templates_admitted
from netsched.foresight.whatif import WhatIfError, as_submitted
from netsched.testing.builders import make_gpujob
from netsched.testing.kube import ApiServer

REPLICAS = ('GPUJob.netsched.io "j" is invalid: [spec.replicas: Invalid value: 0: spec.replicas in body '
            "should be greater than or equal to 1")
NOT_CHECKED = ("<nil>: Invalid value: null: some validation rules were not checked because the object was "
               "invalid; correct the existing errors to complete validation")
INVALID = {"kind": "Status", "message": f"{REPLICAS}, {NOT_CHECKED}]"}


def test_a_gpujob_goes_to_the_api_server_as_a_strict_dry_run_in_its_own_namespace():
    api = ApiServer()
    job = make_gpujob("j", manifest=True)
    job["metadata"]["namespace"] = "team"
    assert admitted(api, job, "default") == {"metadata": {}}  # managedFields dropped
    method, url, body = api.requests[0]
    parts = urlsplit(url)
    assert (method, parts.path, body) == ("POST", "/apis/netsched.io/v1alpha1/namespaces/team/gpujobs", job)
    assert parse_qs(parts.query) == {"dryRun": ["All"], "fieldValidation": ["Strict"]}


def test_its_pods_go_as_the_operator_would_make_them_without_an_owner_that_does_not_exist():
    api = ApiServer()
    pods_admitted(api, as_submitted(make_gpujob("j", gpus=8, manifest=True), "team"))
    method, url, pod = api.requests[0]
    assert urlsplit(url).path == "/api/v1/namespaces/team/pods" and "dryRun=All" in url
    assert pod["metadata"]["name"] == "j-0" and "ownerReferences" not in pod["metadata"]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}


@pytest.mark.parametrize(("status", "body", "said"), [
    (422, INVALID, f"{REPLICAS}]"),
    (409, {"message": 'gpujobs.netsched.io "j" already exists'},
     'gpujobs.netsched.io "j" already exists; whatif answers for a GPUJob not yet submitted: give it another '
     "name, or see this one with `netsched why NAME`"),
    (403, {"message": "forbidden"},
     "forbidden; whatif asks the API server with a dry-run create, which needs permission to create "
     "gpujobs.netsched.io in default"),
    (404, {"message": "the server could not find the requested resource"},
     "the server could not find the requested resource: the API server does not serve GPUJob "
     "(netsched.io/v1alpha1); is netsched's CRD installed?"),
    (404, {"message": 'namespaces "x" not found'}, 'namespaces "x" not found'),
    (500, {"message": "etcd\nis down"}, "etcd is down"),
])
def test_the_api_server_s_refusal_is_its_own_message_on_one_line_with_a_fix_where_one_is_known(
        status, body, said):
    with pytest.raises(WhatIfError) as refused:
        admitted(ApiServer(status, body), make_gpujob("j", manifest=True), "default")
    assert str(refused.value) == said


def test_a_user_who_may_not_create_pods_still_gets_an_answer_but_a_refused_pod_is_said():
    job = as_submitted(make_gpujob("j", manifest=True), "ml")
    pods_admitted(ApiServer(403, {"message": "forbidden"}), job)
    with pytest.raises(WhatIfError) as refused:
        pods_admitted(ApiServer(422, {"message": 'Pod "j-0" is invalid: x'}), job)
    assert str(refused.value) == ("the API server would refuse its pods (made from spec.template): "
                                  'Pod "j-0" is invalid: x')


KINDS = ("GPUJob (netsched.io/v1alpha1), JAXJob, MPIJob, PaddleJob, PyTorchJob, TFJob, XGBoostJob "
         "(kubeflow.org/v1), Job (batch/v1), JobSet (jobset.x-k8s.io/v1alpha2), "
         "LeaderWorkerSet (leaderworkerset.x-k8s.io/v1)")


@pytest.mark.parametrize(("change", "said"), [
    ({"kind": "Deployment"}, f"kind Deployment: netsched does not gang its pods; whatif answers only for "
                             f"{KINDS}"),
    ({"kind": None}, f"kind is not set; whatif answers for {KINDS}"),
    ({"apiVersion": "netsched.io/v1"}, "apiVersion 'netsched.io/v1': the API server serves GPUJob as "
                                       "netsched.io/v1alpha1; write apiVersion: netsched.io/v1alpha1"),
    ({"apiVersion": None},
     "apiVersion is not set: the API server serves GPUJob as netsched.io/v1alpha1; write apiVersion: "
     "netsched.io/v1alpha1"),
])
def test_a_kind_whatif_does_not_answer_for_is_refused_before_asking(change, said):
    api = ApiServer()
    with pytest.raises(WhatIfError) as refused:
        admitted(api, make_gpujob("j", manifest=True) | change, "default")
    assert str(refused.value) == said and api.requests == []


JOBSET = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "llm"},
          "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"parallelism": 2}}}]}}


def test_a_jobset_whose_crd_is_not_served_is_not_refused_but_said_so():
    with pytest.raises(NotServed) as unserved:
        admitted(ApiServer(404, {"message": "the server could not find the requested resource"}), JOBSET,
                 "ml")
    assert str(unserved.value).startswith("JobSet is not installed (the API server does not serve "
                                          "jobset.x-k8s.io/v1alpha2)")
    with pytest.raises(WhatIfError) as missing:  # a namespace that does not exist is still a refusal
        admitted(ApiServer(404, {"message": 'namespaces "ml" not found'}), JOBSET, "ml")
    assert not isinstance(missing.value, NotServed)


def test_what_an_unserved_kinds_controller_would_make_is_checked_as_jobs_and_pods():
    api = ApiServer()
    templates_admitted(api, JOBSET, "ml")
    [(_, url, job)] = api.requests
    assert urlsplit(url).path == "/apis/batch/v1/namespaces/ml/jobs"
    assert job == {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "whatif-"},
                   "spec": {"parallelism": 2}}
    lws = {"kind": "LeaderWorkerSet", "metadata": {"namespace": "team"}, "spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"containers": []}}}}}
    refused = ApiServer(422, {"message": 'Pod "whatif-x" is invalid: spec.containers: Required value'})
    with pytest.raises(WhatIfError) as said:
        templates_admitted(refused, lws, "ml")
    [(_, url, pod)] = refused.requests
    assert urlsplit(url).path == "/api/v1/namespaces/team/pods" and pod["metadata"] == {
        "labels": {"a": "b"}, "generateName": "whatif-"}
    assert str(said.value) == ("spec.leaderWorkerTemplate.workerTemplate: the API server would refuse the "
                               'Pod made from it: Pod "whatif-x" is invalid: spec.containers: Required value')


def test_a_jobset_of_a_version_no_api_serves_is_said_to_be_not_installed():
    old = JOBSET | {"apiVersion": "jobset.x-k8s.io/v1alpha1"}
    with pytest.raises(WhatIfError) as refused:
        admitted(ApiServer(404, {"message": "the server could not find the requested resource"}), old, "ml")
    assert str(refused.value) == (
        "apiVersion 'jobset.x-k8s.io/v1alpha1': JobSet is not installed (the API server serves no "
        "jobset.x-k8s.io API); whatif reads JobSet as jobset.x-k8s.io/v1alpha2: install JobSet's controller "
        "and write apiVersion: jobset.x-k8s.io/v1alpha2")
    with pytest.raises(WhatIfError) as served:  # served, in another version: the version is the fix
        admitted(ApiServer(200, {"kind": "APIGroup"}), old, "ml")
    assert "the API server serves JobSet as jobset.x-k8s.io/v1alpha2" in str(served.value)


def test_a_jobset_gets_the_defaults_its_webhook_gives_before_the_dry_run():
    body = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "r"},
            "spec": {"replicatedJobs": [
                {"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
                {"name": "x", "template": {"spec": {"completionMode": "NonIndexed", "template": {
                    "spec": {"restartPolicy": "Never"}}}}},
                {"name": "broken", "template": None}]}}
    out = defaulted(body)
    first, second = (rj["template"]["spec"] for rj in out["spec"]["replicatedJobs"][:2])
    assert (first["completionMode"], first["template"]["spec"]["restartPolicy"]) == ("Indexed", "OnFailure")
    assert (second["completionMode"], second["template"]["spec"]["restartPolicy"]) == ("NonIndexed", "Never")
    assert "completionMode" not in body["spec"]["replicatedJobs"][0]["template"]["spec"]  # a copy


@pytest.mark.parametrize(("kind", "field", "policy"), [
    ("PyTorchJob", "pytorchReplicaSpecs", "OnFailure"), ("TFJob", "tfReplicaSpecs", "Never")])
def test_a_kubeflow_job_gets_the_training_operator_s_replica_defaults(kind, field, policy):
    body = {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "t"}, "spec": {field: {
        "Master": {"template": {"spec": {"containers": []}}},
        "Worker": {"replicas": 3, "restartPolicy": "ExitCode", "template": {"spec": {"containers": []}}}}}}
    specs = defaulted(body)["spec"][field]
    assert (specs["Master"]["replicas"], specs["Master"]["restartPolicy"]) == (1, policy)
    assert specs["Master"]["template"]["spec"]["restartPolicy"] == policy
    assert specs["Worker"]["template"]["spec"]["restartPolicy"] == "Never"  # ExitCode runs as Never
