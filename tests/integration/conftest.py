"""One real dev-cluster for the whole integration session.

If the control-plane binaries cannot be built, the fixture raises the build error
and every integration test errors with it: nothing is skipped silently.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.wait import poll


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory) -> DevCluster:
    cluster = DevCluster(directory=tmp_path_factory.mktemp("dev-cluster"), nodes=8)
    cluster.up()
    yield cluster
    cluster.down(quiet=True)
    assert not cluster.running_components(), "dev-cluster processes survived `down`"


@pytest.fixture(scope="session")
def core(dev_cluster) -> client.CoreV1Api:
    return client.CoreV1Api(dev_cluster.api_client())


@pytest.fixture
def namespace(core) -> str:
    """A fresh namespace per test, deleted afterwards, so tests cannot see each other's pods."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    poll(lambda: core.read_namespaced_service_account("default", name), 60,
         f"the default ServiceAccount in {name}")
    yield name
    core.delete_namespace(name)
    # Wait until its pods are gone so their GPUs are free for the next test.
    poll(lambda: not core.list_namespaced_pod(name).items, 120, f"the pods of {name} to go")
