"""What the testbed runner (netsched.datagen.testbed_runs) executes inside one site's network namespace.

Run as `ip netns exec <ns> python -m netsched.datagen.testbed_worker <command> ...`:

  serve    answer probes (echo and sink, netsched.telemetry.probe) on PROBE_PORT, pulls on
           SOURCE_PORT and background floods on FLOOD_PORT (a sink too) until killed
  measure  the telemetry a scheduler has when it places a job: the NIC's rates over a short
           window (before any probe, so probes do not count), then RTT and bandwidth probes to
           each host given; prints JSON
  run      one replica of a job: pull its input shard from the data site, compute, then
           exchange with each peer (send to its sink and pull from its source, all at once);
           prints the wall-clock seconds of each phase as JSON
  flood    send to FLOOD_PORT until killed: background traffic, told apart from jobs' by its port

Pull protocol (SOURCE_PORT): the client sends an 8-byte big-endian length N, the server
sends N bytes and closes. Unlike a probe, a pull moves data from the far site to this one,
so it goes through the far site's shaped egress, as reading a dataset does.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from netsched.telemetry.nic import read_counters
from netsched.telemetry.probe import (
    ProbeError,
    ProbeServer,
    measure_bandwidth,
    measure_rtt,
    recv_exact,
    send_zeros,
    sink,
)

PROBE_PORT, SOURCE_PORT, FLOOD_PORT = 9102, 9103, 9104
FOREVER = 1 << 60  # bytes: a sink transfer that never ends
FIRST_PROBE_BYTES = 64 * 1024  # finds the rough rate that sizes the real probe
PROBE_BYTES = (64 * 1024, 4 * 1024 * 1024)  # bounds of the sized probe


class _Source(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(60)
        (size,) = struct.unpack("!Q", recv_exact(sock, 8))
        send_zeros(sock, size)


class SourceServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def pull(host: str, size: int, timeout: float = 60.0) -> float:
    """Fetch `size` bytes from host's source; seconds from connecting to the last byte."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection((host, SOURCE_PORT), timeout=timeout) as sock:
            sock.sendall(struct.pack("!Q", size))
            got = 0
            while got < size:
                data = sock.recv(min(1 << 20, size - got))
                if not data:
                    raise ProbeError(f"pull from {host}:{SOURCE_PORT}: closed after {got} of {size} bytes")
                got += len(data)
    except OSError as exc:
        raise ProbeError(f"pull of {size} bytes from {host}:{SOURCE_PORT} failed: {exc}") from exc
    return time.perf_counter() - t0


def push(host: str, size: int) -> float:
    """Send `size` bytes to host's sink; seconds until the receiver has them all. (Not a rate
    probe: a small exchange may arrive in one burst, too fast for the receiver to time.)"""
    t0 = time.perf_counter()
    got, _ = sink(host, PROBE_PORT, size, timeout=60.0)
    if got != size:
        raise ProbeError(f"push to {host}:{PROBE_PORT}: the receiver got {got} of {size} bytes")
    return time.perf_counter() - t0


def serve(ip: str) -> None:
    source = SourceServer((ip, SOURCE_PORT), _Source)
    ProbeServer(ip, FLOOD_PORT).start()
    ProbeServer(ip, PROBE_PORT).start()  # listening last: once probes answer, pulls do too
    source.serve_forever()


def nic_rates(seconds: float, interface: str = "eth0") -> tuple[float, float]:
    """Received and transmitted Mbit/s over `seconds`, from this namespace's /proc/net/dev."""
    before, t0 = read_counters()[interface], time.monotonic()
    time.sleep(seconds)
    after, dt = read_counters()[interface], time.monotonic() - t0
    return (after[0] - before[0]) * 8 / dt / 1e6, (after[1] - before[1]) * 8 / dt / 1e6


def probe_link(host: str, probe_seconds: float) -> dict[str, float | None]:
    """RTT and bandwidth to host; None for what could not be measured (the scheduler would not know it)."""
    try:
        rtt = measure_rtt(host, PROBE_PORT)
    except ProbeError:
        rtt = None
    try:
        rough = measure_bandwidth(host, PROBE_PORT, FIRST_PROBE_BYTES).mbps
        size = int(min(max(rough * 1e6 / 8 * probe_seconds, PROBE_BYTES[0]), PROBE_BYTES[1]))
        bw = measure_bandwidth(host, PROBE_PORT, size).mbps
    except ProbeError:
        bw = None
    return {"rtt_ms": rtt, "bw_mbps": bw}


def measure(hosts: list[str], nic_seconds: float, probe_seconds: float) -> dict:
    rx, tx = nic_rates(nic_seconds)
    return {"nic_rx_mbps": rx, "nic_tx_mbps": tx, "links": {h: probe_link(h, probe_seconds) for h in hosts}}


def run(data: str, shard_bytes: int, peers: list[str], peer_bytes: int, compute_seconds: float) -> dict:
    """One replica: pull, compute, exchange. The compute is a sleep: GPU work cannot run here,
    the runner scales its length by the node's GPU speed instead."""
    t0 = time.perf_counter()
    pull_s = pull(data, shard_bytes) if shard_bytes else 0.0
    time.sleep(compute_seconds)
    t1 = time.perf_counter()
    if peers and peer_bytes:
        with ThreadPoolExecutor(2 * len(peers)) as pool:
            transfers = [pool.submit(f, p, peer_bytes) for p in peers for f in (push, pull)]
            for transfer in transfers:
                transfer.result()  # raises the first failure
    end = time.perf_counter()
    return {"pull_s": pull_s, "compute_s": compute_seconds, "exchange_s": end - t1, "total_s": end - t0}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m netsched.datagen.testbed_worker")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("serve").add_argument("--ip", required=True, help="this site's address")
    m = sub.add_parser("measure")
    m.add_argument("--host", action="append", default=[], help="a site to probe (repeat)")
    m.add_argument("--nic-seconds", type=float, default=0.3)
    m.add_argument("--probe-seconds", type=float, default=0.25, help="the sized bandwidth probe's length")
    r = sub.add_parser("run")
    r.add_argument("--data", required=True, help="the data site's address")
    r.add_argument("--shard-bytes", type=int, required=True)
    r.add_argument("--peer", action="append", default=[], help="a peer replica's site address (repeat)")
    r.add_argument("--peer-bytes", type=int, default=0, help="bytes sent to and pulled from each peer")
    r.add_argument("--compute-seconds", type=float, required=True)
    sub.add_parser("flood").add_argument("--to", required=True, help="the sink's address")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            serve(args.ip)
        elif args.command == "flood":
            measure_bandwidth(args.to, FLOOD_PORT, FOREVER, timeout=60.0)
        elif args.command == "measure":
            print(json.dumps(measure(args.host, args.nic_seconds, args.probe_seconds)))
        else:
            timings = run(args.data, args.shard_bytes, args.peer, args.peer_bytes, args.compute_seconds)
            print(json.dumps(timings))
    except (OSError, KeyError) as exc:
        print(f"testbed_worker {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
