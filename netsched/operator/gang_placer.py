"""Where a gang's members go, asked of the extender as their gates lift (POST /gang,
netsched.extender.gang): the extender holds the telemetry, the holds of other jobs and the model, and
chooses every member's node together with the plugins that serve kube-scheduler.

The answer is advice with a fallback, never a dependency: with no extender configured, or one that
does not answer within `timeout`, answers an error, or cannot place the whole gang, the gang is released
as before (into its domain, each pod placed by kube-scheduler and the extender one by one). A failure
is logged once per kind of failure until an answer comes again, and counted."""

from __future__ import annotations

import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from netsched.api.objects import KubeObject
from netsched.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)
TIMEOUT = 5.0  # a search over 10,000 nodes takes well under a second; kube-scheduler's call times out at 5


class BadExtenderTLS(ValueError):
    """The files to meet the extender with cannot be used: the message names the flag."""


@dataclass
class GangPlacer:
    url: str | None  # the extender's root URL; None: no placement asked
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    timeout: float = TIMEOUT
    context: ssl.SSLContext | None = None  # for an https URL
    log_failures: bool = True  # a CLI says them in its answer instead (`failure`)
    failure: str | None = None  # why the last call had no answer, in words
    _failing: str | None = None  # the kind of the last failure, said once

    def nodes(self, namespace: str, name: str, pods: Sequence[KubeObject], room: dict[str, int],
              peers: Sequence[str] = (), dry_run: bool = False) -> dict[str, str] | None:
        """Each pod's node (by pod name) for the gang `namespace/name`, beside its members on `peers`
        already, or None: release it unpinned."""
        if not self.url or not pods:
            return None
        body = orjson.dumps({"namespace": namespace, "name": name, "pods": list(pods), "room": room,
                             "peers": list(peers), "dryRun": dry_run})
        request = urllib.request.Request(f"{self.url.rstrip('/')}/gang", body,
                                         {"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as resp:
                doc = orjson.loads(resp.read())
        except urllib.error.HTTPError as exc:  # the extender's own words: a bad request or a stale cache
            self._failed("refused", f"HTTP {exc.code}: {_said(exc)}")
            return None
        except (urllib.error.URLError, OSError, orjson.JSONDecodeError) as exc:
            self._failed("unreachable", str(getattr(exc, "reason", exc)))
            return None
        nodes = doc.get("nodes") if isinstance(doc, dict) else None
        if not isinstance(nodes, dict) or set(nodes) != {p["metadata"]["name"] for p in pods}:
            self.metrics.gang_pins.labels("unplaced").inc()
            said = doc.get("message") if isinstance(doc, dict) else doc
            self.failure = f"the extender placed no node for every member: {said}"
            log.info("gang %s/%s: the extender placed no node for every member (%s); released unpinned",
                     namespace, name, said)
            return None
        if self._failing and self.log_failures:
            log.info("gang placement: the extender at %s answers again", self.url)
        self._failing = self.failure = None
        self.metrics.gang_pins.labels("pinned").inc()
        return {str(k): str(v) for k, v in nodes.items()}

    def _failed(self, kind: str, detail: str) -> None:
        self.metrics.gang_pins.labels(kind).inc()
        self.failure = f"the extender at {self.url} did not answer ({detail})"
        if self._failing != kind and self.log_failures:
            self._failing = kind
            log.warning("gang placement: the extender at %s did not answer (%s); gangs are released unpinned "
                        "until it does", self.url, detail)


def tls_context(ca_file: Path | None, cert_file: Path | None, key_file: Path | None) -> ssl.SSLContext | None:
    """How the operator meets an https extender: its CA (else the system's) and the client certificate
    an extender with mutual TLS asks for; None with none of them (plain HTTP, or the system's CAs)."""
    if not (ca_file or cert_file):
        return None
    try:
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (ssl.SSLError, OSError) as exc:
        raise BadExtenderTLS(f"--extender-ca-file {ca_file}: not a readable PEM CA ({exc})") from None
    if cert_file:
        try:
            context.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
        except (ssl.SSLError, OSError) as exc:
            raise BadExtenderTLS(f"--extender-cert-file {cert_file} with --extender-key-file {key_file}: "
                                 f"not a readable PEM certificate and its key ({exc})") from None
    return context


def _said(exc: urllib.error.HTTPError) -> str:
    try:
        doc = orjson.loads(exc.read())
    except (orjson.JSONDecodeError, OSError):
        return exc.reason or ""
    return str(doc.get("Error", doc)) if isinstance(doc, dict) else str(doc)
