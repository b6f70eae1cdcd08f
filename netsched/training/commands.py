"""`netsched train`, `evaluate`, `predict` and `retrain`: their settings, starts and entries in the CLI.
Bad input (a missing or malformed data file, a refused model artifact) is one line on stderr and exit 2;
too few jobs to train on is one line on stdout and exit 0, nothing changed. Light to import: the `train`
extra's libraries load only when a command runs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsched.api.settings import NOT_IN_CHART, number, option, setting
from netsched.api.subcommand import Command
from netsched.models.gpus import TABLE_ENV as GPU_TABLE_ENV
from netsched.training.enough_jobs import MIN_JOBS, TooFewJobs

DATA_HELP = "dataset CSV or operator records (.jsonl) files"
TRAIN_DATA_HELP = (f"{DATA_HELP}; at least {MIN_JOBS} usable jobs (with fewer, nothing is trained: one line "
                   f"'kept: only N jobs, at least {MIN_JOBS} needed', exit 0)")
MODEL_HELP = "artifact directory or current.json manifest"
CHART_RETRAIN = "the chart's CronJob passes its mounted records and models volumes"
TRAIN_EXTRA = {"sklearn", "skl2onnx", "scipy", "matplotlib"}  # what `pip install netsched` leaves out
THREADS_HELP = ("threads the fits may use (OpenMP and BLAS), at most the CPUs this process may use; more "
                "than 1 gained nothing measured here and stalls badly when other processes keep the CPUs "
                "busy (netsched/training/threads.py; default 1)")


def gpu_table_setting(fixed: str = NOT_IN_CHART) -> Any:
    """`--gpu-table` of the commands that read models or datasets: declared as each one's last field."""
    return setting(flag="--gpu-table", metavar="FILE", fixed=fixed,
                   help="GPU capability table extending the built-in one "
                   f"(as the extender's --gpu-table; default ${GPU_TABLE_ENV} if set)")


def model_command(command: str, run: Callable[[], object]) -> int:
    """Run; bad input as one line, exit 2."""
    from netsched.models.features import SchemaError

    try:
        run()
    except BrokenPipeError:
        raise  # not bad input: the reader of --out /dev/stdout went away; the CLI ends as Unix tools do
    except (SchemaError, OSError) as exc:
        print(f"netsched: error: {command}: {exc}", file=sys.stderr)
        return 2
    return 0


def kept_unless_enough(command: str, run: Callable[[], object], unchanged: str) -> int:
    """model_command; too few jobs to train on is one line and exit 0: a nightly job must not fail
    until a new cluster has run enough of them."""
    try:
        return model_command(command, run)
    except TooFewJobs as exc:
        print(f"kept: {exc}; {unchanged}")
        return 0


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    data: tuple[Path, ...] = option(flag="data", required=True, help=TRAIN_DATA_HELP)
    out: str = option("models", flag="--out", help="directory to write the artifact under (default models)")
    name: str | None = option(
        flag="--name", help="artifact directory name (default jct-s<schema>-<last day>-<data sha256>); "
        "train refuses a name whose directory exists under --out")
    force: bool = option(False, flag="--force", help="replace the artifact directory if it exists already")
    seed: int = option(0, flag="--seed", help="seeds the regressors (default 0)")
    holdout: float = option(0.2, flag="--holdout", parse=number(at_least=0, below=1), metavar="SHARE",
                            help="most recent share of jobs the pick is scored on after cross-validation; "
                            "the model is then refit on all jobs, these included (default 0.2)")
    clusters_by_file: bool = option(
        False, flag="--clusters-by-file",
        help="each DATA file is one cluster's records: the by-site cross-validation then holds out one "
        "cluster at a time instead of one zone, judging each kind on clusters it never saw")
    threads: int = option(1, flag="--threads", parse=number(at_least=1, kind=int), metavar="N",
                          help=THREADS_HELP)
    gpu_table: str | None = gpu_table_setting()


def train_main(settings: TrainSettings) -> int:
    from netsched.training.threads import fitting_threads
    from netsched.training.train import stderr_progress, train

    def run() -> None:
        with fitting_threads(settings.threads):
            train(list(settings.data), Path(settings.out), seed=settings.seed, holdout=settings.holdout,
                  name=settings.name, clusters_by_file=settings.clusters_by_file, progress=stderr_progress,
                  force=settings.force)

    return kept_unless_enough("train", run, "no model written")


@dataclass(frozen=True, kw_only=True)
class EvaluateSettings:
    data: tuple[Path, ...] = option(flag="data", required=True, help=DATA_HELP)
    model: str = option(flag="--model", required=True, metavar="PATH", help=MODEL_HELP)
    out: str = option("evaluation", flag="--out", help="report directory (default evaluation)")
    seed: int = option(0, flag="--seed", help="seeds the random policy (default 0)")
    gpu_table: str | None = gpu_table_setting()


