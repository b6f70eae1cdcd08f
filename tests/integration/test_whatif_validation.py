"""`netsched whatif` as a user runs it, against the real API server: a manifest `kubectl apply` would
refuse gets the API server's own verdict (or the operator's, or one line on what cannot be read) on
one line, exit 2, never a traceback and never an answer; good ones get one answer each, from a file of
several documents, stdin or a directory."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest
import yaml

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import scratch_namespace

NETSCHED = [sys.executable, "-m", "netsched"]
GOOD = make_gpujob("job", replicas=2, gpus=8, manifest=True)
GONE = object()  # as a value: the field is left out


def run(kubeconfig, namespace: str, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    done = subprocess.run([*NETSCHED, "whatif", "-n", namespace, f"--kubeconfig={kubeconfig}", *args],
                          input=stdin, capture_output=True, timeout=300)
    return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def changed(**fields: Any) -> bytes:
    """GOOD as YAML with each dotted field (`__` for a dot: spec__network__maxPeerDistance) set, or left
    out for GONE."""
    body = copy.deepcopy(GOOD)
    for dotted, value in fields.items():
        *path, last = dotted.split("__")
        at = body
        for key in path:
            at = at.setdefault(key, {})
        if value is GONE:
            del at[last]
        else:
            at[last] = value
    return yaml.safe_dump(body).encode()


def pod(**fields: Any) -> bytes:
    """GOOD with these fields in its pod template's spec."""
    containers = [{"name": "main", "image": "trainer:1"}]
    return changed(spec__template={"spec": {"containers": containers, **fields}})


def container(**fields: Any) -> bytes:
    return pod(containers=[{"name": "main", "image": "trainer:1", **fields}])


def annotated(annotations: dict) -> bytes:
    return changed(spec__template={"metadata": {"annotations": annotations},
                                   "spec": {"containers": [{"name": "main", "image": "trainer:1"}]}})


