"""The `netsched` command: parses arguments and calls one function per subcommand."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from netsched import __version__
from netsched.api.settings import add_flags, from_args
from netsched.extender.config import ExtenderConfig
from netsched.models.gpus import TABLE_ENV as GPU_TABLE_ENV
from netsched.operator.config import OperatorConfig

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
  whatif       what a GPUJob would do if submitted now: fits or not, where, predicted
               start and finish, what the packer would evict; creates nothing
  why          why a GPUJob waits, what would change it, and the room per rack or zone

Installed as `kubectl-netsched` too: `kubectl netsched whatif -f job.yaml`, `kubectl netsched why JOB`.
"""


def _cluster(args: argparse.Namespace):
    from netsched.devcluster.devcluster import DevCluster
    from netsched.devcluster.scheduler_config import ExtenderSettings

    kwargs = {"nodes": args.nodes, "zones": args.zones, "racks_per_zone": args.racks_per_zone,
              "run_extender": not getattr(args, "no_extender", False),
              "run_operator": not getattr(args, "no_operator", False),
              "real_node": getattr(args, "real_node", False)}
    if getattr(args, "extender_url", None):
        kwargs["extender"] = ExtenderSettings(url_prefix=args.extender_url)
    if getattr(args, "model", None):
        kwargs["extender_args"] = (f"--model={Path(args.model).resolve()}",)
    if args.dir:
        kwargs["directory"] = Path(args.dir)
    return DevCluster(**kwargs)


