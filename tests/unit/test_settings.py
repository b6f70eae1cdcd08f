"""Each component's settings class against every place its flags appear: the CLI, the chart's values,
values schema and Deployment template, the rendered manifests and the dev-cluster's command lines.
A flag without a Helm value (or a reason), a value without a schema entry, or a template flag the CLI
does not know fails here. Commands the chart never runs say so (`option`) and need no chart value."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path
from unittest import mock

import pytest
import yaml

from netsched.api.settings import flag_of, from_args, settings_fields
from netsched.api.topology import Topology
from netsched.cli import COMMANDS, Group, build_parser
from netsched.devcluster import devcluster
from netsched.extender.config import ExtenderConfig
from netsched.operator.config import OperatorConfig
from netsched.telemetry.command import AgentSettings
from netsched.training.commands import RetrainSettings

ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "netsched"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = yaml.safe_load((CHART / "values.schema.json").read_text())
JSON_TYPES = {bool: {"boolean"}, int: {"integer"}, float: {"number"}, str: {"string"}, Path: {"string"},
              Topology: {"object"}, tuple[str, ...]: {"array"}}
# the helpers a template's flag may take its value from: name -> the Helm values the helper reads
DEFINE = re.compile(r'define "([\w.]+)"(.*?)\{\{-? end -?\}\}\s*(?=\{\{/\*|\{\{-? define|\Z)', re.DOTALL)
HELPERS = {name: {ref.removeprefix(".Values.") for ref in re.findall(r"\.Values(?:\.\w+)+", body)}
           for name, body in DEFINE.findall((CHART / "templates" / "_helpers.tpl").read_text())}

COMPONENTS = pytest.mark.parametrize(("command", "cls"), [("extender", ExtenderConfig),
                                                          ("operator", OperatorConfig)])
# every command the chart runs; its Deployments (the templates checked below) are the extender's and
# the operator's
CHART_RUN = pytest.mark.parametrize(("command", "cls"), [("extender", ExtenderConfig),
                                                        ("operator", OperatorConfig),
                                                        ("agent", AgentSettings),
                                                        ("retrain", RetrainSettings)])
EVERY_COMMAND = pytest.mark.parametrize("cls", sorted(
    {c.settings for g in COMMANDS for c in (g.commands if isinstance(g, Group) else (g,))},
    key=lambda cls: cls.__name__), ids=lambda cls: cls.__name__)


def subparser(command: str) -> argparse.ArgumentParser:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[command]


def helm_fields(cls: type) -> list[tuple[str, str, type]]:
    """(flag, Helm value path, value type) of every field the chart sets from a value."""
    specs = [(flag_of(f), kind) for _, f, kind in settings_fields(cls)]
    return [(spec.name, spec.helm, kind) for spec, kind in specs if spec.helm]


def value_at(path: str):
    node = VALUES
    for key in path.split("."):
        assert isinstance(node, dict) and key in node, f"{path} is not in charts/netsched/values.yaml"
        node = node[key]
    return node


def schema_of(node: dict) -> dict:
    while "$ref" in node:
        node = SCHEMA["definitions"][node["$ref"].removeprefix("#/definitions/")]
    return node


def schema_at(path: str) -> dict | None:
    node = SCHEMA
    for key in path.split("."):
        node = schema_of(node)
        child = node.get("properties", {}).get(key, node.get("additionalProperties"))
        if not isinstance(child, dict):
            return None
        node = child
    return schema_of(node)


def types_of(node: dict) -> set[str]:
    kind = node.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


@EVERY_COMMAND
def test_every_setting_has_a_helm_value_or_says_why_not(cls):
    for dest, f, _ in settings_fields(cls):
        spec = flag_of(f)
        assert spec is not None, f"{cls.__name__}.{dest} has no flag"
        assert bool(spec.helm) != bool(spec.fixed), (
            f"{spec.name}: give it a Helm value (helm=...) or say why the chart has none (fixed=...), not "
            "both or neither")


@COMPONENTS
def test_the_cli_flags_are_the_settings_and_default_to_them(command, cls):
    flags = {o for a in subparser(command)._actions for o in a.option_strings} - {"-h", "--help"}
    assert flags == {flag_of(f).name for _, f, _ in settings_fields(cls)}
    assert from_args(cls, build_parser().parse_args([command])) == cls()


@CHART_RUN
def test_every_helm_value_exists_and_has_a_schema_entry_of_the_settings_type(command, cls):
    for flag, path, kind in helm_fields(cls):
        value = value_at(path)
        schema = schema_at(path)
        assert schema is not None, f"{path} ({flag}) has no entry in values.schema.json"
        assert types_of(schema) & JSON_TYPES[kind], (
            f"{path} is {types_of(schema)} in the schema, {flag} takes {kind.__name__}")
        accepted = {float: (int, float), Path: (str,), Topology: (dict,),
                    tuple[str, ...]: (list,)}.get(kind, (kind,))
        assert type(value) in accepted, f"{path}: {value!r} in values.yaml is not a {kind} ({flag})"


def leaves(node: dict, prefix: str = ""):
    for key, value in node.items():
        path = prefix + key
        yield path, value
        if isinstance(value, dict):
            yield from leaves(value, path + ".")


@pytest.mark.parametrize("path", [p for p, _ in leaves(VALUES)])
def test_every_value_in_values_yaml_has_a_schema_entry(path):
    schema = schema_at(path)
    assert schema is not None, f"{path} is in values.yaml but not in values.schema.json"
    value = value_at(path)
    python = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    kind = python[type(value)]
    allowed = types_of(schema)
    assert not allowed or kind in allowed or (kind == "integer" and "number" in allowed), (
        f"{path}: {value!r} is {kind}, the schema says {allowed}")


ACTION = re.compile(r"{{-?\s*(with|if|else if|else|end|range)\b(.*?)-?}}")
REFERENCE = re.compile(r"(?<![\w\])\"])\.(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?")


def template_flags(template: str) -> tuple[dict[str, set[str]], set[str]]:
    """Each flag in the template's container args, with the Helm values that set it or decide whether it
    is passed (its own line's references and those of every `with`/`if` around it); and the flags it
    always passes."""
    args = template.split("args:", 1)[1]
    args = args[:re.search(r"^\s+[a-zA-Z]+:", args, re.MULTILINE).start()]
    scopes: list[tuple[str, set[str]]] = [("", set())]

    def refs(text: str) -> set[str]:
        out = set()
        for ref in REFERENCE.findall(text):
            if ref.startswith(".Values."):
                out.add(ref.removeprefix(".Values."))
            elif scopes[-1][0]:
                out.add(scopes[-1][0] + ref.rstrip("."))
        return out

    flags: dict[str, set[str]] = defaultdict(set)
    always = set()
    for line in args.splitlines():
        action = ACTION.search(line)
        if action:
            verb, expr = action.groups()
            if verb == "end":
                scopes.pop()
            elif verb in ("else", "else if"):
                scopes[-1] = (scopes[-1][0], scopes[-1][1] | refs(expr))
            else:
                found = refs(expr)
                dot = next(iter(found)) if verb == "with" and len(found) == 1 else scopes[-1][0]
                scopes.append((dot, found))
            continue
        item = re.match(r"\s*- (--[\w-]+)", line)
        if item:
            inside = re.findall(r"{{(.*?)}}", line)
            helpers = (HELPERS[name] for t in inside for name in re.findall(r'include "([\w.]+)"', t))
            flags[item.group(1)] |= set().union(*(s for _, s in scopes), *(refs(t) for t in inside), *helpers)
            if len(scopes) == 1:
                always.add(item.group(1))
    assert len(scopes) == 1, "unbalanced {{ with/if }} ... {{ end }} in the args"
    return flags, always


def template(command: str) -> tuple[dict[str, set[str]], set[str]]:
    return template_flags((CHART / "templates" / f"{command}-deployment.yaml").read_text())


@COMPONENTS
def test_the_template_passes_every_helm_value_to_its_flag_and_only_real_flags(command, cls):
    flags, _ = template(command)
    known = {flag_of(f).name for _, f, _ in settings_fields(cls)}
    assert set(flags) <= known, f"the {command} template passes flags the CLI does not have"
    for flag, path, _ in helm_fields(cls):
        assert flag in flags, f"the {command} template never passes {flag} (from {path})"
        from_path = {ref for ref in flags[flag] if ref == path or ref.startswith(path + ".")}
        assert from_path, f"the {command} template passes {flag} but not from {path}: {flags[flag]}"


@COMPONENTS
def test_the_rendered_manifests_run_with_the_values_defaults(command, cls):
    docs = yaml.safe_load_all((ROOT / "manifests" / "netsched" / f"{command}-deployment.yaml").read_text())
    [deployment] = [d for d in docs if d and d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(args)
    assert args[0] == command
    missing = template(command)[1] - {a.split("=")[0] for a in args}
    assert not missing, f"manifests/ lack {missing}: run `.venv/bin/python hack/render-manifests.py`"
    for dest, f, kind in settings_fields(cls):
        path = flag_of(f).helm
        if path and kind is not Path:  # a path flag is built from more than its value (a mount point)
            expected = (value_at(path) or None) if kind is str else value_at(path)
            if kind is Topology:
                expected = Topology.parse(",".join(f"{lv['name']}={lv['label']}" for lv in expected["levels"])
                                          or expected["preset"])
            assert getattr(parsed, dest) == expected, (
                f"manifests/netsched/{command}-deployment.yaml: {flag_of(f).name} is "
                f"{getattr(parsed, dest)!r}, values.yaml {path} is {value_at(path)!r}")


def test_the_dev_cluster_starts_the_extender_and_operator_with_real_flags(tmp_path):
    ports = defaultdict(lambda: 1)
    kubeconfigs = defaultdict(lambda: tmp_path / "kubeconfig")
    argv = devcluster._component_argv(tmp_path, tmp_path, ports, mock.MagicMock(), kubeconfigs,
                                      tmp_path / "scheduler.yaml", tmp_path / "stages.yaml")
    for mtls in ("mtls", ""):  # the extender as the dev-cluster starts it, with mutual TLS and without
        argv[mtls] = devcluster.DevCluster(tmp_path, extender_mtls=bool(mtls)).extender_argv(1, 2)
    for name, command in (("mtls", "extender"), ("", "extender"), (devcluster.OPERATOR, "operator")):
        args = argv[name][argv[name].index(command):]
        build_parser().parse_args(args)  # exits on an unknown flag


# the chart's plain-words range checks: (dict "name" "<value>" ... "above" 0 "atMost" 60 ...)
CHECKED = {m[0]: dict(re.findall(r'"(above|atLeast|below|atMost)" (-?[\d.]+)', m[1]))
           for m in re.findall(r'\(dict "name" "([\w.]+)" "value" \S+ (.*?) "means"',
                               (CHART / "templates" / "_helpers.tpl").read_text())}


@CHART_RUN
def test_a_flag_refuses_what_the_chart_refuses_for_its_value(command, cls):
    """A number the chart's values-check refuses is refused by the flag too (someone running the command
    by hand gets argparse's one line, not a process that misbehaves), and the bounds it allows pass."""
    checked = 0
    for flag, path, kind in helm_fields(cls):
        rules = CHECKED.get(path)
        if not rules or kind not in (int, float):
            continue
        parse = flag_of(next(f for _, f, _ in settings_fields(cls) if flag_of(f).name == flag)).parse
        assert parse is not None, f"{flag} takes any number, but the chart checks {path}: {rules}"
        step = 1 if kind is int else 0.001
        for rule, bound in rules.items():
            b = kind(float(bound))
            outside = {"above": b, "atLeast": b - step, "below": b, "atMost": b + step}[rule]
            inside = {"above": b + step, "atLeast": b, "below": b - step, "atMost": b}[rule]
            with pytest.raises(argparse.ArgumentTypeError):
                parse(str(outside))
            assert parse(str(inside)) == inside
        checked += 1
    assert checked, f"no {command} flag has a checked range: is the pattern still right?"
