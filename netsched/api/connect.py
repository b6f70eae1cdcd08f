"""How netsched's components reach the API server, and what a command says when it cannot: which
kubeconfig and context, which namespace by default (kubectl's rules), and one line for every way of
not getting there."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config.kube_config import KubeConfigMerger

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FIX = "pass --kubeconfig FILE or set KUBECONFIG"
# what the kubernetes client raises reading a file that is no kubeconfig: not YAML, or the wrong shape
KUBECONFIG_ERRORS = (config.ConfigException, OSError, yaml.YAMLError, TypeError, AttributeError, KeyError,
                     ValueError)


class ClusterUnreachable(Exception):
    """No API server to talk to: no credentials were found, or the server did not answer."""


class NoKubeconfig(ClusterUnreachable):
    """Not in a pod, and no kubeconfig file at all."""


def api_client(kubeconfig: str | None = None, connections: int | None = None,
               context: str | None = None) -> client.ApiClient:
    """From a kubeconfig file if given, else in-cluster credentials, else $KUBECONFIG or ~/.kube/config;
    `context` picks a kubeconfig context other than its current one (and so means a kubeconfig).
    `connections`: how many connections to keep open to the API server (the client's default is 5 per
    CPU); a process with more threads talking at once needs as many, or each extra request opens and
    then throws away a connection of its own (a TLS handshake every time)."""
    settings = client.Configuration()
    if connections:
        settings.connection_pool_maxsize = connections
    if not kubeconfig and not context:
        try:
            config.load_incluster_config(client_configuration=settings)
            return client.ApiClient(settings)
        except config.ConfigException:
            pass  # not in a pod
    kube_context(kubeconfig, context)  # says which file or context is wrong, in one line
    try:
        config.load_kube_config(_where(kubeconfig), context, client_configuration=settings)
    except KUBECONFIG_ERRORS as exc:
        raise _unreadable(kubeconfig, exc) from exc
    return client.ApiClient(settings)


def kube_context(kubeconfig: str | None = None, context: str | None = None) -> dict[str, Any]:
    """The kubeconfig context `context` names, else its current one: {"cluster", "user", "namespace"?}."""
    if kubeconfig and not Path(kubeconfig).expanduser().exists():
        raise _unreadable(kubeconfig, FileNotFoundError("no such file"))
    try:
        merged = KubeConfigMerger(_where(kubeconfig)).config
        if merged is None:
            raise NoKubeconfig("no cluster to talk to: not in a pod, and no kubeconfig ($KUBECONFIG or "
                                     f"~/.kube/config); {FIX}")
        contexts = {entry["name"]: entry.get("context") or {}
                    for entry in (getattr(e, "value", e) for e in merged.value.get("contexts") or [])}
        name = context or merged.value.get("current-context")
    except KUBECONFIG_ERRORS as exc:
        raise _unreadable(kubeconfig, exc) from exc
    if name not in contexts:
        known = ", ".join(contexts) or "none"
        if context:
            raise ClusterUnreachable(f"context {context!r} is not in kubeconfig {_where(kubeconfig)}; its "
                                     f"contexts: {known}")
        raise ClusterUnreachable(f"kubeconfig {_where(kubeconfig)} has no current context (its contexts: "
                                 f"{known}): pass --context NAME or run `kubectl config use-context NAME`")
    found: dict[str, Any] = contexts[name]
    return found


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use without -n: the context's, else "default"; in a pod (no kubeconfig
    given), the pod's own."""
    if not kubeconfig and not context and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        return str(kube_context(kubeconfig, context).get("namespace") or "default")
    except NoKubeconfig:
        return "default"  # as kubectl; connecting will say there is no cluster


def reachable(api: client.ApiClient, timeout: float = 10.0) -> client.ApiClient:
    """`api`, once its API server answered: a server that is down, a wrong address or rejected
    credentials are one line before a command starts, not a traceback (or endless retries) later."""
    settings = copy.copy(api.configuration)
    settings.retries = 0  # one try, and no "Retrying" warnings in the log
    with client.ApiClient(settings) as probe:
        try:
            call(probe, "GET", "/version", timeout=timeout)
        except (urllib3.exceptions.HTTPError, client.ApiException) as exc:
            raise ClusterUnreachable(one_line(exc)) from exc
    return api


