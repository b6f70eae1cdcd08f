"""`netsched simulate`: its settings, writing the simulated dataset with progress on stderr, and its
entry in the CLI."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from netsched.api.settings import option
from netsched.api.subcommand import Command
from netsched.training.commands import gpu_table_setting, model_command


def utc(text: str) -> float:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True, kw_only=True)
class SimulateSettings:
    jobs: int = option(3000, flag="--jobs", help="jobs to simulate (default 3000)")
    nodes: int = option(64, flag="--nodes", help="GPU nodes of the cluster (default 64)")
    candidates: int = option(8, flag="--candidates", help="candidate nodes per job (default 8)")
    seed: int = option(0, flag="--seed", help="seeds the cluster and the jobs (default 0)")
    profile: str = option("default", flag="--profile", metavar="NAME",
                          help="the cluster's GPUs, NICs, links and job mix (netsched/datagen/simulator.py "
                          "PROFILES: default, inference-edge, training-hpc, legacy, mixed; --nodes keeps the "
                          "size; default: default)")
    start: float = option(1_767_225_600.0, flag="--start", parse=utc, metavar="TIME",
                          help="when the first job may start, ISO 8601, UTC unless stated "
                          "(default 2026-01-01)")
    out: str = option(flag="--out", required=True, metavar="FILE.csv", help="dataset file to write")
    gpu_table: str | None = gpu_table_setting()


def main(settings: SimulateSettings) -> int:
    from netsched.datagen.simulator import SimConfig, simulate
    from netsched.training.dataset import write_dataset

    try:
        cfg = SimConfig(nodes=settings.nodes, jobs=settings.jobs, candidates=settings.candidates,
                        seed=settings.seed, start_unix=settings.start, profile=settings.profile)
    except ValueError as exc:
        print(f"netsched: error: simulate: {exc}", file=sys.stderr)
        return 2

    def run() -> None:
        rows = write_dataset(Path(settings.out), _progress(simulate(cfg), cfg.jobs))
        print(f"wrote {rows} rows ({cfg.jobs} jobs x {cfg.candidates} candidates) to {settings.out}")

    return model_command("simulate", run)


def _progress(rows: Iterable[dict[str, Any]], jobs: int) -> Iterator[dict[str, Any]]:
    """The rows, printing on stderr how many jobs are done at every tenth."""
    done, job, step = 0, None, max(jobs // 10, 1)
    for row in rows:
        if row["job_id"] != job:
            if done and done % step == 0:
                print(f"simulate: {done}/{jobs} jobs", file=sys.stderr, flush=True)
            done, job = done + 1, row["job_id"]
        yield row


COMMAND = Command(
    "simulate", "write simulated training data (CSV)", SimulateSettings, main,
    "Simulate a GPU cluster and its jobs (netsched/datagen/simulator.py) and write every job's true "
    "completion time on each of its candidate nodes as a dataset CSV. Deterministic for given options.")
