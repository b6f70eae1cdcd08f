"""The `netsched` command: a table of subcommands, each a component's settings class and its main,
declared in the component's command module; and `kubectl-netsched`, the kubectl plugin: the same table's
user verbs only."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from netsched import __version__
from netsched.api.settings import add_flags, from_args
from netsched.api.subcommand import Command, Group
from netsched.datagen import command as datagen
from netsched.demo import command as demo
from netsched.devcluster import commands as devcluster
from netsched.extender import command as extender
from netsched.foresight import commands as foresight
from netsched.operator import command as operator
from netsched.records import command as records
from netsched.telemetry import command as telemetry
from netsched.training import commands as training

DESCRIPTION = """\
netsched: network-aware GPU job scheduling for Kubernetes.

Subcommands:
  dev-cluster  run a real local Kubernetes control plane (etcd, kube-apiserver,
               kube-controller-manager, kube-scheduler with a `netsched` profile)
               with KWOK-simulated GPU nodes, built from Go modules; no Docker
  extender     the kube-scheduler extender: filters and scores GPU nodes by
               network placement (HTTP, extender v1 protocol)
  agent        the telemetry agent (one per node): probes RTT and bandwidth to peers
               and data endpoints, reads NIC counters, serves Prometheus metrics
  pack         solve a cluster snapshot with the CP-SAT packer and print the plan
               (moves, evictions, placements, per-tier gains, proof status)
  operator     the GPUJob operator (kopf): runs GPUJobs as gang-gated pods, keeps
               their status true and records every finished job for training
  demo         bring up the dev-cluster (or use a running one), run the demo GPU
               workload and print which pod was placed on which node
  simulate     write simulated training data: every job's completion time on each
               of its candidate nodes (CSV, the models' dataset format)
  train        cross-validate the completion-time regressors on datasets or operator
               records, pick one by a stated ranking rule, refit it on all records
               and write a versioned model artifact
  evaluate     judge a model on jobs after its training window against the topology
               heuristic, kube-scheduler's default scoring, random and the oracle
  predict      a model's predicted completion seconds for each candidate row of a file,
               ranked per candidate set as the extender ranks them (CSV or JSON out)
  retrain      train a challenger on fresh data and promote it over the current
               model only if it is better on recent held-out jobs (for a CronJob)
  whatif       what a GPUJob (or Job, JobSet, LeaderWorkerSet, Kubeflow job) would do now:
               fits or not, where, predicted start and finish, what the packer would
               evict; creates nothing
  why          why a GPUJob (or job/NAME, jobset/NAME, lws/NAME) waits, what would
               change it, and the room per rack or zone
  report       what the cluster ran, per week and priority class, from the operator's
               job records: jobs, GPU-hours, time queued and completion time

The kubectl plugin `kubectl netsched` (docs/kubectl-plugin.md) offers whatif and why.
"""

PLUGIN_DESCRIPTION = """\
kubectl netsched: what a GPUJob, Job, JobSet, LeaderWorkerSet or Kubeflow job would do if submitted
now (whatif), and why one waits (why NAME, or why KIND/NAME: job/NAME, jobset/NAME, pytorchjob/NAME, ...).

Flags as kubectl's: -n/--namespace (default: the kubeconfig context's), --context,
--kubeconfig, -o/--output text|json|yaml, before or after the command. Guide: docs/kubectl-plugin.md.
"""
PLUGIN_VERBS = ("whatif", "why")


COMMANDS: tuple[Command | Group, ...] = (
    devcluster.COMMAND,
    extender.COMMAND,
    operator.COMMAND,
    telemetry.COMMAND,
    foresight.PACK, foresight.WHATIF, foresight.WHY,
    demo.COMMAND,
    datagen.COMMAND,
    training.TRAIN, training.EVALUATE, training.RETRAIN, training.PREDICT,
    records.REPORT,
)


def _add(sub: Any, command: Command | Group) -> None:
    parser = sub.add_parser(command.name, help=command.help, description=command.description)
    if isinstance(command, Group):
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        for action in command.commands:
            _add(actions, action)
    else:
        add_flags(parser, command.settings)
        parser.set_defaults(run=command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netsched", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"netsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        _add(sub, command)
    return parser


def _version(_: object) -> int:
    print(f"kubectl-netsched (netsched) {__version__}")
    return 0


@dataclass(frozen=True)
class _NoSettings:
    pass


def build_plugin_parser() -> argparse.ArgumentParser:
    """`kubectl netsched`: only the verbs a GPUJob's user runs, named as kubectl shows them."""
    parser = argparse.ArgumentParser(prog="kubectl netsched", description=PLUGIN_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        if command.name in PLUGIN_VERBS:
            _add(sub, command)
    _add(sub, Command("version", "print the plugin's version", _NoSettings, _version))
    return parser


ONE_LINE_ERRORS = devcluster.ERRORS  # one line, exit 1; and the API server's (netsched.api.connect.one_line)


# kubectl's global flags that whatif and why take, each with a value: also accepted before the verb, as
# kubectl users write them (`kubectl netsched -n ml why train`)
GLOBAL_FLAGS = ("-n", "--namespace", "--context", "--kubeconfig", "-o", "--output")


def verb_first(argv: list[str]) -> list[str]:
    """`argv` with the global flags given before the command moved after it, where its parser takes
    them; unchanged when anything else comes first (--help, --version, an unknown flag: the parser
    says what it says of them)."""
    moved: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        flag, eq, _ = argv[i].partition("=")
        joined = not argv[i].startswith("--") and argv[i][:2] in GLOBAL_FLAGS and len(argv[i]) > 2  # -nml
        if (flag in GLOBAL_FLAGS and eq) or joined:
            moved.append(argv[i])
            i += 1
        elif flag in GLOBAL_FLAGS and i + 1 < len(argv):
            moved += argv[i:i + 2]
            i += 2
        else:
            return argv
    if not moved or i == len(argv):
        return argv
    return [argv[i], *moved, *argv[i + 1:]]


def main(argv: list[str] | None = None) -> int:
    args = verb_first(sys.argv[1:] if argv is None else argv)
    return _closing_quietly(lambda: _run(build_parser(), args))


def plugin_main(argv: list[str] | None = None) -> int:
    args = verb_first(sys.argv[1:] if argv is None else argv)
    return _closing_quietly(lambda: _run(build_plugin_parser(), args))


def _closing_quietly(run: Callable[[], int]) -> int:
    """A reader that goes away (`netsched why x -o yaml | head -1`) ends the command as it ends a Unix
    tool, SIGPIPE: exit 141 (128 + 13), nothing on stderr. Output is flushed here, so that a closed pipe
    is found now and not in the interpreter's own flush at exit (a traceback-like "Exception ignored")."""
    try:
        try:
            return run()
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit finds no pipe
        return 141


def _run(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    args = parser.parse_args(argv)
    if getattr(args, "gpu_table", None):
        from netsched.models.gpus import GpuTableError, configure
        try:
            configure(args.gpu_table)
        except GpuTableError as exc:
            print(f"netsched: error: {exc}", file=sys.stderr)
            return 2
    try:
        return args.run.main(from_args(args.run.settings, args))
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in training.TRAIN_EXTRA:
            raise
        print(f"netsched: error: `netsched {args.command}` needs {exc.name}, of the train extra: "
              "pip install 'netsched[train]', or run the -train image", file=sys.stderr)
        return 1
    except Exception as exc:
        said = _one_line(exc)
        if said is None:
            raise
        print(f"netsched: error: {said}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _one_line(exc: Exception) -> str | None:
    """The message of an error said without a traceback; None for a bug. Looked up among the modules
    loaded: the CLI imports neither the kubernetes client nor the dev-cluster to start."""
    connect = sys.modules.get("netsched.api.connect")
    said: str | None = connect.one_line(exc) if connect else None
    kinds = tuple(getattr(sys.modules[m], name) for m, name in ONE_LINE_ERRORS if m in sys.modules)
    return said or (str(exc) if isinstance(exc, kinds) else None)
