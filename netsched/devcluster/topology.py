"""Fake GPU nodes for the dev-cluster: zones, racks, GPU models and capacity.

Nodes fill racks in order (zone a rack 1, zone a rack 2, zone b rack 1, ...), so
neighbours in the list share a rack and the network-aware scorer has something
to prefer. Every node is a KWOK-managed Node object; KWOK keeps the capacity given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from netsched.api.labels import GPU_PRODUCT_LABEL, GPU_RESOURCE, RACK_LABEL, REGION_LABEL, ZONE_LABEL
from netsched.api.topology import Topology

KWOK_ANNOTATION = "kwok.x-k8s.io/node"

# Alternate zones between two GPU generations so model-aware scoring has a signal.
GPU_MODELS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB")


@dataclass(frozen=True)
class GPUNode:
    name: str
    zone: str
    rack: str
    gpu_model: str
    gpus: int = 8
    cpu: str = "96"
    memory: str = "1024Gi"

    def domains(self, topology: Topology) -> dict[str, str]:
        """Its domain at each level of `topology`, by the level's label: the widest level is its zone,
        the narrowest its rack, a level between them one domain per zone (so a preset of three levels,
        GKE's block, subblock and host, still nests: block = zone, host = rack)."""
        if topology.depth == 1:
            return {topology.labels[0]: self.rack}
        middle = {lv.label: f"{self.zone}-{lv.name}" for lv in topology.levels[1:-1]}
        return {topology.labels[0]: self.zone, **middle, topology.labels[-1]: self.rack}

    def manifest(self, zone_label: str = ZONE_LABEL, rack_label: str = RACK_LABEL,
                 topology: Topology | None = None) -> dict:
        """The Node, its zone and rack under the given label keys (a cluster labelled by a scheme of its
        own, e.g. example.com/block and example.com/rack), or its domains at each level of `topology`."""
        where = self.domains(topology) if topology else {zone_label: self.zone, rack_label: self.rack}
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "type": "kwok",
            REGION_LABEL: "dev",
            **where,
            GPU_PRODUCT_LABEL: self.gpu_model,
            "nvidia.com/gpu.count": str(self.gpus),
        }
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": "110", GPU_RESOURCE: str(self.gpus)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "status": {"capacity": resources, "allocatable": resources},
        }


def gpu_nodes(count: int, zones: int = 2, racks_per_zone: int = 2, gpus: int = 8) -> list[GPUNode]:
    """`count` nodes spread evenly over `zones` x `racks_per_zone` racks."""
    if count < 1 or zones < 1 or racks_per_zone < 1 or gpus < 1:
        raise ValueError("count, zones, racks_per_zone and gpus must all be at least 1")
    racks = zones * racks_per_zone
    per_rack = math.ceil(count / racks)
    nodes = []
    for i in range(count):
        rack_index = i // per_rack
        zone_index = rack_index // racks_per_zone
        zone = chr(ord("a") + zone_index % 26)
        rack = f"{zone}{rack_index % racks_per_zone + 1}"
        name = f"gpu-{rack}-{i % per_rack}"
        model = GPU_MODELS[zone_index % len(GPU_MODELS)]
        nodes.append(GPUNode(name, f"zone-{zone}", f"rack-{rack}", model, gpus))
    return nodes
