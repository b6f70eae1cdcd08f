"""Every simulated world, left out and time-ordered: does the kind `netsched train` ships pick good nodes?

    python bench/loco.py [--jobs 400] [--seed 0] [--split both|loco|within] [--write]

The worlds are the simulator's profiles (netsched.datagen.simulator.PROFILES): five under its own
completion-time law (default, inference-edge, training-hpc, legacy, mixed: GPUs, NICs, links, shape
and job mix differ) and four whose law differs in form (affinity, cliff, cached, stragglers:
netsched/datagen/README.md). Two splits:

- leave-one-cluster-out (`loco`): each world held out in turn, every policy fitted on the other
  eight's jobs and judged on all of its jobs: what a new install is;
- time-ordered (`within`): each world's jobs in start order, the older 70% trained on, the newer
  30% judged: a cluster's own history.

Policies, each picking the candidate it ranks first: `netsched`, the kind `netsched train` ships
(its cross-validation and selection rule on the training rows, netsched.training.train: by-site
folds hold out one training world at a time in `loco`, one zone in `within`), fitted on all of
them; each servable kind (train.SERVABLE) fitted the same way whatever the pick; `20-line HGBR`,
scikit-learn's HistGradientBoostingRegressor at its defaults on the same columns, the four GPU
capability columns replaced by one 0/1 column per GPU product of the training rows, log seconds as
target (`baseline`, 20 lines); and kube-scheduler's default scoring, for scale.

Scores over the judged jobs' candidate sets: top-1 (picked the truly fastest), p95 regret (picked /
best - 1) and the mean completion time of the picks over the oracle's (the truly fastest every
time). Each table ends with the targets: the shipped kind's top-1 at least the plain kind's and the
baseline's, p95 regret at most 30%, mean JCT within 5% of the oracle's.

The oracle knows each run's realised time, per-run noise included: a run's 4% lognormal noise and, in
`stragglers`, whether this run straggles, which no feature shows and no predictor can know. So
beside it, the `expectation oracle` picks by the time each candidate can be expected to take: the
same world simulated without per-run noise (SimConfig.node_noise 0: the same jobs, nodes and rows;
in `stragglers` each node's expected straggle factor, laws.expected_straggle), its picks judged by
the realised times. Its JCT over the oracle's is what is out of any model's reach on that world;
the summary gives it and the shipped kind's JCT over it. `--write` replaces the
section "Every world, left out and time-ordered" of docs/benchmarks-history.md. Fits run on one
thread: on a shared 2-core machine two OpenMP threads that spin-wait made one gradient-boosting fit
30 times slower (a fit's result does not depend on its thread count).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from netsched.datagen.simulator import PROFILES, profile_config, simulate
from netsched.models.features import INDEX, SCHEMA_VERSION
from netsched.models.gpus import GPU_FEATURES
from netsched.training.dataset import Dataset, concat, dataset_from_rows
from netsched.training.fitting import PLAIN
from netsched.training.metrics import Scores, score
from netsched.training.policies import default_scheduler_cost
from netsched.training.train import SERVABLE, evaluate_kinds, fit_kind, seconds, select, split_holdout

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Every world, left out and time-ordered"
WITHIN_TEST = 0.3  # within: the newest share of a world's jobs, tested on
SPLITS = {"loco": "leave-one-cluster-out", "within": "time-ordered within the cluster"}
BASELINE = "20-line HGBR, GPU one-hot"
EXPECTED = "expectation oracle"
GPU_COLUMNS = [INDEX[f] for f in GPU_FEATURES]
P95_TARGET, JCT_TARGET = 0.30, 1.05


def baseline(train: Dataset, test: Dataset, seed: int) -> np.ndarray:
    """The 20-line model: gradient boosting at scikit-learn's defaults, GPU as a one-hot."""
    products = np.unique(train.X[:, GPU_COLUMNS], axis=0)

    def one_hot(X: np.ndarray) -> np.ndarray:
        gpu = X[:, GPU_COLUMNS]
        flags = [(gpu == p).all(axis=1).astype(np.float64) for p in products]
        return np.column_stack([np.delete(X, GPU_COLUMNS, axis=1), *flags])

    model = HistGradientBoostingRegressor(random_state=seed).fit(one_hot(train.X), np.log(train.y))
    return model.predict(one_hot(test.X))


