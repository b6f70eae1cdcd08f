"""The packer on the openb trace at 300, 1,200 and 5,000 nodes: what one plan wins by moves and by
evictions, and whether it keeps to its budget.

    python bench/trace_packer_scale.py [--sizes 300,1200,5000] [--budget 10] [--seed 0] [--trace-dir DIR]

Per size, the trace's GPU nodes (every 4th of them for 300; all 1,213 for 1,200; four copies for
5,000), filled BestFit with whole-GPU pods drawn from the trace until their GPU requests reach the
cluster's GPUs (netsched.datagen.trace_replay); the pods left pending then go to one packer plan
(`solve`, --budget seconds, one worker) under the default disruption policy, twice: with priority
from qos (Guaranteed > LS > Burstable > BE: moves and evictions only for higher-priority pods), and
with one priority for all and every pod a stateless replica (the policy's one case where pods move
for equal work). Writes the "Packer at trace scale (openb)" section of docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from netsched.datagen.openb import DEFAULT_DIR, TraceError, TraceNode, read_trace
from netsched.datagen.placement_policies import POLICIES
from netsched.datagen.trace_packer import GPU, NetschedReplay
from netsched.datagen.trace_replay import arrivals
from netsched.packing.policy import PRICED
from netsched.packing.problem import Problem
from netsched.packing.solver import solve

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Packer at trace scale (openb)"


def cluster(nodes: list[TraceNode], size: int) -> list[TraceNode]:
    if size <= len(nodes) // 2:
        return nodes[::max(1, round(len(nodes) / size))]
    copies = max(1, round(size / len(nodes)))
    return [replace(n, name=f"{n.name}-{c}") for c in range(copies) for n in nodes]


def row(label: str, problem: Problem, budget: float) -> str:
    gpus = {p.name: p.requests[GPU] for p in problem.pods}
    pending = [p for p in problem.pods if not p.running]
    started = time.monotonic()
    plan = solve(problem, budget, workers=1, policy=PRICED)
    wall = time.monotonic() - started
    changes = plan.changes(problem)
    placed = sum(gpus[k] for k, _ in changes["placements"])
    evicted = sum(gpus[k] for k, _ in changes["evictions"])
    asked = sum(gpus[p.name] for p in pending)
    return (f"| {label} | {len(problem.nodes)} | {len(problem.pods)} | {len(pending)} ({asked}) "
            f"| {len(changes['placements'])} (+{placed}) | {len(changes['moves'])} "
            f"| {len(changes['evictions'])} (-{evicted}) | {placed - evicted:+d} | {wall:.2f} "
            f"| {plan.source} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="300,1200,5000")
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace-dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()
    try:
        nodes, pods = read_trace(args.trace_dir)
    except TraceError as exc:
        print(f"trace_packer_scale: {exc}", file=sys.stderr)
        return 2
    whole = [p for p in pods if not p.shares_gpu]
    command = (f"python bench/trace_packer_scale.py --sizes {args.sizes} --budget {args.budget:g} "
               f"--seed {args.seed}")
    lines = [SECTION, "",
             f"`{command}` ({time.strftime('%Y-%m-%d')}): whole-GPU pods of the openb trace filled BestFit "
             f"to 100% of the GPUs, then one plan of {args.budget:g} s (one worker) for the pods left "
             "pending, "
             "default disruption policy. GPUs: placed by the plan (+), evicted by it (-), net.", "",
             "| priorities | nodes | pods | pending (GPUs) | placed (GPUs) | moved | evicted (GPUs) "
             "| net GPUs | solve s | answer |", "|---|---|---|---|---|---|---|---|---|---|"]
    for size in (int(s) for s in args.sizes.split(",") if s):
        chosen = cluster(nodes, size)
        fill = NetschedReplay(chosen, args.seed, packer=False)
        fill.choose = POLICIES["BestFit"]([])
        fill.run(arrivals(whole, sum(n.gpus for n in chosen), args.seed, limit=1.0))
        problem = fill.problem()
        lines.append(row("from qos", problem, args.budget))
        print(lines[-1], flush=True)
        equal = replace(problem, pods=tuple(replace(p, priority=0, stateless=True) for p in problem.pods))
        lines.append(row("one, stateless", equal, args.budget))
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.no_publish:
        print(text)
    else:
        publish(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
