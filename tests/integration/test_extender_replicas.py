"""Two extender replicas against one dev-cluster answer alike: the room held for a gang's other
replicas follows from the watched pods, so a replica started after the gang's first binding holds
it as the replica that placed that pod does."""

from __future__ import annotations

from kubernetes import client

from netsched.api.labels import JOB_LABEL
from netsched.devcluster import processes
from netsched.devcluster.devcluster import EXTENDER
from netsched.devcluster.pods import gpu_pod
from netsched.devcluster.wait import poll
from netsched.testing import extender_http

# Seconds a gang's first node holds its room, the same on both replicas: long enough for a second
# replica to start on a loaded machine while the hold lasts.
HOLD = 900
GANG = {"netsched.io/job-gpus": "8"}  # 2 pods x 4 GPUs


def _post(cluster, url: str, verb: str, pod: dict, names: list[str]) -> object:
    """`verb` as kube-scheduler asks it (over mutual TLS, with its client certificate)."""
    body = {"Pod": pod, "Nodes": None, "NodeNames": names}
    status, answer = extender_http.scheduling_post(cluster, verb, body, url=url)
    assert status == 200, answer
    return answer


def _probe(name: str, namespace: str, gpus: int, labels: dict[str, str] | None = None,
           annotations: dict[str, str] | None = None) -> dict:
    """A pod as kube-scheduler sends it to the extender, never created: asking changes nothing."""
    pod = gpu_pod(name, gpus, labels=labels, annotations=annotations)
    pod["metadata"] |= {"namespace": namespace, "uid": f"probe-{namespace}-{name}"}
    return pod


def test_a_replica_started_after_a_gangs_first_binding_holds_its_room_as_the_one_that_placed_it(
        dev_cluster, core: client.CoreV1Api, namespace):
    dev_cluster.restart(EXTENDER, (f"--hold-seconds={HOLD}",))
    second = None
    try:
        names = [n.metadata.name for n in core.list_node().items]
        first = gpu_pod("gang-0", 4, labels={JOB_LABEL: "gang"}, annotations=GANG)
        core.create_namespaced_pod(namespace, first)
        node = poll(lambda: core.read_namespaced_pod("gang-0", namespace).spec.node_name, 60,
                    "kube-scheduler to bind the gang's first pod through the first replica")

        port, metrics_port = processes.free_port(), processes.free_port()
        second = processes.start("extender-2", [
            *dev_cluster.extender_argv(port, metrics_port), f"--hold-seconds={HOLD}", "--no-explain-events",
        ], dev_cluster.log("extender-2"), cwd=dev_cluster.directory)
        scheme = dev_cluster.extender_url.split(":")[0]
        urls = [dev_cluster.extender_url, f"{scheme}://127.0.0.1:{port}"]
        ready = f"{scheme}://127.0.0.1:{metrics_port}/readyz"  # 503 until synced
        tls = extender_http.scheduler_tls(dev_cluster, certificate=False)
        processes.wait_until(second, lambda: extender_http.request(ready, context=tls)[0] == 200, timeout=120,
                             port=metrics_port)

        # a single pod fits anywhere: both replicas keep it off the room held for the gang's second pod
        single = _probe("single", namespace, 1)
        answers = [_post(dev_cluster, url, "filter", single, names) for url in urls]
        for answer in answers:
            assert isinstance(answer, dict) and answer["Error"] == "" and node not in answer["NodeNames"]
            reason = answer["FailedAndUnresolvableNodes"].get(node, "")
            assert f"held for the other replicas of job {namespace}/gang" in reason, answer
        assert answers[0] == answers[1]

        # the gang's second pod scores alike on both, its first pod's node best
        peer = _probe("gang-1", namespace, 4, labels={JOB_LABEL: "gang"}, annotations=GANG)
        scores = [{h["Host"]: h["Score"] for h in _post(dev_cluster, url, "prioritize", peer, names)}
                  for url in urls]
        assert scores[0] == scores[1] and max(scores[0], key=scores[0].get) == node, scores
    finally:
        if second is not None:
            processes.stop(second.pid)
        dev_cluster.restart(EXTENDER)
