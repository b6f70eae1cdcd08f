"""Fixtures shared by the suites that run a real cluster: each suite's conftest provides `core`
(a CoreV1Api on its own cluster), and a test asking for `namespace` gets a fresh one on it."""

from __future__ import annotations

import os
from collections.abc import Iterator

# One OpenMP thread per process, set before scikit-learn loads its runtime: the lanes run two pytest
# workers on two cores, and OpenMP threads waiting on a core another process holds stall model fits on
# a loaded machine (a 600-job `netsched train` beside a CPU hog: 37 s with one thread, not done in 400 s
# with the default). Subprocesses the tests start (`netsched train`, the extender) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from netsched.testing.cluster import scratch_namespace


@pytest.fixture
def namespace(core) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards, so tests cannot see each other's pods."""
    with scratch_namespace(core) as name:
        yield name
