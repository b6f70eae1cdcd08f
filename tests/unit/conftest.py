"""Unit tests run scikit-learn's OpenMP code on one thread, as the extender serves (server.py).

On a machine whose cores are busy, OpenMP's spinning worker threads wait on each other: fitting
the small models these tests train took 100 s instead of 2 s under a load of 5 on 2 cores, with
the same results. The variable covers libraries loaded later; the limit, those loaded already.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def one_openmp_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="openmp"):
        yield
