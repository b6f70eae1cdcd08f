"""The install path end to end, as a platform team would take it: the image built here
(hack/image/build.sh), loaded into the dev-cluster's real node, the Helm chart installed on it with
mutual TLS between its kube-scheduler and the extender, GPUJobs placed through the chart's own scheduler and
extender, a PackingPlan for a high-priority job, upgrades (one that must roll only the extender, a
certificate the user brings, and a CA the scheduler must refuse), an uninstall that leaves no
netsched pod, and the plain manifests applied and deleted with `kubectl -k`; then `dev-cluster down`
leaves nothing of the node on the host.

In `make test` and `make e2e`: needs root and the real node's and the image build's packages
(docs/dev-cluster.md, docs/install.md).
"""

from __future__ import annotations

import base64
import re
import shutil
import ssl
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from netsched.api import plans
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.api.labels import JOB_LABEL
from netsched.devcluster.binaries import read_versions
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.nodenet import in_netns
from netsched.devcluster.pki import serving_certificate
from netsched.devcluster.realnode import NODE_IP, NODE_LABEL
from netsched.devcluster.wait import poll
from netsched.extender.explain import EVENT_REASON
from netsched.testing import extender_http
from netsched.testing.builders import make_gpujob
from netsched.testing.chart import (
    COMPONENT,
    NAMESPACE,
    RELEASE,
    SCHEDULER_NAME,
    all_pods_ready,
    component_pods,
    helm,
    kubectl,
    real_node,
    timed,
)
from netsched.testing.cluster import scratch_namespace

# the compatibility lane (make test-compat) runs it on the older Kubernetes too: the chart installed on
# each tested Kubernetes
pytestmark = pytest.mark.compat

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "tests/e2e/values.yaml"
EXTENDER_DNS = [f"{RELEASE}-extender.{NAMESPACE}.svc", f"{RELEASE}-extender.{NAMESPACE}"]
USER_SECRET = "e2e-extender-tls"
EXPECTED_PODS = {"operator": 1, "extender": 2, "scheduler": 1, "agent": 1}  # one node for all of them
# What a kube-scheduler logs when kube-system/extension-apiserver-authentication lacks the front
# proxy's CA (seen: `configmap_cafile_content.go:246] "Unhandled Error" err="kube-system/extension-
# apiserver-authentication failed with : missing content for CA bundle "client-ca::kube-system::
# extension-apiserver-authentication::requestheader-client-ca-file""`, 28 lines in its first
# minute), or when it may not read that ConfigMap: klog warnings and errors naming either.
REQUESTHEADER_NOISE = re.compile(r"^[EW]\d{4} .*(requestheader|extension-apiserver-authentication)")


def upgrade(cluster: DevCluster, *sets: str) -> None:
    helm(cluster, "upgrade", RELEASE, ROOT / "charts/netsched", "-n", NAMESPACE, "-f", VALUES, *sets,
         "--wait", "--timeout", "6m")


def deployments(apps: client.AppsV1Api) -> dict[str, int]:
    """Deployment name -> metadata.generation, in the release's namespace."""
    return {d.metadata.name: d.metadata.generation for d in apps.list_namespaced_deployment(NAMESPACE).items}


def check_pods_ready_on_the_real_node(core: client.CoreV1Api) -> None:
    """Every netsched pod Ready on the real node, none restarted. Polled: `helm install --wait` counts
    a DaemonSet ready while maxUnavailable of its pods are not (here 1 of 1: the agent)."""
    poll(lambda: all_pods_ready(core, EXPECTED_PODS), 180,
         f"the netsched pods ({EXPECTED_PODS} per component) to be Ready")
    real = {n.metadata.name for n in core.list_node(label_selector=f"{NODE_LABEL}=true").items}
    for pod in core.list_namespaced_pod(NAMESPACE).items:
        assert pod.spec.node_name in real, f"{pod.metadata.name} is on {pod.spec.node_name}, not the node"
        restarts = {s.name: s.restart_count for s in pod.status.container_statuses if s.restart_count}
        assert not restarts, f"{pod.metadata.name} restarted: {restarts}"