# (id, the file, what the one line must say); the API server's messages are its own words
REFUSED = [
    ("unknown-level", changed(spec__network={"maxPeerDistance": "rak"}),
     "spec.network.maxPeerDistance: 'rak' is not a topology level of this cluster: write one of node, rack, "
     "zone"),
    ("typo-in-network", changed(spec__network={"maxPeerDistence": "rack"}),
     'unknown field "spec.network.maxPeerDistence"'),
    ("typo-in-spec", changed(spec__replica=2), 'unknown field "spec.replica"'),
    ("typo-in-metadata", changed(metadata__labes={"a": "b"}), 'unknown field "metadata.labes"'),
    ("typo-in-data-source", changed(spec__dataSources=[{"name": "d", "kind": "rack", "locaton": "r"}]),
     'unknown field "spec.dataSources[0].locaton"'),
    ("zero-replicas", changed(spec__replicas=0), "spec.replicas: Invalid value: 0"),
    ("negative-replicas", changed(spec__replicas=-1), "spec.replicas: Invalid value: -1"),
    ("zero-gpus", changed(spec__gpusPerReplica=0), "spec.gpusPerReplica: Invalid value: 0"),
    ("too-many-gpus", changed(spec__gpusPerReplica=65), "spec.gpusPerReplica: Invalid value: 65"),
    ("replicas-as-word", changed(spec__replicas="two"), "spec.replicas in body must be of type integer"),
    ("replicas-as-string", changed(spec__replicas="2"), "spec.replicas in body must be of type integer"),
    ("replicas-as-float", changed(spec__replicas=2.5), "spec.replicas in body must be of type integer"),
    ("no-replicas", changed(spec__replicas=GONE), "spec.replicas: Required value"),
    ("no-template", changed(spec__template=GONE), "spec.template: Required value"),
    ("no-containers", changed(spec__template={"spec": {}}), "spec.template.spec.containers: Required value"),
    ("empty-containers", changed(spec__template={"spec": {"containers": []}}),
     "spec.template.spec.containers: Invalid value"),
    ("containers-as-map", changed(spec__template={"spec": {"containers": {"name": "main"}}}),
     'unknown field "spec.template.spec.containers.name"'),
    ("container-without-image", changed(spec__template={"spec": {"containers": [{"name": "main"}]}}),
     "spec.template.spec.containers[0].image: Required value"),
    ("no-spec", changed(spec=GONE), "spec: Required value"),
    ("spec-as-string", changed(spec="big"), "spec: Invalid value"),
    ("cpu-lots", container(resources={"requests": {"cpu": "lots"}}),
     "requests.cpu: 'lots' is not a Kubernetes quantity"),
    ("memory-with-space", container(resources={"limits": {"memory": "16 GB"}}),
     "limits.memory: '16 GB' is not a Kubernetes quantity"),
    # passes the API server and the operator's checks, yet no answer can be worked out: said, no traceback
    ("cpu-beyond-any-number", container(resources={"requests": {"cpu": "1e1000"}}),
     "larger than any real machine has"),
    ("env-as-map", container(env={"A": "1"}), "containers[0].env: {'A': '1'} is not a list"),
    ("gpus-in-template", container(resources={"limits": {"nvidia.com/gpu": 8}}),
     "do not set nvidia.com/gpu in the pod template"),
    ("min-available-over-replicas", changed(spec__gang={"minAvailable": 3}),
     "spec.gang.minAvailable must be at most spec.replicas"),
    ("enum-workload-kind", changed(spec__workload={"kind": "trainin"}), 'Unsupported value: "trainin"'),
    ("enum-intensity", changed(spec__workload={"communicationIntensity": "extreme"}),
     'Unsupported value: "extreme"'),
    ("zero-rtt", changed(spec__network={"maxPeerRttMs": 0}), "spec.network.maxPeerRttMs: Invalid value: 0"),
    ("rtt-as-word", changed(spec__network={"maxPeerRttMs": "fast"}),
     "spec.network.maxPeerRttMs in body must be of type number"),
    ("negative-backoff", changed(spec__backoffLimit=-1), "spec.backoffLimit: Invalid value: -1"),
    ("endpoint-without-endpoint", changed(spec__dataSources=[{"name": "d", "kind": "endpoint"}]),
     "a data source of kind endpoint needs `endpoint`"),
    ("endpoint-without-port",
     changed(spec__dataSources=[{"name": "d", "kind": "endpoint", "endpoint": "s3"}]),
     "spec.dataSources[0].endpoint: Invalid value"),
    ("data-distance-without-data", changed(spec__network={"maxDataDistance": "rack"}),
     "spec.network.maxDataDistance 'rack' needs spec.dataSources"),
    ("data-on-unknown-rack",
     changed(spec__network={"maxDataDistance": "rack"},
             spec__dataSources=[{"name": "d", "kind": "rack", "location": "rack-zz"}]),
     "spec.dataSources[0].location 'rack-zz': no node has"),
    ("no-such-priority-class", changed(spec__priorityClassName="urgnet"),
     "spec.priorityClassName 'urgnet': no such PriorityClass"),
    # the CRD keeps the pod template as written: the API server's verdict on the pods the operator would make
    ("typo-in-pod-template", pod(nodeSelecter={"disk": "ssd"}),
     'its pods (made from spec.template): Pod in version "v1" cannot be handled as a Pod: strict decoding '
     'error: unknown field "spec.nodeSelecter"'),
    ("node-selector-as-string", pod(nodeSelector="ssd"),
     "cannot unmarshal string into Go struct field PodSpec.spec.nodeSelector"),
    ("negative-cpu", container(resources={"requests": {"cpu": "-1"}}),
     "spec.containers[0].resources.requests[cpu]: Invalid value"),
    ("requests-over-limits", container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
     "must be less than or equal to cpu limit"),
    ("container-name-not-dns", pod(containers=[{"name": "Main_1", "image": "i"}]),
     'spec.containers[0].name: Invalid value: "Main_1"'),
    ("empty-image", pod(containers=[{"name": "main", "image": ""}]),
     "spec.containers[0].image: Required value"),
    ("enum-restart-policy", pod(restartPolicy="Sometimes"),
     'spec.restartPolicy: Unsupported value: "Sometimes"'),
    ("annotation-bad-key", annotated({"bad key!": "x"}), 'metadata.annotations: Invalid value: "bad key!"'),
    ("annotation-as-number", annotated({"netsched.io/duration": 30}),
     "spec.template.metadata.annotations.netsched.io/duration in body must be of type string"),
    ("annotation-galaxy", annotated({"netsched.io/max-peer-distance": "galaxy"}), "galaxy"),
    ("no-name", changed(metadata__name=GONE), "metadata.name: Required value"),
    ("name-too-long", changed(metadata__name="j" * 60), "metadata.name must be at most 50 characters"),
    ("name-not-dns", changed(metadata__name="Big_Job"), 'metadata.name: Invalid value: "Big_Job"'),
    ("metadata-as-string", changed(metadata="job"), "cannot unmarshal string"),
    ("no-such-namespace", changed(metadata__namespace="nowhere"), 'namespaces "nowhere" not found'),
    ("kind-pod", yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}).encode(),
     "Pod/p (document 1 of "),
    ("no-kind", changed(kind=GONE), "kind is not set"),
    ("wrong-api-version", changed(apiVersion="netsched.io/v1"), "apiVersion 'netsched.io/v1'"),
    ("no-api-version", changed(apiVersion=GONE), "apiVersion is not set"),
    ("yaml-syntax", b"apiVersion: netsched.io/v1alpha1\nkind: GPUJob\nspec: {replicas: [\n",
     "not valid YAML: line 4"),
    ("yaml-bad-indent", b"kind: GPUJob\n metadata:\n  name: x\n", "not valid YAML: line 2"),
    ("duplicate-field", changed().replace(b"kind: GPUJob", b"kind: GPUJob\nkind: GPUJob"),
     "duplicate field 'kind'"),
    ("empty-file", b"", "no objects in it"),
    ("only-separators", b"---\n# nothing\n---\n", "no objects in it"),
    ("binary", bytes(range(256)) * 4, "not UTF-8 text"),
    ("control-characters", b"\x00\x01kind: GPUJob", "not valid YAML"),
    ("top-level-list", yaml.safe_dump([GOOD]).encode(), "a list, not an object"),
    ("top-level-word", b"GPUJob\n", "just 'GPUJob', not an object"),
    ("broken-json", b'{"apiVersion": "netsched.io/v1alpha1", "kind": ', "not valid YAML"),
    ("not-a-number", changed(spec__workload={"inputSizeGB": float("nan")}), "cannot be written as JSON"),
]


