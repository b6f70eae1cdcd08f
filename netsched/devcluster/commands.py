"""`netsched dev-cluster up|down|status|kubeconfig`: their settings, starts and entry in the CLI. Light
to import: the dev-cluster itself (and the `dev` extra it needs) loads only when a command runs."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netsched.api.settings import option
from netsched.api.subcommand import Command, Group
from netsched.api.topology import PRESETS, BadTopology, Topology

if TYPE_CHECKING:
    from netsched.devcluster.devcluster import DevCluster

# The dev-cluster's errors say what to do: printed without a traceback. Only a command that used the
# dev-cluster raises them, and importing it needs the `dev` extra, which the image does not have.
ERRORS = (("netsched.devcluster.binaries", "BuildError"),
          ("netsched.devcluster.devcluster", "ClusterError"),
          ("netsched.devcluster.processes", "ComponentFailed"),
          ("netsched.devcluster.realnode", "RealNodeError"),
          ("netsched.devcluster.wait", "Timeout"))


@dataclass(frozen=True)
class ClusterDir:
    dir: str | None = option(flag="--dir", help="cluster directory (default: $NETSCHED_DEV_CLUSTER_DIR "
                             "or ~/.local/state/netsched/dev-cluster)")

    def cluster(self, **options: Any) -> DevCluster:
        """The dev-cluster these settings name; `options`: more of its fields."""
        from netsched.devcluster.devcluster import DevCluster

        if self.dir:
            options["directory"] = Path(self.dir)
        return DevCluster(**options)


@dataclass(frozen=True)
class ClusterShape(ClusterDir):
    nodes: int = option(8, flag="--nodes", help="fake GPU nodes to create (default 8)")
    zones: int = option(2, flag="--zones", help="zones to spread them over (default 2)")
    racks_per_zone: int = option(2, flag="--racks-per-zone", help="racks per zone (default 2)")

    def cluster(self, **options: Any) -> DevCluster:
        return super().cluster(nodes=self.nodes, zones=self.zones, racks_per_zone=self.racks_per_zone,
                               **options)


def scored_by(model: str | None) -> dict[str, Any]:
    """The dev-cluster's extender scores by this model (None: the topology heuristic)."""
    return {"extender_args": (f"--model={Path(model).resolve()}",)} if model else {}


def _topology_setting(text: str) -> str:
    """A topology setting as given, once it parses (argparse reports the error in one line)."""
    try:
        Topology.parse(text)
    except BadTopology as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _feature_gate(text: str) -> str:
    """A --feature-gate value, checked: argparse's one-line error naming the form unless NAME=true|false."""
    from netsched.devcluster.feature_gates import BadFeatureGate, parse

    try:
        parse([text])
    except BadFeatureGate as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


@dataclass(frozen=True)
class UpSettings(ClusterShape):
    extender_url: str | None = option(
        flag="--extender-url", help="urlPrefix of another scheduler extender to use instead of starting "
        "netsched's own (e.g. http://127.0.0.1:8888)")
    model: str | None = option(
        flag="--model", metavar="PATH", help="netsched's extender scores by this completion-time model "
        "(artifact directory or current.json manifest; default: the topology heuristic)")
    run_extender: bool = option(
        True, flag="--no-extender",
        help="run kube-scheduler without any extender (plain kube-scheduler behaviour)")
    run_operator: bool = option(True, flag="--no-operator",
                                help="do not run the GPUJob operator (its CRD is still installed)")
    real_node: bool = option(
        False, flag="--real-node",
        help="add one real kubelet node (containerd, kube-proxy) in a private network namespace, for pods "
        "that really run, e.g. the Helm chart's (root; see docs/dev-cluster.md)")
    topology: str | None = option(
        flag="--topology", metavar="LEVELS", parse=_topology_setting,
        help="label the nodes for these topology levels and run the extender and operator with them: a "
        f"preset ({', '.join(PRESETS)}) or NAME=LABEL,... widest first (the widest level is each node's "
        "zone, the narrowest its rack); published for whatif and why (default: netsched's zone and rack)")
    kueue: bool = option(
        False, flag="--kueue",
        help="also run Kueue's manager (built from its Go module on first use), with its CRDs and the "
        "webhooks for its objects and batch/v1 Jobs (see docs/dev-cluster.md)")
    kubernetes: str | None = option(
        flag="--kubernetes", metavar="1.MM",
        help="the Kubernetes minor to run, e.g. 1.34 (default: $NETSCHED_KUBERNETES, else the newest "
        "pinned in hack/controlplane; each is built once and cached)")
    kube_gang_scheduling: bool = option(
        False, flag="--kube-gang-scheduling",
        help="turn on kube-scheduler's own gang scheduling of native PodGroups (the GenericWorkload gate; "
        "1.37 and later)")
    foreground: bool = option(False, flag="--foreground",
                              help="stay in the foreground; Ctrl-C stops every component")
    feature_gates: tuple[str, ...] = option(
        (), flag="--feature-gate", metavar="NAME=true|false", parse=_feature_gate,
        help="a Kubernetes feature gate for the control plane, e.g. DRAExtendedResource=true; passed only "
        "where this version has it and its default differs (repeat for more)")