def print_extender_start_to_ready(core: client.CoreV1Api, when: str) -> None:
    """Seconds from the extender container's start to its pod's Ready condition (both whole seconds in
    the API). Printed, never asserted: timing belongs in benchmarks."""
    for pod in component_pods(core, "extender"):
        [status] = pod.status.container_statuses
        started = status.state.running.started_at
        [ready] = [c for c in pod.status.conditions if c.type == "Ready"]
        seconds = (ready.last_transition_time - started).total_seconds()
        print(f"[e2e] {when}: extender {pod.metadata.name} Ready {seconds:.0f} s after its container started",
              flush=True)


def create_gpujobs(custom: client.CustomObjectsApi, ns: str, jobs: dict[str, dict]) -> None:
    for body in jobs.values():
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def check_succeeded_through_the_extender(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str,
                                         names: list[str]) -> None:
    """Each job Succeeded; each of its pods went through the e2e scheduler name and got the
    extender's NetworkPlacement event (written only for a placement the extender answered)."""
    for name in names:
        poll(lambda name=name: gpujob_phase(custom, ns, name) == "Succeeded", timeout=240,
             what=f"GPUJob {name} to succeed through the scheduler {SCHEDULER_NAME}")
    pods = core.list_namespaced_pod(ns).items
    job_pods = [p for p in pods if (p.metadata.labels or {}).get(JOB_LABEL) in names]
    assert job_pods and {p.spec.scheduler_name for p in job_pods} == {SCHEDULER_NAME}
    events = core.list_namespaced_event(ns).items
    placed = {e.involved_object.name for e in events if e.reason == EVENT_REASON}
    assert {p.metadata.name for p in job_pods} <= placed, "a pod without a NetworkPlacement event"


def run_gpujobs(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str,
                jobs: dict[str, dict]) -> None:
    create_gpujobs(custom, ns, jobs)
    check_succeeded_through_the_extender(core, custom, ns, list(jobs))


def gpujob_phase(custom: client.CustomObjectsApi, namespace: str, name: str) -> str | None:
    job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return (job.get("status") or {}).get("phase")


def scheduler_leads(core: client.CoreV1Api, coordination: client.CoordinationV1Api) -> str | None:
    """The name of the one live scheduler pod once it holds the chart's Lease: after an upgrade the
    old scheduler, with the old configuration, may not take a pod created from here on."""
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{COMPONENT}=scheduler").items
    if len(pods) != 1 or pods[0].metadata.deletion_timestamp:
        return None
    holder = coordination.read_namespaced_lease(f"{RELEASE}-scheduler", NAMESPACE).spec.holder_identity or ""
    return pods[0].metadata.name if holder.startswith(pods[0].metadata.name + "_") else None


def wait_for_new_scheduler(core: client.CoreV1Api, coordination: client.CoordinationV1Api) -> str:
    return poll(lambda: scheduler_leads(core, coordination), 180,
                "one scheduler pod, holding the Lease, after the upgrade")


def pod_log(cluster: DevCluster, pod: client.V1Pod, container: str) -> str:
    """A container's log from the kubelet's pod-log directory under the real node's root (the API's
    pods/log answers 404 with this kubelet). CRI lines: time, stream, tag, then the message."""
    directory = cluster.directory / "node" / "pod-logs" / (
        f"{pod.metadata.namespace}_{pod.metadata.name}_{pod.metadata.uid}") / container
    files = sorted(directory.glob("*.log"))
    assert files, f"no log of {pod.metadata.name}/{container} in {directory}"
    return "\n".join(line.split(" ", 3)[-1] for f in files for line in f.read_text().splitlines())


def scheduler_log(cluster: DevCluster, core: client.CoreV1Api) -> str:
    return "\n".join(pod_log(cluster, p, "kube-scheduler") for p in component_pods(core, "scheduler"))


def pod_scheduling_error(core: client.CoreV1Api, ns: str, job: str) -> str | None:
    """The message of a job pod's PodScheduled=False condition, when it names a certificate error."""
    for pod in core.list_namespaced_pod(ns, label_selector=f"{JOB_LABEL}={job}").items:
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and "x509" in (c.message or ""):
                return c.message
    return None


