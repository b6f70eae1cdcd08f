"""What the API server would accept: each object checked by the server itself with a dry-run create
(its schema, unknown and duplicate fields, enums, CEL rules, defaults and admission), writing nothing.
Its verdict is the server's own message, so whatif never answers for an object `kubectl apply` refuses.
The CRD keeps a GPUJob's pod template as written (the server checks it only when the operator creates
the pods), so one of the pods the operator would make is checked the same way.

The kinds whatif answers for are listed once, in ANSWERED. A JobSet or LeaderWorkerSet whose CRD the
server does not serve is not refused: `NotServed` says so, and netsched's own checks go on. A manifest is
first defaulted as its controller's webhook would (`defaulted`), so what that webhook fills in (a JobSet's
restartPolicy) is not refused as missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client

from netsched.api.connect import ClusterUnreachable, api_message, call
from netsched.api.gpujob import GROUP, KIND, PLURAL, VERSION
from netsched.foresight.whatif import WhatIfError
from netsched.foresight.workload_gangs import WORKLOADS
from netsched.jobs.gpujob import GPUJob
from netsched.jobs.replica_pods import replica_pod

TIMEOUT = 30  # seconds for the API server's verdict on one object


@dataclass(frozen=True)
class Served:
    """Where the API server serves a kind."""
    group: str
    version: str
    plural: str
    ours: bool = True  # netsched's own CRD: a server that does not serve it is not set up for netsched

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


# kind: where; whatif refuses every other kind
ANSWERED = {KIND: Served(GROUP, VERSION, PLURAL),
            **{kind: Served(a.group, a.version, a.plural, ours=a.made is None)
               for kind, a in WORKLOADS.items()}}


def answered_text() -> str:
    """The kinds whatif answers for, those of one API version together: "Job (batch/v1), JAXJob, MPIJob
    (kubeflow.org/v1)"."""
    by_version: dict[str, list[str]] = {}
    for kind, served in ANSWERED.items():
        by_version.setdefault(served.api_version, []).append(kind)
    return ", ".join(f"{', '.join(kinds)} ({version})" for version, kinds in by_version.items())


class NotServed(WhatIfError):
    """The API server does not serve the kind (its CRD is not installed): it could not check the object."""

# the API server adds this to every schema refusal of a custom object; it says nothing the rest does not
_NOT_CHECKED = (", <nil>: Invalid value: null: some validation rules were not checked because the object "
                "was invalid; correct the existing errors to complete validation")


