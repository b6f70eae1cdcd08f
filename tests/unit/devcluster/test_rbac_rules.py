"""netsched/devcluster/rbac.py is the one source of netsched's RBAC: every verb it grants is named by a
call the code makes (looked up here, so a grant whose code went away fails), the chart's generated
template says the same, every chart Role of netsched's own code includes it, and the rendered manifests
grant it."""

from __future__ import annotations

from pathlib import Path

import kopf
import pytest
import yaml

from netsched.devcluster import rbac
from netsched.jobs.kinds.registry import access

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = ROOT / "charts/netsched/templates"
REGENERATE = "run `.venv/bin/python hack/render-manifests.py`"
# chart file -> the generated rules it includes; the scheduler's Role is upstream kube-scheduler's own
INCLUDES = {"extender-rbac.yaml": "extender", "operator-rbac.yaml": "operator",
            "operator-lease.yaml": "operatorLease", "agent-rbac.yaml": "agent",
            "topology-configmap.yaml": "topologyReader"}
USES = [pytest.param(use, id=f"{component}:{'/'.join(rule.resources)}:{'/'.join(use.verbs)}:{use.path}")
        for component in rbac.COMPONENTS for rule in rbac.all_rules(component) for use in rule.uses]


def source(path: str) -> Path:
    if path.startswith(rbac.KOPF):
        return Path(kopf.__file__).parent / path.removeprefix(rbac.KOPF)
    return ROOT / path


@pytest.mark.parametrize("use", USES)
def test_every_call_a_rule_is_granted_for_is_in_the_code(use):
    assert use.call in source(use.path).read_text(), (
        f"{use.path} no longer contains {use.call!r}, the call {'/'.join(use.verbs)} is granted for "
        f"({use.why}): remove the grant from netsched/devcluster/rbac.py or point it at the new call")


@pytest.mark.parametrize("component", list(rbac.COMPONENTS))
def test_every_rule_grants_only_verbs_its_calls_need(component):
    for rule in rbac.all_rules(component):
        assert rule.uses, f"{component}: {rule.resources} is granted for no call"
        assert set(rule.verbs) == {v for use in rule.uses for v in use.verbs}
        assert set(rule.verbs) <= set(rbac.VERBS), rule.verbs


def test_the_gang_kinds_rules_are_what_their_registry_declares():
    gang = [a.rule() for a in access()]
    assert rbac.OPERATOR_RULES[-len(gang):] == gang


def test_the_committed_chart_template_is_the_one_source():
    assert (ROOT / rbac.CHART_TEMPLATE).read_text() == rbac.chart_template(), (
        f"{rbac.CHART_TEMPLATE} is not what netsched/devcluster/rbac.py declares; {REGENERATE}")


def test_the_chart_template_holds_each_components_rules():
    text = rbac.chart_template()
    for component in rbac.COMPONENTS:
        start = text.index(f'{{{{- define "{rbac.define_name(component)}" -}}}}')
        body = text[text.index("\n", start):text.index("{{- end }}", start)]
        if component == "operatorLease":
            body = body.replace(rbac.OPERATOR_LEASE[0].resource_names[0], "LEASE")
        expected = [r.as_dict() for r in rbac.all_rules(component)]
        if component == "operatorLease":
            expected = [r | {"resourceNames": ["LEASE"]} for r in expected]
        assert yaml.safe_load(body) == expected, component


@pytest.mark.parametrize("chart_file, component", INCLUDES.items())
def test_each_chart_role_of_netscheds_code_grants_the_generated_rules_and_nothing_else(chart_file, component):
    text = (TEMPLATES / chart_file).read_text()
    include = f'rules:\n  {{{{- include "{rbac.define_name(component)}" . | nindent 2 }}}}\n---'
    assert text.count("rules:") == 1 and include in text, chart_file


@pytest.mark.parametrize("manifest, rules", [("extender-rbac.yaml", rbac.EXTENDER_RULES),
                                             ("operator-rbac.yaml", rbac.OPERATOR_RULES),
                                             ("agent-rbac.yaml", rbac.AGENT_RULES)])
def test_the_rendered_manifests_grant_the_rules(manifest, rules):
    docs = yaml.safe_load_all((ROOT / "manifests/netsched" / manifest).read_text())
    [role] = [d for d in docs if d and d["kind"] == "ClusterRole"]
    assert role["rules"] == rules, f"manifests/ is out of date; {REGENERATE}"


def test_the_docs_table_is_the_one_source():
    assert rbac.markdown_table() in (ROOT / "docs/security-policies.md").read_text(), (
        "docs/security-policies.md's RBAC table is not what netsched/devcluster/rbac.py declares: paste "
        "`python -c 'from netsched.devcluster.rbac import markdown_table; print(markdown_table())'`")
