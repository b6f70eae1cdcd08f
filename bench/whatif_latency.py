"""How long `netsched whatif` takes against a live cluster of --nodes KWOK nodes, as a user runs it.

    python bench/whatif_latency.py [--nodes 1000] [--fill 0.99] [--runs 5]

One dev-cluster (its operator, extender and kube-scheduler). GPUJobs of 8 replicas × 8 GPUs, each
expected to run an hour, fill --fill of the nodes; then `netsched whatif` runs --runs times as its
own process (`python -m netsched whatif -f job.yaml`) for two jobs: one that fits in the free room
and one that does not (the forecast plays the cluster forward and the packer solves a dry run, its
budget 1 s). Prints wall time per run (process start to exit, imports included) and, from one run
in this process, how it splits between reading the cluster and answering. --baseline DIR: a checkout
of other code (e.g. main) whose runs alternate with this code's on the same cluster, for a before and
after from the same machine state.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client

from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.wait import poll
from netsched.foresight.whatif import Cluster, as_submitted, history, what_if
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import running

sys.path.insert(0, str(Path(__file__).parent))
from gang_locality import code  # noqa: E402
from report import exit_on_sigterm, publish  # noqa: E402

SECTION = "## whatif latency"
ROOT = Path(__file__).resolve().parents[1]  # this checkout: the code measured
NS = "whatif-bench"
HOUR = {"expectedDurationSeconds": 3600}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--fill", type=float, default=0.99, help="share of the nodes the running jobs hold")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", metavar="DIR", help="a checkout whose whatif runs alternate with these")
    parser.add_argument("--no-publish", action="store_true")
    args = parser.parse_args()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory() as d, running(DevCluster(
            directory=Path(d), nodes=args.nodes, zones=4, racks_per_zone=max(1, args.nodes // 80),
            progress=lambda m: print(m, file=sys.stderr))) as cluster:
        result = measure(cluster, Path(d), args)
    text = section(result, args)
    print(text) if args.no_publish else publish(text)


def measure(cluster: DevCluster, d: Path, args: argparse.Namespace) -> dict:
    api = cluster.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": NS}})
    poll(lambda: core.read_namespaced_service_account("default", NS), 60, "the default SA")
    jobs = int(args.nodes * args.fill) // 8
    for i in range(jobs):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, make_gpujob(
            f"fill-{i}", replicas=8, gpus=8, duration="3600s", manifest=True, workload=HOUR))
    poll(lambda: _running(custom) == jobs, 1800, f"{jobs} filler jobs to run", interval=5)
    free_nodes = args.nodes - jobs * 8
    client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": "bench-urgent"}, "value": 1000})
    cases = {"fits": make_gpujob("fits", replicas=2, gpus=8, manifest=True, workload=HOUR),
             "waits": make_gpujob("waits", replicas=free_nodes + 8, gpus=8, manifest=True, workload=HOUR,
                                  priorityClassName="bench-urgent")}
    out: dict = {"nodes": args.nodes, "jobs": jobs, "pods": jobs * 8, "free_nodes": free_nodes,
                 "code": code()}
    for name, body in cases.items():
        path = d / f"{name}.json"
        path.write_text(json.dumps(body))
        walls: dict[Path, list[float]] = {ROOT: [], **({Path(args.baseline): []} if args.baseline else {})}
        for _ in range(args.runs):
            for checkout, times in walls.items():
                t = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "netsched", "whatif", "-f", str(path), "-n", NS,
                                       "-o", "json", f"--kubeconfig={cluster.kubeconfig}"],
                                      capture_output=True, text=True, check=True, cwd=checkout,
                                      env={**os.environ, "PYTHONPATH": str(checkout)})
                times.append(time.perf_counter() - t)
                if checkout == ROOT:
                    answer = json.loads(done.stdout)
        t = time.perf_counter()
        state = Cluster.read(api)
        read = time.perf_counter() - t
        t = time.perf_counter()
        what_if(state, as_submitted(body, NS), history(state, None))
        answered = time.perf_counter() - t
        out[name] = {"walls": walls.pop(ROOT), "baseline": next(iter(walls.values()), None),
                     "read": read, "answer": answered, "fits": answer["schedulable"]["fits"],
                     "plan": (answer.get("packer") or {}).get("wouldPlan"),
                     "start": answer.get("predictedStartTime") is not None}
        c = out[name]
        print(f"{name}: wall {statistics.median(c['walls']):.2f} s median, max {max(c['walls']):.2f} s; "
              f"read {read:.2f} s, answer {answered:.2f} s" + (
                  f"; baseline {statistics.median(c['baseline']):.2f} s median" if c["baseline"] else ""),
              file=sys.stderr)
    return out


def _running(custom: client.CustomObjectsApi) -> int:
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)["items"]
    return sum((j.get("status") or {}).get("phase") == "Running" for j in listed)


def section(r: dict, args: argparse.Namespace) -> str:
    lines = [SECTION, "",
             f"`python bench/whatif_latency.py --nodes {args.nodes} --fill {args.fill} --runs {args.runs}"
             f"{' --baseline ' + args.baseline if args.baseline else ''}` "
             f"(code {r['code']}): {r['nodes']} KWOK nodes heartbeating, {r['jobs']} running GPUJobs "
             f"({r['pods']} pods) with their operator, extender and scheduler; `netsched whatif` as its own "
             "process, wall time from start to exit (imports included), and one in-process run split into "
             "reading the cluster and answering.", "",
             "| job | fits now | packer dry run | wall median / max (s) | read (s) | answer (s) |"
             + (" baseline wall median / max (s) |" if args.baseline else ""),
             "|---|---|---|---|---|---|" + ("---|" if args.baseline else "")]
    for name in ("fits", "waits"):
        c = r[name]
        lines.append(f"| {name} | {'yes' if c['fits'] else 'no'} | "
                     f"{'plan' if c['plan'] else 'no plan' if c['plan'] is False else '-'} | "
                     f"{statistics.median(c['walls']):.2f} / {max(c['walls']):.2f} | {c['read']:.2f} | "
                     f"{c['answer']:.2f} |" + (f" {statistics.median(c['baseline']):.2f} / "
                                               f"{max(c['baseline']):.2f} |" if c["baseline"] else ""))
    return "\n".join(lines + [""])


if __name__ == "__main__":
    main()
