"""The operator's RBAC for the pod-gang kinds comes from their registry (netsched.jobs.kinds): the
dev-cluster's rules, the chart's generated template and the rendered manifests all say the same."""

from pathlib import Path

import yaml

from netsched.devcluster.rbac import CHART_TEMPLATE, GANG_RULES_DEFINE, OPERATOR_RULES, chart_template
from netsched.jobs.kinds.registry import access

ROOT = Path(__file__).resolve().parents[3]
REGENERATE = "run `.venv/bin/python hack/render-manifests.py`"


def test_the_committed_chart_template_is_what_the_kinds_declare():
    assert (ROOT / CHART_TEMPLATE).read_text() == chart_template(), (
        f"{CHART_TEMPLATE} is not what netsched.jobs.kinds declares; {REGENERATE}")


def test_the_chart_template_says_the_kinds_rules_and_the_operators_role_includes_it():
    text = chart_template()
    body = text[text.index("-}}", text.index("define")) + 3:text.rindex("{{- end")]
    rules = [a.rule() for a in access()]
    assert yaml.safe_load(body) == rules
    assert OPERATOR_RULES[-len(rules):] == rules
    role = (ROOT / "charts/netsched/templates/operator-rbac.yaml").read_text()
    assert f'{{{{- include "{GANG_RULES_DEFINE}" . | nindent 2 }}}}' in role


def test_the_rendered_manifests_grant_the_operator_its_rules():
    docs = yaml.safe_load_all((ROOT / "manifests/netsched/operator-rbac.yaml").read_text())
    [role] = [d for d in docs if d and d["kind"] == "ClusterRole"]
    assert role["rules"] == OPERATOR_RULES, f"manifests/ is out of date; {REGENERATE}"
