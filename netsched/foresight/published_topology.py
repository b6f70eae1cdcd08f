"""The topology levels the cluster's operator runs with, read where the cluster publishes them (the
ConfigMap netsched.api.topology names, written by the chart and the dev-cluster from the same setting as
the operator's --topology), so whatif and why judge `maxPeerDistance: subblock` as the operator will.

Which topology a command uses: its --topology, else $NETSCHED_TOPOLOGY, else the published one (the
ConfigMap in $NETSCHED_NAMESPACE, default netsched-system), else netsched's own levels with a note saying
why none was read.
"""

from __future__ import annotations

from urllib.parse import quote

from kubernetes import client

from netsched.api.connect import call
from netsched.api.topology import (
    DEFAULT,
    PUBLISHED_CONFIGMAP,
    PUBLISHED_KEY,
    BadTopology,
    Topology,
)

NAMESPACE_ENV = "NETSCHED_NAMESPACE"  # where netsched is installed, when not in the documented namespace
TIMEOUT = 30


def published(api: client.ApiClient, namespace: str) -> tuple[Topology, str | None]:
    """The topology published in `namespace`, with None; else netsched's default levels and a note saying
    why (not found, not readable, not a topology)."""
    where = f"ConfigMap {namespace}/{PUBLISHED_CONFIGMAP}"
    fallback = (f"assumed netsched's levels ({', '.join(DEFAULT.names)}); give --topology or set "
                "$NETSCHED_TOPOLOGY to the operator's --topology")
    try:
        found = call(api, "GET", f"/api/v1/namespaces/{quote(namespace)}/configmaps/{PUBLISHED_CONFIGMAP}",
                     timeout=TIMEOUT)
    except client.ApiException as exc:
        why = {404: "not found (is netsched installed in another namespace? set $NETSCHED_NAMESPACE)",
               403: "not readable with your permissions"}.get(exc.status, f"not read (HTTP {exc.status})")
        return DEFAULT, f"the cluster's topology levels: {where} {why}; {fallback}"
    text = (found.get("data") or {}).get(PUBLISHED_KEY) or ""
    try:
        return Topology.parse(text), None
    except BadTopology as exc:
        return DEFAULT, f"the cluster's topology levels: {where} holds no topology ({exc}); {fallback}"
