"""One real dev-cluster for the whole integration session.

If the control-plane binaries cannot be built, the fixture raises the build error
and every integration test errors with it: nothing is skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.devcluster.devcluster import DevCluster
from netsched.testing.cluster import plans_deleted, priority_classes, running


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("dev-cluster"), nodes=8)
    with running(cluster):
        yield cluster


@pytest.fixture(scope="session")
def core(dev_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(dev_cluster.api_client())


@pytest.fixture(scope="session")
def jobs(dev_cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(dev_cluster.api_client())


@pytest.fixture(scope="module")
def priorities(dev_cluster) -> Iterator[dict[str, str]]:
    """PriorityClasses "low" and "high" (netsched.testing.cluster.LOW, HIGH): level -> name."""
    with priority_classes(dev_cluster.api_client()) as names:
        yield names


@pytest.fixture
def custom(dev_cluster) -> Iterator[client.CustomObjectsApi]:
    """A CustomObjectsApi; the PackingPlans made meanwhile are deleted afterwards."""
    with plans_deleted(client.CustomObjectsApi(dev_cluster.api_client())) as api:
        yield api
