"""The dev-cluster's API audit log: every request netsched's own components make, as the API server saw
it (who, which verb on which resource, and its answer), so a test can tell that none was refused and
which granted rules were used."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

POLICY_FILE = "audit-policy.yaml"
LOG_FILE = "audit.log"  # under the dev-cluster's logs/
AUDITED = ("netsched-extender", "netsched-operator")  # the users the dev-cluster runs them as (pki.USERS)


def policy() -> dict:
    """Metadata (no bodies) of the audited users' requests when answered (a watch also when it starts:
    it may run for the whole test); nothing else."""
    return {"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "users": list(AUDITED)}, {"level": "None"}]}


def apiserver_args(directory: Path, log_dir: Path) -> list[str]:
    """kube-apiserver flags for the audit log; writes the policy file into `directory`."""
    (directory / POLICY_FILE).write_text(yaml.safe_dump(policy()))
    return [f"--audit-policy-file={directory / POLICY_FILE}", f"--audit-log-path={log_dir / LOG_FILE}",
            "--audit-log-maxsize=200", "--audit-log-maxbackup=1"]


@dataclass(frozen=True)
class Request:
    user: str
    verb: str
    group: str  # "" for the core group
    resource: str  # with its subresource, e.g. pods/eviction
    code: int
    # refused by authorization (RBAC). A 403 alone is not: admission refuses content in a namespace
    # being deleted with 403 too.
    denied: bool

    @classmethod
    def of(cls, event: dict) -> Request | None:
        ref = event.get("objectRef")
        if not ref or "resource" not in ref:  # a non-resource URL (/api, /version): open to everyone
            return None
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
        return cls(event["user"]["username"], event["verb"], ref.get("apiGroup", ""), resource,
                   event.get("responseStatus", {}).get("code", 0), decision == "forbid")


def requests(log: Path) -> list[Request]:
    """The audited requests in `log` (one JSON event a line), oldest first."""
    if not log.exists():
        return []
    found = (Request.of(json.loads(line)) for line in log.read_text().splitlines() if line.strip())
    return [r for r in found if r is not None]
