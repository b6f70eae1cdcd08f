"""Two extenders side by side on one live cluster: this checkout's and another's, holds alternating.

    git worktree add /tmp/before <commit>
    python bench/live_ab.py --against /tmp/before [--nodes 5000] [--pairs 400] [--rounds 6] [--heuristic]

A change to the request path is measured against the code before it under the same churn: one
dev-cluster with KWOK nodes heartbeating (live_latency.py's cluster and requests), both extenders
started (`--against`'s with PYTHONPATH pointing at that checkout), then holds of filter +
prioritize pairs that alternate A B B A ..., so both see the same control-plane load over the run.
Prints each hold's p50 / p99 and the control plane's cores, then all holds of each arm together
(p50 / p99 / p99.9 over filter and prioritize). Writes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from netsched.devcluster import processes
from netsched.devcluster.devcluster import DevCluster

sys.path.insert(0, str(Path(__file__).parent))
from live_latency import MODEL, hold, live_cluster, start_extender  # noqa: E402
from report import exit_on_sigterm  # noqa: E402


def started(cluster: DevCluster, model: Path | None,
            pythonpath: Path | None) -> tuple[processes.Process, int]:
    """An extender from this checkout, or from `pythonpath`'s (its netsched package shadows ours)."""
    saved = os.environ.get("PYTHONPATH")
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = str(pythonpath)
    try:
        return start_extender(cluster, model)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="another checkout of netsched")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=400, help="filter + prioritize pairs per hold")
    parser.add_argument("--rounds", type=int, default=6, help="holds of each arm")
    parser.add_argument("--heuristic", action="store_true", help="score by the heuristic, not the model")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not (args.against / "netsched" / "__init__.py").is_file():
        parser.error(f"--against {args.against}: no netsched package there (give a checkout's root)")
    exit_on_sigterm()
    model = None if args.heuristic else MODEL
    arms = {"this checkout": None, f"{args.against}": args.against.resolve()}
    with live_cluster(args.nodes, args.seed) as (cluster, state, bodies):
        control_plane = {name: info["pid"] for name, info in state["components"].items()}
        running: dict[str, tuple[processes.Process, int]] = {}
        try:
            for arm, path in arms.items():
                running[arm] = started(cluster, model, path)
            samples: dict[str, list[np.ndarray]] = {arm: [] for arm in arms}
            for rnd in range(args.rounds):
                for arm in list(arms) if rnd % 2 == 0 else list(arms)[::-1]:
                    proc, port = running[arm]
                    times = hold(proc, port, bodies, args.pairs, control_plane)
                    both = np.concatenate([times["filter"], times["prioritize"]]) * 1000
                    samples[arm].append(both)
                    p50, p99 = np.percentile(both, [50, 99])
                    print(f"round {rnd + 1} {arm}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
                          f"control plane {times['control_plane']:.2f} cores", flush=True)
        finally:
            for proc, _ in running.values():
                processes.stop(proc.pid)
    scorer = "heuristic" if args.heuristic else "model"
    print(f"\n{args.nodes:,} nodes, {scorer}, filter and prioritize together, {args.rounds} holds of "
          f"{args.pairs} pairs each:")
    for arm, held in samples.items():
        p50, p99, p999 = np.percentile(np.concatenate(held), [50, 99, 99.9])
        print(f"  {arm}: p50 {p50:.2f} / p99 {p99:.2f} / p99.9 {p999:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
