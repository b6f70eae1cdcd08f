"""The real node's command lines, prerequisites, cluster DNS answers and the apiserver's tunnel into
the node's network, without starting anything."""

import contextlib
import socket
import struct
import threading
from pathlib import Path

import pytest
import yaml

from netsched.devcluster import nodenet, realnode
from netsched.devcluster.nodenet import answer
from netsched.devcluster.realnode import RealNode


def node(tmp_path: Path) -> RealNode:
    return RealNode(tmp_path / "node", Path("/bin-dir"))


def test_the_kubelet_joins_containerds_mount_namespace_and_the_nodes_netns(tmp_path):
    n = node(tmp_path)
    kubelet = n.argv("kubelet", {}, containerd_pid=4242)
    assert kubelet[:3] == ["nsenter", "--mount=/proc/4242/ns/mnt", f"--net=/run/netns/{n.netns}"]
    assert "/bin-dir/kubelet" in kubelet and f"--node-ip={realnode.NODE_IP}" in kubelet


def test_containerd_keeps_the_hosts_sys_and_sees_the_kubelets_sysctls_read_only(tmp_path):
    n = node(tmp_path)
    argv = n.argv("containerd", {})
    assert argv[:2] == ["nsenter", f"--net=/run/netns/{n.netns}"]  # not `ip netns exec`: it remounts /sys
    script = argv[-1]
    for key in realnode.KUBELET_SYSCTLS:
        assert f"mount -o remount,bind,ro /proc/sys/{key}" in script
    for path in realnode.HOST_PATHS:
        assert f" {path} &&" in script
    assert script.endswith(f"exec containerd --config {n.directory / 'containerd.toml'}")


def test_each_cluster_directory_gets_its_own_netns(tmp_path):
    assert node(tmp_path / "a").netns != node(tmp_path / "b").netns
    assert node(tmp_path).netns.startswith("netsched-")


def test_missing_prerequisites_are_named_with_the_command_that_installs_them(monkeypatch):
    monkeypatch.setattr(realnode.os, "geteuid", lambda: 1000)
    missing = ("umoci", "conntrack")
    monkeypatch.setattr(realnode.shutil, "which", lambda tool: None if tool in missing else "/x")
    with pytest.raises(realnode.RealNodeError) as err:
        realnode.check_prerequisites()
    assert "run as root" in str(err.value)
    assert "apt-get install -y conntrack umoci" in str(err.value)


class FakeServices:
    def lookup(self, name: str) -> list[str]:
        return {"netsched-extender.netsched-system": ["10.0.0.42"],
                "headless.netsched-system": ["10.88.0.7", "10.88.0.9"]}.get(name, [])


def query(name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, 1)


@pytest.mark.parametrize(("name", "qtype", "rcode", "ips"), [
    pytest.param("netsched-extender.netsched-system.svc.cluster.local", 1, 0, ["10.0.0.42"], id="service"),
    pytest.param("headless.netsched-system.svc.cluster.local", 1, 0, ["10.88.0.7", "10.88.0.9"],
                 id="headless-endpoints-in-order"),
    pytest.param("netsched-extender.netsched-system.svc.svc.cluster.local", 1, 3, [], id="search-miss"),
    pytest.param("example.com", 1, 3, [], id="outside-the-cluster"),
    pytest.param("netsched-extender.netsched-system.svc.cluster.local", 28, 0, [], id="aaaa-no-data"),
])
def test_cluster_dns_answers_services_only(name, qtype, rcode, ips):
    response = answer(query(name, qtype), FakeServices())  # type: ignore[arg-type]
    ident, flags, _qd, ancount = struct.unpack("!HHHH", response[:8])
    assert ident == 7 and flags & 0xF == rcode
    assert ancount == len(ips)
    records = response[len(response) - 16 * len(ips):]  # each: name pointer, type, class, TTL, length, IP
    assert [socket.inet_ntoa(records[16 * k + 12:16 * k + 16]) for k in range(len(ips))] == ips


def tunnel(request: bytes, monkeypatch) -> bytes:
    """What the apiserver reads back after sending `request` to node-net's egress socket, whose
    connections are made here in the test's own network namespace; a server on 127.0.0.1 echoes."""
    monkeypatch.setattr(nodenet, "in_netns", lambda name: contextlib.nullcontext())
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)
    threading.Thread(target=echo, daemon=True).start()
    apiserver, proxy = socket.socketpair()
    threading.Thread(target=nodenet._tunnel, args=(proxy, "netns"), daemon=True).start()
    apiserver.settimeout(5)
    apiserver.sendall(request.replace(b"PORT", str(port).encode()))
    reply = b""
    while not reply.endswith(b"early") and (chunk := apiserver.recv(4096)):  # or until node-net closes
        reply += chunk
    return reply


def test_the_egress_socket_tunnels_the_apiservers_connect_requests(monkeypatch):
    reply = tunnel(b"CONNECT 127.0.0.1:PORT HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\nearly", monkeypatch)
    assert reply == b"HTTP/1.1 200 Connection established\r\n\r\nearly"  # bytes sent ahead pass through


def test_the_egress_socket_refuses_what_is_not_a_connect(monkeypatch):
    assert tunnel(b"GET / HTTP/1.1\r\n\r\n", monkeypatch).startswith(b"HTTP/1.1 502 ")


def test_the_apiserver_reaches_the_cluster_through_node_nets_socket(tmp_path):
    n = node(tmp_path)
    admin = tmp_path / "admin.kubeconfig"
    admin.write_text(yaml.safe_dump({"clusters": [{"cluster": {"server": "https://127.0.0.1:6443"}}]}))
    assert f"--egress-socket={n.egress_socket}" in n.argv("node-net", {"admin": admin})
    [selection] = n.egress_selection()["egressSelections"]
    assert selection["name"] == "cluster"
    assert selection["connection"]["transport"]["uds"]["udsName"] == str(n.egress_socket)
