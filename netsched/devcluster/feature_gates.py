"""Feature gates for the dev-cluster's control plane, passed only where the built version needs them.

A test names the gates it needs (`DevCluster.feature_gates`, `dev-cluster up --feature-gate`), e.g.
DRAExtendedResource=true, which is alpha in Kubernetes 1.34 and stable later. A gate that reached GA is
locked to true, and a later release removes it: passing it then fails the component's start. So the
dev-cluster asks the built kube-apiserver which gates it has (`--help` lists every gate that is not GA
or deprecated, with its default) and passes a gate only where it is listed and asked to differ from
its default; each gate left out is said in words.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

# `--help` lists each gate as "kube:NAME=true|false (STAGE - default=VALUE)" (older ones: no "kube:")
LISTED = re.compile(r"(?:\b\w+:)?\b([A-Z][A-Za-z0-9]+)=true\|false \((\w+) - default=(true|false)\)")


class BadFeatureGate(ValueError):
    """A --feature-gate value that is not NAME=true or NAME=false."""


def parse(wanted: Sequence[str]) -> dict[str, bool]:
    out = {}
    for item in wanted:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Z][A-Za-z0-9]+", name) or value not in ("true", "false"):
            raise BadFeatureGate(f"feature gate {item!r}: give NAME=true or NAME=false, "
                                 "e.g. DRAExtendedResource=true")
        out[name] = value == "true"
    return out


def known_gates(help_text: str) -> dict[str, bool]:
    """Each gate a component's `--help` lists, with its default."""
    return {name: default == "true" for name, _, default in LISTED.findall(help_text)}


def gates_to_pass(wanted: dict[str, bool], known: dict[str, bool]) -> tuple[list[str], list[str]]:
    """(NAME=VALUE to pass, what was left out and why): a gate the version does not list is GA (locked
    on) or removed, and one asked for its default needs nothing."""
    passed, left = [], []
    for name, value in wanted.items():
        if name not in known:
            left.append(f"{name}: not a settable gate of this version (GA or removed); not passed")
        elif known[name] == value:
            left.append(f"{name}={str(value).lower()} is this version's default; not passed")
        else:
            passed.append(f"{name}={str(value).lower()}")
    return passed, left


def feature_gate_args(bin_dir: Path, wanted: Sequence[str]) -> tuple[list[str], list[str]]:
    """The --feature-gates argument for this build's control plane (empty when none is needed), and the
    words for the gates left out."""
    gates = parse(wanted)
    if not gates:
        return [], []
    done = subprocess.run([str(bin_dir / "kube-apiserver"), "--help"], capture_output=True, text=True,
                          timeout=30)
    passed, left = gates_to_pass(gates, known_gates(done.stdout + done.stderr))
    return ([f"--feature-gates={','.join(passed)}"] if passed else []), left


def one_feature_gates_flag(flags: Sequence[str]) -> list[str]:
    """`flags` with every --feature-gates=... among them joined into one (the gates the built minor needs
    and the ones asked for), the others kept in order."""
    prefix = "--feature-gates="
    gates = [g for f in flags if f.startswith(prefix) for g in f[len(prefix):].split(",") if g]
    rest = [f for f in flags if not f.startswith(prefix)]
    return [*rest, f"{prefix}{','.join(gates)}"] if gates else rest
