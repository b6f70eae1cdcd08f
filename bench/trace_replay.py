"""The public Alibaba GPU trace (openb, cluster-trace-gpu-v2023) replayed as "Beware of Fragmentation"
(USENIX ATC '23) does, through netsched and the published placement policies.

    python bench/trace_replay.py [--seeds 10] [--trace-dir ../shared/openb] [--budget 10] [--policies A,B]
                                 [--no-publish]

Per seed, the same pods for every policy: drawn from the trace with replacement until their GPU
requests reach 1.3x the cluster's 6,212 GPUs (1,213 nodes), submitted one by one, nothing leaving
(netsched.datagen.trace_replay). Policies (netsched.datagen.placement_policies): Random, DotProd,
Packing, Clustering, BestFit, FGD written here from the paper's definitions, kube-scheduler's default scoring,
netsched's scoring alone, and netsched as served: its scoring plus the packer (default disruption
policy, --budget seconds a plan) making room at each measured load for the pods left waiting
(netsched.datagen.trace_packer; priority from qos: Guaranteed > LS > Burstable > BE).

Two pod sets: the whole-GPU subset (pods that share no GPU: netsched's scope) and the full default
trace (44% of its GPU pods ask a share of one GPU; netsched asks a whole GPU for them, the others
share). Measured: the GPU allocation ratio (GPU requests of the placed pods over the cluster's GPUs)
at 90/95/100/110/130% arrived, GPUs unallocated at 100%, pods moved and evicted, wall time per run;
means over the seeds, and the authors' figures at 100% beside ours. Writes the "Trace replay (openb)"
section of docs/benchmarks-history.md. The trace is read from --trace-dir, never copied.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from netsched.datagen.gpu_cluster import Ask
from netsched.datagen.openb import DEFAULT_DIR, TraceError, TraceNode, TracePod, read_trace
from netsched.datagen.placement_policies import POLICIES
from netsched.datagen.trace_packer import NetschedReplay
from netsched.datagen.trace_replay import LOADS, Outcome, Replay, arrivals

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Trace replay (openb)"
# the authors' result files, default trace, 100% arrived, mean of 10 seeds
PAPER = {"FGD": 95.23, "BestFit": 92.86, "Packing": 91.78, "Clustering": 91.65, "DotProd": 90.62,
         "Random": 86.30}
NETSCHED = "netsched (scoring + packer)"


def run_seed(nodes: list[TraceNode], pods: list[TracePod], seed: int, budget: float,
             names: list[str]) -> list[Outcome]:
    gpus = sum(n.gpus for n in nodes)
    sequence = arrivals(pods, gpus, seed)
    asks = [Ask.of(p) for p in pods]
    out = []
    for name in names:
        replay: Replay
        if name == NETSCHED:
            replay = NetschedReplay(nodes, seed, budget, name=name)
        elif name == "netsched scoring alone":
            replay = NetschedReplay(nodes, seed, budget, name=name, packer=False)
        else:
            replay = Replay(name, nodes, POLICIES[name](asks), seed)
        out.append(replay.run(sequence))
        print(f"  seed {seed} {name}: {100 * out[-1].ratio[1.0]:.2f}% at 100%, "
              f"{out[-1].seconds:.1f} s", flush=True)
    return out


def table(title: str, outcomes: dict[str, list[Outcome]], paper: bool) -> list[str]:
    loads = " | ".join(f"{round(100 * x)}%" for x in LOADS)
    lines = [f"{title}", "", f"| policy | {loads} | unallocated GPUs at 100% | moved | evicted | "
             f"wall s per run |" + (" authors at 100% | ours - theirs |" if paper else ""),
             "|---|" + "---|" * (len(LOADS) + 4) + ("---|---|" if paper else "")]
    for name, runs in outcomes.items():
        ratio = [statistics.mean(r.ratio[x] for r in runs) * 100 for x in LOADS]
        row = (f"| {name} | " + " | ".join(f"{v:.2f}" for v in ratio) +
               f" | {statistics.mean(r.unallocated[1.0] for r in runs):.0f}"
               f" | {statistics.mean(r.moved for r in runs):.1f}"
               f" | {statistics.mean(r.evicted for r in runs):.1f}"
               f" | {statistics.mean(r.seconds for r in runs):.1f} |")
        if paper:
            theirs = PAPER.get(name)
            row += f" {theirs:.2f} | {ratio[2] - theirs:+.2f} |" if theirs else " - | - |"
        lines.append(row)
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trace-dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--budget", type=float, default=10.0, help="the packer's budget per plan, seconds")
    ap.add_argument("--policies", default="", help="only these, comma-separated (default: all)")
    ap.add_argument("--no-publish", action="store_true")
    args = ap.parse_args()
    try:
        nodes, pods = read_trace(args.trace_dir)
    except TraceError as exc:
        print(f"trace_replay: {exc}", file=sys.stderr)
        return 2
    names = ["Random", "DotProd", "Packing", "Clustering", "BestFit", "FGD", "kube default",
             "netsched scoring alone", NETSCHED]
    if args.policies:
        names = [n for n in names if n in args.policies.split(",")]
    started = time.monotonic()
    sections = []
    whole = [p for p in pods if not p.shares_gpu]
    for title, chosen, paper in (("Whole-GPU subset (pods sharing no GPU)", whole, False),
                                 ("Full default trace (shares of one GPU included)", pods, True)):
        print(title, flush=True)
        outcomes: dict[str, list[Outcome]] = defaultdict(list)
        for seed in range(args.seeds):
            for o in run_seed(nodes, chosen, seed, args.budget, names):
                outcomes[o.policy].append(o)
        sections += table(f"**{title}**, {len(chosen)} pods in the file:", outcomes, paper) + [""]
    gpus = sum(n.gpus for n in nodes)
    text = "\n".join([
        SECTION, "",
        f"`python bench/trace_replay.py --seeds {args.seeds} --budget {args.budget:g}` "
        f"({time.strftime('%Y-%m-%d')}, {time.monotonic() - started:.0f} s): the openb trace's "
        f"{len(nodes)} GPU nodes ({gpus} GPUs), pods drawn with replacement until their GPU requests reach "
        f"1.3x the GPUs, the same pods for every policy, seeds 0..{args.seeds - 1}; GPU allocation ratio "
        "(%) against the arrived load, means over the seeds.", "", *sections])
    if args.no_publish:
        print(text)
    else:
        publish(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
