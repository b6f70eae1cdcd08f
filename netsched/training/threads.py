"""How many threads the fits of `netsched train` and `retrain` run on: scikit-learn's OpenMP pool and
numpy's BLAS, held to `--threads` (default 1) and never more than the CPUs the process may use.

One thread is the default because more bought nothing and cost a great deal when the machine is
busy. On a 2-core machine (docs/benchmarks-history.md, "Training beside a CPU hog"), quiet, the model
card's 6,000-job train took 35.0 s on one thread and 36.0 s on two; a 600-job one 10.5 s and 11.5 s.
Beside `yes > /dev/null` the 600-job train took 29.6 s on one thread and had not finished after 600 s
on two: gradient boosting runs thousands of short parallel loops per fit, and each waits at its end
for the thread the kernel has put behind the other process. The retrain CronJob shares its node with
whatever runs there, so the chart passes `retrain.threads` (1) too. The limit is set here, after
scikit-learn has loaded its OpenMP runtime (threadpoolctl), for the command's whole run: it wins over
OMP_NUM_THREADS.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"


def usable_cpus(cpu_max: Path = CPU_MAX) -> int:
    """The CPUs this process may run on (its affinity), fewer where its cgroup's CPU quota allows
    fewer (a container's CPU limit, rounded up); at least 1."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 CPU controller here: the affinity is the limit
    return max(1, cpus)


@contextmanager
def fitting_threads(threads: int) -> Iterator[int]:
    """Within: OpenMP and BLAS thread pools held to `threads`, at most usable_cpus(); yields that
    number. The pools must be loaded already (import scikit-learn first), as threadpoolctl limits only
    the libraries it finds loaded."""
    from threadpoolctl import threadpool_limits

    limit = max(1, min(threads, usable_cpus()))
    with threadpool_limits(limits=limit):
        yield limit