def packing_plans(custom: client.CustomObjectsApi) -> list[dict]:
    return custom.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)["items"]


def plan_placing(custom: client.CustomObjectsApi, pod: str) -> dict | None:
    placing = (p for p in packing_plans(custom) if pod in {x["pod"] for x in p["spec"].get("placements", [])})
    return next(placing, None)


def check_packing_plan(core: client.CoreV1Api, custom: client.CustomObjectsApi,
                       scheduling: client.SchedulingV1Api) -> None:
    """Low-priority jobs hold every GPU; a high-priority job that does not fit gets a PackingPlan
    from the chart's operator that gives it room."""
    suffix = uuid.uuid4().hex[:6]
    low, high = f"e2e-low-{suffix}", f"e2e-high-{suffix}"
    for name, value in ((low, 100), (high, 100000)):
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
    try:
        with scratch_namespace(core, "e2e-pack") as ns:
            nodes = core.list_node().items
            full = sum(int((n.status.capacity or {}).get("nvidia.com/gpu", 0)) for n in nodes) // 8
            create_gpujobs(custom, ns, {f"low-{i}": make_gpujob(
                f"low-{i}", replicas=1, gpus=8, duration="600s", manifest=True, priorityClassName=low)
                for i in range(full)})
            poll(lambda: sum(p.status.phase == "Running" for p in core.list_namespaced_pod(ns).items) == full,
                 120, f"{full} low-priority 8-GPU jobs to hold every GPU")
            create_gpujobs(custom, ns, {"urgent": make_gpujob(
                "urgent", replicas=1, gpus=8, duration="600s", manifest=True, priorityClassName=high)})
            wanted = f"{ns}/urgent-0"
            plan = poll(lambda: plan_placing(custom, wanted), 120, f"a PackingPlan that places {wanted}")
            evicted = {e["pod"] for e in plan["spec"]["evictions"]}
            assert evicted and all(e.startswith(f"{ns}/low-") for e in evicted), plan["spec"]
            print(f"[e2e] PackingPlan {plan['metadata']['name']}: evict {sorted(evicted)}, place {wanted}",
                  flush=True)
    finally:
        for plan in packing_plans(custom):
            custom.delete_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL,
                                                plan["metadata"]["name"])
        for name in (low, high):
            scheduling.delete_priority_class(name)


def check_only_the_scheduler_is_answered(cluster: DevCluster, core: client.CoreV1Api) -> None:
    """From the node's network, as any pod could: an extender replica's scheduling port hangs up on a
    client without the scheduler's client certificate, and its metrics port wants a bearer token."""
    pod = component_pods(core, "extender")[0]
    unverified = ssl._create_unverified_context()  # the certificate names the Service, not pod IPs
    made_up = {"Pod": {"metadata": {"name": "made-up", "namespace": "default", "uid": "made-up"}},
               "NodeNames": [pod.spec.node_name]}
    at = f"https://{pod.status.pod_ip}"
    with in_netns(real_node(cluster).netns):
        with pytest.raises(OSError):  # no HTTP answer at all: the TLS handshake fails
            extender_http.request(f"{at}:8888/filter", made_up, context=unverified)
        status, _ = extender_http.request(f"{at}:8889/debug/decisions", context=unverified)
    assert status == 401


