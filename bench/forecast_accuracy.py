"""Predicted start and completion times, and their P10-P90 intervals, against what then happened,
on the dev-cluster.

    python bench/forecast_accuracy.py [--nodes 12] [--jobs 120] [--history 60] [--scale 50]
                                      [--seeds 1 2 3] [--model models/current.json | none]
                                      [--warm-up OFFSET]

The workload is the simulator's (netsched.datagen.simulator.runs, its default cluster): job kinds,
shapes (replicas × GPUs), arrival gaps, the user's duration hint (missing for 20% of jobs) and each
job's true run time on each of its candidate nodes. A job runs on a GPU the dev-cluster has (H100 or
A100-80GB, pinned by a nodeSelector on nvidia.com/gpu.product): the node it ran on in the simulation
if that has one of them, else its first candidate that does (a job with neither, or bigger than the
dev-cluster's nodes of that GPU, is left out), and
its run is its true run time there, divided by --scale so that a run takes minutes. The spec carries
the simulator's numbers unscaled (the hint in simulated seconds): only KWOK's run times are scaled,
and every estimate is calibrated on the history, so the scale is learned like any other bias.

Per seed, a fresh --nodes dev-cluster (its operator with --model, extender and kube-scheduler; KWOK
ends each pod after its true run time); the operator's records file is seeded with --history
finished jobs of another seed (what it would have recorded before, with the GPU each ran on); then
--jobs GPUJobs arrive on their simulated schedule. Each job's forecast is read as a user would, from
its status, the first time one is written after submission (predictedStartTime while it waits,
predictedCompletionTime, and the P10/P90 beside each), and compared with its real startTime and
completionTime once all have finished.

With --warm-up OFFSET, seed+OFFSET's jobs run first on the same cluster, unmeasured: the operator has
then recorded its own first forecasts and what happened, which its intervals are corrected by
(netsched/jobs/forecast_errors.py), as in a cluster it has run in for a while. Without, the records
hold no forecast: intervals are corrected only once enough of the seed's own jobs have ended.

Baselines from the same run: start = submission ("now"); completion = submission + the mean run
of the history, and = submission + the job's own duration hint at the bench's scale (the mean where
it has none). Errors are absolute, in seconds at the bench's scale; median and p90. Coverage: the
share of actual times inside the P10-P90 interval, of the jobs whose forecast had one.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from kubernetes import client

from netsched.api.events import parse_rfc3339
from netsched.api.gpujob import (
    GROUP,
    PLURAL,
    PREDICTED_FINISH,
    PREDICTED_FINISH_RANGE,
    PREDICTED_START,
    PREDICTED_START_RANGE,
    VERSION,
)
from netsched.api.labels import GPU_PRODUCT_LABEL
from netsched.datagen.simulator import GPUS_PER_NODE, Cluster, SimConfig, runs
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.topology import gpu_nodes
from netsched.devcluster.wait import poll
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import running

sys.path.insert(0, str(Path(__file__).parent))
from gang_locality import code  # noqa: E402
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## Predicted start and completion"
MIN_RUN = 5.0  # seconds: a shorter run would end inside one forecast interval


@dataclass(frozen=True)
class SimJob:
    name: str
    arrival: float  # seconds after the first job
    kind: str
    replicas: int
    gpus: int
    run: float  # true run time on `gpu`, seconds at the bench's scale
    hint: float | None  # the user's duration hint, seconds at the bench's scale (for the baseline)
    sim_hint: float | None  # the same in simulated seconds: spec.workload.expectedDurationSeconds
    gpu: str  # the GPU product it runs on


def workload(seed: int, count: int, scale: float, nodes: int) -> list[SimJob]:
    """The simulated jobs, each on a GPU product the `nodes`-node dev-cluster has enough of to run it."""
    room = Counter(n.gpu_model for n in gpu_nodes(nodes))
    config = SimConfig(seed=seed, jobs=count, candidates=4)
    cluster = Cluster(config, np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0]))  # as runs()
    gpu_of = dict(zip(cluster.names, cluster.gpu, strict=True))
    jobs = []
    first = None
    for job, rows in runs(config):
        first = job.start if first is None else first
        usable = sorted((r for r in rows if room[gpu_of[r["node"]]] * GPUS_PER_NODE >= job.replicas
                         * job.gpus_per_replica), key=lambda r: -r["chosen"])
        if not usable:
            continue
        ran = usable[0]
        hint = None if math.isnan(job.expected_s) else job.expected_s
        jobs.append(SimJob(f"j{len(jobs):03d}", (job.start - first) / scale, job.kind, job.replicas,
                           job.gpus_per_replica, max(MIN_RUN, ran["duration_seconds"] / scale),
                           max(1.0, hint / scale) if hint else None, hint, str(gpu_of[ran["node"]])))
    return jobs


def history_rows(jobs: list[SimJob]) -> list[dict]:
    """What the operator would have recorded of these jobs (the fields a forecast reads)."""
    return [{"schema_version": 1, "uid": f"history-{j.name}", "name": j.name, "outcome": "Succeeded",
             "duration_seconds": j.run, "workload_kind": j.kind, "replicas": j.replicas,
             "gpus_per_replica": j.gpus, "gpus": j.replicas * j.gpus, "gpu_models": [j.gpu] * j.replicas,
             "expected_duration_seconds": round(j.sim_hint) if j.sim_hint else None} for j in jobs]


def manifest(job: SimJob) -> dict:
    workload = {"kind": job.kind} | ({"expectedDurationSeconds": round(job.sim_hint)} if job.sim_hint else {})
    body = make_gpujob(job.name, replicas=job.replicas, gpus=job.gpus, duration=f"{job.run:.1f}s",
                       manifest=True, workload=workload)
    body["spec"]["template"]["spec"]["nodeSelector"] = {GPU_PRODUCT_LABEL: job.gpu}
    return body


FIELDS = {"start": PREDICTED_START, "start_p10": PREDICTED_START_RANGE[0],
          "start_p90": PREDICTED_START_RANGE[1], "finish": PREDICTED_FINISH,
          "finish_p10": PREDICTED_FINISH_RANGE[0], "finish_p90": PREDICTED_FINISH_RANGE[1]}


def run(args: argparse.Namespace, seed: int) -> dict:
    past = workload(seed + 1000, args.history, args.scale, args.nodes)
    jobs = workload(seed, args.jobs, args.scale, args.nodes)
    mean_run = statistics.fmean(j.run for j in past)
    model = () if args.model == "none" else (f"--model={Path(args.model).resolve()}",)
    with tempfile.TemporaryDirectory() as d, running(DevCluster(
            directory=Path(d), nodes=args.nodes, progress=lambda m: print(m, file=sys.stderr),
            operator_args=model)) as cluster:
        (cluster.directory / "job-records.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in history_rows(past)))
        api = cluster.api_client()
        if args.warm_up is not None:  # the operator records these jobs and its forecasts of them
            play(api, "warm-up", workload(args.warm_up + seed, args.jobs, args.scale, args.nodes))
        submitted, first_seen, done = play(api, "forecast", jobs)
    return measure(jobs, submitted, first_seen, done, mean_run, seed)


def play(api: client.ApiClient, ns: str, jobs: list[SimJob]) -> tuple[dict, dict, dict]:
    """Submit `jobs` into namespace `ns` on their schedule and wait for all to end: when each was
    submitted, its first forecast, its final status."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    submitted: dict[str, float] = {}
    first_seen: dict[str, dict] = {}
    core.create_namespace({"metadata": {"name": ns}})
    poll(lambda: core.read_namespaced_service_account("default", ns), 60, "the default SA")
    t0 = time.time()

    def submit() -> None:
        for job in jobs:
            time.sleep(max(0.0, t0 + job.arrival - time.time()))
            sent = time.time()
            custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, manifest(job))
            submitted[job.name] = sent
    feeder = threading.Thread(target=submit, daemon=True)
    feeder.start()
    done: dict[str, dict] = {}
    while len(done) < len(jobs):
        if not feeder.is_alive() and len(submitted) < len(jobs):
            raise RuntimeError(f"submitting stopped after {len(submitted)} of {len(jobs)} jobs: see the "
                               "thread's traceback above")
        for body in custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]:
            name, status = body["metadata"]["name"], body.get("status") or {}
            if name not in first_seen and status.get(PREDICTED_FINISH):
                first_seen[name] = {key: status.get(field) for key, field in FIELDS.items()} | {
                    "phase": status.get("phase"), "basis": status.get("predictionBasis")}
            if status.get("phase") in ("Succeeded", "Failed"):
                done[name] = status
        print(f"\r{ns}: {len(submitted)}/{len(jobs)} submitted, {len(first_seen)} forecast, "
              f"{len(done)} done", end="", file=sys.stderr)
        time.sleep(1.0)
    print(file=sys.stderr)
    return submitted, first_seen, done


