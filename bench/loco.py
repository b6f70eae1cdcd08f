"""Leave-one-cluster-out: does the completion-time model pick good nodes on a cluster it never saw?

    python bench/loco.py [--jobs 1500] [--seed 0] [--write]
    python bench/loco.py --within [--jobs 1500] [--seed 0] [--write]

The simulator (netsched.datagen.simulator.PROFILES) draws five clusters that differ in GPU
models (several found in one cluster only: H200, L4, A10, T4, A40, A100-40GB), NIC and
inter-zone link speeds, shape (48-96 nodes, 2-5 zones) and job mix. For each cluster in turn,
every policy is fitted on the other four and judged on all of its jobs; nothing is tuned on
the held-out cluster. Policies, each picking the candidate it ranks first:

- default: kube-scheduler's scoring (least allocated + balanced), from CPU and memory load;
- heuristic: the extender's topology heuristic (netsched.training.policies.heuristic_cost);
- network-blind: netsched's model fitted on the same rows, network columns removed;
- plain HGBR: scikit-learn's HistGradientBoostingRegressor at its defaults on every raw
  column, log seconds as target, one model over (job, candidate) rows;
- plain HGBR, GPU one-hot: the same with the four GPU capability columns replaced by one 0/1
  column per GPU product of the training rows (a product is told apart by its numbers; one
  the training rows never held is all zeros): what the history knows of each GPU, nothing of a
  new one;
- physics, no product offsets: hist_gradient_boosting_physics without the offsets per GPU
  product and workload kind (netsched.models.products), as it was before them;
- netsched: the kind `netsched train --clusters-by-file` picks by its own cross-validation and
  selection rule on the training clusters (netsched.training.train: evaluate_kinds over the
  servable kinds, the only ones it may pick, then select; its by-site folds hold out one training
  cluster at a time), fitted on all of them; the table names the kind;
- two-part: the kind hist_gradient_boosting whatever the pick (the shipped model's kind), for
  comparison;
- noise-free oracle: not a policy but the ceiling. It picks by the true completion time without
  the simulator's per-candidate noise (the same clusters simulated again with node_noise 0: the
  same draws, that factor 1), which no feature shows; no model can expect to pick better.

`--within` judges each cluster on its own history instead: its jobs in start order, the older
70% to train on, the newer 30% to test on (netsched picking its kind as `netsched train` does
on one cluster's records, by cross-validation by time and by zone); the oracle is left out.

Scores: top-1 (picked the truly fastest), median and p95 regret (picked / best - 1), and
the JCT ratio: mean picked completion time over the mean best possible. `--write` replaces
the section "Leave-one-cluster-out" (with --within: "Within one cluster, time-ordered split") of
docs/benchmarks-history.md. Fits run on one thread: on a shared
2-core machine two OpenMP threads that spin-wait made one gradient-boosting fit 30 times slower
(a fit's result does not depend on its thread count).
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
from netsched.models.features import FEATURE_NAMES, INDEX, NETWORK_BLIND, SCHEMA_VERSION
from netsched.models.gpus import GPU_FEATURES
from netsched.training.dataset import Dataset, concat, dataset_from_rows
from netsched.training.fitting import fit_linear_plus_trees, fit_model
from netsched.training.metrics import Scores, score
from netsched.training.policies import default_scheduler_cost, heuristic_cost
from netsched.training.train import SERVABLE, evaluate_kinds, select, split_holdout

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

SECTION = "## Leave-one-cluster-out"
WITHIN_SECTION = "## Within one cluster, time-ordered split"
POLICIES = ("default", "heuristic", "network-blind", "plain HGBR", "plain HGBR, GPU one-hot", "two-part",
            "physics, no product offsets", "netsched", "noise-free oracle")
WITHIN_TEST = 0.3  # --within: the newest share of a cluster's jobs, tested on
GPU_COLUMNS = [INDEX[f] for f in GPU_FEATURES]


def clusters(jobs: int, seed: int, **config) -> dict[str, Dataset]:
    return {name: dataset_from_rows(list(simulate(profile_config(name, jobs, seed + k, **config))), name)
            for k, name in enumerate(PROFILES)}


def costs(train: Dataset, test: Dataset, seed: int) -> tuple[str, dict[str, np.ndarray]]:
    """The kind netsched picks, and each policy's cost per row of `test` (lower is picked), the
    learned ones fitted on `train`."""
    log_y = np.log(train.y)
    blind = [INDEX[f] for f in NETWORK_BLIND]
    kind = select(evaluate_kinds(train, seed, SERVABLE)).kind
    netsched = fit_model(kind, FEATURE_NAMES, train.X, log_y, train.candidate_set, seed)
    two_part = fit_model("hist_gradient_boosting", FEATURE_NAMES, train.X, log_y, train.candidate_set, seed)
    network_blind = fit_model(kind, NETWORK_BLIND, train.X[:, blind], log_y, train.candidate_set, seed)
    plain = HistGradientBoostingRegressor(random_state=seed).fit(train.X, log_y)
    products = np.unique(train.X[:, GPU_COLUMNS], axis=0)
    one_hot = HistGradientBoostingRegressor(random_state=seed).fit(gpu_one_hot(train.X, products), log_y)
    no_offsets = fit_linear_plus_trees(FEATURE_NAMES, train.X, log_y, train.candidate_set, seed,
                                       products=False)
    return kind, {"default": default_scheduler_cost(test), "heuristic": heuristic_cost(test, test.sets()),
                  "network-blind": network_blind.predict(test.X[:, blind]),
                  "plain HGBR": plain.predict(test.X),
                  "plain HGBR, GPU one-hot": one_hot.predict(gpu_one_hot(test.X, products)),
                  "two-part": two_part.predict(test.X),
                  "physics, no product offsets": no_offsets.predict(test.X),
                  "netsched": netsched.predict(test.X)}


def gpu_one_hot(X: np.ndarray, products: np.ndarray) -> np.ndarray:
    """X with its GPU capability columns replaced by one 0/1 column per row of `products`."""
    gpu = X[:, GPU_COLUMNS]
    flags = [(gpu == p).all(axis=1).astype(np.float64) for p in products]
    return np.column_stack([np.delete(X, GPU_COLUMNS, axis=1), *flags])


def jct_ratio(s: Scores, best: Scores) -> float:
    return s.mean_jct / best.mean_jct


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1500, help="simulated jobs per cluster (default 1500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--within", action="store_true",
                        help="train on each cluster's older jobs, test on its newer ones")
    parser.add_argument("--write", action="store_true", help="write the table into the benchmarks history")
    args = parser.parse_args()
    started = time.perf_counter()
    threadpool_limits(1)
    data = clusters(args.jobs, args.seed)
    noise_free = None if args.within else clusters(args.jobs, args.seed, node_noise=0.0)
    lines = ["| cluster | policy | top-1 | regret median | regret p95 | JCT / best |",
             "|---|---|---:|---:|---:|---:|"]
    pooled: dict[str, list[tuple[Scores, float]]] = {}
    for held in data:
        if args.within:
            train, test = split_holdout(data[held], WITHIN_TEST)
        else:
            test = data[held]
            train = concat([d for name, d in data.items() if name != held])
        sets = test.sets()
        best = score(test.y, test.y, sets)
        kind, policies = costs(train, test, args.seed)
        if noise_free is not None:
            assert np.array_equal(noise_free[held].node, test.node), "the noise-free run drew others"
            policies["noise-free oracle"] = noise_free[held].y
        for policy, cost in policies.items():
            s = score(test.y, cost, sets)
            pooled.setdefault(policy, []).append((s, jct_ratio(s, best)))
            name = f"netsched ({kind})" if policy == "netsched" else policy
            lines.append(f"| {held} | {name} | {s.top1:.1%} | {s.regret_median:.1%} | {s.regret_p95:.1%} | "
                         f"{jct_ratio(s, best):.3f} |")
        print(f"{held}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    lines += ["", f"Mean over the five {'clusters' if args.within else 'held-out clusters'}:", "",
              "| policy | top-1 | regret median | regret p95 | JCT / best |", "|---|---:|---:|---:|---:|"]
    for policy, results in pooled.items():
        mean = {k: np.mean([getattr(s, k) for s, _ in results])
                for k in ("top1", "regret_median", "regret_p95")}
        ratio = np.mean([r for _, r in results])
        lines.append(f"| {policy} | {mean['top1']:.1%} | {mean['regret_median']:.1%} | "
                     f"{mean['regret_p95']:.1%} | {ratio:.3f} |")
    within = " --within" if args.within else ""
    command = f"python bench/loco.py{within} --jobs {args.jobs} --seed {args.seed}"
    how = (f"each cluster's older {1 - WITHIN_TEST:.0%} of jobs trained on, its newer {WITHIN_TEST:.0%} "
           "tested on" if args.within else
           "each cluster held out in turn, every policy fitted on the other four")
    intro = (f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, 2 cores shared, load "
             f"{os.getloadavg()[0]:.1f} at the end, feature schema v{SCHEMA_VERSION}, "
             f"{time.perf_counter() - started:.0f} s). {args.jobs} "
             f"jobs of 8 candidates per cluster; {how} (bench/loco.py says what each policy is).")
    section = "\n".join([WITHIN_SECTION if args.within else SECTION, "", intro, "", *lines]) + "\n"
    if args.write:
        publish(section)
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
