"""Kubernetes Events (core/v1) as `kubectl describe` shows them."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from typing import Any

INSTANCE = socket.gethostname()


def rfc3339(t: datetime) -> str:
    """As Kubernetes writes times: UTC, whole seconds, a Z."""
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def now_rfc3339() -> str:
    return rfc3339(datetime.now(UTC))


def event(involved: dict[str, Any], reason: str, message: str, component: str,
          type_: str = "Normal") -> dict[str, Any]:
    """An Event about `involved` ({apiVersion, kind, namespace, name, uid}); messages are cut at 1 KiB.
    A cluster-scoped object's events live in the default namespace, as client-go records them."""
    now = now_rfc3339()
    return {
        "metadata": {"generateName": f"{involved['name']}.", "namespace": involved["namespace"] or "default"},
        "involvedObject": involved,
        "reason": reason, "type": type_, "message": message[:1024],
        "source": {"component": component}, "reportingComponent": component,
        "reportingInstance": INSTANCE, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }
