"""KubeSchedulerConfiguration for the dev-cluster's kube-scheduler.

Two profiles: `default-scheduler` for ordinary pods and `netsched` for GPU jobs.
When an extender URL is given, the extender block sends only pods that request
nvidia.com/gpu to it (managedResources) while the scheduler keeps counting GPUs
itself (ignoredByScheduler: false; `true` lets a 9-GPU pod bind to an 8-GPU node).
The `netsched` profile scores GPUs MostAllocated: when the ignorable extender is down or
skipped, kube-scheduler still fills a node's GPUs before opening another, so a gang's pods
tend to share a node instead of spreading as the default LeastAllocated would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netsched.api.labels import GPU_RESOURCE, SCHEDULER_NAME


@dataclass(frozen=True)
class ExtenderTLS:
    """kube-scheduler's side of mutual TLS with the extender: the CA it verifies the extender's certificate
    with (without one it would verify nothing), and the client certificate and key it presents."""

    ca_file: Path
    cert_file: Path
    key_file: Path

    def config(self) -> dict:
        return {"caFile": str(self.ca_file), "certFile": str(self.cert_file), "keyFile": str(self.key_file)}


@dataclass(frozen=True)
class ExtenderSettings:
    url_prefix: str
    weight: int = 5
    http_timeout: str = "2s"
    ignorable: bool = True  # a down extender must not stop GPU pods from scheduling
    node_cache_capable: bool = True
    tls: ExtenderTLS | None = None  # None: plain HTTP

    def block(self) -> dict:
        block = {
            "urlPrefix": self.url_prefix,
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "preemptVerb": "preempt",  # candidates whose node breaks the pod's network needs are dropped
            "enableHTTPS": self.tls is not None,
            "weight": self.weight,
            "httpTimeout": self.http_timeout,
            "nodeCacheCapable": self.node_cache_capable,
            "ignorable": self.ignorable,
            "managedResources": [{"name": GPU_RESOURCE, "ignoredByScheduler": False}],
        }
        if self.tls is not None:
            block["tlsConfig"] = self.tls.config()
        return block


# Only GPU requests are scored: a pod that requests no GPU scores 0 on every node from it.
PACK_GPUS = {"name": "NodeResourcesFit",
             "args": {"scoringStrategy": {"type": "MostAllocated",
                                          "resources": [{"name": GPU_RESOURCE, "weight": 1}]}}}


def scheduler_config(kubeconfig: Path, extender: ExtenderSettings | None = None) -> dict:
    config: dict = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        # Hard network constraints must see every node, not a sample.
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": "default-scheduler"},
                     {"schedulerName": SCHEDULER_NAME, "pluginConfig": [PACK_GPUS]}],
    }
    if extender is not None:
        config["extenders"] = [extender.block()]
    return config