def check_certificates(core: client.CoreV1Api, custom: client.CustomObjectsApi,
                       coordination: client.CoordinationV1Api, cluster: DevCluster, work: Path) -> None:
    """The user's own certificate: first with a caBundle that did not sign it, which the real
    kube-scheduler must refuse (the extender is not ignorable here, so the pod waits), then with the
    right one, and the waiting job goes through the extender."""
    ca, cert, key = serving_certificate(EXTENDER_DNS[0], EXTENDER_DNS)
    other_ca, _, _ = serving_certificate("somebody-else", ["somebody-else"])
    core.create_namespaced_secret(NAMESPACE, {
        "metadata": {"name": USER_SECRET}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}})
    (work / "ca.pem").write_bytes(ca)
    (work / "other-ca.pem").write_bytes(other_ca)
    user_tls = ("--set", f"extender.tls.secretName={USER_SECRET}",
                "--set", "scheduler.extender.ignorable=false")

    t = time.monotonic()
    upgrade(cluster, *user_tls, "--set-file", f"extender.tls.caBundle={work / 'other-ca.pem'}")
    wait_for_new_scheduler(core, coordination)
    with scratch_namespace(core, "e2e-tls") as ns:
        create_gpujobs(custom, ns, {"untrusted": make_gpujob("untrusted", replicas=1, gpus=1, manifest=True,
                                                             duration="5s")})
        message = poll(lambda: pod_scheduling_error(core, ns, "untrusted"), 120,
                       "the scheduler to refuse the extender's certificate (x509 in PodScheduled)")
        print(f"[e2e] with a CA that did not sign the extender's certificate: {message}", flush=True)
        assert "x509" in scheduler_log(cluster, core)
        assert gpujob_phase(custom, ns, "untrusted") != "Succeeded"
        t = timed("a wrong caBundle: the real kube-scheduler refused the extender's certificate", t)

        upgrade(cluster, *user_tls, "--set-file", f"extender.tls.caBundle={work / 'ca.pem'}")
        wait_for_new_scheduler(core, coordination)
        check_succeeded_through_the_extender(core, custom, ns, ["untrusted"])
        timed("the user's certificate and its CA: the waiting GPUJob Succeeded through the extender", t)