def evaluate_main(settings: EvaluateSettings) -> int:
    from netsched.training.evaluate import evaluate, table, write_report

    def run() -> None:
        result = evaluate(Path(settings.model), list(settings.data), seed=settings.seed)
        print(table(result))
        print("wrote " + ", ".join(str(p) for p in write_report(result, Path(settings.out))))

    try:
        return model_command("evaluate", run)
    except ModuleNotFoundError as exc:
        print(f"netsched: error: evaluate: {exc}; its plots need matplotlib: pip install 'netsched[train]'",
              file=sys.stderr)
        return 2


@dataclass(frozen=True, kw_only=True)
class RetrainSettings:
    data: tuple[Path, ...] = setting(flag="data", required=True, help=TRAIN_DATA_HELP, fixed=CHART_RETRAIN)
    models: str = setting("models", flag="--models", fixed=CHART_RETRAIN,
                          help="models directory with current.json (default models)")
    holdout: float = setting(0.2, flag="--holdout", parse=number(above=0, below=1), metavar="SHARE",
                             helm="retrain.holdout",
                             help="most recent share of jobs both models are judged on (default 0.2)")
    seed: int = setting(0, flag="--seed", fixed="the chart keeps the default",
                        help="seeds the regressors (default 0)")
    threads: int = setting(1, flag="--threads", parse=number(at_least=1, kind=int), metavar="N",
                           helm="retrain.threads", help=THREADS_HELP)
    gpu_table: str | None = gpu_table_setting(
        fixed="the chart mounts its gpuCapabilities value and passes this flag when it is not empty")


def retrain_main(settings: RetrainSettings) -> int:
    from netsched.models.artifact import MANIFEST
    from netsched.training.retrain import retrain
    from netsched.training.threads import fitting_threads
    from netsched.training.train import stderr_progress

    def run() -> None:
        with fitting_threads(settings.threads):
            retrain(settings.data, Path(settings.models), holdout=settings.holdout, seed=settings.seed,
                    progress=stderr_progress)

    return kept_unless_enough("retrain", run, f"{Path(settings.models) / MANIFEST} unchanged")


@dataclass(frozen=True, kw_only=True)
class PredictSettings:
    model: str = option(flag="--model", required=True, metavar="PATH", help=MODEL_HELP)
    candidates: str = option(flag="--candidates", required=True, metavar="FILE",
                             help="candidates file, CSV or JSON")
    out: str | None = option(flag="--out", metavar="FILE", help="write here (default: standard output)")
    format: str | None = option(flag="--format", choices=("csv", "json"),
                                help="output format (default: json if --out ends in .json, else csv)")
    gpu_table: str | None = gpu_table_setting()


def predict_main(settings: PredictSettings) -> int:
    from netsched.training.predict import predict_rows, write_predictions

    out = settings.out
    fmt = settings.format or ("json" if out and out.endswith(".json") else "csv")

    def run() -> None:
        rows = predict_rows(Path(settings.model), Path(settings.candidates))
        if out:
            with open(out, "w", newline="") as f:
                write_predictions(rows, f, fmt)
            print(f"wrote {len(rows)} predictions to {out}", file=sys.stderr)
        else:
            write_predictions(rows, sys.stdout, fmt)

    return model_command("predict", run)


TRAIN = Command(
    "train", "train and cross-validate a completion-time model", TrainSettings, train_main,
    "Train on dataset CSVs and/or operator records: cross-validate every regressor on all but the most "
    "recent jobs (folds split by job, later jobs tested by models of earlier ones; by time and by site), "
    "pick one by SELECTION_RULE (netsched/training/train.py: top-1 or mean regret beyond noise; node pairs "
    "for records of one row per job), score it on the most recent jobs, then refit it on all records and "
    "write <out>/<name>/model.joblib and meta.json.")
EVALUATE = Command(
    "evaluate", "judge a model against the other placement policies", EvaluateSettings, evaluate_main,
    "Score a model on the jobs of DATA that started after its training window, against its network-blind "
    "twin, the extender's heuristic, kube-scheduler's default scoring, random and the oracle. Prints the "
    "table; writes evaluation.md, evaluation.json and PNG plots to --out.")
RETRAIN = Command(
    "retrain", "train a challenger; promote it only if it beats the current model", RetrainSettings,
    retrain_main,
    "Train a challenger on DATA as `netsched train` does, score it as validated (fitted on all but the "
    "most recent jobs) and the model <models>/current.json names on those jobs by the same ranking rule, "
    "repoint current.json to the challenger (refit on all jobs) only if it is better (or no usable "
    "current model exists), and log the decision in <models>/promotions.jsonl. Exit 0 whether promoted "
    "or kept, 2 on bad data.")
PREDICT = Command(
    "predict", "a model's predicted completion seconds for candidate rows, ranked", PredictSettings,
    predict_main,
    "Predict completion seconds for each row of a candidates file (CSV or JSON: the model's features by "
    "name, optional candidate_set, node and gpu_product; docs/record-format.md) with the extender's own "
    "call, and rank each candidate set's rows (1: predicted fastest) as the extender would. Writes the "
    "rows with predicted_seconds and rank, as CSV or JSON.")
