"""Measure the scheduler extender's latency: filter and prioritize over HTTP, 100 to 5,000 nodes.

    python bench/extender_latency.py [--quick] [--seed 1]

Serves the real extender (uvicorn, httptools, uvloop, orjson) in a thread and sends it
kube-scheduler's requests over one keep-alive connection; compares that stack with
http.server and the json module at 5,000 nodes; times the extender without HTTP.
Prints a markdown section and rewrites "Extender latency" in docs/benchmarks-history.md.
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import random
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import orjson
import uvicorn

from netsched.api.labels import GPU_RESOURCE, JOB_LABEL
from netsched.devcluster.topology import gpu_nodes
from netsched.extender.engine import Extender
from netsched.extender.protocol import parse_args
from netsched.extender.read_model import ReadModel
from netsched.extender.server import _answer, _filter, _prioritize, make_app, settle_runtime

sys.path.insert(0, str(Path(__file__).parent))
from report import publish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/extender-v1/filter-args.nodeCacheCapable-true.json"
SECTION = "## Extender latency"
SIZES = (100, 1000, 5000)
BIG = 5000
JOB = "bench-job"
JOB_PODS = 3  # the job's pods already bound, so scoring takes the peer path
SHUFFLES = 8  # distinct request bodies per size; kube-scheduler's node order varies
WARMUP = 50
REQUESTS = {100: 1000, 1000: 1000, 5000: 300}
QUICK_WARMUP, QUICK_REQUESTS = 10, {100: 100, 1000: 100, 5000: 30}
HEADERS = {"Content-Type": "application/json"}
VERBS = {"filter": _filter, "prioritize": _prioritize}


# ---- the cluster and the requests ---------------------------------------------------


def bound_pod(i: int, node: str, gpus: int, job: str | None, namespace: str = "ml") -> dict:
    labels = {JOB_LABEL: job} if job else {}
    return {"metadata": {"name": f"p{i}", "namespace": namespace, "uid": f"uid-{i}", "labels": labels},
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}]},
            "status": {"phase": "Running"}}


def build_cache(n: int, seed: int) -> tuple[ReadModel, list[str]]:
    """n nodes in 4 zones, about n/2 GPU pods on them (half in 4-pod jobs), and bench-job's pods."""
    rng = random.Random(seed)
    nodes = [g.manifest() for g in gpu_nodes(n, zones=4, racks_per_zone=max(n // 40, 1))]
    names = [node["metadata"]["name"] for node in nodes]
    pods = [bound_pod(i, rng.choice(names), rng.randint(1, 4), f"job-{i // 4}" if i % 8 < 4 else None)
            for i in range(n // 2)]
    # the request's pod lives in "default" (the fixture's namespace); its job's pods must too
    pods += [bound_pod(n + k, node, 2, JOB, "default") for k, node in enumerate(rng.sample(names, JOB_PODS))]
    cache = ReadModel(max_age=3600.0)  # never stale during a run: no watch keeps it fresh here
    cache.replace("nodes", nodes)
    cache.replace("pods", pods)
    cache.replace("packingplans", [])
    settle_runtime()  # as `netsched extender` does after its first sync
    return cache, names


def request_bodies(names: list[str], seed: int) -> list[bytes]:
    """ExtenderArgs as kube-scheduler sends them (nodeCacheCapable: true), the names shuffled."""
    pod = copy.deepcopy(orjson.loads(FIXTURE.read_bytes())["Pod"])
    pod["metadata"].setdefault("labels", {})[JOB_LABEL] = JOB
    rng = random.Random(seed)
    return [orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": rng.sample(names, len(names))})
            for _ in range(SHUFFLES)]


# ---- servers ----------------------------------------------------------------------------


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def start_uvicorn(extender: Extender) -> tuple[int, Callable[[], None]]:
    """The production stack (as server.serve runs it), in a thread; returns the port and a stop."""
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(make_app(extender), host="127.0.0.1", port=port, loop="uvloop",
                            http="httptools", lifespan="off", access_log=False, log_level="warning",
                            proxy_headers=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for_port(port)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
        sock.close()

    return port, stop


class StdlibHandler(BaseHTTPRequestHandler):
    """The same `_answer` behind http.server, encoded with the json module: the alternative stack."""

    protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client uses it
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        verb = self.path.strip("/")
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if verb in VERBS:
            status, doc = _answer(self.server.extender, verb, VERBS[verb], body)
        else:
            status, doc = 404, {"Error": f"no POST {self.path}"}
        out = json.dumps(doc, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would be timed too


def start_stdlib(extender: Extender) -> tuple[int, Callable[[], None]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StdlibHandler)
    server.extender = extender
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(10)

    return server.server_address[1], stop


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"extender did not listen on port {port} within {timeout:g} s")


# ---- measuring ----------------------------------------------------------------------


class Client:
    """One keep-alive connection, as kube-scheduler keeps to its extender."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def post(self, verb: str, body: bytes) -> tuple[float, bytes]:
        """Seconds from sending the request to the answer's last byte, and the answer."""
        t0 = time.perf_counter()
        self.conn.request("POST", "/" + verb, body, HEADERS)
        response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - t0
        if response.status != 200:
            raise RuntimeError(f"{verb} answered {response.status}: {data[:300]!r}")
        return elapsed, data

    def close(self) -> None:
        self.conn.close()


def check_answers(client: Client, body: bytes) -> None:
    """Fail loudly if the extender errs: a fast error would make a fine-looking benchmark."""
    answer = orjson.loads(client.post("filter", body)[1])
    if answer["Error"] or not answer["NodeNames"]:
        why = answer["Error"] or answer["FailedAndUnresolvableNodes"]
        raise RuntimeError(f"filter passed no node: {why}")
    if not isinstance(orjson.loads(client.post("prioritize", body)[1]), list):
        raise RuntimeError("prioritize did not answer with a HostPriorityList")


def serving_thread(pid: int) -> np.ndarray:
    """Seconds the server's main thread (where requests run) has spent on a CPU and waiting in the
    run queue for one (/proc schedstat): around a request, what is left of its wall time went to
    neither, e.g. to waiting for Python's interpreter lock."""
    ran, queued = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[:2]
    return np.array([int(ran), int(queued)]) / 1e9


def measure_http(port: int, bodies: list[bytes], count: int, warmup: int,
                 pid: int | None = None) -> dict[str, np.ndarray]:
    """A filter then a prioritize on the same names, `count` times: seconds of each and of both; with
    the server's `pid`, also its main thread's CPU and run-queue seconds per filter ("filter_thread")."""
    client = Client(port)
    thread = np.zeros((count, 2))
    try:
        check_answers(client, bodies[0])
        for i in range(warmup):
            client.post("filter" if i % 2 else "prioritize", bodies[i % len(bodies)])
        times = np.zeros((count, 2))
        for i in range(count):
            body = bodies[i % len(bodies)]
            before = serving_thread(pid) if pid else 0
            times[i, 0] = client.post("filter", body)[0]
            thread[i] = serving_thread(pid) - before if pid else 0
            times[i, 1] = client.post("prioritize", body)[0]
    finally:
        client.close()
    return {"filter": times[:, 0], "prioritize": times[:, 1], "both": times.sum(axis=1),
            "filter_thread": thread}


def measure_calls(call: Callable[[int], object], count: int, warmup: int) -> np.ndarray:
    for i in range(warmup):
        call(i)
    times = np.zeros(count)
    for i in range(count):
        t0 = time.perf_counter()
        call(i)
        times[i] = time.perf_counter() - t0
    return times


def over_http(start: Callable, n: int, shortlist: int, seed: int, count: int,
              warmup: int) -> dict[str, np.ndarray]:
    """A fresh cluster per run: a shortlist-1 filter assumes its pod, which would leak into the next."""
    cache, names = build_cache(n, seed)
    port, stop = start(Extender(cache, shortlist=shortlist))
    try:
        return measure_http(port, request_bodies(names, seed), count, warmup)
    finally:
        stop()


def in_process(shortlist: int, seed: int, count: int, warmup: int) -> dict[str, np.ndarray]:
    """The extender's own work at BIG nodes, then with JSON decoding, validation and encoding added."""
    cache, names = build_cache(BIG, seed)
    extender = Extender(cache, shortlist=shortlist)
    bodies = request_bodies(names, seed)
    parsed = [parse_args(orjson.loads(b)) for b in bodies]

    def handled(verb: str) -> Callable[[int], object]:
        return lambda i: orjson.dumps(_answer(extender, verb, VERBS[verb], bodies[i % len(bodies)])[1])

    return {
        "Extender.filter": measure_calls(lambda i: extender.filter(parsed[i % len(parsed)]), count, warmup),
        "Extender.prioritize": measure_calls(lambda i: extender.prioritize(parsed[i % len(parsed)]),
                                             count, warmup),
        "filter handler (`_answer`, JSON in and out)": measure_calls(handled("filter"), count, warmup),
        "prioritize handler (`_answer`, JSON in and out)": measure_calls(handled("prioritize"), count,
                                                                         warmup),
    }


# ---- reporting ----------------------------------------------------------------------


def ms(samples: np.ndarray) -> str:
    """p50 / p99 in milliseconds."""
    p50, p99 = np.percentile(samples, [50, 99]) * 1000
    return f"{p50:.2f} / {p99:.2f}"


def latency_table(rows: list[tuple[int, int, int, dict]]) -> list[str]:
    lines = ["| nodes | shortlist | requests each | filter | prioritize | filter + prioritize |",
             "|---:|---:|---:|---:|---:|---:|"]
    for n, shortlist, count, t in rows:
        lines.append(f"| {n:,} | {shortlist} | {count} | {ms(t['filter'])} | {ms(t['prioritize'])} | "
                     f"{ms(t['both'])} |")
    return lines


def stack_table(rows: list[tuple[str, int, dict]]) -> list[str]:
    lines = ["| server stack | shortlist | filter | prioritize | filter + prioritize |",
             "|---|---:|---:|---:|---:|"]
    for stack, shortlist, t in rows:
        lines.append(f"| {stack} | {shortlist} | {ms(t['filter'])} | {ms(t['prioritize'])} | "
                     f"{ms(t['both'])} |")
    return lines


def in_process_table(rows: list[tuple[int, dict]]) -> list[str]:
    lines = ["| call | shortlist | p50 / p99 |", "|---|---:|---:|"]
    for shortlist, t in rows:
        lines += [f"| {name} | {shortlist} | {ms(samples)} |" for name, samples in t.items()]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few requests: a smoke run, not figures")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warmup, requests = (QUICK_WARMUP, QUICK_REQUESTS) if args.quick else (WARMUP, REQUESTS)

    http_rows = []
    for n in SIZES:
        for shortlist in (1, 0):
            http_rows.append((n, shortlist, requests[n],
                              over_http(start_uvicorn, n, shortlist, args.seed, requests[n], warmup)))
            print(f"uvicorn, {n} nodes, shortlist {shortlist}: done", file=sys.stderr)
    stacks = [(name, shortlist, over_http(start, BIG, shortlist, args.seed, requests[BIG], warmup))
              for shortlist in (1, 0)
              for name, start in (("uvicorn + httptools + uvloop + orjson (ours)", start_uvicorn),
                                  ("http.server (ThreadingHTTPServer) + json", start_stdlib))]
    print("server stacks: done", file=sys.stderr)
    local = [(shortlist, in_process(shortlist, args.seed, requests[BIG], warmup)) for shortlist in (1, 0)]

    request_kib = len(request_bodies(build_cache(BIG, args.seed)[1], args.seed)[0]) / 1024
    command = " ".join(["python bench/extender_latency.py", *sys.argv[1:]])
    lines = [
        SECTION,
        "",
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}, 2 cores).",
        "",
        "The extender in-process, on a cluster held in memory with nothing else running: what its code "
        "costs. What kube-scheduler sees, with the extender as its own process beside a live API server "
        "and heartbeating nodes, is in \"Extender latency, live cluster\" below.",
        "",
        "Wall time per request in ms, **p50 / p99**, from sending the request to the answer's last byte, "
        "over one keep-alive connection on 127.0.0.1 (TCP_NODELAY); client and server share the process "
        "(server in a thread). Requests are the captured kube-scheduler filter body "
        "(nodeCacheCapable: true) with the pod in job `bench-job`, whose 3 pods are already bound, "
        f"and all candidate names shuffled ({request_kib:.0f} KiB at {BIG:,} nodes). The cluster: 4 zones, "
        "nodes/40 racks, 8 GPUs a node, nodes/2 bound pods of 1-4 GPUs, half of them in 4-pod jobs. "
        f"{warmup} requests of warm-up. Each measured round is a filter then a prioritize on the "
        "same names; *filter + prioritize* is their sum per round. Prioritize answers with the scores "
        "its pod's filter computed: with shortlist 0 it gets the very nodes filter passed (a list "
        "compare); after a shortlist-1 filter nothing is kept and it scores afresh.",
        "",
        "With shortlist 1 (the default) filter answers one node and kube-scheduler skips prioritize, "
        "so **filter alone is the per-pod cost**; filter + prioritize on all names is the worst case. "
        "With shortlist 0 kube-scheduler sends both: filter + prioritize is the per-pod cost. "
        "Design target: filter + prioritize p99 <= 5 ms at 5,000 node names.",
        "",
        "### Over HTTP (uvicorn, httptools, uvloop, orjson)",
        "",
        *latency_table(http_rows),
        "",
        f"### Server stack at {BIG:,} nodes, the same `_answer` behind each",
        "",
        *stack_table(stacks),
        "",
        f"### Without HTTP, {BIG:,} nodes, {requests[BIG]} calls each",
        "",
        "`Extender.filter`/`prioritize` on already parsed arguments; the handler rows add orjson decoding, "
        "request validation and orjson encoding of the answer (`server._answer`), i.e. all but HTTP.",
        "",
        *in_process_table(local),
        "",
    ]
    section = "\n".join(lines)
    publish(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
