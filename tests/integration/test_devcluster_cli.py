"""`netsched dev-cluster` as a user runs it: up, kubectl, status, down, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client

from netsched.devcluster.binaries import ensure_binaries, read_versions
from netsched.devcluster.devcluster import COMPONENTS, DevCluster
from netsched.devcluster.processes import listens, pid_alive
from netsched.devcluster.wait import poll

NETSCHED = [sys.executable, "-m", "netsched"]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([*NETSCHED, *args], capture_output=True, text=True, check=check, timeout=300)


def processes_using(directory) -> list[str]:
    """Command lines of live processes that mention `directory` (every component's flags do)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(directory).encode() in a for a in args) and b"pytest" not in args[0]:
            found.append(b" ".join(args).decode(errors="replace"))
    return [c for c in found if "-m netsched dev-cluster" not in c]  # the CLI under test itself


def recorded_pids(directory) -> list[int]:
    state = json.loads((directory / "state.json").read_text())
    return [c["pid"] for c in state["components"].values()]


@pytest.fixture(scope="module")
def bin_dir():
    return ensure_binaries(quiet=True)


def test_up_kubectl_status_down(tmp_path, bin_dir):
    d = str(tmp_path)
    up = run("dev-cluster", "up", "--dir", d, "--nodes", "3")
    assert "3 GPU nodes Ready" in up.stdout
    pids = [pid for pid in recorded_pids(tmp_path) if pid_alive(pid)]
    try:
        assert len(pids) == len(COMPONENTS) - 1  # all but Kueue, which runs only with --kueue
        kubeconfig = run("dev-cluster", "kubeconfig", "--dir", d).stdout.strip()
        nodes = subprocess.run(
            [str(bin_dir / "kubectl"), "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers"],
            capture_output=True, text=True, check=True, env={**os.environ, "KUBECACHEDIR": d},
        ).stdout.splitlines()
        assert len(nodes) == 3 and all(line.split()[1] == "Ready" for line in nodes)
        status = json.loads(run("dev-cluster", "status", "--dir", d).stdout)
        assert status["nodes_ready"] == 3
        assert all(c["running"] for c in status["components"].values())

        again = run("dev-cluster", "up", "--dir", d, check=False)
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        run("dev-cluster", "down", "--dir", d)
    assert not [pid for pid in pids if pid_alive(pid)]
    assert not processes_using(tmp_path)
    assert run("dev-cluster", "status", "--dir", d, check=False).returncode == 1


def test_foreground_cluster_stops_everything_on_ctrl_c(tmp_path, bin_dir):
    proc = subprocess.Popen([*NETSCHED, "dev-cluster", "up", "--foreground", "--dir", str(tmp_path),
                             "--nodes", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if "Ctrl-C stops every component" in line:
                break
        pids = recorded_pids(tmp_path)
        assert all(pid_alive(pid) for pid in pids)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    except BaseException:
        DevCluster(directory=tmp_path).down(quiet=True)  # a failed run must not leave a cluster behind
        raise
    finally:
        proc.kill()
    poll(lambda: not any(pid_alive(pid) for pid in pids), 10, "every component to exit")


def test_ctrl_c_during_start_up_stops_what_had_started(tmp_path, bin_dir):
    """Ctrl-C once the apiserver is up and the rest is still starting. The controller-manager is
    one that never becomes healthy, so start-up is still waiting for it when the signal comes,
    however busy the machine (a real one could finish starting before the signal, and such a run
    tests nothing)."""
    stalled = binaries_with(tmp_path / "bin", bin_dir, "kube-controller-manager",
                            "#!/bin/sh\nwhile :; do sleep 1; done\n")
    directory = tmp_path / "cluster"
    proc = subprocess.Popen([*NETSCHED, "dev-cluster", "up", "--dir", str(directory), "--nodes", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "NETSCHED_BIN_DIR": str(stalled)}, preexec_fn=as_in_a_terminal)
    try:
        for line in proc.stdout:
            if line.startswith("kube-apiserver ready"):
                break
        poll(lambda: len(recorded_pids(directory)) >= 3, 60, "the controller-manager to be started")
        pids = recorded_pids(directory)
        proc.send_signal(signal.SIGINT)
        # stopping etcd and the apiserver may take each its 10 s grace and more on a loaded machine
        code = proc.wait(timeout=300)
        said = proc.stdout.read()
    finally:
        proc.kill()
    assert code == 130, said
    assert not any(pid_alive(pid) for pid in pids)
    assert not processes_using(directory)


def as_in_a_terminal() -> None:
    """Ctrl-C as a user at a terminal sends it: a CI job started in the background inherits SIGINT
    ignored, and Python then leaves it ignored, so the signal would never reach `up`."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def binaries_with(directory: Path, bin_dir: Path, name: str, script: str) -> Path:
    """A copy of the binaries directory (links) in which `name` is the given shell script."""
    directory.mkdir()
    for binary in bin_dir.iterdir():
        (directory / binary.name).symlink_to(binary)
    (directory / name).unlink()
    (directory / name).write_text(script)
    (directory / name).chmod(0o755)
    return directory


def test_binaries_report_the_pinned_versions(bin_dir):
    versions = read_versions()
    k8s = versions["KUBERNETES_VERSION"]
    for binary in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        out = subprocess.run([str(bin_dir / binary), "--version"], capture_output=True, text=True).stdout
        assert out.strip() == f"Kubernetes {k8s}"
    kubectl = subprocess.run([str(bin_dir / "kubectl"), "version", "--client"],
                             capture_output=True, text=True).stdout
    assert f"Client Version: {k8s}" in kubectl
    etcd = subprocess.run([str(bin_dir / "etcd"), "--version"], capture_output=True, text=True).stdout
    assert f"etcd Version: {versions['ETCD_VERSION'].removeprefix('v')}" in etcd
    kwok = subprocess.run([str(bin_dir / "kwok"), "--version"], capture_output=True, text=True).stdout
    assert versions["KWOK_VERSION"] in kwok
    helm = subprocess.run([str(bin_dir / "helm"), "version", "--short"], capture_output=True, text=True)
    assert helm.stdout.startswith(versions["HELM_VERSION"])


def test_a_failed_start_names_the_component_shows_its_log_and_cleans_up(tmp_path, bin_dir):
    broken = binaries_with(tmp_path / "bin", bin_dir, "kube-scheduler",
                           "#!/bin/sh\necho 'E1123 invalid scheduler config: boom' >&2\nexit 1\n")
    cluster_dir = tmp_path / "cluster"

    result = subprocess.run([*NETSCHED, "dev-cluster", "up", "--dir", str(cluster_dir)], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "NETSCHED_BIN_DIR": str(broken)})

    assert result.returncode == 1
    assert "kube-scheduler exited during start-up" in result.stderr
    assert "invalid scheduler config: boom" in result.stderr
    assert str(cluster_dir / "logs" / "kube-scheduler.log") in result.stderr
    assert not processes_using(cluster_dir)


def test_a_port_taken_before_its_component_binds_it_starts_the_cluster_again(tmp_path, bin_dir, monkeypatch):
    # Another process (as a second dev-cluster starting beside this one would) holds the port picked
    # for KWOK and answers its health check: KWOK cannot bind it and exits, the cluster starts again.
    class Healthy(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    squatter = ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=squatter.serve_forever, daemon=True).start()
    taken = squatter.server_address[1]
    picks, pick = [], DevCluster._pick_ports

    def pick_ports():
        picks.append({**pick(), **({} if picks else {"kwok": taken})})
        return picks[-1]

    monkeypatch.setattr(DevCluster, "_pick_ports", staticmethod(pick_ports))
    said: list[str] = []
    cluster = DevCluster(directory=tmp_path / "cluster", nodes=2, progress=said.append)
    try:
        state = cluster.up()
        assert picks[0]["kwok"] == taken and state["ports"]["kwok"] != taken
        assert any("kwok's port was taken by another process; starting again on new ports" in m for m in said)
        assert listens(state["components"]["kwok"]["pid"], state["ports"]["kwok"])
        assert len(client.CoreV1Api(cluster.api_client()).list_node().items) == 2
    finally:
        cluster.down(quiet=True)
        squatter.shutdown()
    assert not processes_using(tmp_path / "cluster")
