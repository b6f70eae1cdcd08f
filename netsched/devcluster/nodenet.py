"""The real node's view of the control plane: the apiserver and cluster DNS inside its netns.

The dev-cluster's control plane listens on the host's 127.0.0.1; the real node (kubelet,
kube-proxy, containerd, pods) lives in a private network namespace with no route to it. This
process opens its listening sockets inside that namespace and connects out from the host's:

- TCP on <node IP>:<apiserver port> is relayed to 127.0.0.1:<apiserver port>, so the kubelet
  and, through the `kubernetes` Service's endpoint, every pod reach the apiserver;
- UDP on <node IP>:53 answers A queries for `<service>.<namespace>.svc.cluster.local` with the
  Service's ClusterIP, or for a headless Service the addresses of its ready endpoints, as CoreDNS
  does (NXDOMAIN otherwise): the cluster DNS the kubelet hands to pods, a stand-in for CoreDNS;
- the other way, a Unix socket on the host takes HTTP CONNECT requests and connects from inside
  the namespace: the apiserver's egress to the cluster (its `cluster` egress selection), so that it
  reaches admission webhooks behind Services and the kubelet, as a konnectivity proxy would.

Nothing binds or changes anything in the host's network namespace.
    python -m netsched.devcluster.nodenet --netns NAME --node-ip IP --apiserver-port P --kubeconfig F \
        --egress-socket PATH
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import socket
import struct
import threading
import time

from kubernetes import client

from netsched.api.connect import api_client

CLONE_NEWNET = 0x40000000
DOMAIN = "svc.cluster.local"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # on the EndpointSlices of a Service


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name: str):
    """Run the block with this thread in network namespace `name` (sockets keep theirs after)."""
    with open("/proc/self/ns/net") as home, open(f"/run/netns/{name}") as target:
        _setns(target.fileno())
        try:
            yield
        finally:
            _setns(home.fileno())


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def relay(listener: socket.socket, target: tuple[str, int]) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            upstream = socket.create_connection(target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def serve_egress(listener: socket.socket, netns: str) -> None:
    """HTTP CONNECT over the Unix socket: each tunnel connects to its target from inside `netns`."""
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_tunnel, args=(conn, netns), daemon=True).start()


def _tunnel(conn: socket.socket, netns: str) -> None:
    request = b""
    while b"\r\n\r\n" not in request and len(request) < 8192:
        chunk = conn.recv(4096)
        if not chunk:
            conn.close()
            return
        request += chunk
    head, _, early = request.partition(b"\r\n\r\n")
    method, target, *_ = head.split(b"\r\n", 1)[0].decode(errors="replace").split(" ") + ["", ""]
    host, _, port = target.rpartition(":")
    try:
        if method != "CONNECT" or not port.isdigit():
            raise OSError(f"not a CONNECT request: {method} {target}")
        with in_netns(netns):  # the socket keeps the namespace it was made in
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        upstream.settimeout(None)
    except OSError:
        with contextlib.suppress(OSError):
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
        conn.close()
        return
    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    if early:
        upstream.sendall(early)
    for a, b in ((conn, upstream), (upstream, conn)):
        threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


class Services:
    """`name.namespace` -> the addresses a lookup answers: the ClusterIP, or a headless Service's
    ready endpoints (from its EndpointSlices). Read again at most once a second."""

    def __init__(self, kubeconfig: str):
        api = api_client(kubeconfig)
        self.core, self.discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
        self.table: dict[str, list[str]] = {}
        self.read_at = 0.0

    def lookup(self, name: str) -> list[str]:
        if time.monotonic() - self.read_at > 1.0:
            with contextlib.suppress(Exception):  # answer from the last table if the apiserver hiccups
                self.table = self._read()
                self.read_at = time.monotonic()
        return self.table.get(name, [])

    def _read(self) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        headless = set()
        for s in self.core.list_service_for_all_namespaces().items:
            key = f"{s.metadata.name}.{s.metadata.namespace}"
            if s.spec.cluster_ip == "None":
                headless.add(key)
            elif s.spec.cluster_ip:
                table[key] = [s.spec.cluster_ip]
        if headless:
            for piece in self.discovery.list_endpoint_slice_for_all_namespaces().items:
                key = f"{(piece.metadata.labels or {}).get(SERVICE_NAME_LABEL)}.{piece.metadata.namespace}"
                if key not in headless:
                    continue
                for e in piece.endpoints or ():
                    if not e.conditions or e.conditions.ready is not False:  # unset means ready
                        table.setdefault(key, []).extend(e.addresses)
        return table


def answer(query: bytes, services: Services) -> bytes | None:
    """A DNS response to `query`: the A records of a Service, else NXDOMAIN."""
    if len(query) < 12:
        return None
    ident, _flags, qdcount = struct.unpack("!HHH", query[:6])
    labels, i = [], 12
    while i < len(query) and query[i]:
        labels.append(query[i + 1:i + 1 + query[i]].decode(errors="replace").lower())
        i += 1 + query[i]
    end = i + 5  # the root label, QTYPE, QCLASS
    if qdcount != 1 or end > len(query):
        return None
    qtype = struct.unpack("!H", query[i + 1:i + 3])[0]
    question = query[12:end]
    name = ".".join(labels)
    ips = services.lookup(name.removesuffix("." + DOMAIN)) if name.endswith("." + DOMAIN) else []
    if not ips:  # no such Service, or a headless one with no ready endpoint
        return struct.pack("!HHHHHH", ident, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
    if qtype != 1:  # the name exists, but has no record of that type (AAAA): NOERROR, no answer
        return struct.pack("!HHHHHH", ident, 0x8180, 1, 0, 0, 0) + question
    records = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(ip) for ip in ips)
    return struct.pack("!HHHHHH", ident, 0x8180, 1, len(ips), 0, 0) + question + records


def serve_dns(sock: socket.socket, services: Services) -> None:
    while True:
        query, peer = sock.recvfrom(512)
        with contextlib.suppress(Exception):
            response = answer(query, services)
            if response:
                sock.sendto(response, peer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--netns", required=True)
    parser.add_argument("--node-ip", required=True)
    parser.add_argument("--apiserver-port", type=int, required=True)
    parser.add_argument("--kubeconfig", required=True, help="for the Service lookups of the DNS")
    parser.add_argument("--egress-socket", required=True, help="the apiserver's HTTP CONNECT proxy (a path)")
    args = parser.parse_args()
    with in_netns(args.netns):
        api = socket.create_server((args.node_ip, args.apiserver_port), backlog=128)
        dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dns.bind((args.node_ip, 53))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(args.egress_socket)  # left by a killed earlier run
    egress = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    egress.bind(args.egress_socket)
    egress.listen(128)
    threading.Thread(target=serve_dns, args=(dns, Services(args.kubeconfig)), daemon=True).start()
    threading.Thread(target=serve_egress, args=(egress, args.netns), daemon=True).start()
    print(f"relaying {args.node_ip}:{args.apiserver_port} in netns {args.netns} to 127.0.0.1; "
          f"DNS for *.{DOMAIN} on {args.node_ip}:53", flush=True)
    relay(api, ("127.0.0.1", args.apiserver_port))


if __name__ == "__main__":
    main()
