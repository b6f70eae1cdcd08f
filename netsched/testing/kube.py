"""A fake Kubernetes API server behind a real `kubernetes.client.ApiClient`.

`FakeKube` is an ApiClient whose HTTP layer answers from an in-memory store instead of a
socket, so the code under test builds its CoreV1Api, CustomObjectsApi and PolicyV1Api on
it unchanged and every call still passes through the client's own serialisation,
deserialisation and error handling:

    kube = FakeKube([make_node("a1-0"), make_pod("p", "a1-0")])
    GPUJobController(api=kube, records=...).tick(...)
    kube.get("pods", "ml", "train-0-0")              # what the code wrote
    [c.verb for c in kube.calls]                     # what it asked, in order

What it serves, by URL (`/api/v1/...` and `/apis/<group>/<version>/...`, any plural):
list (with `fieldSelector` of `a.b=v` / `a.b!=v` terms and `labelSelector` of `k=v` terms),
get, create (409 if the name is taken, `generateName` honoured), replace (PUT: 409 when its
`resourceVersion` is not the stored one, as optimistic concurrency asks), JSON patch (a list body)
and merge patch (a dict body; strategic merge is taken as a merge patch, which is the same
for the maps netsched patches), delete, the `status` subresource (a patch there changes
only `status`), `eviction` (deletes the pod) and watches. A watch replays the changes made
after its `resourceVersion` and then ends, as a server's watch does at its timeout; a
version older than `compact()` gets the ERROR event (410) a real server sends. Selectors
filter a watch's events by the object as it is now (a real server also sends DELETED for an
object that leaves the selection).

What it does not do: admission, validation, defaulting, owner garbage collection,
PodDisruptionBudget accounting on eviction (script a refusal with `fail`). Every object
gets a `uid`, a `resourceVersion` and, unless it has one, the `creationTimestamp` given to
the constructor; nothing else is filled in.

`fail(verb, plural, status)` makes the next matching request(s) fail the way the API
server does (a Status body whose message `api_message` reads); `on_call` runs after each
request, so a test can act between, say, a list and the watch that follows it.
"""

from __future__ import annotations

import builtins
import copy
import io
import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import jsonpatch
import urllib3
from kubernetes import client
from kubernetes.client import rest


@dataclass(frozen=True)
class Call:
    """One request the code made: `verb` is list, watch, get, create, replace, patch or delete."""
    verb: str
    plural: str
    namespace: str | None
    name: str | None = None
    subresource: str | None = None
    body: object = None
    query: dict = field(default_factory=dict)


@dataclass
class _Fault:
    verb: str
    plural: str
    status: int
    message: str
    times: int


