"""GPUs a DRA driver publishes (resource.k8s.io/v1), counted as a node's `nvidia.com/gpu`: the one place
netsched reads them.

On a node whose GPUs a Dynamic Resource Allocation driver manages, `status.allocatable` has no
`nvidia.com/gpu`: the driver publishes each GPU as a device in a ResourceSlice for the node, and
a pod gets devices through a ResourceClaim, or by asking `nvidia.com/gpu` as before where a
DeviceClass maps that name to the driver's devices (`spec.extendedResourceName`, KEP-5004); the
scheduler then makes the pod a claim of its own, annotated EXTENDED_CLAIM.

Every part of netsched that counts GPUs (the extender's node table, the operator's rooms and
never-fit check, the packer's problem, whatif and why, the records' GPU product) reads a node's
allocatable and its `nvidia.com/gpu.product` label. `DraGpus` gives them a node as a device plugin
would show it: allocatable `nvidia.com/gpu` = the GPU devices of the configured drivers on that
node, less those held by claims a pod's `nvidia.com/gpu` request does not already count (claim-only
pods); and the product from the devices' attributes where the node has no GPU feature-discovery
label. A node that has `nvidia.com/gpu` from a device plugin keeps it: kube-scheduler takes the
device plugin's count first too.

What is counted: the devices of ResourceSlices whose `spec.driver` is configured (`--dra-gpu-driver`)
and that name one node (`spec.nodeName`), of the newest generation of their pool; a device whose
`type` attribute says something other than `gpu` (a MIG slice of NVIDIA's driver) is not a GPU.
A claim's devices are those its `status.allocation.devices.results` name.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from netsched.api.connect import listed
from netsched.api.labels import GPU_PRODUCT_LABEL, GPU_RESOURCE
from netsched.api.objects import KubeObject

log = logging.getLogger(__name__)
GROUP, VERSION = "resource.k8s.io", "v1"
SLICES, CLAIMS = "resourceslices", "resourceclaims"
KINDS = (SLICES, CLAIMS)
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"  # "true" on a claim kube-scheduler made
PRODUCT_ATTRIBUTES = ("productName", "model")  # NVIDIA's driver, the example driver
TYPE_ATTRIBUTE = "type"
DeviceId = tuple[str, str, str]  # driver, pool, device


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs as its DRA drivers publish them."""
    devices: int
    claimed: int  # held by claims no pod's nvidia.com/gpu request counts
    product: str | None

    @property
    def allocatable(self) -> int:
        return max(self.devices - self.claimed, 0)


@dataclass(frozen=True)
class _Slice:
    node: str
    driver: str
    pool: str
    generation: int
    gpus: tuple[str, ...]  # device names
    product: str | None


