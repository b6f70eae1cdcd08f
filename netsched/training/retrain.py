"""`netsched retrain`: train a challenger on fresh data, promote it only if it beats the model in service.

Made for a CronJob over the operator's growing records: a challenger is validated and
trained as `netsched train` does (netsched.training.train): picked on all but the most
recent `holdout` share of jobs, fitted on those earlier jobs and scored on the held-out ones,
then refit on all of them. The challenger as validated and the current model
(`<models>/current.json`) are scored on the held-out jobs neither has trained on, by
metrics.model_scores; metrics.better decides, the rule train selects among kinds by, with the model
in service where train has its pick so far: top-1 higher or mean regret lower by more than the noise
of the comparison (weighted node-pair accuracy where jobs have one row each, as the operator's do).
The manifest is repointed, to the refit challenger, only when there is no current model, the current
one cannot be loaded (another schema, a corrupt file), or the challenger is better so. Every
decision, kept or promoted, is appended to `<models>/promotions.jsonl` with both models'
scores. A challenger that is not promoted is deleted (its scores stay in the log), so a
nightly run does not fill the volume.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from netsched.models.artifact import MANIFEST, ArtifactError, append_log, promote
from netsched.models.features import FEATURE_NAMES, SCHEMA_VERSION
from netsched.models.predictor import Predictor
from netsched.training.dataset import Dataset
from netsched.training.evaluate import held_out, training_window
from netsched.training.metrics import Scores, better, describe, judged_by, model_scores
from netsched.training.onnx_export import compiled
from netsched.training.train import Validation, no_progress, seconds, train, training_data, validate

LOG_FILE = "promotions.jsonl"


@dataclass(frozen=True)
class Decision:
    promoted: bool
    reason: str
    challenger: Path
    current: Path | None  # the artifact in service before this run; None if there was none
    challenger_scores: Scores | None  # as validated, on the held-out jobs; None if none was left to score
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
            log: Callable[[str], None] = print, progress: Callable[[str], None] = no_progress) -> Decision:
    """Train, compare, promote or keep, log; raises SchemaError on data it cannot use, and TooFewJobs,
    changing nothing, on fewer than MIN_JOBS usable jobs."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout {holdout} must be in (0, 1): retraining judges on held-out recent jobs")
    models_dir, paths = Path(models_dir), [Path(p) for p in data_paths]
    rows = training_data(paths)
    checked = validate(rows, holdout, seed, log, progress)
    challenger = Predictor.load(train(paths, models_dir, seed=seed, holdout=holdout, log=log,
                                      name=_fresh_name(models_dir), dataset=rows, validation=checked),
                                convert=compiled)
    current, problem = _current(models_dir / MANIFEST)
    recent = checked.recent
    judged = held_out(recent, float(training_window(current)["end_unix"])) if current else recent
    decision = _decide(challenger.path, checked, current, problem, judged)
    record = {**decision.to_json(models_dir), "held_out": _describe(judged), "data": [str(p) for p in paths],
              "data_sha256": challenger.meta["training_data"]["sha256"]}
    if decision.promoted:
        promote(models_dir / MANIFEST, challenger.path, models_dir / LOG_FILE, record)
    else:
        append_log(models_dir / LOG_FILE, {**record, "challenger_deleted": True})
        shutil.rmtree(challenger.path)
    log(f"{'promoted' if decision.promoted else 'kept the current model'}: {decision.reason}")
    return decision


def _decide(challenger: Path, checked: Validation, current: Predictor | None, problem: str | None,
            judged: Dataset) -> Decision:
    """The challenger is judged as validated (`checked.recent_model`, fitted without the held-out jobs),
    served as the current model is (netsched.training.onnx_export)."""
    assert checked.recent_model is not None  # retrain's holdout is above 0
    served = compiled(checked.recent_model, len(FEATURE_NAMES))
    mine = (model_scores(judged, seconds(served, judged.X), lambda X: seconds(served, X)) if len(judged)
            else None)
    if current is None:
        return Decision(True, problem, challenger, None, mine, None)
    if mine is None:
        return Decision(False, "no held-out job is newer than the current model's training data, so the two "
                        "cannot be compared fairly; kept", challenger, current.path, None, None)
    theirs = model_scores(judged, current.predict(judged.X), current.predict)
    won = better(mine, theirs)
    reason = (f"challenger {'beats' if won else 'does not beat'} the current model on {len(judged.jobs())} "
              f"held-out jobs by {judged_by(mine, theirs) or 'nothing: no job to rank'} "
              f"(challenger {describe(mine)}; current {describe(theirs)})")
    return Decision(won, reason, challenger, current.path, mine, theirs)


def _current(manifest: Path) -> tuple[Predictor | None, str | None]:
    """The model in service, or None and why none can be compared with."""
    if not manifest.exists():
        return None, f"no current model ({manifest} does not exist)"
    try:
        current = Predictor.load(manifest, convert=compiled)
        training_window(current)  # what judging needs of it
    except ArtifactError as exc:
        return None, f"the current model cannot be loaded, so it is replaced: {exc}"
    return current, None


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

