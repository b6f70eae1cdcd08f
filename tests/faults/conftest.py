"""The fault suite: netsched's components killed and restarted on a real control plane, with the
work they carry in flight. Its own dev-cluster, since it kills that cluster's components; one per
module, so it is gone before the integration tests start theirs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from netsched.devcluster.devcluster import DevCluster
from netsched.testing.cluster import running


@pytest.fixture(scope="module")
def fault_cluster(tmp_path_factory) -> Iterator[DevCluster]:
    # 4 racks of 6 nodes x 8 GPUs: room for a burst of single pods beside rack-bound gangs
    cluster = DevCluster(directory=tmp_path_factory.mktemp("fault-cluster"), nodes=24, racks_per_zone=2,
                         progress=lambda _: None)
    with running(cluster):
        yield cluster


@pytest.fixture(scope="module")
def core(fault_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(fault_cluster.api_client())


@pytest.fixture(scope="module")
def custom(fault_cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(fault_cluster.api_client())
