"""`netsched report`: what the cluster ran, per week and priority class, from the operator's job
records (netsched.records.weekly), with the estimated gain over kube-scheduler's default
(netsched.records.gain) when a completion-time model is at hand: a table on the terminal, or JSON with
-o json, and with --plot the gain per week as an SVG chart."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import netsched
from netsched.api.settings import option
from netsched.api.subcommand import Command
from netsched.models.errors import SchemaError
from netsched.models.predictor import Predictor
from netsched.records.gain import DRAWS, JobTimes, gain, model_error, predicted_times
from netsched.records.gain_plot import gain_svg
from netsched.records.reader import checked_records
from netsched.records.weekly import as_json, as_table, by_week_and_class

# the model shipped with netsched: beside the package in a checkout, /opt/netsched/models in the image
SHIPPED = (Path(netsched.__file__).resolve().parents[1] / "models" / "current.json",
           Path("/opt/netsched/models/current.json"))


def svg_path(text: str) -> str:
    if text and not text.endswith(".svg"):
        raise argparse.ArgumentTypeError(f"{text!r}: the plot is an SVG file, name it FILE.svg "
                                         "(netsched's serving install has no plotting library for PNG)")
    return text


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    records: str = option(flag="records", required=True,
                          help="the operator's job records file (its --records, JSON Lines)")
    output: str = option("text", flag="--output", short="-o", choices=("text", "json"),
                         help="text (a table, the default) or json")
    model: str = option("", flag="--model", metavar="PATH",
                        help="estimate the gain over the default scheduler with this completion-time model "
                        "(an artifact directory or current.json; default: the model shipped with netsched)")
    no_gain: bool = option(False, flag="--no-gain", help="leave out the estimated gain (no model read)")
    plot: str = option("", flag="--plot", metavar="FILE.svg", parse=svg_path,
                       help="also draw the estimated gain per week and priority class into this SVG file")


def report_main(settings: ReportSettings) -> int:
    path = Path(settings.records)
    try:
        records = [record for _, record in checked_records(path)] if path.exists() else []
        predictor = None if settings.no_gain or not records else _model(settings.model)
    except (OSError, SchemaError) as exc:
        print(f"netsched: error: report: {exc}", file=sys.stderr)
        return 2
    times = None if predictor is None else predicted_times(records, predictor)
    rows = by_week_and_class(records, times)
    about = _about(predictor, times)
    if settings.plot and rows:
        try:
            title = f"netsched against the default scheduler: {path.name}"
            Path(settings.plot).write_text(gain_svg(rows, title))
        except OSError as exc:
            print(f"netsched: error: report: cannot write the plot {settings.plot}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 2
    if settings.output == "json":
        print(json.dumps({"records": str(path), "weeks": as_json(rows), "gain": about}, indent=2))
    elif not rows:
        print(f"no finished jobs in {path} yet: the operator writes one record per finished GPUJob "
              "(netsched operator --records)")
    else:
        print(as_table(rows, with_gain=times is not None))
        if not settings.no_gain:
            print(_note(about))
    return 0


def _model(flag: str) -> Predictor | None:
    """The model named by --model (an error if it cannot be read), else the shipped one if present."""
    if flag:
        return Predictor.load(flag)
    found = next((p for p in SHIPPED if p.exists()), None)
    return Predictor.load(found) if found else None


def _about(predictor: Predictor | None, times: JobTimes | None) -> dict[str, Any] | None:
    """How the gain was estimated, and over every estimated job (None without a model)."""
    if predictor is None or times is None:
        return None
    total = gain(times.netsched, times.default, times.gpus)
    return {**model_error(predictor), "draws_per_job": DRAWS,
            "all_weeks": None if total is None else asdict(total)}


def _note(about: dict[str, Any] | None) -> str:
    if about is None:
        return ("no estimated gain: no completion-time model (give --model PATH; the shipped one is "
                "models/current.json)")
    total = about["all_weeks"]
    mape = about["held_out_mape"]
    head = ("no job to estimate (none Succeeded on recorded nodes)" if total is None else
            f"all weeks: {total['jobs']} jobs, estimated gain {100 * total['gain']:+.1f}% "
            f"({100 * total['gain_low']:+.1f}..{100 * total['gain_high']:+.1f}), "
            f"{total['gpu_hours_saved']:+.1f} GPU-hours saved")
    error = f"{100 * mape:.0f}%" if mape is not None else "not recorded"
    return (f"{head}.\nGain: the model's predicted completion time on netsched's placement against "
            "kube-scheduler's default placement reconstructed from the records (replicas spread over nodes "
            "that can hold them, blind to peers, data and GPU speed), applied to the real run times; 95% "
            "interval: bootstrap over jobs. Not in the interval: the model's own error on one job, held-out "
            f"MAPE {error} ({about['model']}).")


REPORT = Command(
    "report", "what the cluster ran, per week and priority class, from the operator's job records",
    ReportSettings, report_main,
    "Read the operator's job records (netsched operator --records) and print, per ISO week of completion "
    "and priority class: jobs, jobs succeeded, GPU-hours, time queued (p50 / p95), completion time "
    "(start to completion, p50 / p95), and the estimated gain over kube-scheduler's default scheduler: the "
    "completion-time model's predicted time on the placement the default would have made against the "
    "placement netsched made, with a 95% bootstrap interval over jobs (docs/record-format.md). Reads the "
    "files only.")