def _stop_on_signal() -> threading.Event:
    """An event SIGINT/SIGTERM set, installed before anyone is told Ctrl-C works."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def cmd_up(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    cluster.up()
    print(f"kubeconfig: {cluster.kubeconfig}")
    print(f"logs:       {cluster.log_dir}")
    if not args.foreground:
        print("stop it with: netsched dev-cluster down" + (f" --dir {args.dir}" if args.dir else ""))
        return 0
    stop = _stop_on_signal()
    print("running in the foreground; Ctrl-C stops every component", flush=True)
    try:
        stop.wait()
    finally:
        cluster.down()
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = _cluster(args).down()
    if not stopped:
        print("no dev-cluster components were running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    report = cluster.status()
    print(json.dumps(report, indent=2))
    return 0 if report["components"] and cluster.running_components() else 1


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    if not cluster.kubeconfig.exists():
        print(f"no dev-cluster in {cluster.directory}; run `netsched dev-cluster up`", file=sys.stderr)
        return 1
    print(cluster.kubeconfig)
    return 0


def cmd_extender(args: argparse.Namespace) -> int:
    import logging

    from netsched.api.connect import api_client
    from netsched.extender.server import CONNECTIONS, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = from_args(ExtenderConfig, args)
    serve(api_client(settings.kubeconfig, connections=CONNECTIONS), settings)
    return 0


def cmd_operator(args: argparse.Namespace) -> int:
    import logging

    from netsched.operator.run import PortTaken, run_operator
    from netsched.packing.policy import InvalidPolicy

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_operator(from_args(OperatorConfig, args))
    except (InvalidPolicy, PortTaken) as exc:  # say which file or port and why; never half start
        print(f"netsched: error: operator: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_agent(args: argparse.Namespace) -> int:
    import logging
    import os

    from netsched.telemetry.agent import ProbePlan, run_agent
    from netsched.telemetry.discovery import BadTarget, PodDiscovery, static_targets

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    node = args.node_name or os.environ.get("NODE_NAME")
    if not node:
        print("netsched: error: agent: --node-name (or $NODE_NAME) is required: the node it measures from",
              file=sys.stderr)
        return 2
    try:
        fixed = static_targets(args.peer, args.data)
    except BadTarget as exc:
        print(f"netsched: error: agent: {exc}", file=sys.stderr)
        return 2
    found = None
    if args.discover_namespace:
        from netsched.api.connect import api_client

        found = PodDiscovery(api_client(args.kubeconfig), args.discover_namespace, args.discover_selector,
                             args.probe_port, node)
    plan = ProbePlan(interval=args.interval, peers_per_round=args.peers_per_round,
                     budget_bytes_per_minute=args.budget_bytes_per_minute)
    run_agent(node, lambda: {**(found() if found else {}), **fixed}, args.host, args.port, args.probe_port,
              plan)
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    from netsched.api.connect import api_client
    from netsched.foresight.whatif import Cluster, WhatIfError, history, load_manifest, render, what_if

    try:
        manifest = load_manifest(Path(args.filename), args.namespace)
    except WhatIfError as exc:
        print(f"netsched: error: whatif: {exc}", file=sys.stderr)
        return 2
    cluster = Cluster.read(api_client(args.kubeconfig))
    answer = what_if(cluster, manifest, history(cluster, Path(args.records) if args.records else None),
                     budget=args.budget)
    print(_formatted(answer, args.output) if args.output != "text" else render(answer))
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    from netsched.api.connect import api_client
    from netsched.foresight.whatif import Cluster, WhatIfError
    from netsched.foresight.why import render_why, why

    try:
        answer = why(Cluster.read(api_client(args.kubeconfig)), args.namespace, args.job)
    except WhatIfError as exc:
        print(f"netsched: error: why: {exc}", file=sys.stderr)
        return 1
    print(_formatted(answer, args.output) if args.output != "text" else render_why(answer))
    return 0


def _formatted(answer: dict, output: str) -> str:
    import yaml

    return json.dumps(answer, indent=2) if output == "json" else yaml.safe_dump(answer, sort_keys=False)


def cmd_pack(args: argparse.Namespace) -> int:
    import yaml

    from netsched.packing.policy import DisruptionPolicy, InvalidPolicy, read_policy
    from netsched.packing.problem import Problem
    from netsched.packing.report import plan_json, plan_text
    from netsched.packing.solver import solve

    if bool(args.snapshot) == bool(args.from_cluster):
        print("netsched: error: pack: give a snapshot file or --from-cluster (not both)", file=sys.stderr)
        return 2
    if args.from_cluster:
        from netsched.api.connect import api_client
        from netsched.packer.live_cluster import problem_from_cluster

        snapshot = problem_from_cluster(api_client(args.kubeconfig))
    else:
        try:
            snapshot = Problem.from_json(yaml.safe_load(Path(args.snapshot).read_text()))
        except (OSError, yaml.YAMLError, ValueError, TypeError) as exc:
            print(f"netsched: error: pack {args.snapshot}: {exc}", file=sys.stderr)
            return 2
    try:
        disruption = read_policy(Path(args.policy)) if args.policy else DisruptionPolicy()
    except InvalidPolicy as exc:
        print(f"netsched: error: pack: {exc}", file=sys.stderr)
        return 2
    if args.save_snapshot:
        Path(args.save_snapshot).write_text(json.dumps(snapshot.to_json(), indent=1))
    plan = solve(snapshot, budget=args.budget, policy=disruption.resolve(snapshot))
    print(json.dumps(plan_json(snapshot, plan), indent=2) if args.json else plan_text(snapshot, plan))
    if args.from_cluster and not args.json:
        print("dry run: nothing in the cluster was changed")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from netsched.demo import run_demo

    return run_demo(_cluster(args), keep=args.keep_cluster)


def _model_command(command: str, run: Callable[[], object]) -> int:
    """Bad input (a missing or malformed data file, a refused model artifact) as one line, exit 2."""
    from netsched.models.features import SchemaError

    try:
        run()
    except (SchemaError, OSError) as exc:
        print(f"netsched: error: {command}: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from netsched.datagen.simulator import SimConfig, simulate
    from netsched.training.dataset import write_dataset

    try:
        cfg = SimConfig(nodes=args.nodes, jobs=args.jobs, candidates=args.candidates, seed=args.seed,
                        start_unix=args.start, profile=args.profile)
    except ValueError as exc:
        print(f"netsched: error: simulate: {exc}", file=sys.stderr)
        return 2

    def run() -> None:
        rows = write_dataset(Path(args.out), _progress(simulate(cfg), cfg.jobs))
        print(f"wrote {rows} rows ({cfg.jobs} jobs x {cfg.candidates} candidates) to {args.out}")

    return _model_command("simulate", run)


def _progress(rows, jobs: int):
    """The rows, printing on stderr how many jobs are done at every tenth."""
    done, job, step = 0, None, max(jobs // 10, 1)
    for row in rows:
        if row["job_id"] != job:
            if done and done % step == 0:
                print(f"simulate: {done}/{jobs} jobs", file=sys.stderr, flush=True)
            done, job = done + 1, row["job_id"]
        yield row


def cmd_train(args: argparse.Namespace) -> int:
    from netsched.training.train import train

    return _model_command("train", lambda: train(args.data, Path(args.out), seed=args.seed,
                                                 holdout=args.holdout, name=args.name,
                                                 clusters_by_file=args.clusters_by_file))


def cmd_evaluate(args: argparse.Namespace) -> int:
    from netsched.training.evaluate import evaluate, table, write_report

    def run() -> None:
        result = evaluate(Path(args.model), args.data, seed=args.seed)
        print(table(result))
        print("wrote " + ", ".join(str(p) for p in write_report(result, Path(args.out))))

    try:
        return _model_command("evaluate", run)
    except ModuleNotFoundError as exc:
        print(f"netsched: error: evaluate: {exc}; its plots need matplotlib: pip install 'netsched[train]'",
              file=sys.stderr)
        return 2


def cmd_predict(args: argparse.Namespace) -> int:
    from netsched.training.predict import predict_rows, write_predictions

    fmt = args.format or ("json" if args.out and args.out.endswith(".json") else "csv")

    def run() -> None:
        rows = predict_rows(Path(args.model), Path(args.candidates))
        if args.out:
            with open(args.out, "w", newline="") as f:
                write_predictions(rows, f, fmt)
            print(f"wrote {len(rows)} predictions to {args.out}", file=sys.stderr)
        else:
            write_predictions(rows, sys.stdout, fmt)

    return _model_command("predict", run)


def cmd_retrain(args: argparse.Namespace) -> int:
    from netsched.training.retrain import retrain

    if args.holdout == 0:
        print("netsched: error: retrain: --holdout must be above 0: both models are judged on the held-out "
              "recent jobs", file=sys.stderr)
        return 2
    return _model_command("retrain", lambda: retrain(args.data, Path(args.models), holdout=args.holdout,
                                                     seed=args.seed))


def _share(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a share in [0, 1)")
    return value


def _utc(text: str) -> float:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


DATA_HELP = "dataset CSV or operator records (.jsonl) files"


def _add_model_parsers(sub) -> None:
    sim = sub.add_parser(
        "simulate", help="write simulated training data (CSV)",
        description="Simulate a GPU cluster and its jobs (netsched/datagen/simulator.py) and write every "
        "job's true completion time on each of its candidate nodes as a dataset CSV. Deterministic for "
        "given options.")
    sim.add_argument("--jobs", type=int, default=3000, help="jobs to simulate (default 3000)")
    sim.add_argument("--nodes", type=int, default=64, help="GPU nodes of the cluster (default 64)")
    sim.add_argument("--candidates", type=int, default=8, help="candidate nodes per job (default 8)")
    sim.add_argument("--seed", type=int, default=0, help="seeds the cluster and the jobs (default 0)")
    sim.add_argument("--profile", default="default", metavar="NAME",
                     help="the cluster's GPUs, NICs, links and job mix (netsched/datagen/simulator.py "
                     "PROFILES: default, inference-edge, training-hpc, legacy, mixed; --nodes keeps the "
                     "size; default: default)")
    sim.add_argument("--start", type=_utc, default=1_767_225_600.0, metavar="TIME",
                     help="when the first job may start, ISO 8601, UTC unless stated (default 2026-01-01)")
    sim.add_argument("--out", required=True, metavar="FILE.csv", help="dataset file to write")
    sim.set_defaults(func=cmd_simulate)

    tr = sub.add_parser(
        "train", help="train and cross-validate a completion-time model",
        description="Train on dataset CSVs and/or operator records: cross-validate every regressor on all "
        "but the most recent jobs (folds split by job, later jobs tested by models of earlier ones; by time "
        "and by site), pick one by SELECTION_RULE (netsched/training/train.py: top-1, then p95 regret; "
        "pairwise accuracy for records of one row per job), score it on the most recent jobs, then refit "
        "it on all records and write <out>/<name>/model.joblib and meta.json.")
    tr.add_argument("data", nargs="+", type=Path, help=DATA_HELP)
    tr.add_argument("--out", default="models", help="directory to write the artifact under (default models)")
    tr.add_argument("--name", help="artifact directory name (default jct-s<schema>-<last day>-<data sha256>)")
    tr.add_argument("--seed", type=int, default=0, help="seeds the regressors (default 0)")
    tr.add_argument("--holdout", type=_share, default=0.2, metavar="SHARE",
                    help="most recent share of jobs the pick is scored on after cross-validation; the "
                    "model is then refit on all jobs, these included (default 0.2)")
    tr.add_argument("--clusters-by-file", action="store_true",
                    help="each DATA file is one cluster's records: the by-site cross-validation then "
                    "holds out one cluster at a time instead of one zone, judging each kind on clusters it "
                    "never saw")
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser(
        "evaluate", help="judge a model against the other placement policies",
        description="Score a model on the jobs of DATA that started after its training window, against its "
        "network-blind twin, the extender's heuristic, kube-scheduler's default scoring, random and the "
        "oracle. Prints the table; writes evaluation.md, evaluation.json and PNG plots to --out.")
    ev.add_argument("data", nargs="+", type=Path, help=DATA_HELP)
    ev.add_argument("--model", required=True, metavar="PATH",
                    help="artifact directory or current.json manifest")
    ev.add_argument("--out", default="evaluation", help="report directory (default evaluation)")
    ev.add_argument("--seed", type=int, default=0, help="seeds the random policy (default 0)")
    ev.set_defaults(func=cmd_evaluate)

    rt = sub.add_parser(
        "retrain", help="train a challenger; promote it only if it beats the current model",
        description="Train a challenger on DATA as `netsched train` does, score it as validated (fitted on "
        "all but the most recent jobs) and the model <models>/current.json names on those jobs by the same "
        "ranking rule, repoint current.json to the challenger (refit on all jobs) only if it is better "
        "(or no usable current model exists), and log the decision in <models>/promotions.jsonl. "
        "Exit 0 whether promoted or kept, 2 on bad data.")
    rt.add_argument("data", nargs="+", type=Path, help=DATA_HELP)
    rt.add_argument("--models", default="models", help="models directory with current.json (default models)")
    rt.add_argument("--holdout", type=_share, default=0.2, metavar="SHARE",
                    help="most recent share of jobs both models are judged on (default 0.2)")
    rt.add_argument("--seed", type=int, default=0, help="seeds the regressors (default 0)")
    rt.set_defaults(func=cmd_retrain)
    pr = sub.add_parser(
        "predict", help="a model's predicted completion seconds for candidate rows, ranked",
        description="Predict completion seconds for each row of a candidates file (CSV or JSON: the model's "
        "features by name, optional candidate_set, node and gpu_product; docs/record-format.md) with the "
        "extender's own call, and rank each candidate set's rows (1: predicted fastest) as the extender "
        "would. Writes the rows with predicted_seconds and rank, as CSV or JSON.")
    pr.add_argument("--model", required=True, metavar="PATH",
                    help="artifact directory or current.json manifest")
    pr.add_argument("--candidates", required=True, metavar="FILE", help="candidates file, CSV or JSON")
    pr.add_argument("--out", metavar="FILE", help="write here (default: standard output)")
    pr.add_argument("--format", choices=("csv", "json"),
                    help="output format (default: json if --out ends in .json, else csv)")
    pr.set_defaults(func=cmd_predict)
    for p in (sim, tr, ev, rt, pr):
        p.add_argument("--gpu-table", metavar="FILE", help="GPU capability table extending the built-in one "
                       f"(as the extender's --gpu-table; default ${GPU_TABLE_ENV} if set)")


def _add_cluster_options(p: argparse.ArgumentParser, shape: bool = True) -> None:
    p.add_argument("--dir", help="cluster directory (default: $NETSCHED_DEV_CLUSTER_DIR "
                   "or ~/.local/state/netsched/dev-cluster)")
    p.set_defaults(nodes=8, zones=2, racks_per_zone=2)
    if shape:
        p.add_argument("--nodes", type=int, default=8, help="fake GPU nodes to create (default 8)")
        p.add_argument("--zones", type=int, default=2, help="zones to spread them over (default 2)")
        p.add_argument("--racks-per-zone", type=int, default=2, help="racks per zone (default 2)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netsched", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"netsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = sub.add_parser("dev-cluster", help="local real control plane with KWOK GPU nodes",
                         description="Run a local Kubernetes control plane with fake GPU nodes.")
    dev_sub = dev.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = dev_sub.add_parser("up", help="build binaries if needed, start everything, create nodes")
    _add_cluster_options(up)
    up.add_argument("--extender-url", help="urlPrefix of another scheduler extender to use instead "
                    "of starting netsched's own (e.g. http://127.0.0.1:8888)")
    up.add_argument("--model", metavar="PATH", help="netsched's extender scores by this completion-time "
                    "model (artifact directory or current.json manifest; default: the topology heuristic)")
    up.add_argument("--no-extender", action="store_true",
                    help="run kube-scheduler without any extender (plain kube-scheduler behaviour)")
    up.add_argument("--no-operator", action="store_true",
                    help="do not run the GPUJob operator (its CRD is still installed)")
    up.add_argument("--real-node", action="store_true",
                    help="add one real kubelet node (containerd, kube-proxy) in a private network "
                    "namespace, for pods that really run, e.g. the Helm chart's "
                    "(root; see docs/dev-cluster.md)")
    up.add_argument("--foreground", action="store_true",
                    help="stay in the foreground; Ctrl-C stops every component")
    up.set_defaults(func=cmd_up)
    for name, func, text in (
        ("down", cmd_down, "stop every component of the dev-cluster"),
        ("status", cmd_status, "show components, pids, logs and Ready nodes (exit 1 if down)"),
        ("kubeconfig", cmd_kubeconfig, "print the admin kubeconfig path"),
    ):
        p = dev_sub.add_parser(name, help=text, description=text)
        _add_cluster_options(p, shape=False)
        p.set_defaults(func=func)

    ext = sub.add_parser("extender", help="run the scheduler extender (HTTP)",
                         description="Serve the kube-scheduler extender v1 verbs filter, prioritize and "
                         "preempt, answering from a watch-fed cache of Nodes and Pods.")
    add_flags(ext, ExtenderConfig)
    ext.set_defaults(func=cmd_extender)

    op = sub.add_parser("operator", help="run the GPUJob operator (kopf)",
                        description="Run GPUJobs: create their pods behind a gang gate, release the gang "
                        "when it fits, keep status, conditions and events true, and append one training "
                        "record per finished job.")
    add_flags(op, OperatorConfig)
    op.set_defaults(func=cmd_operator)

    ag = sub.add_parser("agent", help="run the telemetry agent of one node",
                        description="Probe RTT and bandwidth to peers and data endpoints on a bounded "
                        "schedule and budget, read NIC counters, and serve /metrics, /matrix, /healthz.")
    ag.add_argument("--node-name", help="the node this agent measures from (default: $NODE_NAME)")
    ag.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    ag.add_argument("--port", type=int, default=9101, help="HTTP: /metrics, /matrix, /healthz (default 9101)")
    ag.add_argument("--probe-port", type=int, default=9102, help="TCP port answering probes (default 9102)")
    ag.add_argument("--peer", action="append", default=[], metavar="NODE=HOST:PORT",
                    help="a peer agent to probe (repeatable)")
    ag.add_argument("--data", action="append", default=[], metavar="HOST:PORT",
                    help="a data endpoint to probe; it must answer probes (another agent's probe port)")
    ag.add_argument("--discover-namespace", help="find peer agents as pods in this namespace (needs the API)")
    ag.add_argument("--discover-selector", default="app.kubernetes.io/component=agent",
                    help="label selector of the agent pods (default app.kubernetes.io/component=agent)")
    ag.add_argument("--kubeconfig", help="for discovery (default: in-cluster, then ~/.kube/config)")
    ag.add_argument("--interval", type=float, default=30.0, metavar="SECONDS",
                    help="seconds between probe rounds, jittered x0.8-1.2 (default 30)")
    ag.add_argument("--peers-per-round", type=int, default=8, help="targets probed per round (default 8)")
    ag.add_argument("--budget-bytes-per-minute", type=int, default=64 * 1024 * 1024,
                    help="cap on bandwidth-probe bytes sent per minute (default 64 MiB)")
    ag.set_defaults(func=cmd_agent)

    pk = sub.add_parser("pack", help="solve a snapshot with the CP-SAT packer (dry run: prints the plan)",
                        description="Read a snapshot (JSON or YAML: nodes, pods, budgets; see "
                        "netsched/packing/problem.py), find the placement that serves the highest "
                        "priorities best with the fewest pods moved or evicted, and print it. Nothing "
                        "is changed in any cluster.")
    pk.add_argument("snapshot", nargs="?", help="snapshot file (JSON or YAML)")
    pk.add_argument("--from-cluster", action="store_true",
                    help="snapshot the live cluster instead (read only: a dry run)")
    pk.add_argument("--kubeconfig", help="with --from-cluster (default: in-cluster, then ~/.kube/config)")
    pk.add_argument("--save-snapshot", metavar="FILE", help="also write the snapshot solved, as JSON")
    pk.add_argument("--budget", type=float, default=1.0, metavar="SECONDS",
                    help="wall-clock limit for the whole solve (default 1)")
    pk.add_argument("--policy", metavar="FILE",
                    help="disruption policy, YAML or JSON, as the operator's --pack-policy (default: strict)")
    pk.add_argument("--json", action="store_true", help="print the plan as JSON")
    pk.set_defaults(func=cmd_pack)

    wi = sub.add_parser("whatif", help="what a GPUJob would do if submitted now (creates nothing)",
                        description="Read the live cluster once and answer, with the operator's own rules: "
                        "would the GPUJob fit now, where would it run, how long would it run and when "
                        "would it start and finish, which jobs go before it, and what the packer would "
                        "evict or move to make room. Nothing is created or changed.")
    wi.add_argument("-f", "--filename", required=True, help="the GPUJob manifest (YAML or JSON)")
    wi.add_argument("--records", metavar="FILE", help="the operator's job records, to learn run times from "
                    "(default: only the finished GPUJobs still in the cluster)")
    wi.add_argument("--budget", type=float, default=1.0, metavar="SECONDS",
                    help="wall-clock limit of the packer's dry run (default 1)")
    wy = sub.add_parser("why", help="why a GPUJob waits and what would change it",
                        description="The GPUJob's Schedulable reason and message (the smallest change that "
                        "would let it run), its predicted start and completion, and the room per node, "
                        "rack or zone now.")
    wy.add_argument("job", help="the GPUJob's name")
    for p, func in ((wi, cmd_whatif), (wy, cmd_why)):
        p.add_argument("-n", "--namespace", default="default", help="namespace (default: default)")
        p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text",
                       help="text for people (default), json or yaml for tools")
        p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
        p.set_defaults(func=func)

    demo = sub.add_parser("demo", help="run the demo GPU workload and print placements",
                          description="Bring up the dev-cluster (unless one is running), run "
                          "the demo workload and print where each pod went.")
    _add_cluster_options(demo)
    demo.add_argument("--model", metavar="PATH", help="the extender scores by this completion-time model "
                      "(artifact directory or current.json; default: the topology heuristic)")
    demo.add_argument("--keep-cluster", action="store_true",
                      help="leave a cluster this command started running afterwards")
    demo.set_defaults(func=cmd_demo)
    _add_model_parsers(sub)
    return parser


# The dev-cluster's errors say what to do: printed without a traceback. Only a command that used the
# dev-cluster raises them, and importing it needs the `dev` extra, which the image does not have.
DEV_CLUSTER_ERRORS = (("netsched.devcluster.binaries", "BuildError"),
                      ("netsched.devcluster.devcluster", "ClusterError"),
                      ("netsched.devcluster.processes", "ComponentFailed"),
                      ("netsched.devcluster.realnode", "RealNodeError"),
                      ("netsched.devcluster.wait", "Timeout"))


TRAIN_EXTRA = {"sklearn", "skl2onnx", "scipy", "matplotlib"}  # what `pip install netsched` leaves out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "gpu_table", None):
        from netsched.models.gpus import GpuTableError, configure

        try:
            configure(args.gpu_table)
        except GpuTableError as exc:
            print(f"netsched: error: {exc}", file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in TRAIN_EXTRA:
            raise
        print(f"netsched: error: `netsched {args.command}` needs {exc.name}, of the train extra: "
              "pip install 'netsched[train]', or run the -train image", file=sys.stderr)
        return 1
    except Exception as exc:
        kinds = tuple(getattr(sys.modules[m], name) for m, name in DEV_CLUSTER_ERRORS if m in sys.modules)
        if not isinstance(exc, kinds):
            raise
        print(f"netsched: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