class DraGpus:
    """ResourceSlices and ResourceClaims, kept by a list-and-watch (a `Sink` of netsched.api.watch for the
    two KINDS) or read once (`read`), counted per node. `replace` and `apply` return the nodes whose count
    changed. Not thread-safe: its owner calls it under its own lock."""

    def __init__(self, drivers: Iterable[str]):
        self.drivers = frozenset(drivers)
        self._slices: dict[str, _Slice] = {}
        self._of_node: dict[str, set[str]] = defaultdict(set)  # node -> slice keys
        self._pool_node: dict[tuple[str, str], str] = {}  # (driver, pool) -> node
        self._claims: dict[str, tuple[DeviceId, ...]] = {}  # claim key -> devices it holds (claim-only)
        self._held: Counter[DeviceId] = Counter()  # how many claims hold each device
        self._counted: dict[str, NodeGpus] = {}

    # ---- the watches' sink ------------------------------------------------------
    def replace(self, kind: str, objects: Iterable[KubeObject]) -> set[str]:
        before = dict(self._counted)
        if kind == SLICES:
            self._slices.clear()
            self._of_node.clear()
            self._pool_node.clear()
        else:
            self._claims.clear()
            self._held.clear()
        for obj in objects:
            self._put(kind, obj)
        self._counted = {n: c for n in self._of_node if (c := self._count(n)) is not None}
        return {n for n in before.keys() | self._counted.keys() if before.get(n) != self._counted.get(n)}

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> set[str]:
        key = _key(obj)
        touched = self._nodes_of(kind, key)
        self._drop(kind, key)
        if event_type != "DELETED":
            self._put(kind, obj)
        touched |= self._nodes_of(kind, key)
        changed = set()
        for node in touched:
            count = self._count(node)
            if self._counted.get(node) != count:
                changed.add(node)
                if count is None:
                    self._counted.pop(node, None)
                else:
                    self._counted[node] = count
        return changed

    def clear(self, kind: str) -> set[str]:
        """The kind is not served (or may not be read): none of it."""
        return self.replace(kind, [])

    # ---- readers --------------------------------------------------------------------
    def gpus(self, node: str) -> NodeGpus | None:
        """The node's DRA GPUs; None where the configured drivers publish none for it."""
        return self._counted.get(node)

    def claimed(self, node: str) -> int:
        """The node's devices claim-only pods hold."""
        gpus = self._counted.get(node)
        return 0 if gpus is None else gpus.claimed

    def nodes(self) -> dict[str, NodeGpus]:
        return dict(self._counted)

    def node(self, obj: KubeObject) -> KubeObject:
        """The node object as a device plugin would show it (see the module's words); the object itself
        where DRA adds nothing. Its labels and status are new dicts: the object is not changed."""
        name = (obj.get("metadata") or {}).get("name", "")
        labels, allocatable = self.fold(name, (obj.get("metadata") or {}).get("labels") or {},
                                        (obj.get("status") or {}).get("allocatable") or {}, str)
        if allocatable is None:
            return obj
        status = {**(obj.get("status") or {}), "allocatable": allocatable}
        if "capacity" in status:
            status["capacity"] = {**status["capacity"], GPU_RESOURCE: str(self._counted[name].devices)}
        return {**obj, "metadata": {**obj["metadata"], "labels": labels}, "status": status}

    def fold(self, name: str, labels: Mapping[str, str], allocatable: Mapping[str, Any],
             quantity: Callable[[int], Any]) -> tuple[dict[str, str], dict[str, Any] | None]:
        """A node's labels and allocatable with its DRA GPUs (`quantity` writes the count as the caller's
        allocatable holds quantities: a string, a float); None for allocatable where DRA adds nothing."""
        gpus = self._counted.get(name)
        if gpus is None or GPU_RESOURCE in allocatable:
            return dict(labels), None
        folded = dict(labels)
        if gpus.product and not labels.get(GPU_PRODUCT_LABEL):
            folded[GPU_PRODUCT_LABEL] = gpus.product
        return folded, {**allocatable, GPU_RESOURCE: quantity(gpus.allocatable)}

    def nodes_folded(self, nodes: Iterable[KubeObject]) -> list[KubeObject]:
        return [self.node(n) for n in nodes]

    # ---- one read -------------------------------------------------------------------
    @classmethod
    def read(cls, api: client.ApiClient, drivers: Iterable[str]) -> tuple[DraGpus, tuple[str, ...]]:
        """Slices and claims listed once (whatif, the packer's pass), and what could not be read, in words:
        a cluster that does not serve resource.k8s.io/v1, or a user who may not list it, counts no DRA
        GPUs."""
        dra = cls(drivers)
        notes: list[str] = []
        if not dra.drivers:
            return dra, ()
        for kind in KINDS:
            try:
                dra.replace(kind, listed(api, f"/apis/{GROUP}/{VERSION}/{kind}"))
            except client.ApiException as exc:
                if exc.status not in (403, 404):
                    raise
                why = "this cluster does not serve them" if exc.status == 404 else "you may not list them"
                notes.append(f"DRA {kind} ({GROUP}/{VERSION}) were not read ({why}): GPUs that DRA drivers "
                             "publish are not counted")
        return dra, tuple(notes)

    # ---- under the owner's lock -----------------------------------------------------------
    def _put(self, kind: str, obj: KubeObject) -> None:
        key = _key(obj)
        if kind == SLICES:
            s = _slice(obj, self.drivers)
            if s is not None:
                self._slices[key] = s
                self._of_node[s.node].add(key)
                self._pool_node[(s.driver, s.pool)] = s.node
        else:
            held = _claimed(obj, self.drivers)
            if held:
                self._claims[key] = held
                self._held.update(held)

    def _drop(self, kind: str, key: str) -> None:
        if kind == SLICES:
            s = self._slices.pop(key, None)
            if s is not None:
                keys = self._of_node[s.node]
                keys.discard(key)
                if not keys:
                    del self._of_node[s.node]
                if not any(o.driver == s.driver and o.pool == s.pool for o in self._of(s.node)):
                    self._pool_node.pop((s.driver, s.pool), None)
        else:
            self._held.subtract(self._claims.pop(key, ()))
            self._held = +self._held  # drop the devices no claim holds any more

    def _nodes_of(self, kind: str, key: str) -> set[str]:
        if kind == SLICES:
            s = self._slices.get(key)
            return {s.node} if s else set()
        return {n for d, p, _ in self._claims.get(key, ()) if (n := self._pool_node.get((d, p)))}

    def _of(self, node: str) -> list[_Slice]:
        return [self._slices[k] for k in self._of_node.get(node, ())]

    def _count(self, node: str) -> NodeGpus | None:
        slices = self._of(node)
        newest: dict[tuple[str, str], int] = {}
        for s in slices:  # a pool being republished: only its newest generation counts
            newest[(s.driver, s.pool)] = max(newest.get((s.driver, s.pool), s.generation), s.generation)
        current = [s for s in slices if s.generation == newest[(s.driver, s.pool)]]
        devices = {(s.driver, s.pool, d) for s in current for d in s.gpus}
        if not devices:
            return None
        products = sorted({s.product for s in current if s.product})
        return NodeGpus(len(devices), sum(1 for d in devices if self._held.get(d)),
                        products[0] if products else None)


