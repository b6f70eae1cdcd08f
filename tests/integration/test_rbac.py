"""Least privilege, checked the way an admin would: `kubectl auth can-i --list` as each component's
identity on a real apiserver gives exactly the rules of netsched.devcluster.rbac (which the Helm chart
grants too, and whose every verb a unit test finds the call for), and the API server's audit log shows a
GPUJob run from start to finish without one request of the extender or operator refused."""

from __future__ import annotations

import re
import subprocess

import pytest
from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.devcluster import audit
from netsched.devcluster.binaries import ensure_binaries
from netsched.devcluster.devcluster import EXTENDER, OPERATOR
from netsched.devcluster.rbac import EXTENDER_RULES, OPERATOR_RULES
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import scratch_namespace

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


def granted_to(rules: list[dict], request: audit.Request) -> bool:
    return any(request.group in r["apiGroups"] and request.resource in r["resources"]
               and request.verb in r["verbs"] for r in rules)


def test_a_gpujob_runs_with_no_request_of_the_extender_or_operator_refused(dev_cluster, core):
    custom = client.CustomObjectsApi(dev_cluster.api_client())
    with scratch_namespace(core, "rbac") as namespace:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            "train", replicas=2, gpus=4, duration="2s", manifest=True))

        def succeeded() -> bool:
            job = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "train")
            return job.get("status", {}).get("phase") == "Succeeded"
        poll(succeeded, 90, f"GPUJob {namespace}/train to succeed")
        # the extender explains each placement with an Event, written from a queue after the answer
        poll(lambda: (EXTENDER, "create", "events") in {(r.user, r.verb, r.resource)
                                                        for r in audit.requests(dev_cluster.audit_log)},
             30, "the extender's placement events")
    # the self-reviews are the can-i test's own, made with the components' credentials
    seen = [r for r in audit.requests(dev_cluster.audit_log) if f"{r.resource}.{r.group}" not in SELF_REVIEWS]
    rules = {EXTENDER: EXTENDER_RULES, OPERATOR: OPERATOR_RULES}
    refused = [r for r in seen if r.denied]
    assert not refused, refused[:10]
    beyond = [r for r in seen if not granted_to(rules[r.user], r)]
    assert not beyond, beyond[:10]  # anything else would have been refused: the log itself is checked
    used = {(r.user, r.verb, r.resource) for r in seen}
    for needed in [(EXTENDER, "list", "nodes"), (EXTENDER, "watch", "pods"),
                   (EXTENDER, "watch", "packingplans"), (EXTENDER, "create", "events"),
                   (OPERATOR, "create", "pods"), (OPERATOR, "watch", "gpujobs"),
                   (OPERATOR, "patch", "gpujobs/status"), (OPERATOR, "patch", "pods"),
                   (OPERATOR, "create", "events")]:
        assert needed in used, (needed, sorted(used))
