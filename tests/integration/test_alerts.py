"""The chart's PrometheusRule, checked and run by promtool (Debian's prometheus package, the one the
telemetry tests run): every rule parses, each alert fires on the series its trouble makes and none fires
on a healthy install, each names only metrics the components export and has its runbook section."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from netsched.devcluster.binaries import ensure_binaries
from netsched.extender.metrics import Metrics
from netsched.operator.metrics import OperatorMetrics

ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "netsched"
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_URL = "https://github.com/netsched/netsched/blob/main/docs/runbook.md"  # the chart's runbookUrl
NS = "ops"
EXTENDER = {"job": "netsched-extender", "namespace": NS}
OPERATOR = {"job": "netsched-operator", "namespace": NS}
# the API server's count of pods refused because it could not call the webhook, as it exports it
REFUSED = {"job": "apiserver", "name": "gang-gate.netsched.io", "operation": "CREATE", "type": "admit",
           "error_type": "calling_webhook_error", "rejection_code": "503"}
VALUES = {"prometheusRule": {"enabled": True, "downFor": "5m", "cacheStaleFor": "2m",
                             "modelFallbackFor": "15m", "reconcileErrors": 5, "waitingSeconds": 3600,
                             "failedPlansPerHour": 2, "webhookErrors": 5},
          "extender": {"maxCacheAge": 30}}


@pytest.fixture(scope="module")
def helm() -> Path:
    return ensure_binaries(quiet=True) / "helm"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool not found: it comes with Debian's prometheus package (`make prometheus`)"
    return found


def render(helm: Path, values: dict) -> list[dict]:
    done = subprocess.run([str(helm), "template", "netsched", str(CHART), "-n", NS, "-f", "-"],
                          input=yaml.safe_dump(values), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def groups(helm) -> list[dict]:
    [rule] = [d for d in render(helm, VALUES) if d["kind"] == "PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["namespace"] == NS
    return rule["spec"]["groups"]


def rules(groups: list[dict]) -> list[dict]:
    return [r for g in groups for r in g["rules"]]


def promtool_run(promtool: str, directory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=directory, capture_output=True, text=True)


def write_tests(directory: Path, tests: list[dict]) -> None:
    """promtool's unit-test file over rules.yaml in `directory`."""
    (directory / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"],
                                                         "evaluation_interval": "1m", "tests": tests}))


def series(name: str, labels: dict, values: str) -> dict:
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def test_no_rule_unless_enabled(helm):
    assert not [d for d in render(helm, {}) if d["kind"] == "PrometheusRule"]