def one_line(exc: BaseException) -> str | None:
    """What a command says for a failure to reach or use the API server; None for any other error."""
    if isinstance(exc, ClusterUnreachable):
        return str(exc)
    if isinstance(exc, client.ApiException):
        said = f"the API server answered {exc.status} {exc.reason}: {api_message(exc)}"
        if exc.status == 401:
            said += "; the kubeconfig's credentials are not accepted"
        return said
    if isinstance(exc, urllib3.exceptions.HTTPError):
        reason = getattr(exc, "reason", None) or exc  # MaxRetryError wraps the last failure
        cause = reason.__cause__ or reason.__context__ or reason
        what = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(reason)
        pool = getattr(exc, "pool", None)
        where = f" at {pool.scheme}://{pool.host}:{pool.port}" if pool is not None else ""
        return (f"the API server{where} did not answer ({what}): is the cluster up, and are the kubeconfig "
                "and context the right ones?")
    return None


def _where(kubeconfig: str | None) -> str:
    """The kubeconfig file(s) kubectl reads: --kubeconfig, else $KUBECONFIG (now, not at import), else
    ~/.kube/config."""
    return kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"


def _unreadable(kubeconfig: str | None, exc: Exception) -> ClusterUnreachable:
    what = " ".join(str(exc).split())  # YAML errors span lines
    if isinstance(exc, yaml.YAMLError):
        what = f"not YAML: {what}"
    elif not isinstance(exc, config.ConfigException | OSError):  # the client's own words name its internals
        what = "not a kubeconfig (a YAML mapping of apiVersion, clusters, contexts, users)"
    return ClusterUnreachable(f"no cluster to talk to: kubeconfig {_where(kubeconfig)}: {what}; {FIX}")


# asks a list for its objects' metadata alone (names, labels), not their spec and status
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def call(api: client.ApiClient, method: str, path: str, query: Sequence[tuple[str, str]] = (),
         body: Any = None, timeout: float | None = None, accept: str = "application/json") -> dict[str, Any]:
    """The API server's JSON answer to one request at `path`, as the server wrote it; ApiException
    for any answer but 2xx. No API class of the client is used: each imports its hundreds of model
    classes (CoreV1Api alone about 2 s on a busy 2-core machine), more than a command like whatif
    takes to do its work. `accept=METADATA_ONLY` asks a list for its objects' metadata alone."""
    request = api.param_serialize(
        method, path, query_params=list(query),
        header_params={"Accept": accept, "Content-Type": "application/json"}, body=body,
        auth_settings=["BearerToken"])
    response = api.call_api(*request, _request_timeout=timeout)
    response.read()
    if not 200 <= response.status <= 299:
        raise client.ApiException.from_response(
            http_resp=response, body=response.data.decode(errors="replace"), data=None)
    answer: dict[str, Any] = orjson.loads(response.data)
    return answer


def listed(api: client.ApiClient, path: str) -> list[dict[str, Any]]:
    """The objects of the list at `path` (e.g. /api/v1/pods: every namespace's), read with `call`."""
    found: list[dict[str, Any]] = call(api, "GET", path)["items"]
    return found


def listed_together(api: client.ApiClient, paths: Sequence[str]) -> list[list[dict[str, Any]]]:
    """`listed` for each of `paths`, asked at once: the API server encodes the lists side by side, and
    the wait for the largest (1,000 nodes, their pods: megabytes each) is most of the read."""
    with ThreadPoolExecutor(len(paths)) as pool:
        return list(pool.map(lambda path: listed(api, path), paths))


def items(list_call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """The objects a list call returns, as the API server's own JSON (camelCase keys, as
    sanitize_for_serialization would give). Skips the client's model classes: building them costs
    about 10 ms per node, 14 s for 1,000 nodes and their pods on a busy 2-core machine."""
    response = list_call(*args, _preload_content=False, **kwargs)
    found: list[dict[str, Any]] = orjson.loads(response.data)["items"]
    return found


def api_message(exc: client.ApiException) -> str:
    """The API server's own message for a failed call (its Status body), else the HTTP status."""
    try:
        message: str = json.loads(exc.body)["message"]
        return message
    except (TypeError, ValueError, KeyError):
        return f"{exc.status} {exc.reason}"
