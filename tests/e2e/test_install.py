"""The install path end to end, as a platform team would take it: the image built here
(hack/image/build.sh), loaded into the dev-cluster's real node, the Helm chart installed on it,
GPUJobs placed through the chart's own kube-scheduler and extender, and an uninstall that leaves
no netsched pod; then `dev-cluster down` leaves nothing of the node on the host.

Opt-in (`make e2e`, not `make test`): needs root and the real node's and the image build's
packages (docs/dev-cluster.md, docs/install.md).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL
from netsched.devcluster.binaries import ensure_binaries, read_versions
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.nodenet import in_netns
from netsched.devcluster.realnode import NODE_IP, NODE_LABEL, RealNode
from netsched.devcluster.wait import poll
from netsched.extender.explain import EVENT_REASON
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import running, scratch_namespace

ROOT = Path(__file__).resolve().parents[2]
RELEASE, NAMESPACE = "netsched", "netsched-system"
SCHEDULER_NAME = "netsched-chart"  # tests/e2e/values.yaml


def timed(what: str, since: float) -> float:
    now = time.monotonic()
    print(f"[e2e] {what}: {now - since:.1f} s", flush=True)
    return now


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[DevCluster]:
    t = time.monotonic()
    cluster = DevCluster(directory=tmp_path_factory.mktemp("e2e-cluster"), nodes=4, real_node=True,
                         run_extender=False, run_operator=False)  # the chart brings its own
    with running(cluster):
        timed("dev-cluster up --real-node", t)
        yield cluster
        assert not host_network_traces(), "the real node wrote to the host's network namespace"
    assert not RealNode(cluster.directory / "node", Path()).leftovers(), "the real node left host state"
    assert not host_network_traces()


def host_network_traces() -> list[str]:
    """kube-proxy's and the CNI's iptables chains, and the node's bridge, in the host's namespace."""
    rules = sh("iptables-save").splitlines()
    links = sh("ip", "-o", "link", "show").splitlines()
    return [r for r in rules if "KUBE-" in r or "CNI-" in r] + [x for x in links if ": cni0:" in x]


def sh(*argv: str | Path) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True)
    command = " ".join(map(str, argv))
    assert proc.returncode == 0, f"{command} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def load_images(cluster: DevCluster, work: Path) -> None:
    """netsched's image, and the upstream kube-scheduler's layout (the binary built here at
    /usr/local/bin, on the same base: it links glibc) under the chart's default name."""
    bin_dir = ensure_binaries(quiet=True, node=True)
    node = RealNode(cluster.directory / "node", bin_dir)
    archive = Path(sh("bash", ROOT / "hack/image/build.sh", "--archive").strip().splitlines()[-1])
    node.import_image(archive)
    scheduler = f"registry.k8s.io/kube-scheduler:{read_versions()['KUBERNETES_VERSION']}"
    ctr = sh("buildah", "from", "--pull=never", "docker.io/library/python:3.11-slim").strip()
    try:
        sh("buildah", "copy", ctr, bin_dir / "kube-scheduler", "/usr/local/bin/kube-scheduler")
        sh("buildah", "config", "--entrypoint", '["/usr/local/bin/kube-scheduler"]', "--user", "65532", ctr)
        sh("buildah", "commit", "--quiet", ctr, scheduler)
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)
    tarball = work / "kube-scheduler.tar"
    sh("buildah", "push", "--quiet", scheduler, f"docker-archive:{tarball}:{scheduler}")
    sh("buildah", "rmi", scheduler)  # made again next run: no untagged copy piles up per run
    node.import_image(tarball)


def helm(cluster: DevCluster, *args: str | Path) -> str:
    return sh(ensure_binaries(quiet=True) / "helm", "--kubeconfig", cluster.kubeconfig, *args)


def deployments(apps: client.AppsV1Api) -> dict[str, int]:
    """Deployment name -> metadata.generation, in the release's namespace."""
    return {d.metadata.name: d.metadata.generation for d in apps.list_namespaced_deployment(NAMESPACE).items}