def up(settings: UpSettings) -> int:
    from netsched.devcluster.scheduler_config import ExtenderSettings

    options: dict[str, Any] = {"run_extender": settings.run_extender, "run_operator": settings.run_operator,
                               "real_node": settings.real_node, "kueue": settings.kueue,
                               "topology": settings.topology, "feature_gates": settings.feature_gates,
                               "kubernetes": settings.kubernetes,
                               "kube_gang_scheduling": settings.kube_gang_scheduling,
                               **scored_by(settings.model)}
    if settings.extender_url:
        options["extender"] = ExtenderSettings(url_prefix=settings.extender_url)
    cluster = settings.cluster(**options)
    cluster.up()
    from netsched.devcluster.binaries import ensure_binaries

    tools = ensure_binaries(quiet=True)  # built by up(): only looked up here
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(f"logs:       {cluster.log_dir}")
    print(f"tools:      {tools} (kubectl, helm; to use them: export PATH={tools}:$PATH "
          f"KUBECONFIG={cluster.kubeconfig})")
    if not settings.foreground:
        print("stop it with: netsched dev-cluster down" + (f" --dir {settings.dir}" if settings.dir else ""))
        return 0
    stop = _stop_on_signal()
    print("running in the foreground; Ctrl-C stops every component", flush=True)
    try:
        stop.wait()
    finally:
        cluster.down()
    return 0


def _stop_on_signal() -> threading.Event:
    """An event SIGINT/SIGTERM set, installed before anyone is told Ctrl-C works."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def down(settings: ClusterDir) -> int:
    if not settings.cluster().down():
        print("no dev-cluster components were running")
    return 0


def status(settings: ClusterDir) -> int:
    cluster = settings.cluster()
    report = cluster.status()
    print(json.dumps(report, indent=2))
    return 0 if report["components"] and cluster.running_components() else 1


def kubeconfig(settings: ClusterDir) -> int:
    cluster = settings.cluster()
    if not cluster.kubeconfig.exists():
        print(f"no dev-cluster in {cluster.directory}; run `netsched dev-cluster up`", file=sys.stderr)
        return 1
    print(cluster.kubeconfig)
    return 0


def _cluster_action(name: str, text: str, main: Callable[[Any], int]) -> Command:
    return Command(name, text, ClusterDir, main, description=text)


COMMAND = Group("dev-cluster", "local real control plane with KWOK GPU nodes",
                "Run a local Kubernetes control plane with fake GPU nodes.", (
                    Command("up", "build binaries if needed, start everything, create nodes", UpSettings, up),
                    _cluster_action("down", "stop every component of the dev-cluster", down),
                    _cluster_action("status", "show components, pids, logs and Ready nodes (exit 1 if down)",
                                    status),
                    _cluster_action("kubeconfig", "print the admin kubeconfig path", kubeconfig)))