def judged(train: Dataset, test: Dataset, expected: Dataset, seed: int) -> tuple[str, dict[str, Scores]]:
    """The kind netsched ships on `train`, and every policy's scores on `test` (`expected`: the same
    rows with their noise-free times, the expectation oracle's costs)."""
    if not np.array_equal(expected.X, test.X, equal_nan=True):
        raise SystemExit("the noise-free twin of a world differs in its rows: the simulator's draws moved")
    shipped = select(evaluate_kinds(train, seed, SERVABLE)).kind
    costs = {kind: seconds(fit_kind(kind, train, seed), test.X) for kind in SERVABLE}
    costs = {"netsched": costs[shipped], **costs, BASELINE: baseline(train, test, seed),
             "default scheduler": default_scheduler_cost(test), EXPECTED: expected.y}
    return shipped, {policy: score(test.y, cost, test.sets()) for policy, cost in costs.items()}


def table(world: str, split: str, shipped: str, scores: dict[str, Scores], oracle: Scores) -> list[str]:
    lines = [f"**{world}, {SPLITS[split]}** ({scores['netsched'].sets} jobs judged)", "",
             "| policy | top-1 | regret p95 | mean JCT / oracle |", "|---|---:|---:|---:|"]
    for policy, s in scores.items():
        name = f"netsched ships {shipped}" if policy == "netsched" else policy
        lines.append(f"| {name} | {s.top1:.1%} | {s.regret_p95:.1%} | {s.mean_jct / oracle.mean_jct:.3f} |")
    return [*lines, "", f"Targets: {', '.join(targets(scores, oracle))}.", ""]


def targets(scores: dict[str, Scores], oracle: Scores) -> list[str]:
    s = scores["netsched"]
    checks = {f"top-1 >= {PLAIN}'s": s.top1 >= scores[PLAIN].top1,
              "top-1 >= the 20-line HGBR's": s.top1 >= scores[BASELINE].top1,
              f"p95 regret <= {P95_TARGET:.0%}": s.regret_p95 <= P95_TARGET,
              f"mean JCT within {JCT_TARGET - 1:.0%} of the oracle's":
                  s.mean_jct <= JCT_TARGET * oracle.mean_jct}
    return [f"{name} {'met' if ok else '**missed**'}" for name, ok in checks.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=400, help="simulated jobs per world (default 400)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("both", *SPLITS), default="both")
    parser.add_argument("--write", action="store_true", help="write the tables into the benchmarks history")
    args = parser.parse_args()
    started = time.perf_counter()
    threadpool_limits(1)
    data = {name: dataset_from_rows(list(simulate(profile_config(name, args.jobs, args.seed + k))), name)
            for k, name in enumerate(PROFILES)}
    noise_free = {name: dataset_from_rows(list(simulate(profile_config(name, args.jobs, args.seed + k,
                                                                       node_noise=0.0))), name)
                  for k, name in enumerate(PROFILES)}
    splits = list(SPLITS) if args.split == "both" else [args.split]
    lines: list[str] = []
    summary = ["| world | split | shipped kind | top-1 | p95 regret | JCT / oracle | expectation "
               "oracle JCT / oracle | JCT / expectation oracle | plain kind top-1 | 20-line top-1 | "
               "targets missed |",
               "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for split in splits:
        for world in data:
            if split == "within":
                train, test = split_holdout(data[world], WITHIN_TEST)
                expected = split_holdout(noise_free[world], WITHIN_TEST)[1]
            else:
                train, test = concat([d for name, d in data.items() if name != world]), data[world]
                expected = noise_free[world]
            shipped, scores = judged(train, test, expected, args.seed)
            oracle = score(test.y, test.y, test.sets())
            lines += table(world, split, shipped, scores, oracle)
            s, floor = scores["netsched"], scores[EXPECTED]
            missed = [t.removesuffix(" **missed**") for t in targets(scores, oracle)
                      if t.endswith("**missed**")]
            summary.append(f"| {world} | {split} | {shipped} | {s.top1:.1%} | {s.regret_p95:.1%} | "
                           f"{s.mean_jct / oracle.mean_jct:.3f} | {floor.mean_jct / oracle.mean_jct:.3f} | "
                           f"{s.mean_jct / floor.mean_jct:.3f} | {scores[PLAIN].top1:.1%} | "
                           f"{scores[BASELINE].top1:.1%} | {'; '.join(missed) or 'none'} |")
            print(f"{world} {split}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr,
                  flush=True)
    command = f"python bench/loco.py --jobs {args.jobs} --seed {args.seed}" + (
        f" --split {args.split}" if args.split != "both" else "")
    intro = (f"Command: `OMP_NUM_THREADS=1 nice -n 15 {command}` ({time.strftime('%Y-%m-%d')}, 2 cores "
             f"shared, load {os.getloadavg()[0]:.1f} at the end, feature schema v{SCHEMA_VERSION}, "
             f"{time.perf_counter() - started:.0f} s). {args.jobs} jobs of 8 candidates per world; "
             "bench/loco.py says what each policy is.")
    section = "\n".join([SECTION, "", intro, "", *summary, "", *lines]) + "\n"
    if args.write:
        publish(section)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