def defaulted(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as its kind's controller defaults it before the API server stores it (the kind's
    `defaults`), else as it is."""
    kind = WORKLOADS.get(str(body.get("kind")))
    return kind.defaults(body) if kind is not None and kind.defaults is not None else body


def serves_group(api: client.ApiClient, group: str) -> bool | None:
    """Does the API server serve any version of the API `group` (None: it did not say)?"""
    try:
        call(api, "GET", f"/apis/{quote(group)}", timeout=TIMEOUT)
    except client.ApiException as exc:
        return False if exc.status == 404 else None
    return True


def admitted(api: client.ApiClient, body: dict[str, Any], namespace: str) -> dict[str, Any]:
    """`body` as the API server would store it if it were created now (with the CRD's defaults), in the
    manifest's namespace, else in `namespace` (as kubectl does); WhatIfError with the server's refusal."""
    kind, served = body.get("kind"), ANSWERED.get(str(body.get("kind")))
    answered = answered_text()
    if not kind:
        raise WhatIfError(f"kind is not set; whatif answers for {answered}")
    if served is None:
        raise WhatIfError(f"kind {kind}: netsched does not gang its pods; whatif answers only for {answered}")
    if body.get("apiVersion") != served.api_version:
        said = f"apiVersion {body['apiVersion']!r}" if body.get("apiVersion") else "apiVersion is not set"
        if not served.ours and serves_group(api, served.group) is False:
            raise WhatIfError(f"{said}: {kind} is not installed (the API server serves no {served.group} "
                              f"API); whatif reads {kind} as {served.api_version}: install {kind}'s "
                              f"controller and write apiVersion: {served.api_version}")
        raise WhatIfError(f"{said}: the API server serves {kind} as {served.api_version}; write "
                          f"apiVersion: {served.api_version}")
    namespace = _namespace(body, namespace)
    try:
        path = f"/apis/{served.api_version}/namespaces/{quote(namespace)}/{served.plural}"
        stored = _dry_run_create(api, path, body)
    except client.ApiException as exc:
        said = _refusal(exc, kind, served, namespace)
        if exc.status == 404 and not served.ours and "namespaces" not in said:
            raise NotServed(f"{kind} is not installed (the API server does not serve {served.api_version}), "
                            "so it checked only what its controller would make of it; netsched's own checks "
                            f"follow; nothing runs it until {kind}'s controller is installed") from None
        raise WhatIfError(said) from None
    stored["metadata"].pop("managedFields", None)
    return stored


def pods_admitted(api: client.ApiClient, manifest: dict[str, Any]) -> None:
    """WhatIfError if the API server would refuse the pods the operator makes for the GPUJob `manifest`
    (as `as_submitted` makes it)."""
    job = GPUJob.of(manifest)
    pod = replica_pod(job, 0, 0, gated=True)
    del pod["metadata"]["ownerReferences"]  # its GPUJob is not in the cluster
    try:
        _dry_run_create(api, f"/api/v1/namespaces/{quote(job.namespace)}/pods", pod)
    except client.ApiException as exc:
        if exc.status == 403:  # the operator makes them with its own permission, not the user's
            return
        said = " ".join(api_message(exc).split())
        raise WhatIfError(f"the API server would refuse its pods (made from spec.template): {said}") from None


def _namespace(body: dict[str, Any], namespace: str) -> str:
    """The manifest's own namespace, else `namespace` (as kubectl does)."""
    meta = body.get("metadata")
    own = meta.get("namespace") if isinstance(meta, dict) else None
    return own if isinstance(own, str) and own else namespace


def templates_admitted(api: client.ApiClient, body: dict[str, Any], namespace: str) -> None:
    """For a JobSet or LeaderWorkerSet the API server does not serve (`NotServed`): WhatIfError if it
    would refuse what its controller makes of it (the kind's `made`: a Job per replicated job, a pod per
    template), checked by a dry-run create of each (named by generateName: only the template is in
    question)."""
    where = quote(_namespace(body, namespace))
    kind = WORKLOADS.get(str(body.get("kind")))
    for made in kind.made(body) if kind and kind.made else []:
        at, obj = made.at, made.body
        api_root = "/api/v1" if made.api_version == "v1" else f"/apis/{made.api_version}"
        try:
            _dry_run_create(api, f"{api_root}/namespaces/{where}/{made.plural}", obj)
        except client.ApiException as exc:
            if exc.status == 403:  # its controller makes them with its own permission, not the user's
                continue
            said = " ".join(api_message(exc).split())
            raise WhatIfError(f"{at}: the API server would refuse the {obj['kind']} made from it: "
                              f"{said}") from None


def _dry_run_create(api: client.ApiClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The object the API server would store for a create of `body` at `path`, unknown and duplicate
    fields refused; nothing is written. `body` goes as it is: the client's typed calls would refuse a
    malformed pod themselves, with a message of their own instead of the server's."""
    try:
        return call(api, "POST", path, [("dryRun", "All"), ("fieldValidation", "Strict")], body, TIMEOUT)
    except urllib3.exceptions.TimeoutError:
        raise ClusterUnreachable(f"the API server gave no verdict in {TIMEOUT} s") from None


def _refusal(exc: client.ApiException, kind: str, served: Served, namespace: str) -> str:
    said = " ".join(api_message(exc).replace(_NOT_CHECKED, "").split())
    if exc.status == 409:
        target = "NAME" if kind == KIND else f"{kind.lower()}/NAME"
        return (f"{said}; whatif answers for a {kind} not yet submitted: give it another name, or see this "
                f"one with `netsched why {target}`")
    if exc.status == 403:
        return (f"{said}; whatif asks the API server with a dry-run create, which needs permission to "
                f"create {served.plural}.{served.group} in {namespace}")
    if exc.status == 404 and "namespaces" not in said:
        return (f"{said}: the API server does not serve {kind} ({served.api_version}); is netsched's CRD "
                "installed?")
    return said
