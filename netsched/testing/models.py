"""Small simulated datasets and one trained artifact, shared by the model tests (built once per run)."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from netsched.datagen.simulator import SimConfig, simulate
from netsched.training.dataset import write_dataset
from netsched.training.train import train

TINY = SimConfig(nodes=16, zones=2, racks_per_zone=2, jobs=150, seed=1)


def sim_rows(jobs: int = 30, seed: int = 3, **kwargs) -> list[dict]:
    return list(simulate(SimConfig(nodes=16, zones=2, racks_per_zone=2, jobs=jobs, seed=seed, **kwargs)))


@functools.cache
def trained() -> tuple[Path, Path]:
    """(artifact directory, its data file): 150 simulated jobs, validated on the last 30, then fitted
    on all 150. Shared: copy the directory before changing it."""
    root = Path(tempfile.mkdtemp(prefix="netsched-models-test-"))
    atexit.register(shutil.rmtree, root, True)
    data = root / "sim.csv"
    write_dataset(data, simulate(TINY))
    return train([data], root / "models", name="tiny", log=lambda *_: None), data


def copy_of(artifact: Path, to: Path) -> Path:
    return Path(shutil.copytree(artifact, to / artifact.name))
