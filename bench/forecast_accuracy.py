"""Predicted start and completion times against what then happened, on the dev-cluster.

    python bench/forecast_accuracy.py [--nodes 8] [--jobs 60] [--history 60] [--scale 50] [--seed 1]

The workload is the simulator's (netsched.datagen.simulator.runs): job kinds, shapes (replicas ×
GPUs), arrival gaps, the user's duration hint (`expected_s`, missing for 20% of jobs) and each job's
true run time on the node it ran on, all divided by --scale so that a run takes minutes. The
operator's records file is seeded with --history finished jobs of another seed (what the operator
would have recorded before); then --jobs GPUJobs arrive on their simulated schedule into a
--nodes dev-cluster (its operator, extender and kube-scheduler; KWOK ends each pod after its true
run time). Each job's forecast is read as a user would, from its status, the first time one is
written after submission (predictedStartTime while it waits, predictedCompletionTime), and
compared with its real startTime and completionTime once all have finished.

Baselines from the same run: start = submission ("now"); completion = submission + the mean run
of the history, and = submission + the job's own duration hint (the mean where it has none).
Errors are absolute, in seconds at the bench's scale; median and p90.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from netsched.api.events import parse_rfc3339
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.datagen.simulator import SimConfig, runs
from netsched.devcluster.devcluster import DevCluster
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
    run: float  # true run time, seconds at the bench's scale
    hint: float | None  # the user's spec.workload.expectedDurationSeconds


def workload(seed: int, count: int, scale: float) -> list[SimJob]:
    jobs = []
    first = None
    for job, rows in runs(SimConfig(seed=seed, jobs=count, candidates=4)):
        ran = next(r for r in rows if r["chosen"])["duration_seconds"]
        first = job.start if first is None else first
        hint = None if math.isnan(job.expected_s) else max(1.0, job.expected_s / scale)
        jobs.append(SimJob(f"j{len(jobs):03d}", (job.start - first) / scale, job.kind, job.replicas,
                           job.gpus_per_replica, max(MIN_RUN, ran / scale), hint))
    return jobs


def history_rows(jobs: list[SimJob]) -> list[dict]:
    """What the operator would have recorded of these jobs (the fields a forecast reads)."""
    return [{"schema_version": 1, "uid": f"history-{j.name}", "name": j.name, "outcome": "Succeeded",
             "duration_seconds": j.run, "workload_kind": j.kind, "replicas": j.replicas,
             "gpus_per_replica": j.gpus, "gpus": j.replicas * j.gpus,
             "expected_duration_seconds": round(j.hint) if j.hint else None} for j in jobs]


def manifest(job: SimJob) -> dict:
    workload = {"kind": job.kind} | ({"expectedDurationSeconds": round(job.hint)} if job.hint else {})
    return make_gpujob(job.name, replicas=job.replicas, gpus=job.gpus, duration=f"{job.run:.1f}s",
                       manifest=True, workload=workload)


def run(args: argparse.Namespace) -> dict:
    past = workload(args.seed + 1000, args.history, args.scale)
    jobs = workload(args.seed, args.jobs, args.scale)
    mean_run = statistics.fmean(j.run for j in past)
    submitted: dict[str, float] = {}
    first_seen: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d, running(DevCluster(
            directory=Path(d), nodes=args.nodes, progress=lambda m: print(m, file=sys.stderr))) as cluster:
        (cluster.directory / "job-records.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in history_rows(past)))
        api = cluster.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        ns = "forecast"
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
                if name not in first_seen and status.get("predictedCompletionTime"):
                    first_seen[name] = {"start": status.get("predictedStartTime"),
                                        "finish": status["predictedCompletionTime"],
                                        "phase": status.get("phase"),
                                        "basis": status.get("predictionBasis")}
                if status.get("phase") in ("Succeeded", "Failed"):
                    done[name] = status
            print(f"\r{len(submitted)}/{len(jobs)} submitted, {len(first_seen)} forecast, "
                  f"{len(done)} done", end="", file=sys.stderr)
            time.sleep(1.0)
        print(file=sys.stderr)
    return measure(jobs, submitted, first_seen, done, mean_run, args)


def measure(jobs: list[SimJob], submitted: dict, first_seen: dict, done: dict, mean_run: float,
            args: argparse.Namespace) -> dict:
    rows = []
    for job in jobs:
        status, seen = done[job.name], first_seen.get(job.name)
        if status.get("phase") != "Succeeded" or seen is None:
            continue
        start = parse_rfc3339(status["startTime"]).timestamp()
        end = parse_rfc3339(status["completionTime"]).timestamp()
        sub = submitted[job.name]
        predicted_start = parse_rfc3339(seen["start"]).timestamp() if seen["start"] else None
        rows.append({
            "job": job.name, "run": end - start,
            "start_error": abs((predicted_start or sub) - start), "start_baseline": abs(sub - start),
            "finish_error": abs(parse_rfc3339(seen["finish"]).timestamp() - end),
            "finish_mean": abs(sub + mean_run - end),
            "finish_hint": abs(sub + (job.hint or mean_run) - end),
            "pending_at_forecast": seen["phase"] == "Pending", "basis": seen["basis"]})
    waited = [r for r in rows if r["pending_at_forecast"]]

    def stats(key: str, among: list[dict]) -> dict:
        values = sorted(r[key] for r in among)
        if not values:
            return {"median": None, "p90": None}
        return {"median": statistics.median(values),
                "p90": values[min(len(values) - 1, int(0.9 * len(values)))]}
    return {"code": code(), "nodes": args.nodes, "jobs": len(jobs), "measured": len(rows),
            "waited": len(waited),
            "history": args.history, "scale": args.scale, "seed": args.seed, "mean_history_run": mean_run,
            "start_all": {"forecast": stats("start_error", rows), "now": stats("start_baseline", rows)},
            "start_waiting": {"forecast": stats("start_error", waited),
                              "now": stats("start_baseline", waited)},
            "finish": {"forecast": stats("finish_error", rows), "mean": stats("finish_mean", rows),
                       "hint": stats("finish_hint", rows)},
            "rows": rows}


def section(r: dict, command: str) -> str:
    def cell(s: dict) -> str:
        return "–" if s["median"] is None else f"{s['median']:.1f} / {s['p90']:.1f}"
    lines = [SECTION, "",
             f"`{command}` (code {r['code']}): {r['jobs']} simulated jobs (seed {r['seed']}, times ÷ "
             f"{r['scale']:g}) arriving into a {r['nodes']}-node dev-cluster, run times learned from "
             f"{r['history']} recorded jobs of another seed (mean run {r['mean_history_run']:.1f} s); "
             f"{r['measured']} jobs measured, {r['waited']} of them still waiting for room when their "
             "first forecast was written. Absolute error in seconds, median / p90; the forecast is the "
             "first one written into the job's status after submission.", "",
             "| what | forecast | baseline |", "|---|---|---|",
             f"| start, all jobs | {cell(r['start_all']['forecast'])} | "
             f"{cell(r['start_all']['now'])} (now) |",
             f"| start, jobs that waited | {cell(r['start_waiting']['forecast'])} | "
             f"{cell(r['start_waiting']['now'])} (now) |",
             f"| completion | {cell(r['finish']['forecast'])} | {cell(r['finish']['mean'])} (now + mean "
             f"run); {cell(r['finish']['hint'])} (now + the job's own hint) |", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--history", type=int, default=60)
    parser.add_argument("--scale", type=float, default=50.0, help="simulated seconds per bench second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the figures and per-job rows here")
    parser.add_argument("--no-publish", action="store_true", help="print; do not write docs/benchmarks.md")
    args = parser.parse_args()
    exit_on_sigterm()
    result = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    command = "python bench/forecast_accuracy.py " + " ".join(
        f"--{k} {getattr(args, k)}" for k in ("nodes", "jobs", "history", "scale", "seed"))
    text = section(result, command)
    print(text) if args.no_publish else publish(text)


if __name__ == "__main__":
    main()
