"""Who may read the extender's metrics and decisions: the API server says, as it does for Kubernetes'
own components (component-base's delegated authentication and authorization).

A bearer token is checked with a TokenReview; the caller it names is then asked about with a
SubjectAccessReview: `get` on the path as a non-resource URL (/metrics, /debug/decisions, ...), the
rule kube-scheduler and kube-controller-manager apply to their own /metrics, and for placements, the
pods they describe (`list pods` in a namespace for the list, `get` of the pod for one). Answers are
kept for TTL seconds, so a scrape every few seconds costs the API server no review each time and a
revoked right takes at most that long to bite.

The calls block: the server makes them on a worker thread, never on the loop that answers
kube-scheduler.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TTL = 10.0  # seconds an answer is kept (component-base keeps token reviews 10 s)
MAX_ENTRIES = 4096  # answers kept at most; past that the cache starts again empty


@dataclass(frozen=True)
class Caller:
    """Whom a token belongs to, as the API server said (TokenReview status.user)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    def subject(self) -> dict[str, Any]:
        """The SubjectAccessReview spec fields naming this caller."""
        return {"user": self.name, "uid": self.uid, "groups": list(self.groups),
                "extra": {k: list(v) for k, v in self.extra}}


class Unauthenticated(Exception):
    """No bearer token, or one the API server does not accept: HTTP 401."""


class Forbidden(Exception):
    """The caller may not do this: HTTP 403; the message says which right is missing."""


class ReviewFailed(Exception):
    """The API server could not be asked: HTTP 503."""


class Reviewer(Protocol):
    """The two questions put to the API server (a fake in unit tests)."""

    def review_token(self, token: str) -> Caller | None: ...

    def allowed(self, caller: Caller, attributes: dict[str, Any]) -> bool: ...


class ApiReviewer:
    """TokenReview and SubjectAccessReview through a Kubernetes ApiClient (raw JSON, no model classes)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import orjson

        try:
            response = self.api.call_api(*self.api.param_serialize(
                "POST", path, body=body, auth_settings=["BearerToken"],
                header_params={"Content-Type": "application/json", "Accept": "application/json"}),
                _request_timeout=5)
            response.read()
            if not 200 <= response.status < 300:
                raise ReviewFailed(f"POST {path}: HTTP {response.status}: {response.data[:200]!r}")
            doc: dict[str, Any] = orjson.loads(response.data)
            return doc
        except ReviewFailed:
            raise
        except Exception as exc:  # unreachable, TLS, timeout: one line, never the client's traceback
            raise ReviewFailed(f"POST {path}: {type(exc).__name__}: {exc}") from None

    def review_token(self, token: str) -> Caller | None:
        doc = self._create("/apis/authentication.k8s.io/v1/tokenreviews", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        status = doc.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = tuple(sorted((k, tuple(v)) for k, v in (user.get("extra") or {}).items()))
        return Caller(user.get("username", ""), user.get("uid", ""), tuple(user.get("groups") or ()), extra)

    def allowed(self, caller: Caller, attributes: dict[str, Any]) -> bool:
        doc = self._create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": caller.subject() | attributes})
        return bool((doc.get("status") or {}).get("allowed"))


class _Answers:
    """Answers kept TTL seconds, safe across the server's worker threads."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl, self.clock = ttl, clock
        self._kept: dict[object, tuple[float, object]] = {}
        self._lock = threading.Lock()

    def get(self, key: object, ask: Callable[[], object]) -> object:
        now = self.clock()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self.ttl:
            return kept[1]
        answer = ask()
        with self._lock:
            if len(self._kept) >= MAX_ENTRIES:
                self._kept.clear()
            self._kept[key] = (now, answer)
        return answer


class Access:
    """Authenticate a request's Authorization header and authorise what it asks, with kept answers."""

    def __init__(self, reviewer: Reviewer, ttl: float = TTL, clock: Callable[[], float] = time.monotonic):
        self.reviewer = reviewer
        self._tokens = _Answers(ttl, clock)
        self._rights = _Answers(ttl, clock)

    def caller(self, authorization: str | None) -> Caller:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("netsched: this endpoint needs a bearer token the API server accepts "
                                  "(Authorization: Bearer <token>, e.g. from `kubectl create token`)")
        key = hashlib.sha256(token.encode()).digest()  # the token itself is never kept
        caller = self._tokens.get(key, lambda: self.reviewer.review_token(token))
        if caller is None:
            raise Unauthenticated("netsched: the API server did not accept this bearer token (TokenReview)")
        assert isinstance(caller, Caller)
        return caller

    def may(self, caller: Caller, attributes: dict[str, Any]) -> bool:
        key = (caller, repr(sorted(attributes.items())))
        return bool(self._rights.get(key, lambda: self.reviewer.allowed(caller, attributes)))

    def require_path(self, caller: Caller, path: str) -> None:
        """`get` on the non-resource URL, as Kubernetes components ask for their /metrics."""
        if not self.may(caller, {"nonResourceAttributes": {"path": path, "verb": "get"}}):
            raise Forbidden(f'netsched: user "{caller.name}" may not get {path}: grant get on the '
                            f"nonResourceURL {path} (the chart's ClusterRole <release>-extender-reader "
                            "has it)")

    def may_read_pods(self, caller: Caller, namespace: str, name: str | None = None) -> bool:
        """`list pods` in the namespace (all namespaces for ""), or `get` of the pod `name` there."""
        resource = {"namespace": namespace, "verb": "get" if name else "list", "resource": "pods",
                    "group": "", "version": "v1"}
        if name:
            resource["name"] = name
        return self.may(caller, {"resourceAttributes": resource})

    def readable_namespaces(self, caller: Caller, namespaces: set[str]) -> set[str]:
        """Those of `namespaces` the caller may list pods in: all at once with one review when it may
        list them cluster-wide, else a review per namespace."""
        if self.may_read_pods(caller, ""):
            return set(namespaces)
        return {ns for ns in namespaces if self.may_read_pods(caller, ns)}
