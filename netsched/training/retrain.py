"""`netsched retrain`: train a challenger on fresh data, promote it only if it beats the model in service.

Made for a CronJob over the operator's growing records: the most recent `holdout` share of
jobs is held out, a challenger is trained (netsched.training.train) on the rest, and both it
and the current model (`<models>/current.json`) are scored on the held-out jobs that
neither has trained on, by metrics.score; metrics.better decides (mean regret, or MAPE where
candidate sets have one row, as the operator's do). The manifest is repointed only when
there is no current model, the current one cannot be loaded (another schema, a corrupt
file), or the challenger is better. Every decision, kept or promoted, is appended to
`<models>/promotions.jsonl` with both models' scores. A challenger that is not promoted is
deleted (its scores stay in the log), so a nightly run does not fill the volume.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from netsched.models.artifact import MANIFEST, ArtifactError, append_log, promote
from netsched.models.features import SCHEMA_VERSION
from netsched.models.predictor import Predictor
from netsched.training.dataset import Dataset, read_datasets
from netsched.training.evaluate import held_out, training_window
from netsched.training.metrics import Scores, better, score
from netsched.training.train import split_holdout, train

LOG_FILE = "promotions.jsonl"


@dataclass(frozen=True)
class Decision:
    promoted: bool
    reason: str
    challenger: Path
    current: Path | None  # the artifact in service before this run; None if there was none
    challenger_scores: Scores | None  # on the held-out jobs; None if none was left to score
    current_scores: Scores | None

    def to_json(self, models_dir: Path) -> dict:
        def rel(p: Path | None) -> str | None:
            return None if p is None else os.path.relpath(p, models_dir)

        return {"decision": "promoted" if self.promoted else "kept", "reason": self.reason,
                "challenger": rel(self.challenger), "current": rel(self.current),
                "challenger_scores": self.challenger_scores and self.challenger_scores.to_json(),
                "current_scores": self.current_scores and self.current_scores.to_json(),
                "schema_version": SCHEMA_VERSION}


def retrain(data_paths: Sequence[Path], models_dir: Path, holdout: float = 0.2, seed: int = 0,
            log: Callable[[str], None] = print) -> Decision:
    """Train, compare, promote or keep, log; raises SchemaError on data it cannot use."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout {holdout} must be in (0, 1): retraining judges on held-out recent jobs")
    models_dir, paths = Path(models_dir), [Path(p) for p in data_paths]
    rows = read_datasets(paths)
    _, recent = split_holdout(rows, holdout)
    challenger = Predictor.load(train(paths, models_dir, seed=seed, holdout=holdout,
                                      name=_fresh_name(models_dir), log=log, dataset=rows))
    current, problem = _current(models_dir / MANIFEST)
    judged = held_out(recent, float(training_window(current)["end_unix"])) if current else recent
    decision = _decide(challenger, current, problem, judged)
    record = {**decision.to_json(models_dir), "held_out": _describe(judged), "data": [str(p) for p in paths],
              "data_sha256": challenger.meta["training_data"]["sha256"]}
    if decision.promoted:
        promote(models_dir / MANIFEST, challenger.path, models_dir / LOG_FILE, record)
    else:
        append_log(models_dir / LOG_FILE, {**record, "challenger_deleted": True})
        shutil.rmtree(challenger.path)
    log(f"{'promoted' if decision.promoted else 'kept the current model'}: {decision.reason}")
    return decision


def _decide(challenger: Predictor, current: Predictor | None, problem: str | None,
            judged: Dataset) -> Decision:
    if current is None:
        return Decision(True, problem, challenger.path, None, _score(challenger, judged), None)
    if not len(judged):
        return Decision(False, "no held-out job is newer than the current model's training data, so the two "
                        "cannot be compared fairly; kept", challenger.path, current.path, None, None)
    mine, theirs = _score(challenger, judged), _score(current, judged)
    won = better(mine, theirs)
    basis = (f"mean regret {mine.regret_mean:.4f} vs {theirs.regret_mean:.4f}" if mine.sets and theirs.sets
             else "no candidate set of two or more to rank, so by MAPE")
    reason = (f"challenger {'beats' if won else 'does not beat'} the current model on {len(judged.sets())} "
              f"held-out jobs ({basis}; MAPE {mine.mape:.3f} vs {theirs.mape:.3f})")
    return Decision(won, reason, challenger.path, current.path, mine, theirs)


def _current(manifest: Path) -> tuple[Predictor | None, str | None]:
    """The model in service, or None and why none can be compared with."""
    if not manifest.exists():
        return None, f"no current model ({manifest} does not exist)"
    try:
        current = Predictor.load(manifest)
        training_window(current)  # what judging needs of it
    except ArtifactError as exc:
        return None, f"the current model cannot be loaded, so it is replaced: {exc}"
    return current, None


def _score(predictor: Predictor, ds: Dataset) -> Scores:
    predicted = predictor.predict(ds.X)
    return score(ds.y, predicted, ds.sets(), predicted)


def _describe(ds: Dataset) -> dict:
    if not len(ds):
        return {"jobs": 0, "rows": 0}
    return {"jobs": len(ds.sets()), "rows": len(ds), "first_start_unix": float(ds.start.min()),
            "last_start_unix": float(ds.start.max())}


def _fresh_name(models_dir: Path) -> str:
    """A new directory name for the challenger: never the artifact in service, rewritten in place."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name, n = f"jct-s{SCHEMA_VERSION}-{stamp}", 1
    while (models_dir / name).exists():
        n += 1
        name = f"jct-s{SCHEMA_VERSION}-{stamp}-{n}"
    return name

