"""List-and-watch Nodes, Pods, PackingPlans or DRA ResourceSlices and ResourceClaims into a process's
own view, one daemon thread per kind.

The extender's ReadModel and the operator's ClusterIndex are kept this way (a `Sink`).

Objects stay plain dicts decoded by orjson: the kubernetes client's model classes
cost far more per event than the extender can afford at a thousand pods a second.
Each watch asks for bookmarks and ends after WATCH_SECONDS, so a healthy stream
is heard from at least that often; a read timeout catches a hung connection.
On any error the thread waits (with backoff) and lists again; a failure is logged when its
reason changes, not on every retry. An optional kind whose resource the apiserver does not
serve (a CRD not installed) is marked absent in the sink and looked for every ABSENT_RECHECK.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Protocol

import orjson
from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from netsched.api import dra, plans
from netsched.api.objects import KubeObject

log = logging.getLogger(__name__)
WATCH_SECONDS = 10
READ_TIMEOUT = WATCH_SECONDS + 20
ABSENT_RECHECK = 30.0  # seconds between looks for a resource the apiserver did not serve
# kinds served only once their CRD is installed, or (DRA) by clusters from Kubernetes 1.34 on
OPTIONAL = ("packingplans", *dra.KINDS)
# Finished pods hold no room; leaving them out of a watch keeps it small.
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class Sink(Protocol):
    """What a Reflector keeps up to date."""

    def replace(self, kind: str, objects: list[KubeObject]) -> None: ...  # a fresh LIST
    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None: ...  # one watch event
    def heard(self, kind: str) -> None: ...  # the apiserver was heard from
    def absent(self, kind: str) -> None: ...  # an optional kind is not served


class Reflector:
    def __init__(self, api: client.ApiClient, cache: Sink, kind: str,
                 on_event: Callable[[str, KubeObject], None] = lambda t, o: None,
                 field_selector: str | None = None):
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.list_call = {
            "nodes": core.list_node,
            "pods": core.list_pod_for_all_namespaces,
            "packingplans": partial(custom.list_cluster_custom_object, plans.GROUP, plans.VERSION,
                                    plans.PLURAL),
            # any group's list and watch: the client's ResourceV1Api follows one Kubernetes version's fields
            dra.SLICES: partial(custom.list_cluster_custom_object, dra.GROUP, dra.VERSION, dra.SLICES),
            dra.CLAIMS: partial(custom.list_cluster_custom_object, dra.GROUP, dra.VERSION, dra.CLAIMS),
        }[kind]
        self.kwargs = {"field_selector": field_selector} if field_selector else {}
        self.cache, self.kind, self.on_event = cache, kind, on_event
        self.first_backoff, self.absent_recheck = 0.5, ABSENT_RECHECK
        self.stopped = threading.Event()

    def start(self) -> Reflector:
        threading.Thread(target=self.run, name=f"watch-{self.kind}", daemon=True).start()
        return self

    def run(self) -> None:
        backoff, failing = self.first_backoff, ""
        while not self.stopped.is_set():
            try:
                resume: str | None = self._list()
                if failing:
                    log.info("%s watch recovered", self.kind)
                backoff, failing = self.first_backoff, ""
                while not self.stopped.is_set() and resume:
                    resume = self._watch(resume)
            except Exception as exc:  # any failure: log, back off, list again
                why, wait = _why(exc), backoff
                backoff = min(backoff * 2, 10)
                if self._absent(exc):
                    self.cache.absent(self.kind)
                    why += "; serving without them until it is"
                    wait = self.absent_recheck
                if why != failing:
                    log.warning("%s watch failed (%s); listing again in %.1f s", self.kind, why, wait)
                failing = why
                self.stopped.wait(wait)

    def _absent(self, exc: Exception) -> bool:
        return self.kind in OPTIONAL and isinstance(exc, client.ApiException) and exc.status == 404

    def _list(self) -> str:
        resp = self.list_call(_preload_content=False, _request_timeout=(5, READ_TIMEOUT), **self.kwargs)
        doc = orjson.loads(resp.data)
        items = doc.get("items") or []
        self.cache.replace(self.kind, items)
        for obj in items:  # a change a broken watch missed is heard here: e.g. a binding to explain
            self.on_event("ADDED", obj)
        return str(doc["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str | None:
        """Follow one watch from version; returns where to resume, or None to list again."""
        resp = self.list_call(
            watch=True, resource_version=version, allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS, _preload_content=False,
            _request_timeout=(5, READ_TIMEOUT), **self.kwargs,
        )
        self.cache.heard(self.kind)
        try:
            for line in iter_resp_lines(resp):
                event = orjson.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":  # usually 410 Gone: our version is too old
                    log.info("%s watch ended: %s", self.kind, obj.get("message"))
                    return None
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if kind == "BOOKMARK":
                    self.cache.heard(self.kind)
                    continue
                self.cache.apply(self.kind, kind, obj)
                self.on_event(kind, obj)
        finally:
            resp.release_conn()
        self.cache.heard(self.kind)
        return version


def _why(exc: Exception) -> str:
    if isinstance(exc, client.ApiException):
        hint = ": is its CRD installed? (netsched/crds/)" if exc.status == 404 else ""
        return f"HTTP {exc.status} {exc.reason}{hint}"
    return f"{type(exc).__name__}: {exc}"