def essentials(kind: str, obj: KubeObject) -> KubeObject:
    """The parts of a slice or claim DraGpus reads: a claim's reservations and a slice's other attributes
    change nothing it counts."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}
    if kind == SLICES:
        spec = obj.get("spec") or {}
        read = (TYPE_ATTRIBUTE, *PRODUCT_ATTRIBUTES)
        devices = [{"name": d.get("name"),
                    "attributes": {k: v for k, v in (d.get("attributes") or {}).items() if _local(k) in read}}
                   for d in spec.get("devices") or () if isinstance(d, dict)]
        return {"metadata": kept, "spec": {"driver": spec.get("driver"), "nodeName": spec.get("nodeName"),
                                           "pool": spec.get("pool"), "devices": devices}}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k == EXTENDED_CLAIM}
    allocation = ((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}
    results = [{k: r.get(k) for k in ("driver", "pool", "device")} for r in allocation.get("results") or ()
               if isinstance(r, dict)]
    return {"metadata": {**kept, "annotations": annotations},
            "status": {"allocation": {"devices": {"results": results}}} if results else {}}


def _key(obj: KubeObject) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def _slice(obj: KubeObject, drivers: frozenset[str]) -> _Slice | None:
    spec = obj.get("spec") or {}
    driver, node = spec.get("driver"), spec.get("nodeName")
    if driver not in drivers or not node:
        return None  # another driver's, or devices of many nodes (a network-attached pool): not a node's GPUs
    pool = spec.get("pool") or {}
    gpus, products = [], []
    for device in spec.get("devices") or ():
        if not isinstance(device, dict) or not device.get("name"):
            continue
        attributes = {_local(k): v for k, v in (device.get("attributes") or {}).items()
                      if isinstance(v, dict)}
        kind = attributes.get(TYPE_ATTRIBUTE, {}).get("string")
        if kind not in (None, "gpu"):
            continue
        gpus.append(str(device["name"]))
        products += [str(a["string"]) for name in PRODUCT_ATTRIBUTES
                     if isinstance(a := attributes.get(name), dict) and a.get("string")][:1]
    try:
        generation = int(pool.get("generation") or 0)
    except (TypeError, ValueError):
        generation = 0
    product = _as_label(products[0]) if products else None
    return _Slice(str(node), str(driver), str(pool.get("name") or node), generation, tuple(gpus), product)


def _claimed(obj: KubeObject, drivers: frozenset[str]) -> tuple[DeviceId, ...]:
    """The configured drivers' devices a claim holds, unless the claim is kube-scheduler's for a pod's
    extended resource: that pod's `nvidia.com/gpu` request counts them already."""
    if ((obj.get("metadata") or {}).get("annotations") or {}).get(EXTENDED_CLAIM) == "true":
        return ()
    allocation = ((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}
    results = [r for r in allocation.get("results") or () if isinstance(r, dict)]
    return tuple((str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
                 for r in results if r.get("driver") in drivers)


def _local(attribute: str) -> str:
    """An attribute's name without its domain (`gpu.nvidia.com/productName` -> `productName`)."""
    return attribute.rsplit("/", 1)[-1]


def _as_label(product: str) -> str:
    """A product name as GPU feature discovery writes the label: `NVIDIA A100-SXM4-80GB` ->
    `NVIDIA-A100-SXM4-80GB`."""
    return "-".join(product.split())
