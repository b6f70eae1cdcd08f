"""Measure what each model kind costs to serve: Predictor.fastest over 5,000 candidate rows.

    python bench/model_kinds.py [--jobs 2000] [--calls 300] [--seed 1]

Fits every kind of netsched.models.estimators on simulated data, as `netsched train` does,
and times the serving path the extender takes at 5,000 candidates: the linear screen over
every row, then the kind over the SCREEN_ROWS best. This is the measurement behind
train.SERVABLE: which kinds may serve is fixed by their settings, not decided by the wall
time of each training run. Rewrites "Model kinds" in docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from netsched.datagen.simulator import SimConfig, simulate
from netsched.models.features import FEATURE_NAMES
from netsched.models.predictor import SCREEN_ROWS, LinearScreen, fastest
from netsched.training.dataset import dataset_from_rows
from netsched.training.fitting import MODEL_KINDS, fit_model, fit_screen
from netsched.training.train import SERVABLE

sys.path.insert(0, str(Path(__file__).parent))
from extender_latency import measure_calls  # noqa: E402
from report import publish  # noqa: E402

SECTION = "## Model kinds"
ROWS = 5000


def timings(call, batch: np.ndarray, calls: int) -> np.ndarray:
    """Milliseconds per call on `batch`, after 20 calls of warm-up."""
    return measure_calls(lambda _: call(batch), calls, 20) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="simulated jobs to fit on (default 2000)")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per kind (default 300)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    ds = dataset_from_rows(list(simulate(SimConfig(jobs=args.jobs, seed=args.seed))))
    log_y = np.log(ds.y)
    batch = np.ascontiguousarray(ds.X[np.random.default_rng(args.seed).integers(len(ds), size=ROWS)])
    screen = LinearScreen(fit_screen(FEATURE_NAMES, ds.X, log_y), FEATURE_NAMES).predict
    alone = timings(screen, batch, args.calls)
    lines = ["| kind | servable | fastest p50 | fastest p99 | predict all 5,000 p50 |",
             "|---|---|---:|---:|---:|",
             f"| (linear screen alone) | | {np.median(alone):.2f} | {np.quantile(alone, 0.99):.2f} | |"]
    for kind in MODEL_KINDS:
        model = fit_model(kind, FEATURE_NAMES, ds.X, log_y, ds.candidate_set, 0)
        serve = timings(lambda X, m=model: fastest(X, 1, screen, m.predict), batch, args.calls)
        full = timings(model.predict, batch, max(args.calls // 10, 5))
        lines.append(f"| {kind} | {'yes' if kind in SERVABLE else 'no'} | {np.median(serve):.2f} | "
                     f"{np.quantile(serve, 0.99):.2f} | {np.median(full):.1f} |")
        print(f"{kind}: done", file=sys.stderr)
    command = " ".join(["python bench/model_kinds.py", *sys.argv[1:]])
    publish("\n".join([
        SECTION, "",
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, 2 cores). Each kind fitted as `netsched train` "
        f"does, on {len(ds):,} simulated rows. Wall time per call in ms: *fastest* is the serving path at "
        f"{ROWS:,} candidates (the linear screen over all of them, the kind over the best {SCREEN_ROWS}), "
        f"{args.calls} calls after 20 of warm-up; *predict all* runs the kind on every row. The extender's "
        "target is filter + prioritize p99 <= 5 ms at 5,000 nodes, for everything it does.", "",
        *lines, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
