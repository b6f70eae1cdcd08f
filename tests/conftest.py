"""Fixtures shared by the suites that run a real cluster: each suite's conftest provides `core`
(a CoreV1Api on its own cluster), and a test asking for `namespace` gets a fresh one on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from netsched.testing.cluster import scratch_namespace


@pytest.fixture
def namespace(core) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards, so tests cannot see each other's pods."""
    with scratch_namespace(core) as name:
        yield name