class FakeKube(client.ApiClient):
    """An in-memory API server behind a real ApiClient; `objects` are stored as given (deep copies)."""

    def __init__(self, objects: Iterable[dict] = (), created: str = "2025-01-01T12:00:00Z"):
        super().__init__(client.Configuration(host="http://fake-kube"))
        self.created = created
        self.rest_client = _Transport(self)
        self.calls: list[Call] = []
        self.on_call: Callable[[Call], None] = lambda call: None
        self._objects: dict[tuple[str, str, str], dict] = {}  # (plural, namespace or "", name) -> object
        self._changes: list[tuple[int, str, str, dict]] = []  # (version, plural, event type, object)
        self._version = itertools.count(1)
        self._now = 0  # the latest resourceVersion
        self._compacted = 0  # watches from before this version get 410 Gone
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        for obj in objects:
            self.add(obj)

    # ---- the store, as a test sees it -------------------------------------------------
    def add(self, obj: dict, plural: str | None = None) -> dict:
        """Store `obj` (a create that cannot fail); its plural defaults to its kind, lowercased, plus s."""
        with self._lock:
            return self._write(plural or _plural(obj), "ADDED", copy.deepcopy(obj))

    def get(self, plural: str, namespace: str | None, name: str) -> dict | None:
        obj = self._objects.get((plural, namespace or "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, plural: str, namespace: str | None = None) -> list[dict]:
        return [copy.deepcopy(o) for (p, ns, _), o in sorted(self._objects.items())
                if p == plural and (namespace is None or ns == namespace)]

    def delete(self, plural: str, namespace: str | None, name: str) -> None:
        with self._lock:
            obj = self._objects.pop((plural, namespace or "", name))
            self._record(plural, "DELETED", obj)

    def bookmark(self, plural: str) -> None:
        """A BOOKMARK at the current version, for watches of `plural` that allow bookmarks."""
        with self._lock:
            self._changes.append((self._now, plural, "BOOKMARK",
                                  {"metadata": {"resourceVersion": str(self._now)}}))

    def compact(self) -> None:
        """Forget the changes so far, as etcd compaction does: older watches get 410 Gone."""
        with self._lock:
            self._compacted = self._now
            self._changes.clear()

    def fail(self, verb: str, plural: str, status: int, message: str = "injected failure",
             times: int = 1) -> None:
        """The next `times` requests of `verb` on `plural` fail with `status` and `message`."""
        self._faults.append(_Fault(verb, plural, status, message, times))

    def made(self, verb: str, plural: str | None = None,
             subresource: str | None = None) -> builtins.list[Call]:
        """The calls of `verb` (on `plural`, with `subresource`) made so far."""
        return [c for c in self.calls if c.verb == verb and plural in (None, c.plural)
                and (subresource is None or c.subresource == subresource)]

    # ---- serving a request --------------------------------------------------------------
    def serve(self, method: str, url: str, body: object) -> tuple[int, bytes]:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        segments = [unquote(s) for s in parts.path.strip("/").split("/")]
        rest_ = segments[2:] if segments[0] == "api" else segments[3:]
        namespace = None
        if len(rest_) >= 3 and rest_[0] == "namespaces":
            namespace, rest_ = rest_[1], rest_[2:]
        plural = rest_[0] if rest_ else ""
        name, sub = (rest_[1:] + [None, None])[:2]
        watch = query.get("watch") == "true"
        verb = {"GET": "watch" if watch else ("get" if name else "list"), "POST": "create",
                "PUT": "replace", "PATCH": "patch", "DELETE": "delete"}[method]
        call = Call(verb, plural, namespace, name, sub, copy.deepcopy(body), query)
        self.calls.append(call)
        try:
            with self._lock:
                fault = self._fault(verb, plural)
                if fault:
                    return _status(fault.status, fault.message)
                return getattr(self, f"_{verb}")(plural, namespace, name, sub, body, query)
        finally:
            self.on_call(call)

    def _fault(self, verb: str, plural: str) -> _Fault | None:
        for fault in self._faults:
            if fault.verb == verb and fault.plural == plural and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    def _list(self, plural, namespace, name, sub, body, query):
        items = [o for (p, ns, _), o in sorted(self._objects.items())
                 if p == plural and namespace in (None, ns) and _selected(o, query)]
        version = {"resourceVersion": str(self._now)}
        return 200, _json({"kind": "List", "apiVersion": "v1", "metadata": version, "items": items})

    def _watch(self, plural, namespace, name, sub, body, query):
        since = int(query.get("resourceVersion") or 0)
        if since < self._compacted:
            gone = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired",
                    "message": f"too old resource version: {since} ({self._compacted})"}
            return 200, _json({"type": "ERROR", "object": gone}) + b"\n"
        lines = []
        bookmarks = query.get("allowWatchBookmarks") == "true"
        for version, p, type_, obj in self._changes:
            if p != plural or version < since:
                continue
            if type_ == "BOOKMARK" and bookmarks or (
                    type_ != "BOOKMARK" and version > since
                    and namespace in (None, obj["metadata"].get("namespace")) and _selected(obj, query)):
                lines.append(_json({"type": type_, "object": obj}))
        return 200, b"".join(line + b"\n" for line in lines)

    def _get(self, plural, namespace, name, sub, body, query):
        obj = self._objects.get((plural, namespace or "", name))
        return (200, _json(obj)) if obj is not None else _not_found(plural, name)

    def _create(self, plural, namespace, name, sub, body, query):
        if sub == "eviction":
            if (plural, namespace or "", name) not in self._objects:
                return _not_found(plural, name)
            self._record(plural, "DELETED", self._objects.pop((plural, namespace or "", name)))
            return 201, _json({"kind": "Status", "status": "Success", "code": 201})
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if namespace:
            meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._version):05d}"
        if (plural, namespace or "", meta.get("name")) in self._objects:
            return _status(409, f'{plural} "{meta.get("name")}" already exists', "AlreadyExists")
        return 201, _json(self._write(plural, "ADDED", obj))

    def _replace(self, plural, namespace, name, sub, body, query):
        old = self._objects.get((plural, namespace or "", name))
        if old is None:
            return _not_found(plural, name)
        given = (body.get("metadata") or {}).get("resourceVersion")
        if given and given != old["metadata"]["resourceVersion"]:
            return _status(409, f'Operation cannot be fulfilled on {plural} "{name}": the object has been '
                           "modified; please apply your changes to the latest version and try again",
                           "Conflict")
        new = copy.deepcopy(body)
        new["metadata"] = {**new.get("metadata", {}), "uid": old["metadata"]["uid"],
                           "creationTimestamp": old["metadata"]["creationTimestamp"]}
        return 200, _json(self._write(plural, "MODIFIED", new))

    def _patch(self, plural, namespace, name, sub, body, query):
        old = self._objects.get((plural, namespace or "", name))
        if old is None:
            return _not_found(plural, name)
        try:
            new = jsonpatch.apply_patch(old, body) if isinstance(body, list) else _merge(old, body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            return _status(422, str(exc), "Invalid")
        if sub == "status":
            new = {**copy.deepcopy(old), "status": new.get("status")}
        return 200, _json(self._write(plural, "MODIFIED", new))

    def _delete(self, plural, namespace, name, sub, body, query):
        obj = self._objects.pop((plural, namespace or "", name), None)
        if obj is None:
            return _not_found(plural, name)
        self._record(plural, "DELETED", obj)
        return 200, _json(obj)

    def _write(self, plural: str, type_: str, obj: dict) -> dict:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{plural}-{meta.get('name')}")
        meta.setdefault("creationTimestamp", self.created)
        self._record(plural, type_, obj)
        self._objects[(plural, meta.get("namespace") or "", meta["name"])] = obj
        return obj

    def _record(self, plural: str, type_: str, obj: dict) -> None:
        self._now = next(self._version)
        obj["metadata"]["resourceVersion"] = str(self._now)
        self._changes.append((self._now, plural, type_, copy.deepcopy(obj)))


class _Body(io.BytesIO):
    """A response body that reads as closed once consumed, as a finished HTTP response does
    (urllib3 streams until then)."""

    def isclosed(self) -> bool:
        return self.closed or self.tell() >= len(self.getbuffer())


class _Transport:
    """Stands in for the client's RESTClientObject: the one method ApiClient calls."""

    def __init__(self, kube: FakeKube):
        self.kube = kube

    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        status, payload = self.kube.serve(method.upper(), url, body)
        raw = urllib3.HTTPResponse(body=_Body(payload), headers={"Content-Type": "application/json"},
                                   status=status, reason=_REASONS.get(status, "OK"), preload_content=False)
        return rest.RESTResponse(raw)

    def close(self) -> None:
        pass


_REASONS = {200: "OK", 201: "Created", 404: "Not Found", 409: "Conflict", 410: "Gone",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error"}


def _plural(obj: dict) -> str:
    return obj["kind"].lower() + "s"


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()


def _status(code: int, message: str, reason: str = "") -> tuple[int, bytes]:
    return code, _json({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                        "reason": reason or _REASONS.get(code, ""), "message": message})


def _not_found(plural: str, name: str | None) -> tuple[int, bytes]:
    return _status(404, f'{plural} "{name}" not found', "NotFound")


def _merge(old: object, patch: object) -> object:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(old) if isinstance(old, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _field(obj: dict, path: str) -> str:
    value: object = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _selected(obj: dict, query: dict) -> bool:
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        path, negated, value = term.partition("!=") if "!=" in term else term.partition("=")
        if (_field(obj, path) == value) == (negated == "!="):
            return False
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, query.get("labelSelector", "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class CacheSpy:
    """A watch Sink (netsched.api.watch) that logs what it is told, in order: objects by name."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def replace(self, kind: str, objects: list[dict[str, Any]]) -> None:
        self.log.append(("replace", kind, [o["metadata"]["name"] for o in objects]))

    def apply(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        self.log.append((event_type, kind, obj["metadata"]["name"]))

    def heard(self, kind: str) -> None:
        self.log.append(("heard", kind))

    def absent(self, kind: str) -> None:
        self.log.append(("absent", kind))


class _Canned:
    """An HTTP response as the client reads it: a status and a JSON body."""

    def __init__(self, status: int, body: dict):
        self.status, self.reason, self.data = status, "", json.dumps(body).encode()
        self.headers: dict[str, str] = {}

    def read(self) -> bytes:
        return self.data

    def getheaders(self) -> dict:
        return self.headers


class ApiServer(client.ApiClient):
    """The real client, with a canned answer in place of the network; keeps each request."""

    def __init__(self, status: int = 201, body: dict | None = None):
        super().__init__(client.Configuration(host="https://api"))
        self.answer = _Canned(status, body or {"metadata": {"managedFields": []}})
        self.requests: list[tuple[str, str, Any]] = []

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> _Canned:
        self.requests.append((method, url, body))
        return self.answer
