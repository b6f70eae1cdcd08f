"""The packer against the default scheduler on the "Priority Matters" grid, and at scale.

    python bench/packing_bench.py [--seeds 5] [--scale 100,500,1000]

Grid: 4/8/16/32 nodes x 4/8 pods per node x 1/2/4 priority classes x utilisation
0.90/0.95/1.00/1.05 (netsched/packing/scenarios.py); per cell the first --seeds seeds in
which the default-scheduler emulation leaves pods pending (the reference used 100). Every
scenario is solved at a 1 s budget; the 32-node, 4-class cells also at 10 s. Outcomes, as
the reference counts them, compare pods placed per priority tier (highest first) with what
the default left: better and proven optimal, better but not proven, default proven optimal,
no improvement, failure (CP-SAT found no solution in time; the packer then returns the
current placement). Wall time is the whole `solve()` call. Then one scenario each at
--scale nodes (8 pods per node, GPUs too) at 1 s and 10 s. Writes the "Packer" and "Packer at
scale" sections of docs/benchmarks.md (`--seeds 0` skips the grid, `--scale ""` the scale run).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from netsched.packing.scenarios import failing, scenario
from netsched.packing.snapshot import Snapshot
from netsched.packing.solver import current, solve, tiers

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Packer"
SCALE_SECTION = "## Packer at scale"
OUTCOMES = ("better, optimal", "better, not proven", "default proven optimal", "no improvement", "failure")


def placed_by_tier(snap: Snapshot, placement: dict) -> tuple[int, ...]:
    return tuple(sum(placement.get(p.name) is not None for p in snap.pods if p.priority >= t)
                 for t in tiers(snap))


def utilisation(snap: Snapshot, placement: dict) -> float:
    """Mean over CPU and memory of requested / capacity, in percent."""
    shares = []
    for r in ("cpu", "memory"):
        cap = sum(n.capacity.get(r, 0) for n in snap.nodes)
        used = sum(p.requests.get(r, 0) for p in snap.pods if placement.get(p.name))
        shares.append(100 * used / cap)
    return sum(shares) / len(shares)


def run_one(snap: Snapshot, budget: float) -> dict:
    t0 = time.monotonic()
    plan = solve(snap, budget)
    wall = time.monotonic() - t0
    before, after = placed_by_tier(snap, current(snap)), placed_by_tier(snap, plan.placement)
    found = any(s.get("status") in ("OPTIMAL", "FEASIBLE", "improved", "unchanged") for s in plan.stages)
    if after > before:
        outcome = OUTCOMES[0] if plan.proven_optimal else OUTCOMES[1]
    elif not found:
        outcome = OUTCOMES[4]
    else:
        outcome = OUTCOMES[2] if plan.proven_optimal else OUTCOMES[3]
    changes = plan.changes(snap)
    return {"outcome": outcome, "wall": wall, "util": utilisation(snap, plan.placement) - utilisation(
        snap, current(snap)), "moves": len(changes["moves"]), "evictions": len(changes["evictions"]),
        "placed": len(changes["placements"])}


def failing_seeds(nodes: int, ppn: int, classes: int, util: float, want: int) -> list[Snapshot]:
    out = []
    for seed in range(400):
        snap = scenario(nodes, ppn, classes, util, seed)
        if failing(snap):
            out.append(snap)
            if len(out) == want:
                break
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--scale", default="100,500,1000")
    args = parser.parse_args()
    results: dict[tuple, list[dict]] = defaultdict(list)  # (budget, classes, nodes) -> runs
    grid = itertools.product((4, 8, 16, 32), (4, 8), (1, 2, 4), (0.90, 0.95, 1.00, 1.05))
    for nodes, ppn, classes, util in grid if args.seeds > 0 else ():
        for snap in failing_seeds(nodes, ppn, classes, util, args.seeds):
            results[(1.0, classes, nodes)].append(run_one(snap, 1.0))
            if nodes == 32 and classes == 4:
                results[(10.0, classes, nodes)].append(run_one(snap, 10.0))
        print(f"{nodes} nodes x {ppn} pods, {classes} classes, utilisation {util:.2f}: done", file=sys.stderr)
    scale = []
    for n in (int(x) for x in args.scale.split(",") if x):
        snap = next(s for seed in range(50) if failing(s := scenario(n, 8, 4, 1.0, seed, gpus=True)))
        for budget in (1.0, 10.0):
            pending = sum(not p.running for p in snap.pods)
            scale.append((n, len(snap.pods), pending, budget, run_one(snap, budget)))
            print(f"scale {n} nodes at {budget:g} s: {scale[-1][-1]}", file=sys.stderr)
    if results:
        section = report(args, results)
        publish(section)
    if scale:
        section = scale_report(args, scale)
        publish(section)
    return 0


def _row(label: str, runs: list[dict]) -> str:
    counts = Counter(r["outcome"] for r in runs)
    pct = [f"{100 * counts[o] / len(runs):.1f}%" for o in OUTCOMES]
    walls = [r["wall"] for r in runs]
    return (f"| {label} | {len(runs)} | {' | '.join(pct)} | "
            f"{statistics.mean(walls):.2f} / {max(walls):.2f} | "
            f"{statistics.mean(r['util'] for r in runs):+.2f} |")


def report(args, results: dict) -> str:
    head = "| scenarios | n | " + " | ".join(OUTCOMES) + " | wall s mean / max | utilisation change, points |"
    rows = []
    for budget in (1.0, 10.0):
        sizes = {n for (b, _, n) in results if b == budget}
        for classes in (1, 2, 4) if len(sizes) > 1 else ():  # 10 s runs only the 32-node cells
            runs = [r for (b, c, _), rs in results.items() if b == budget and c == classes for r in rs]
            if runs:
                rows.append(_row(f"{budget:g} s, {classes} class(es), all sizes", runs))
        for (b, c, n), runs in sorted(results.items()):
            if b == budget and c == 4:
                rows.append(_row(f"{budget:g} s, 4 classes, {n} nodes", runs))
    four = [r for (b, c, _), rs in results.items() if b == 1.0 and c == 4 for r in rs]
    better = sum(r["outcome"].startswith("better") for r in four) / len(four)
    covered = sum(r["outcome"] in OUTCOMES[:3] for r in four) / len(four)
    return "\n".join([
        SECTION, "",
        f"Command: `python bench/packing_bench.py --seeds {args.seeds} --scale ''` "
        f"({time.strftime('%Y-%m-%d')}, 2 cores, CP-SAT with 2 workers).", "",
        f"The reference grid (`netsched/packing/scenarios.py`), {args.seeds} failing seeds per cell (the "
        "reference used 100). Outcomes compare pods placed per priority tier with what the default-scheduler "
        "emulation left.", "",
        head, "|" + "---|" * (len(OUTCOMES) + 4),
        *rows, "",
        f"At 1 s over the 4-class failing scenarios: better than the default in **{better:.1%}** (reference: "
        f"44.2% at 1 s, 73.6% at 10 s), better or default proven optimal in **{covered:.1%}** (reference: "
        "63.3% at 1 s, 93.4% at 10 s: its better share plus its default-proven-optimal share, 19.1% and "
        f"19.8%). Not the same experiment: {args.seeds} seeds per cell against the reference's 100, our "
        "scenario generator and an emulated default scheduler (priority queue and preemption), not the "
        "real one.", "",
    ])


def scale_report(args, scale: list) -> str:
    rows = [f"| {n} | {pods} | {pending} | {b:g} s | {r['wall']:.2f} | {r['placed']} | "
            f"{r['moves']} | {r['evictions']} | {r['outcome']} | {r['util']:+.2f} |"
            for n, pods, pending, b, r in scale]
    return "\n".join([
        SCALE_SECTION, "",
        f"Command: `python bench/packing_bench.py --seeds 0 --scale {args.scale}` "
        f"({time.strftime('%Y-%m-%d')}, 2 cores, CP-SAT with 2 workers).", "",
        "One failing scenario per size, 8 pods per node, 4 classes, utilisation 1.0, pods asking "
        "1-4 GPUs as well as CPU and memory; above 20,000 placement variables the packer solves pieces "
        "(the highest-priority pending pods and the nodes where room could be made for them).", "",
        "| nodes | pods | pending | budget | wall s | placed | moved | evicted | outcome | "
        "utilisation change |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows, "",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
