"""The kubectl plugin as a platform team's user meets it: `kubectl-netsched` on PATH, found and run by
the real kubectl, against the dev-cluster, reading the namespace and the cluster from the kubeconfig's
contexts as kubectl does."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.devcluster.binaries import ensure_binaries
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import scratch_namespace
from netsched.testing.plugin import install_plugin, path_with


@pytest.fixture
def other_namespace(core):
    with scratch_namespace(core, prefix="other") as name:
        yield name


@pytest.fixture
def kubectl(dev_cluster, namespace, other_namespace, tmp_path):
    """Run `kubectl ARGS` as a user would: the plugin and kubectl on PATH, and a kubeconfig whose
    current context "team" is in `namespace` and whose context "other" is in `other_namespace`."""
    config = yaml.safe_load(Path(dev_cluster.kubeconfig).read_text())
    [admin] = config["contexts"]
    config["contexts"] = [
        {"name": "team", "context": {**admin["context"], "namespace": namespace}},
        {"name": "other", "context": {**admin["context"], "namespace": other_namespace}}]
    config["current-context"] = "team"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    plugin = install_plugin(tmp_path / "bin")
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig"), "HOME": str(tmp_path),
           "PATH": path_with(plugin.parent, ensure_binaries(quiet=True))}

    def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        return subprocess.run(["kubectl", *args], env=env, cwd=tmp_path, text=True, timeout=180, **kwargs)

    run.plugin = plugin  # type: ignore[attr-defined]
    return run


def test_kubectl_finds_the_plugin_and_shows_only_its_verbs(kubectl):
    listed = kubectl("plugin", "list")
    assert listed.returncode == 0, listed.stderr
    assert str(kubectl.plugin) in listed.stdout
    helped = kubectl("netsched", "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: kubectl netsched")
    assert "dev-cluster" not in helped.stdout and "simulate" not in helped.stdout


def test_the_plugin_answers_in_the_contexts_namespace_and_another_context_on_request(
        kubectl, jobs, namespace, other_namespace, tmp_path):
    jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
        "train", replicas=2, gpus=8, duration="600s", manifest=True))
    jobs.create_namespaced_custom_object(GROUP, VERSION, other_namespace, PLURAL, make_gpujob(
        "elsewhere", replicas=1, gpus=8, duration="600s", manifest=True))

    why = kubectl("netsched", "why", "train", "-o", "json")  # no -n: the current context's namespace
    assert why.returncode == 0, why.stderr
    assert json.loads(why.stdout)["job"] == f"{namespace}/train"

    manifest = make_gpujob("next", replicas=2, gpus=8, duration="600s", manifest=True)
    manifest["metadata"].pop("namespace", None)
    (tmp_path / "next.yaml").write_text(yaml.safe_dump(manifest))
    whatif = kubectl("netsched", "whatif", "-f", "next.yaml", "-o", "yaml")
    assert whatif.returncode == 0, whatif.stderr
    assert yaml.safe_load(whatif.stdout)["job"] == f"{namespace}/next"

    there = kubectl("netsched", "why", "elsewhere", "--context", "other", "-o", "yaml")
    assert there.returncode == 0, there.stderr
    assert yaml.safe_load(there.stdout)["job"] == f"{other_namespace}/elsewhere"
    explicit = kubectl("netsched", "why", "elsewhere", "-n", other_namespace)
    assert explicit.returncode == 0 and explicit.stdout.startswith(f"GPUJob {other_namespace}/elsewhere")

    missing = kubectl("netsched", "why", "elsewhere")  # not in the current context's namespace
    assert missing.returncode == 1
    assert missing.stderr == (f"netsched: error: why: GPUJob {namespace}/elsewhere not found "
                              f"(kubectl get gpujobs -n {namespace})\n")
    wrong = kubectl("netsched", "why", "train", "--context", "nope")
    assert wrong.returncode == 1
    kubeconfig = tmp_path / "kubeconfig"
    assert wrong.stderr == (f"netsched: error: context 'nope' is not in kubeconfig {kubeconfig}; "
                            "its contexts: team, other\n")

    reader, writer = os.pipe()
    os.close(reader)  # `| head -1` gone before the answer comes
    try:
        cut = kubectl("netsched", "why", "train", "-o", "yaml", stdout=writer, capture_output=False,
                      stderr=subprocess.PIPE)
    finally:
        os.close(writer)
    assert cut.returncode == 141 and cut.stderr == "", cut.stderr
