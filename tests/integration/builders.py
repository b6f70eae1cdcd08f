"""Builders shared by the integration tests."""

from __future__ import annotations

from netsched.api.gpujob import GROUP, VERSION
from netsched.devcluster.pods import DURATION_ANNOTATION


def make_gpujob(name: str, replicas: int = 2, gpus: int = 2, duration: str | None = "3s", **spec) -> dict:
    annotations = {DURATION_ANNOTATION: duration} if duration else {}
    annotations |= spec.pop("annotations", {})
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUJob", "metadata": {"name": name},
        "spec": {"replicas": replicas, "gpusPerReplica": gpus, **spec,
                 "template": {"metadata": {"annotations": annotations},
                              "spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
    }
