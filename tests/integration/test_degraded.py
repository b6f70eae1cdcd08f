"""The extender without an optional source, on a real control plane: it serves what it can and
takes the source up when it appears."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

import orjson
from kubernetes import client

from netsched.api import plans
from netsched.api.labels import GPU_RESOURCE
from netsched.devcluster import processes
from netsched.devcluster.crds import install_crds
from netsched.devcluster.devcluster import EXTENDER, DevCluster
from netsched.devcluster.rbac import EXTENDER_ROLE, EXTENDER_RULES, grant
from netsched.devcluster.wait import poll


def readyz(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, orjson.loads(err.read())


def test_without_the_packingplan_crd_the_extender_serves_and_takes_plans_up_once_installed(tmp_path):
    cluster = DevCluster(directory=tmp_path / "cluster", nodes=2, run_extender=False, run_operator=False,
                         progress=lambda _: None)
    cluster.up()
    try:
        api = cluster.api_client()
        client.ApiextensionsV1Api(api).delete_custom_resource_definition(f"{plans.PLURAL}.{plans.GROUP}")
        custom = client.CustomObjectsApi(api)

        def gone() -> bool:
            try:
                custom.list_cluster_custom_object(plans.GROUP, plans.VERSION, plans.PLURAL)
            except client.ApiException as exc:
                return exc.status == 404
            return False

        poll(gone, 60, "the PackingPlan CRD to be removed")
        grant(api, EXTENDER_ROLE, EXTENDER_RULES, EXTENDER)
        port, metrics_port = processes.free_port(), processes.free_port()
        proc = processes.start("extender", [
            sys.executable, "-m", "netsched", "extender",
            f"--kubeconfig={cluster.directory}/{EXTENDER}.kubeconfig", "--host=127.0.0.1", f"--port={port}",
            f"--metrics-port={metrics_port}",
        ], cluster.log("extender"), cwd=cluster.directory)
        url, metrics = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}"
        try:
            status, ready = poll(lambda: (r := readyz(metrics))[0] == 200 and r, 90,
                                 "the extender to be ready")
            assert ready["sources"] == {"nodes": "synced", "pods": "synced", "packingplans": "absent"}
            names = [n.metadata.name for n in client.CoreV1Api(api).list_node().items]
            pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
                   "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU_RESOURCE: "1"}}}]}}
            request = urllib.request.Request(f"{url}/filter", orjson.dumps(
                {"Pod": pod, "Nodes": None, "NodeNames": names}), {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as resp:
                answer = orjson.loads(resp.read())
            assert answer["Error"] == "" and answer["NodeNames"]

            install_crds(api)
            poll(lambda: readyz(metrics)[1]["sources"]["packingplans"] == "synced", 120,
                 "the extender to take up PackingPlans once their CRD is installed")
            log = cluster.log("extender").read_text()
            assert log.count("packingplans watch failed") == 1  # said once, not at every look
            assert "serving without them until it is" in log and "packingplans watch recovered" in log
        finally:
            processes.stop(proc.pid)
    finally:
        cluster.down(quiet=True)
