"""Least privilege, checked the way an admin would: `kubectl auth can-i --list` as each component's
identity on a real apiserver gives exactly the rules the component needs (netsched.devcluster.rbac,
which the Helm chart grants too), and nothing more."""

from __future__ import annotations

import re
import subprocess

import pytest

from netsched.devcluster.binaries import ensure_binaries
from netsched.devcluster.devcluster import EXTENDER, OPERATOR
from netsched.devcluster.rbac import EXTENDER_RULES, OPERATOR_RULES

# what every authenticated identity may do (system:basic-user): ask what it may do
SELF_REVIEWS = {"selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
                "selfsubjectrulesreviews.authorization.k8s.io"}
ROW = re.compile(r"^(\S+)\s+\[[^\]]*\]\s+\[[^\]]*\]\s+\[([^\]]*)\]$")


def can_i(kubeconfig, *args: str) -> subprocess.CompletedProcess:
    kubectl = ensure_binaries(quiet=True) / "kubectl"
    return subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), "auth", "can-i", *args],
                          capture_output=True, text=True, timeout=60)


def granted(kubeconfig) -> dict[str, set[str]]:
    """Resource -> verbs from `kubectl auth can-i --list` (non-resource URLs left out)."""
    out = can_i(kubeconfig, "--list", "--no-headers")
    assert out.returncode == 0, out.stderr
    rows: dict[str, set[str]] = {}
    for line in out.stdout.splitlines():
        if (m := ROW.match(line.strip())) and not line[0].isspace():
            rows.setdefault(m.group(1), set()).update(m.group(2).split())
    return rows


def expected(rules: list[dict]) -> dict[str, set[str]]:
    """The same shape from rules: `resource.group`, subresources after the group as kubectl prints them."""
    rows: dict[str, set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                base, _, sub = resource.partition("/")
                name = (f"{base}.{group}" if group else base) + (f"/{sub}" if sub else "")
                rows.setdefault(name, set()).update(rule["verbs"])
    return rows


@pytest.mark.parametrize("identity, rules", [(EXTENDER, EXTENDER_RULES), (OPERATOR, OPERATOR_RULES)])
def test_each_component_may_do_what_it_needs_and_nothing_more(dev_cluster, identity, rules):
    kubeconfig = dev_cluster.directory / f"{identity}.kubeconfig"
    have = granted(kubeconfig)
    assert {k: v for k, v in have.items() if k not in SELF_REVIEWS} == expected(rules)
    for forbidden in (("get", "secrets", "-A"), ("delete", "nodes"), ("create", "clusterrolebindings"),
                      ("update", "pods")):
        answer = can_i(kubeconfig, *forbidden)
        assert answer.stdout.strip() == "no", (identity, forbidden, answer.stdout, answer.stderr)
