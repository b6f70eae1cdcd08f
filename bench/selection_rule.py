"""Does the score `netsched train` selects a kind by pick the kind that places jobs best?

    python bench/selection_rule.py [--jobs 1000] [--seed 0] [--write]

For every simulated world (netsched.datagen.simulator.PROFILES: the five under the simulator's own
law and the four whose law differs in form, netsched/datagen/README.md), its jobs in start order:
the older 70% are the history, the newer 30% the test. Two kinds of history:

- records: one row per job, the candidate it ran on (`chosen`: kube-scheduler's pick), as the
  operator records a cluster's finished jobs: no counterfactual candidate, so `train` cannot rank
  candidate sets and compares kinds by pairs of jobs;
- candidates: every candidate of every job, as the simulator writes them (top-1).

For each servable kind (netsched.training.train.SERVABLE): its cross-validation scores on the
history as `train` computes them (evaluate_kinds), and its placement on the test jobs when fitted
on the whole history: mean regret over their candidate sets (picked / best - 1). A rule is judged
by the test regret of the kind it picks against the lowest test regret of any kind ("excess").
Rules on records: pairwise accuracy between comparable jobs (`train`'s rule before node pairs),
node-pair accuracy (netsched.training.metrics: the first job of a pair predicted on both jobs'
nodes) unweighted, and weighted by how far apart the pair's true times are (`train`'s rule). On the
candidate history: `train`'s rule (from the physics kind, a top-1 or mean-regret lead beyond noise), and the
lowest cross-validated mean regret. Fits run on one thread. `--write` replaces the section
"Selection rule against placement regret" of docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from netsched.datagen.simulator import PROFILES, profile_config, simulate
from netsched.training.dataset import Dataset, dataset_from_rows
from netsched.training.metrics import score
from netsched.training.train import (
    SERVABLE,
    KindResult,
    evaluate_kinds,
    fit_kind,
    seconds,
    select,
    split_holdout,
)

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Selection rule against placement regret"
RULES = ("pairs", "node pairs, unweighted", "node pairs, weighted (train)", "top-1 (train)",
         "regret mean (CV)")
CANDIDATE_RULES = ("top-1 (train)", "regret mean (CV)")
TEST = 0.3


def pick_by(results: list[KindResult], rule: str) -> str:
    """The kind `rule` picks: `select` when the scores offer only what it reads (pairs), `select` itself
    (the rule `train` applies), or the servable kind with the lowest of a score."""
    if rule == "pairs":
        return select([replace(r, overall=replace(r.overall, node_pairs=0)) for r in results]).kind
    if rule == "node pairs, unweighted":
        return select([replace(r, overall=replace(r.overall, node_pair_weighted=r.overall.node_pair_accuracy))
                       for r in results]).kind
    if rule == "regret mean (CV)":
        return min((r for r in results if r.kind in SERVABLE), key=lambda r: r.overall.regret_mean).kind
    return select(results).kind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="simulated jobs per world (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="write the tables into the benchmarks history")
    args = parser.parse_args()
    started = time.perf_counter()
    threadpool_limits(1)
    detail = ["| world | history | kind | pair acc. (CV) | node-pair acc. (CV) | weighted (CV) | "
              "top-1 (CV) | regret mean (CV) | test regret mean | test top-1 |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    summary = ["| world | history | lowest test regret | " + " | ".join(f"{r} picks" for r in RULES) + " |",
               "|---|---|---|" + "---|" * len(RULES)]
    excess: dict[str, list[float]] = {rule: [] for rule in RULES}
    for k, world in enumerate(PROFILES):
        data = dataset_from_rows(list(simulate(profile_config(world, args.jobs, args.seed + k))), world)
        history, test = split_holdout(data, TEST)
        for name, train in (("records", history.take(history.chosen)), ("candidates", history)):
            results = evaluate_kinds(train, args.seed, SERVABLE)
            regret = {r.kind: _test_scores(r.kind, train, test, args.seed) for r in results}
            best = min(regret, key=lambda kind: regret[kind].regret_mean)
            for r in results:
                s, t = r.overall, regret[r.kind]
                detail.append(f"| {world} | {name} | {r.kind} | {s.pair_accuracy:.3f} | "
                              f"{s.node_pair_accuracy:.3f} | {s.node_pair_weighted:.3f} | {s.top1:.3f} | "
                              f"{s.regret_mean:.1%} | {t.regret_mean:.1%} | {t.top1:.1%} |")
            picks = {rule: pick_by(results, rule) for rule in RULES if (rule in CANDIDATE_RULES) == (
                name == "candidates")}
            for rule, kind in picks.items():
                excess[rule].append(regret[kind].regret_mean - regret[best].regret_mean)
            cells = [_named(picks.get(rule), regret, best) for rule in RULES]
            lowest = f"{best} ({regret[best].regret_mean:.1%})"
            summary.append(f"| {world} | {name} | {lowest} | {' | '.join(cells)} |")
        print(f"{world}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    totals = [f"- {rule}: picked the lowest-regret kind in {sum(e == 0 for e in v)} of {len(v)} worlds; "
              f"mean excess regret {np.mean(v):.2%}, worst {np.max(v):.2%}"
              for rule, v in excess.items() if v]
    command = f"python bench/selection_rule.py --jobs {args.jobs} --seed {args.seed}"
    intro = (f"Command: `nice -n 15 {command}` ({time.strftime('%Y-%m-%d')}, 2 cores shared, load "
             f"{os.getloadavg()[0]:.1f} at the end, {time.perf_counter() - started:.0f} s). {args.jobs} jobs "
             f"of 8 candidates per world, the older {1 - TEST:.0%} the history, the newer {TEST:.0%} the "
             "test (bench/selection_rule.py says what each column is). Excess: the test regret of the kind a "
             "rule "
             "picks less the lowest test regret of any kind, mean over the worlds.")
    section = "\n".join([SECTION, "", intro, "", *totals, "", *summary, "", *detail]) + "\n"
    if args.write:
        publish(section)
    else:
        print(section)
    return 0


def _test_scores(kind: str, train: Dataset, test: Dataset, seed: int):
    model = fit_kind(kind, train, seed)
    return score(test.y, seconds(model, test.X), test.sets())


def _named(kind: str | None, regret: dict, best: str) -> str:
    if kind is None:
        return "-"
    mark = "**" if kind == best else ""
    return f"{mark}{kind}{mark} ({regret[kind].regret_mean:.1%})"


if __name__ == "__main__":
    sys.exit(main())