def measure(jobs: list[SimJob], submitted: dict, first_seen: dict, done: dict, mean_run: float,
            seed: int) -> dict:
    rows = []
    for job in jobs:
        status, seen = done[job.name], first_seen.get(job.name)
        if status.get("phase") != "Succeeded" or seen is None:
            continue
        start = parse_rfc3339(status["startTime"]).timestamp()
        end = parse_rfc3339(status["completionTime"]).timestamp()
        sub = submitted[job.name]
        predicted_start = parse_rfc3339(seen["start"]).timestamp() if seen["start"] else None
        when = {k: parse_rfc3339(v).timestamp() if v else None for k, v in seen.items() if k in FIELDS}
        rows.append({
            "job": job.name, "run": end - start,
            "start_error": abs((predicted_start or sub) - start), "start_baseline": abs(sub - start),
            "finish_error": abs(parse_rfc3339(seen["finish"]).timestamp() - end),
            "finish_mean": abs(sub + mean_run - end),
            "finish_hint": abs(sub + (job.hint or mean_run) - end),
            "pending_at_forecast": seen["phase"] == "Pending", "basis": seen["basis"], "gpu": job.gpu,
            "start_side": _side(when["start_p10"], start, when["start_p90"]),
            "finish_side": _side(when["finish_p10"], end, when["finish_p90"])})
    waited = [r for r in rows if r["pending_at_forecast"]]

    def stats(key: str, among: list[dict]) -> dict:
        values = sorted(r[key] for r in among)
        if not values:
            return {"median": None, "p90": None}
        return {"median": statistics.median(values),
                "p90": values[min(len(values) - 1, int(0.9 * len(values)))]}
    return {"jobs": len(jobs), "measured": len(rows), "waited": len(waited), "seed": seed,
            "mean_history_run": mean_run,
            "coverage": {"start_waiting": _coverage(waited, "start_side"),
                         "finish": _coverage(rows, "finish_side")},
            "start_all": {"forecast": stats("start_error", rows), "now": stats("start_baseline", rows)},
            "start_waiting": {"forecast": stats("start_error", waited),
                              "now": stats("start_baseline", waited)},
            "finish": {"forecast": stats("finish_error", rows), "mean": stats("finish_mean", rows),
                       "hint": stats("finish_hint", rows)},
            "rows": rows}


