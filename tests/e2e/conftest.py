"""One dev-cluster with a real kubelet node for the whole e2e suite, and netsched's image and the
upstream kube-scheduler's loaded into that node once: every test installs the chart itself and
leaves no netsched pod behind."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from netsched.devcluster.binaries import ensure_binaries, read_versions
from netsched.devcluster.devcluster import DevCluster
from netsched.devcluster.realnode import RealNode
from netsched.testing.chart import real_node, sh, timed
from netsched.testing.cluster import running

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Iterator[DevCluster]:
    """8 KWOK GPU nodes (2 zones of 2 racks of 2 nodes, 8 GPUs each) and the real node the chart's
    pods run on; the cluster's own extender and operator are off: the chart brings its own."""
    t = time.monotonic()
    cluster = DevCluster(directory=tmp_path_factory.mktemp("e2e-cluster"), nodes=8, real_node=True,
                         run_extender=False, run_operator=False)
    with running(cluster):
        timed("dev-cluster up --real-node", t)
        yield cluster
        assert not host_network_traces(), "the real node wrote to the host's network namespace"
    assert not real_node(cluster).leftovers(), "the real node left host state"
    assert not host_network_traces()


def host_network_traces() -> list[str]:
    """kube-proxy's and the CNI's iptables chains, and the node's bridge, in the host's namespace."""
    rules = sh("iptables-save").splitlines()
    links = sh("ip", "-o", "link", "show").splitlines()
    return [r for r in rules if "KUBE-" in r or "CNI-" in r] + [x for x in links if ": cni0:" in x]


@pytest.fixture(scope="session")
def image(cluster, tmp_path_factory) -> str:
    """netsched's image (hack/image/build.sh, cached), and the upstream kube-scheduler's layout (the
    binary built here at /usr/local/bin, on the same base: it links glibc) under the chart's default
    name, both in the real node's containerd. Returns netsched's image name."""
    t = time.monotonic()
    work = tmp_path_factory.mktemp("images")
    bin_dir = ensure_binaries(quiet=True, node=True)
    node = RealNode(cluster.directory / "node", bin_dir)
    archive = Path(sh("bash", ROOT / "hack/image/build.sh", "--archive").strip().splitlines()[-1])
    node.import_image(archive)
    scheduler = f"registry.k8s.io/kube-scheduler:{read_versions()['KUBERNETES_VERSION']}"
    ctr = sh("buildah", "from", "--pull=never", "docker.io/library/python:3.11-slim").strip()
    try:
        sh("buildah", "copy", ctr, bin_dir / "kube-scheduler", "/usr/local/bin/kube-scheduler")
        sh("buildah", "config", "--entrypoint", '["/usr/local/bin/kube-scheduler"]', "--user", "65532", ctr)
        sh("buildah", "commit", "--quiet", ctr, scheduler)
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)
    tarball = work / "kube-scheduler.tar"
    sh("buildah", "push", "--quiet", scheduler, f"docker-archive:{tarball}:{scheduler}")
    sh("buildah", "rmi", scheduler)  # made again next run: no untagged copy piles up per run
    node.import_image(tarball)
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert version, "no version in pyproject.toml"
    timed("image built and loaded, kube-scheduler image loaded", t)
    return f"netsched:{version[1]}"  # hack/image/build.sh's tag
