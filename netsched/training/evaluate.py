"""`netsched evaluate`: on held-out jobs, which node each policy picks and how good that pick really was.

Held-out jobs are the candidate sets that started after the last job of the model's
training window (meta.json), so a file that also holds the training data can be given
as is. Policies: the learned model, the same model kind trained without network features,
the extender's topology heuristic, kube-scheduler's default scoring, uniform random, and
the oracle (the true best). Writes evaluation.md (the table), evaluation.json, and PNG
plots: predicted vs actual, top-1/top-3 per policy, regret per policy, and the regret CDF
per policy (regret_cdf.png: the share of jobs whose pick was within x of the best).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsched.models.artifact import META_FILE, ArtifactError
from netsched.models.features import INDEX, SchemaError
from netsched.models.predictor import SCREEN_ROWS, Predictor, predict_ms
from netsched.training.dataset import Dataset, read_datasets
from netsched.training.metrics import Scores, regrets, score
from netsched.training.onnx_export import compiled
from netsched.training.policies import default_scheduler_cost, heuristic_cost, oracle_cost, random_cost

POLICIES = ("learned", "network_blind", "heuristic", "default_scheduler", "random", "oracle")
LABELS = {"learned": "learned model", "network_blind": "network-blind model",
          "heuristic": "extender heuristic", "default_scheduler": "default kube-scheduler",
          "random": "random", "oracle": "oracle"}


@dataclass(frozen=True)
class Evaluation:
    scores: dict[str, Scores]
    predicted: dict[str, np.ndarray]  # seconds per held-out row, for the model policies
    actual: np.ndarray
    held_out: dict  # what was evaluated: jobs, rows, window
    serving_ms_5000: float  # Predictor.fastest over 5,000 rows (median): the extender's path
    regret: dict[str, np.ndarray]  # per policy, each held-out job's regret (for the CDF plot)

    def to_json(self) -> dict:
        return {"held_out": self.held_out, "serving_ms_5000": round(self.serving_ms_5000, 3),
                "policies": {p: s.to_json() for p, s in self.scores.items()}}


def training_window(predictor: Predictor) -> dict:
    """meta.json's training window: start/end as Unix seconds (start_unix, end_unix) and as text."""
    window = (predictor.meta.get("training_data") or {}).get("window")
    complete = isinstance(window, dict) and {"start", "end"} <= set(window)
    if not complete or not isinstance(window.get("end_unix"), int | float):
        raise ArtifactError(f"{predictor.path / META_FILE}: no training_data.window (start, end, end_unix); "
                            "retrain the model with `netsched train`")
    return window


def held_out(ds: Dataset, end_unix: float) -> Dataset:
    """The candidate sets that started after `end_unix`, the end of a model's training window."""
    later = np.zeros(len(ds), dtype=bool)
    for rows in ds.sets():
        later[rows] = ds.start[rows].min() > end_unix
    return ds.take(later)


def evaluate(model: Path, data: list[Path], seed: int = 0) -> Evaluation:
    learned, blind = Predictor.load(model, convert=compiled), Predictor.load(model, "network_blind", compiled)
    window = training_window(learned)
    all_rows = read_datasets(data)
    ds = held_out(all_rows, float(window["end_unix"]))
    if not len(ds):
        raise SchemaError(f"{', '.join(map(str, data))}: no job started after the model's training window "
                          f"({window['start']} - {window['end']}); evaluate on later jobs")
    sets = ds.sets()
    blind_cols = [INDEX[f] for f in blind.features]
    predicted = {"learned": learned.predict(ds.X), "network_blind": blind.predict(ds.X[:, blind_cols])}
    costs: dict[str, Callable[[], np.ndarray]] = {
        "learned": lambda: predicted["learned"], "network_blind": lambda: predicted["network_blind"],
        "heuristic": lambda: heuristic_cost(ds, sets),
        "default_scheduler": lambda: default_scheduler_cost(ds),
        "random": lambda: random_cost(ds, seed), "oracle": lambda: oracle_cost(ds),
    }
    cost = {p: costs[p]() for p in POLICIES}
    scores = {p: score(ds.y, cost[p], sets, predicted.get(p)) for p in POLICIES}
    info = {"jobs": len(sets), "rows": len(ds), "skipped_rows_in_training_window": len(all_rows) - len(ds),
            "first_start_unix": float(ds.start.min()), "last_start_unix": float(ds.start.max()),
            "model": str(learned.path), "model_kind": learned.meta.get("model_kind")}
    return Evaluation(scores, predicted, ds.y, info, predict_ms(learned.fastest, all_rows.X),
                      {p: regrets(ds.y, cost[p], sets) for p in POLICIES})


def table(ev: Evaluation) -> str:
    rows = ["| policy | top-1 | top-3 | regret median | regret p95 | regret mean | mean JCT (s) | MAE (s) "
            "| MAPE |", "|---|---|---|---|---|---|---|---|---|"]
    for p in POLICIES:
        s = ev.scores[p]
        rows.append(f"| {LABELS[p]} | {_pct(s.top1)} | {_pct(s.top3)} | {_pct(s.regret_median)} | "
                    f"{_pct(s.regret_p95)} | {_pct(s.regret_mean)} | {_num(s.mean_jct)} | {_num(s.mae)} | "
                    f"{_pct(s.mape)} |")
    gain = ev.scores["learned"].top1 - ev.scores["default_scheduler"].top1
    h = ev.held_out
    rows += ["", f"{h['jobs']} held-out jobs ({h['rows']} candidate rows); learned top-1 is "
             f"{gain * 100:+.1f} points against the default scheduler; serving 5,000 candidates (screen, "
             f"then the model on the best {SCREEN_ROWS}) took {ev.serving_ms_5000:.2f} ms (median)."]
    return "\n".join(rows)


def _pct(v: float) -> str:
    return "-" if np.isnan(v) else f"{v * 100:.1f}%"


def _num(v: float) -> str:
    """Seconds: whole ones for the simulator's hour-long jobs, hundredths for the testbed's short ones."""
    return "-" if np.isnan(v) else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"


def write_report(ev: Evaluation, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.md").write_text(table(ev) + "\n")
    (out / "evaluation.json").write_text(json.dumps(ev.to_json(), indent=1) + "\n")
    from netsched.training.plots import plot_all  # matplotlib only where plots are drawn

    return [out / "evaluation.md", out / "evaluation.json", *plot_all(ev, out, LABELS)]