def test_the_rendered_rules_pass_promtool_check(promtool, groups, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    done = promtool_run(promtool, tmp_path, "check", "rules", "rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(FIRING)} rules found" in done.stdout


HEALTHY = [
    series("up", {**EXTENDER, "pod": "e1"}, "1x60"),
    series("up", {**OPERATOR, "pod": "o1"}, "1x60"),
    series("netsched_operator_leader", {**OPERATOR, "pod": "o1"}, "1x60"),
    series("netsched_operator_leader", {**OPERATOR, "pod": "o2"}, "0x60"),  # a replica standing by
    series("netsched_extender_cache_age_seconds", {**EXTENDER, "pod": "e1"}, "2x60"),
    series("netsched_extender_model_fallbacks_total", {**EXTENDER, "pod": "e1", "reason": "no_model"},
           "3x60"),  # fell back once, long ago
    series("netsched_operator_reconcile_errors_total", {**OPERATOR, "pod": "o1"}, "0+1x3 3x60"),  # a few
    series("netsched_operator_loop_errors_total", {**OPERATOR, "pod": "o1", "loop": "forecast"}, "0x60"),
    series("netsched_gpujob_oldest_waiting_seconds", {**OPERATOR, "pod": "o1"}, "0+60x50"),  # under an hour
    series("netsched_gang_oldest_waiting_seconds", {**OPERATOR, "pod": "o1", "kind": "Job"}, "0+60x50"),
    # a gang Blocked for a few minutes, then changed by its owner
    series("netsched_gangs", {**OPERATOR, "pod": "o1", "kind": "Job", "state": "blocked"}, "1x10 0x50"),
    series("netsched_packing_plans_finished_total", {**OPERATOR, "pod": "o1", "phase": "Failed",
                                                     "reason": "EvictionRefused"}, "0+1x1 1x60"),
    series("netsched_webhook_requests_total", {**OPERATOR, "pod": "o1", "outcome": "error"}, "0+1x1 1x60"),
    # an operator restart: a few pods refused, created again
    series("apiserver_admission_webhook_rejection_count", REFUSED, "0+1x2 2x60"),
]

# alert -> (its series, or None for no series at all; when to look; the labels it fires with)
FIRING = {
    "NetschedExtenderDown": ([series("up", {**EXTENDER, "pod": "e1"}, "0x20")], "10m",
                             {"severity": "critical", "namespace": NS}),
    "NetschedExtenderCacheStale": (
        [series("netsched_extender_cache_age_seconds", {**EXTENDER, "pod": "e1"}, "5+10x20")], "10m",
        {"severity": "critical", "namespace": NS, "pod": "e1"}),
    "NetschedModelFallback": (
        [series("netsched_extender_model_fallbacks_total",
                {**EXTENDER, "pod": "e1", "reason": "predict_error"}, "0+4x40")], "25m",
        {"severity": "warning", "namespace": NS, "pod": "e1", "reason": "predict_error"}),
    "NetschedOperatorReconcileErrors": (
        [series("netsched_operator_loop_errors_total", {**OPERATOR, "pod": "o1", "loop": "packer"},
                "0+1x20")], "10m", {"severity": "warning", "namespace": NS}),
    "NetschedGPUJobsWaitingTooLong": (
        [series("netsched_gpujob_oldest_waiting_seconds", {**OPERATOR, "pod": "o1"}, "3000+60x30")], "20m",
        {"severity": "warning", "namespace": NS}),
    "NetschedGangsWaitingTooLong": (
        [series("netsched_gang_oldest_waiting_seconds", {**OPERATOR, "pod": "o1", "kind": "JobSet"},
                "3000+60x30")], "20m", {"severity": "warning", "namespace": NS, "kind": "JobSet"}),
    "NetschedGangsBlocked": (
        [series("netsched_gangs", {**OPERATOR, "pod": "o1", "kind": "Job", "state": "blocked"}, "1x40")],
        "35m", {"severity": "warning", "namespace": NS, "kind": "Job"}),
    "NetschedPackingPlansFailing": ([series("netsched_packing_plans_finished_total",
                                            {**OPERATOR, "pod": "o1", "phase": "TimedOut",
                                             "reason": "DeadlineExceeded"}, "0+1x10")], "10m",
                                    {"severity": "warning", "namespace": NS}),
    "NetschedOperatorDown": ([], "10m", {"severity": "critical", **OPERATOR}),  # never scraped: absent
    "NetschedOperatorNoLeader": (  # two replicas up, neither holding the Lease
        [series("netsched_operator_leader", {**OPERATOR, "pod": pod}, "0x20") for pod in ("o1", "o2")],
        "10m", {"severity": "critical", "namespace": NS}),
    "NetschedWebhookErrors": (  # the operator gone: the API server cannot call its webhook
        [series("apiserver_admission_webhook_rejection_count", REFUSED,
                "0+2x30")], "15m", {"severity": "warning", "namespace": NS}),
}


def test_each_alert_fires_on_its_trouble_and_none_on_a_healthy_install(promtool, groups, tmp_path):
    assert sorted(FIRING) == sorted(r["alert"] for r in rules(groups)), "a case per alert"
    # Annotations are checked on their own below: promtool compares them whole.
    bare = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
            for g in groups]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": bare}))
    healthy = {"interval": "1m", "input_series": HEALTHY,
               "alert_rule_test": [{"eval_time": t, "alertname": a, "exp_alerts": []}
                                   for a in FIRING for t in ("10m", "30m", "55m")]}
    cases = [{"name": alert, "interval": "1m", "input_series": made, "alert_rule_test": [
                 {"eval_time": at, "alertname": alert, "exp_alerts": [{"exp_labels": labels}]},
                 {"eval_time": "1m", "alertname": alert, "exp_alerts": []}]}  # not at once
             for alert, (made, at, labels) in FIRING.items()]
    write_tests(tmp_path, [healthy, *cases])
    done = promtool_run(promtool, tmp_path, "test", "rules", "test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_an_alert_says_which_pod_and_how_stale_and_links_its_runbook(promtool, groups, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    stale, _, labels = FIRING["NetschedExtenderCacheStale"]
    case = {"interval": "1m", "input_series": stale, "alert_rule_test": [{
        "eval_time": "10m", "alertname": "NetschedExtenderCacheStale", "exp_alerts": [{
            "exp_labels": labels,
            "exp_annotations": {
                "summary": "Extender e1 answers from a stale cluster cache",
                "description": "The extender e1 last heard from the API server's node and pod watches "
                               "1m 45s ago, past its bound of 30 s (extender.maxCacheAge): it answers "
                               "filter requests with Error and is not ready.",
                "runbook_url": f"{RUNBOOK_URL}#netschedextendercachestale"}}]}]}
    write_tests(tmp_path, [case])
    done = promtool_run(promtool, tmp_path, "test", "rules", "test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_its_words_and_a_runbook_section_and_every_section_an_alert(groups):
    headings = re.findall(r"^## (\S+)$", RUNBOOK.read_text(), re.MULTILINE)
    for rule in rules(groups):
        notes = rule["annotations"]
        assert notes["summary"] and len(notes["description"]) > 40, rule["alert"]
        assert notes["runbook_url"] == f"{RUNBOOK_URL}#{rule['alert'].lower()}"
        assert rule["alert"] in headings, f"docs/runbook.md has no section ## {rule['alert']}"
    assert sorted(headings) == sorted(r["alert"] for r in rules(groups))


def test_alerts_read_only_metrics_the_components_export(groups):
    used = {re.sub(r"_total$", "", name)
            for r in rules(groups) for name in re.findall(r"netsched_\w+", r["expr"])}
    exported = {m.name for registry in (Metrics().registry, OperatorMetrics().registry)
                for m in registry.collect()}
    assert used <= exported, f"not exported by any component: {used - exported}"


def test_thresholds_are_values_and_refused_when_wrong(helm):
    values = {"prometheusRule": {"enabled": True, "waitingSeconds": 600,
                                 "runbookUrl": "https://wiki.example/netsched/runbook/"}}
    [rule] = [d for d in render(helm, values) if d["kind"] == "PrometheusRule"]
    [waiting] = [r for r in rules(rule["spec"]["groups"]) if r["alert"] == "NetschedGPUJobsWaitingTooLong"]
    assert waiting["expr"].endswith("> 600")
    assert waiting["annotations"]["runbook_url"] == \
        "https://wiki.example/netsched/runbook#netschedgpujobswaitingtoolong"
    done = subprocess.run([str(helm), "template", "x", str(CHART), "--set",
                           "prometheusRule.downFor=five minutes"], capture_output=True, text=True)
    assert done.returncode != 0 and "at '/prometheusRule/downFor'" in done.stderr
    relative = subprocess.run([str(helm), "template", "x", str(CHART), "--set", "prometheusRule.enabled=true",
                               "--set", "prometheusRule.runbookUrl=docs/runbook.md"],
                              capture_output=True, text=True)
    said = 'prometheusRule.runbookUrl is "docs/runbook.md"; it must be an absolute http(s) URL'
    assert relative.returncode == 1 and said in relative.stderr, relative.stderr


def test_helm_lint_strict_passes_with_the_rule(helm):
    done = subprocess.run([str(helm), "lint", "--strict", str(CHART), "-f", "-"],
                          input=yaml.safe_dump(VALUES), capture_output=True, text=True)
    assert done.returncode == 0 and "0 chart(s) failed" in done.stdout, done.stdout + done.stderr