@pytest.fixture(scope="module")
def whatif_ns(core):
    """One namespace for the whole table: whatif creates nothing in it."""
    with scratch_namespace(core, "whatif") as name:
        yield name


@pytest.mark.parametrize(("manifest", "says"), [pytest.param(manifest, says, id=name)
                                                  for name, manifest, says in REFUSED])
def test_a_manifest_the_api_server_or_the_operator_would_refuse_gets_one_line_and_no_answer(
        dev_cluster, whatif_ns, tmp_path, manifest, says):
    path = tmp_path / "job.yaml"
    path.write_bytes(manifest)
    code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", str(path))
    assert "Traceback" not in out + err
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and err.startswith("netsched: error: whatif: "), err
    assert says in err and str(path) in err


def test_good_jobs_get_one_answer_each_from_a_multi_document_file_stdin_and_a_directory(
        dev_cluster, jobs, whatif_ns, tmp_path):
    second = copy.deepcopy(GOOD)
    second["metadata"] = {"name": "other", "namespace": "default"}  # the manifest's namespace wins over -n
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump_all([GOOD, second]))
    code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", str(both))
    assert (code, err) == (0, "")
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("GPUJob ")] == [
        f"GPUJob {whatif_ns}/job", "GPUJob default/other"]
    assert out.count("Fits now: yes") == 2 and out.count("Nothing was created.") == 2

    code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", str(both), "-o", "json")
    assert (code, err) == (0, "")
    assert [a["job"] for a in json.loads(out)] == [f"{whatif_ns}/job", "default/other"]

    generated = copy.deepcopy(GOOD)
    generated["metadata"] = {"generateName": "job-"}
    code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", "-", "-o", "json",
                         stdin=json.dumps(generated).encode())
    assert (code, err) == (0, "")
    answer = json.loads(out)  # one object in: its answer, not a list
    assert answer["job"].startswith(f"{whatif_ns}/job-") and answer["schedulable"]["fits"] is True

    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "a.yaml").write_text(yaml.safe_dump(GOOD))
    (folder / "b.json").write_text(json.dumps(second))
    (folder / "c.yml").write_bytes(changed(spec__network={"maxPeerDistance": "rak"}))
    (folder / "notes.txt").write_text("not a manifest")
    code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", str(folder), "-o", "yaml")
    assert code == 2 and "Traceback" not in out + err
    assert [a["job"] for a in yaml.safe_load(out)] == [f"{whatif_ns}/job", "default/other"]
    assert err.splitlines() == [f"netsched: error: whatif: GPUJob/job (document 1 of {folder / 'c.yml'}): "
                                "spec.network.maxPeerDistance: 'rak' is not a topology level of this "
                                "cluster: write one of node, rack, zone"]
    for namespace in (whatif_ns, "default"):
        assert not jobs.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]


def test_a_job_that_exists_already_or_a_path_that_does_not_is_said_in_one_line(
        dev_cluster, jobs, whatif_ns, tmp_path):
    existing = make_gpujob("there", replicas=1, gpus=1, manifest=True)
    jobs.create_namespaced_custom_object(GROUP, VERSION, whatif_ns, PLURAL, existing)
    path = tmp_path / "there.json"
    path.write_text(json.dumps(existing))
    try:
        code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", str(path))
    finally:
        jobs.delete_namespaced_custom_object(GROUP, VERSION, whatif_ns, PLURAL, "there")
    assert (code, out, len(err.splitlines())) == (2, "", 1)
    assert 'gpujobs.netsched.io "there" already exists' in err and "netsched why" in err

    (tmp_path / "empty").mkdir()
    for missing, says in ((tmp_path / "nope.yaml", "No such file or directory"),
                          (tmp_path / "empty", "a directory with no .yaml, .yml, .json files")):
        code, out, err = run(dev_cluster.kubeconfig, whatif_ns, "-f", str(missing))
        assert (code, out) == (2, "") and err == f"netsched: error: whatif: {missing}: {says}\n"
