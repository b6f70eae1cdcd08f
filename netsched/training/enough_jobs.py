"""How many jobs are enough to train on: below `MIN_JOBS` usable jobs `train` and `retrain` change
nothing (`TooFewJobs`). Light to import: `--help` says the number without loading scikit-learn."""

from __future__ import annotations

# After the default 20% holdout (two jobs to judge a challenger on), eight earlier jobs give each of
# train.TIME_BLOCKS (5) a job, so each of the four time folds trains on one block or more and tests on
# another. Fewer: nothing is trained, nothing changed, exit 0.
MIN_JOBS = 10


class TooFewJobs(Exception):
    """Fewer than MIN_JOBS usable jobs in the data: nothing is trained, nothing written."""
