"""scheduler-plugins' PodGroup API as tests and benches serve it: the CRD with the subset of its
documented v1alpha1 schema that netsched reads (spec.minMember), and the label its members carry.
The scheduler-plugins controllers are not run: only the CRD and the objects they would read."""

from __future__ import annotations

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
CRD_NAME = f"{PLURAL}.{GROUP}"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEMA = {"type": "object", "properties": {  # the subset of scheduler-plugins' PodGroup schema netsched reads
    "spec": {"type": "object", "properties": {
        "minMember": {"type": "integer", "format": "int32"},
        "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"}}},
    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": CRD_NAME},
       "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"kind": "PodGroup", "listKind": "PodGroupList", "plural": PLURAL,
                          "singular": "podgroup", "shortNames": ["pg", "pgs"]},
                "versions": [{"name": VERSION, "served": True, "storage": True,
                              "subresources": {"status": {}}, "schema": {"openAPIV3Schema": SCHEMA}}]}}
