"""Short TCP probes between agents: round-trip time and achievable bandwidth.

Every agent serves one TCP port. A connection starts with one byte saying what it is:

  b"E"  echo: each byte sent is sent back (RTT: the fastest of a few one-byte round trips)
  b"B"  sink: an 8-byte big-endian length N, then N bytes; the server answers with N and the
        seconds between the first and last byte it received (struct "!Qd")

Bandwidth is measured at the receiver, from first to last byte, so connection set-up
is not counted. A probe is bounded in size and time: the caller sizes it to last about
`target_seconds` at the last measured rate, never more than the budget allows.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from dataclasses import dataclass

ECHO, SINK = b"E", b"B"
REPLY = struct.Struct("!Qd")
CHUNK = 64 * 1024
_ZEROS = memoryview(bytes(CHUNK))


class ProbeError(OSError):
    """A probe could not be completed; the message names the peer and what failed."""


@dataclass(frozen=True)
class Bandwidth:
    mbps: float
    bytes_sent: int
    seconds: float


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        kind = sock.recv(1)
        if kind == ECHO:
            while byte := sock.recv(1):
                sock.sendall(byte)
        elif kind == SINK:
            (size,) = struct.unpack("!Q", recv_exact(sock, 8))
            got, first, last = 0, 0.0, 0.0  # 0.0: no data yet
            while got < size:
                data = sock.recv(min(CHUNK, size - got))
                if not data:
                    return
                last = time.perf_counter()
                first = first or last
                got += len(data)
            sock.sendall(REPLY.pack(got, (last - first) if first else 0.0))


class ProbeServer(socketserver.ThreadingTCPServer):
    """Answers echo and sink probes on (host, port) from a daemon thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int):
        super().__init__((host, port), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, name="probe-server", daemon=True)

    def start(self) -> ProbeServer:
        self.thread.start()
        return self

    @property
    def port(self) -> int:
        return self.server_address[1]


def measure_rtt(host: str, port: int, samples: int = 5, timeout: float = 2.0) -> float:
    """Fastest round trip of one byte, in milliseconds: the path's own delay. A median would
    swing with whatever else queues on the link at that moment (another agent's bandwidth
    probe can add tens of ms); load shows in the bandwidth and NIC figures instead."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(ECHO)
            times = []
            for _ in range(samples):
                t0 = time.perf_counter()
                sock.sendall(b"x")
                if sock.recv(1) != b"x":
                    raise ProbeError(f"echo probe to {host}:{port}: connection closed")
                times.append(time.perf_counter() - t0)
    except OSError as exc:
        raise ProbeError(f"RTT probe to {host}:{port} failed: {exc}") from exc
    return min(times) * 1000


def measure_bandwidth(host: str, port: int, size: int, timeout: float = 10.0) -> Bandwidth:
    """Send `size` bytes and return the rate the receiver saw."""
    got, seconds = sink(host, port, size, timeout)
    if got != size or seconds <= 0:
        raise ProbeError(f"bandwidth probe to {host}:{port}: the receiver got {got} of {size} bytes "
                         f"in {seconds:.3f} s; probe too small to time")
    return Bandwidth(got * 8 / seconds / 1e6, size, seconds)


def sink(host: str, port: int, size: int, timeout: float = 10.0) -> tuple[int, float]:
    """Send `size` bytes to a sink: the bytes it received and the seconds from its first to last."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(SINK + struct.pack("!Q", size))
            send_zeros(sock, size)
            return REPLY.unpack(recv_exact(sock, REPLY.size))
    except OSError as exc:
        raise ProbeError(f"bandwidth probe to {host}:{port} failed: {exc}") from exc


def send_zeros(sock: socket.socket, size: int) -> None:
    """`size` bytes of payload, a chunk at a time."""
    while size > 0:
        n = min(CHUNK, size)
        sock.sendall(_ZEROS[:n])
        size -= n


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        data = sock.recv(n - len(buf))
        if not data:
            raise ProbeError("connection closed mid-reply")
        buf += data
    return buf