def run_gpujobs(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str,
                jobs: dict[str, dict]) -> None:
    """Create `jobs`, wait until each Succeeded; each pod went through the chart's scheduler and got
    the extender's NetworkPlacement event."""
    for body in jobs.values():
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    for name in jobs:
        poll(lambda name=name: gpujob_phase(custom, ns, name) == "Succeeded", timeout=240,
             what=f"GPUJob {name} to succeed through the chart's scheduler")
    pods = core.list_namespaced_pod(ns).items
    job_pods = [p for p in pods if (p.metadata.labels or {}).get(JOB_LABEL) in jobs]
    assert job_pods and {p.spec.scheduler_name for p in job_pods} == {SCHEDULER_NAME}
    events = core.list_namespaced_event(ns).items
    placed = {e.involved_object.name for e in events if e.reason == EVENT_REASON}
    assert {p.metadata.name for p in job_pods} <= placed, "a pod without a NetworkPlacement event"


def gpujob_phase(custom: client.CustomObjectsApi, namespace: str, name: str) -> str | None:
    job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return (job.get("status") or {}).get("phase")


def test_the_chart_installs_on_a_real_node_places_gpujobs_and_uninstalls_cleanly(cluster, tmp_path):
    api = cluster.api_client()
    core, custom, apps = client.CoreV1Api(api), client.CustomObjectsApi(api), client.AppsV1Api(api)
    t = time.monotonic()
    load_images(cluster, tmp_path)
    t = timed("image built and loaded, kube-scheduler image loaded", t)

    helm(cluster, "install", RELEASE, ROOT / "charts/netsched", "-n", NAMESPACE, "--create-namespace",
         "-f", ROOT / "tests/e2e/values.yaml", "--wait", "--timeout", "6m")
    t = timed("helm install --wait", t)
    pods = core.list_namespaced_pod(NAMESPACE).items
    components = {p.metadata.labels.get("app.kubernetes.io/component") for p in pods}
    assert {"operator", "extender", "scheduler", "agent"} <= components
    real = {n.metadata.name for n in core.list_node(label_selector=f"{NODE_LABEL}=true").items}
    for pod in pods:
        assert pod.spec.node_name in real and pod.status.phase == "Running", pod.metadata.name
        assert all(s.ready and s.restart_count == 0 for s in pod.status.container_statuses), pod.metadata.name

    node = RealNode(cluster.directory / "node", Path())

    def scrape() -> str:
        with in_netns(node.netns):  # the agent serves on the node's network (hostNetwork)
            return urllib.request.urlopen(f"http://{NODE_IP}:9101/metrics", timeout=10).read().decode()

    # Ready is not serving: the agent has no readiness probe, and its HTTP server starts after imports.
    metrics = poll(scrape, timeout=60, what="the agent's /metrics on the real node")
    assert "# TYPE netsched_link_rtt_seconds gauge" in metrics

    with scratch_namespace(core, "e2e") as ns:
        run_gpujobs(core, custom, ns, {
            "single": make_gpujob("single", replicas=1, gpus=1, manifest=True, duration="5s"),
            "gang": make_gpujob("gang", replicas=2, gpus=8, manifest=True, duration="5s",
                                gang={"minAvailable": 2})})
        t = timed("a 1-GPU GPUJob and a 2x8 gang Succeeded", t)

        before = deployments(apps)
        helm(cluster, "upgrade", RELEASE, ROOT / "charts/netsched", "-n", NAMESPACE, "-f",
             ROOT / "tests/e2e/values.yaml", "--set", "extender.shortlist=2", "--wait", "--timeout", "6m")
        after = deployments(apps)
        rolled = {name for name in after if after[name] != before.get(name)}
        assert rolled == {f"{RELEASE}-extender"}, f"helm upgrade of an extender value rolled {rolled}"
        assert all(gpujob_phase(custom, ns, name) == "Succeeded" for name in ("single", "gang"))
        run_gpujobs(core, custom, ns, {"after-upgrade": make_gpujob("after-upgrade", replicas=1, gpus=2,
                                                                    manifest=True, duration="5s")})
        t = timed("helm upgrade rolled the extender only; a GPUJob Succeeded after it", t)

    helm(cluster, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "3m")
    poll(lambda: not core.list_namespaced_pod(NAMESPACE).items, timeout=120, what="no netsched pod left")
    timed("helm uninstall, no netsched pod left", t)