def kustomize_overlay(work: Path, image: str) -> Path:
    """manifests/ under an overlay for this cluster: the image built here, the cluster's kube-scheduler
    version, every pod on the real node,
    job records on an emptyDir (no StorageClass), and the e2e scheduler name (the dev-cluster's own
    kube-scheduler has a `netsched` profile: two schedulers must not race for a pod). The namespace
    stays netsched-system: kustomize's namespace would also move the scheduler's RoleBinding out of
    kube-system, where it lets the scheduler read the authentication ConfigMap."""
    base = work / "overlay" / "base"
    shutil.copytree(ROOT / "manifests", base, ignore=shutil.ignore_patterns("examples"))
    config_map = next(yaml.safe_load_all((base / "netsched/scheduler-config.yaml").read_text()))
    config = yaml.safe_load(config_map["data"]["scheduler.yaml"])
    config["profiles"][0]["schedulerName"] = SCHEDULER_NAME
    operator = next(yaml.safe_load_all((base / "netsched/operator-deployment.yaml").read_text()))
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    at = args.index("--scheduler-name=netsched")
    on_node = [{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {NODE_LABEL: "true"}}]
    name, _, tag = image.rpartition(":")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["base"],
        # the manifests name the default tested kube-scheduler; a cluster of another version sets its own,
        # as the install docs tell a user to
        "images": [{"name": "netsched", "newName": name, "newTag": tag},
                   {"name": "registry.k8s.io/kube-scheduler",
                    "newTag": read_versions()["KUBERNETES_VERSION"]}],
        "patches": [
            {"target": {"kind": "Deployment"}, "patch": yaml.safe_dump(on_node)},
            {"target": {"kind": "DaemonSet"}, "patch": yaml.safe_dump(on_node)},
            {"target": {"kind": "Deployment", "name": "netsched-operator"}, "patch": yaml.safe_dump([
                {"op": "replace", "path": f"/spec/template/spec/containers/0/args/{at}",
                 "value": f"--scheduler-name={SCHEDULER_NAME}"},
                {"op": "replace", "path": "/spec/template/spec/volumes/0",
                 "value": {"name": "records", "emptyDir": {}}}])},
            {"target": {"kind": "PersistentVolumeClaim", "name": "netsched-operator-records"},
             "patch": yaml.safe_dump({"$patch": "delete", "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                      "metadata": {"name": "netsched-operator-records"}})},
            {"target": {"kind": "ConfigMap", "name": "netsched-scheduler"}, "patch": yaml.safe_dump([
                {"op": "replace", "path": "/data/scheduler.yaml", "value": yaml.safe_dump(config)}])},
        ],
    }
    assert operator["spec"]["template"]["spec"]["volumes"][0]["name"] == "records"
    overlay = work / "overlay"
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return overlay


def check_manifests(cluster: DevCluster, core: client.CoreV1Api, custom: client.CustomObjectsApi,
                    image: str, work: Path) -> None:
    """The plain manifests, with `kubectl apply -k`: the same first checks as the chart's install."""
    t = time.monotonic()
    overlay = kustomize_overlay(work, image)
    kubectl(cluster, "apply", "-k", overlay)
    check_pods_ready_on_the_real_node(core)
    t = timed("kubectl apply -k manifests/ (overlay), every pod Ready", t)
    with scratch_namespace(core, "e2e-manifests") as ns:
        run_gpujobs(core, custom, ns, {"plain": make_gpujob("plain", replicas=1, gpus=1, manifest=True,
                                                            duration="5s")})
    t = timed("a 1-GPU GPUJob Succeeded through the manifests' scheduler", t)
    kubectl(cluster, "delete", "-k", overlay, "--wait=true", "--timeout=180s")
    poll(lambda: not core.list_namespaced_pod(NAMESPACE).items, 120, "no pod of the manifests left")
    timed("kubectl delete -k, no netsched pod left", t)


def test_the_chart_installs_on_a_real_node_places_gpujobs_and_uninstalls_cleanly(cluster, image, tmp_path):
    api = cluster.api_client()
    core, custom, apps = client.CoreV1Api(api), client.CustomObjectsApi(api), client.AppsV1Api(api)
    coordination, scheduling = client.CoordinationV1Api(api), client.SchedulingV1Api(api)
    started = t = time.monotonic()

    helm(cluster, "install", RELEASE, ROOT / "charts/netsched", "-n", NAMESPACE, "--create-namespace",
         "-f", VALUES, "--wait", "--timeout", "6m")
    t = timed("helm install --wait (extender over mutual TLS, certificates made by the chart)", t)
    check_pods_ready_on_the_real_node(core)
    print_extender_start_to_ready(core, "install")

    node = real_node(cluster)

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
        t = timed("a 1-GPU GPUJob and a 2x8 gang Succeeded through the extender over mutual TLS", t)
        check_only_the_scheduler_is_answered(cluster, core)
        t = timed("a client without the scheduler's certificate got no answer, nor one without a token", t)

        check_packing_plan(core, custom, scheduling)
        t = timed("a high-priority GPUJob that did not fit got a PackingPlan", t)

        before = deployments(apps)
        upgrade(cluster, "--set", "extender.shortlist=2")
        after = deployments(apps)
        rolled = {name for name in after if after[name] != before.get(name)}
        # the chart's certificate is looked up, not made again: the scheduler's CA stays, so it stays
        assert rolled == {f"{RELEASE}-extender"}, f"helm upgrade of an extender value rolled {rolled}"
        assert all(gpujob_phase(custom, ns, name) == "Succeeded" for name in ("single", "gang"))
        run_gpujobs(core, custom, ns, {"after-upgrade": make_gpujob("after-upgrade", replicas=1, gpus=2,
                                                                    manifest=True, duration="5s")})
        print_extender_start_to_ready(core, "upgrade")
        t = timed("helm upgrade rolled the extender only; a GPUJob Succeeded after it", t)

    noise = [line for line in scheduler_log(cluster, core).splitlines() if REQUESTHEADER_NOISE.match(line)]
    assert not noise, "the chart's kube-scheduler logs authentication lookup errors:\n" + "\n".join(noise[:5])

    check_certificates(core, custom, coordination, cluster, tmp_path)
    t = time.monotonic()

    helm(cluster, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "3m")
    poll(lambda: not core.list_namespaced_pod(NAMESPACE).items, timeout=120, what="no netsched pod left")
    core.delete_namespaced_secret(USER_SECRET, NAMESPACE)  # the user's, not the release's
    timed("helm uninstall, no netsched pod left", t)

    check_manifests(cluster, core, custom, image, tmp_path)
    timed("the install path in all (after the cluster was up)", started)