def _side(low: float | None, actual: float, high: float | None) -> str | None:
    """Where `actual` fell against [low, high]: "early", "inside" or "late"; None without an
    interval. A second of slack each side: the times are written in whole seconds."""
    if low is None or high is None:
        return None
    return "early" if actual < low - 1 else "late" if actual > high + 1 else "inside"


def _coverage(rows: list[dict], key: str) -> dict:
    judged = [r[key] for r in rows if r[key] is not None]
    sides = Counter(judged)
    return {"with_interval": len(judged), "inside": sides["inside"], "early": sides["early"],
            "late": sides["late"], "share": sides["inside"] / len(judged) if judged else None}


def section(runs_: list[dict], args: argparse.Namespace, command: str, load: str) -> str:
    def cell(s: dict) -> str:
        return "–" if s["median"] is None else f"{s['median']:.1f} / {s['p90']:.1f}"

    def share(c: dict) -> str:
        if c["share"] is None:
            return "–"
        return (f"{100 * c['share']:.1f}% ({c['inside']}/{c['with_interval']}; {c['early']} early, "
                f"{c['late']} late)")
    model = "no model" if args.model == "none" else f"the model {args.model}"
    lines = [SECTION, "",
             f"`{command}` (code {code()}; {load}): per seed, simulated jobs (times ÷ {args.scale:g}) "
             f"arriving into a fresh {args.nodes}-node dev-cluster whose operator forecasts with {model}, "
             f"run times learned from {args.history} recorded jobs of another seed"
             + (f", after the jobs of seed + {args.warm_up} ran unmeasured on the same cluster"
                if args.warm_up is not None else "") + ". Absolute error in "
             "seconds, median / p90, of the first forecast written into each job's status after "
             "submission; baselines from the same run. Coverage: actual times inside the forecast's "
             "P10-P90 (target 75-85%), and how many came before the P10 (early) or after the P90 (late).", "",
             "| seed | jobs (waited) | completion: forecast | now + mean run | now + hint | "
             "start of waiting jobs: forecast | now | completion coverage | waiting start coverage |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs_:
        lines.append(
            f"| {r['seed']} | {r['measured']} ({r['waited']}) | {cell(r['finish']['forecast'])} | "
            f"{cell(r['finish']['mean'])} | {cell(r['finish']['hint'])} | "
            f"{cell(r['start_waiting']['forecast'])} | {cell(r['start_waiting']['now'])} | "
            f"{share(r['coverage']['finish'])} | {share(r['coverage']['start_waiting'])} |")
    if len(runs_) > 1:  # a seed's waiting jobs are few: pooled, the coverage says more
        pooled = {key: {k: sum(r["coverage"][key][k] for r in runs_) for k in ("with_interval", "inside",
                                                                               "early", "late")}
                  for key in ("finish", "start_waiting")}
        for c in pooled.values():
            c["share"] = c["inside"] / c["with_interval"] if c["with_interval"] else None
        lines += ["", f"All seeds together: completion coverage {share(pooled['finish'])}, waiting start "
                  f"coverage {share(pooled['start_waiting'])}."]
    return "\n".join([*lines, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=120,
                        help="jobs per seed: with 40, an interval holding 80%% of times covers 75-85%% of "
                             "a seed's jobs only 68%% of the time; with 120, 86%%")
    parser.add_argument("--history", type=int, default=60)
    parser.add_argument("--scale", type=float, default=50.0, help="simulated seconds per bench second")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--model", default="models/current.json",
                        help="the operator's completion-time model (an artifact or manifest), or none")
    parser.add_argument("--warm-up", type=int, metavar="OFFSET",
                        help="before each seed's jobs, run seed+OFFSET's on the same cluster, unmeasured: "
                             "the operator has recorded its own forecasts (and their errors) before")
    parser.add_argument("--json", help="also write the figures and per-job rows here")
    parser.add_argument("--no-publish", action="store_true", help="print; do not write the history")
    args = parser.parse_args()
    exit_on_sigterm()
    results = []
    for seed in args.seeds:
        results.append(run(args, seed))
        if args.json:  # each seed as it ends: a later one that fails keeps the earlier ones
            Path(args.json).write_text(json.dumps(results, indent=1))
    load = "load average " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.split(
        "load average:")[-1].strip() + " at the end, on a shared 2-core machine"
    command = "python bench/forecast_accuracy.py " + " ".join(
        f"--{k} {getattr(args, k)}" for k in ("nodes", "jobs", "history", "scale", "model")) + (
        " --seeds " + " ".join(map(str, args.seeds))) + (
        f" --warm-up {args.warm_up}" if args.warm_up is not None else "")
    text = section(results, args, command, load)
    print(text) if args.no_publish else publish(text)


if __name__ == "__main__":
    main()
