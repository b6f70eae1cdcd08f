"""How well a policy picks nodes, and how close a model's predictions are, over candidate sets.

For each candidate set (two candidates or more) a policy picks its lowest-cost row (the
first on a tie); that pick is judged against the set's true completion times:

- top-1 / top-3: the pick's true time is the best / among the three best of the set;
- regret: pick's time / best time - 1 (mean, median, p95);
- mean JCT: the mean true time of the picks.

MAE and MAPE compare predicted with true seconds, row by row. `better` is the one rule
that both model selection (train) and promotion (retrain) apply.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

REGRET_TIE = 0.001  # mean regrets closer than 0.1 percentage point are a tie...
MAPE_TIE = 0.005  # ...broken by MAPE lower by more than 0.5 point


@dataclass(frozen=True)
class Scores:
    sets: int  # candidate sets of two or more candidates judged
    top1: float = math.nan
    top3: float = math.nan
    regret_mean: float = math.nan
    regret_median: float = math.nan
    regret_p95: float = math.nan
    mean_jct: float = math.nan
    mae: float = math.nan  # seconds; NaN for a policy that predicts no times
    mape: float = math.nan
    rows: int = 0

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict) -> Scores:
        return cls(**{k: (math.nan if v is None else v) for k, v in data.items()})


def score(y: np.ndarray, cost: np.ndarray, sets: list[np.ndarray],
          predicted: np.ndarray | None = None) -> Scores:
    """Scores of the policy whose cost per row is `cost`; MAE/MAPE if it predicts seconds."""
    picks, best, ranks = [], [], []
    for rows in sets:
        if len(rows) < 2:
            continue
        pick = rows[np.argmin(cost[rows])]
        picks.append(y[pick])
        best.append(y[rows].min())
        ranks.append(int((y[rows] < y[pick]).sum()))
    errors = {} if predicted is None else _errors(y, predicted)
    if not picks:
        return Scores(sets=0, rows=len(y), **errors)
    regret = np.array(picks) / np.array(best) - 1
    ranks_ = np.array(ranks)
    return Scores(sets=len(picks), top1=float(np.mean(ranks_ == 0)), top3=float(np.mean(ranks_ < 3)),
                  regret_mean=float(regret.mean()), regret_median=float(np.median(regret)),
                  regret_p95=float(np.quantile(regret, 0.95)), mean_jct=float(np.mean(picks)),
                  rows=len(y), **errors)


def _errors(y: np.ndarray, predicted: np.ndarray) -> dict:
    err = np.abs(predicted - y)
    return {"mae": float(err.mean()), "mape": float((err / y).mean())}


def better(a: Scores, b: Scores) -> bool:
    """a beats b: its mean regret is lower by more than REGRET_TIE; on a tie (or when there are
    no candidate sets to judge, as with operator records alone), its MAPE is lower by more than MAPE_TIE."""
    if a.sets and b.sets:
        if a.regret_mean < b.regret_mean - REGRET_TIE:
            return True
        if a.regret_mean > b.regret_mean + REGRET_TIE:
            return False
    return a.mape < b.mape - MAPE_TIE
