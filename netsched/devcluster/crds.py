"""CustomResourceDefinitions (netsched's: netsched/crds/*.yaml): install them and wait until served."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client

from netsched.devcluster.wait import poll

CRD_DIR = Path(__file__).parents[1] / "crds"


def crd_manifests() -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob("*.yaml"))]


def install_crds(api: client.ApiClient, manifests: list[dict] | None = None,
                 timeout: float = 60) -> list[str]:
    """Create or update every CRD (netsched's unless `manifests` says others), then wait until each is
    Established. Returns their names."""
    ext = client.ApiextensionsV1Api(api)
    names = []
    for crd in crd_manifests() if manifests is None else manifests:
        name = crd["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(crd)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            current = ext.read_custom_resource_definition(name)
            crd["metadata"]["resourceVersion"] = current.metadata.resource_version
            ext.replace_custom_resource_definition(name, crd)
        poll(lambda n=name: _established(ext, n), timeout, f"CRD {name} to be established")
        names.append(name)
    return names


def _established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    conds = ext.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conds)
