"""The extender's HTTP servers: bare ASGI apps under uvicorn (httptools, uvloop) with orjson.

Chosen by measurement (docs/benchmarks.md, "Extender latency"): at 5,000 node names
filter + prioritize takes about 0.7x the time of http.server with the json module
(p50), with a much tighter p99; the scheduler waits on every call.

Two ports, one event loop (docs/security.md):
  scheduling port (--port): kube-scheduler's. With --client-ca-file only a client holding a
  certificate that CA signed completes the TLS handshake (mutual TLS); anyone else gets no answer.
    POST /filter /prioritize /preempt   the extender v1 verbs (urlPrefix is the server root)
    POST /gang                          a gang's nodes chosen together (the operator, as it releases
                                        it; also behind mutual TLS: it presents the same certificate)
    GET  /healthz                       the process is alive
  metrics port (--metrics-port): for people and Prometheus; HTTPS with the same certificate.
    GET  /healthz /readyz               open, for probes (/readyz: the cache is synced and fresh)
    GET  /metrics                       Prometheus       } a bearer token the API server accepts, and
    GET  /debug/decisions[/<ns>/<pod>]  why pods went   } its right to them (access.py); decisions
                                        where they did  } only of namespaces whose pods it may read

Every request gets an answer: malformed input is HTTP 200 with `Error` set (filter)
or HTTP 400 with a message (prioritize, preempt); a body over the limit is 413, one
that does not arrive in BODY_SECONDS 408 (a stalled or deliberately slow client holds
no handler open); an unexpected failure is logged, counted and answered like malformed input, never
a 500 or a dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from kubernetes.client import ApiClient

from netsched.api.objects import KubeObject
from netsched.extender.access import Access, ApiReviewer, Forbidden, ReviewFailed, Unauthenticated
from netsched.extender.config import ExtenderConfig
from netsched.extender.engine import Extender, StaleCache
from netsched.extender.explain import WRITERS
from netsched.extender.gang import decide_gang, gang_result, parse_gang
from netsched.extender.metrics import Metrics
from netsched.extender.plugin import InvalidNeeds
from netsched.extender.protocol import (
    BadRequest,
    filter_result,
    host_priority_list,
    parse_args,
    parse_preemption,
    preemption_result,
)
from netsched.extender.read_model import ReadModel
from netsched.extender.scorers import NodeScorer, TopologyScorer
from netsched.telemetry.store import TelemetryStore

log = logging.getLogger(__name__)
MAX_BODY = 64 * 1024 * 1024  # 5,000 full Node objects (nodeCacheCapable: false) fit with room
BODY_SECONDS = 10.0  # twice kube-scheduler's default httpTimeout: a slower body is no use to it
JSON = b"application/json"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (glibc malloc.h)
MMAP_THRESHOLD = 32 * 1024 * 1024  # blocks below this come from the heap, reused (glibc's maximum)
TRIM_THRESHOLD = 256 * 1024 * 1024  # free memory kept at the top of the heap before returning any
RECENT = 50  # decisions listed by /debug/decisions
CONNECTIONS = WRITERS + 2  # to the API server: a writer's each, the reviews of the metrics port, a spare
# (the watches have a process)


Message = dict[str, Any]  # an ASGI event or scope
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Message, Receive, Send], Awaitable[None]]


class BadTLS(ValueError):
    """A TLS or port flag that cannot work: said in one line before anything starts (exit 2)."""


class TooLarge(Exception):
    pass


class TooSlow(Exception):
    pass


def make_app(extender: Extender, max_body: int = MAX_BODY, body_seconds: float = BODY_SECONDS) -> App:
    """The scheduling port's app: the extender verbs for kube-scheduler, and /healthz."""
    verbs = {
        "/filter": _filter,
        "/prioritize": _prioritize,
        "/preempt": _preempt,
        "/gang": _gang,
    }

    async def app(scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"].rstrip("/") or "/", scope["method"]
        if method == "POST" and path in verbs:
            try:
                body = await _read_body(receive, max_body, body_seconds)
            except TooLarge:
                extender.metrics.requests.labels(path[1:], "bad_request").inc()
                msg = f"netsched: request body is larger than {max_body} bytes; use nodeCacheCapable: true"
                return await _reply(send, 413, {"Error": msg})
            except TooSlow:
                extender.metrics.requests.labels(path[1:], "bad_request").inc()
                msg = f"netsched: the request body did not arrive within {body_seconds:g} s"
                return await _reply(send, 408, {"Error": msg})
            status, doc = _answer(extender, path[1:], verbs[path], body)
            return await _reply(send, status, doc)
        if method == "GET" and path == "/healthz":
            return await _reply(send, 200, {"status": "ok"})
        if method == "GET":
            return await _reply(send, 404, {"Error": f"netsched: no GET {path} on the scheduling port; "
                                                     "/readyz, /metrics and /debug/decisions are on the "
                                                     "metrics port (--metrics-port)"})
        await _reply(send, 404 if method == "POST" else 405,
                     {"Error": f"netsched: no {method} {path}; the verbs are POST /filter, /prioritize, "
                               "/preempt"})

    return app


def make_ops_app(extender: Extender, access: Access) -> App:
    """The metrics port's app: probes open, metrics and decisions to whom the API server allows."""

    async def app(scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"].rstrip("/") or "/", scope["method"]
        if method != "GET":
            return await _reply(send, 405, {"Error": f"netsched: no {method} on the metrics port; GET only"})
        if path in ("/healthz", "/readyz"):
            return await _open(extender, path, send)
        if path != "/metrics" and path != "/debug/decisions" and not path.startswith("/debug/decisions/"):
            return await _reply(send, 404, {"Error": f"netsched: no GET {path}; try /healthz, /readyz, "
                                                     "/metrics, /debug/decisions"})
        authorization = next((v.decode("latin-1") for k, v in scope.get("headers") or ()
                              if k.lower() == b"authorization"), None)
        try:
            status, body, content_type = await asyncio.to_thread(_authorised, extender, access, path,
                                                                 authorization)
        except Unauthenticated as exc:
            return await _raw(send, 401, orjson.dumps({"Error": str(exc)}), JSON,
                              [(b"www-authenticate", b'Bearer realm="netsched-extender"')])
        except Forbidden as exc:
            return await _reply(send, 403, {"Error": str(exc)})
        except ReviewFailed as exc:
            log.warning("could not check a caller of %s with the API server: %s", path, exc)
            return await _reply(send, 503, {"Error": f"netsched: could not ask the API server who may read "
                                                     f"{path}; try again ({exc})"})
        except Exception as exc:  # a bug: logged, answered, never a dropped connection
            log.exception("GET %s failed", path)
            return await _reply(send, 503, {"Error": f"netsched: internal error in GET {path}: "
                                                     f"{type(exc).__name__}: {exc}"})
        await _raw(send, status, body, content_type)

    return app


async def _open(extender: Extender, path: str, send: Send) -> None:
    if path == "/healthz":
        return await _reply(send, 200, {"status": "ok"})
    snap = extender.cluster.snapshot()
    ready = not snap.stale
    await _reply(send, 200 if ready else 503, {
        "ready": ready, "cache_age_seconds": None if snap.age == float("inf") else round(snap.age, 3),
        "nodes": len(snap.table.names), "sources": extender.cluster.sources()})


def _authorised(extender: Extender, access: Access, path: str,
                authorization: str | None) -> tuple[int, bytes, bytes]:
    """The answer to an authorised GET (on a worker thread: the reviews block); raises Unauthenticated,
    Forbidden or ReviewFailed."""
    caller = access.caller(authorization)
    access.require_path(caller, path)
    if path == "/metrics":
        return 200, extender.metrics.exposition(), b"text/plain; version=0.0.4"
    if path == "/debug/decisions":  # the latest of those the caller may read, not of all
        decisions = extender.decisions.recent(extender.decisions.size)
        readable = access.readable_namespaces(caller, {d.namespace for d in decisions})
        shown = [d.as_dict() for d in decisions if d.namespace in readable][-RECENT:]
        return 200, orjson.dumps(shown), JSON
    parts = path.split("/")
    if len(parts) != 5:
        return 404, orjson.dumps({"Error": f"netsched: no GET {path}; one pod's decision is at "
                                           "/debug/decisions/<namespace>/<pod>"}), JSON
    namespace, pod = parts[3], parts[4]
    if not access.may_read_pods(caller, namespace, pod):
        raise Forbidden(f'netsched: user "{caller.name}" may not get pod {namespace}/{pod}, so not its '
                        "placement either")
    found = extender.decisions.find(namespace, pod)
    if found is None:
        return 404, orjson.dumps({"Error": f"netsched: no decision recorded for pod {namespace}/{pod} (kept "
                                           f"for the last {extender.decisions.size} pods)"}), JSON
    return 200, orjson.dumps(found.as_dict() | {"summary": found.summary()}), JSON


def _answer(extender: Extender, verb: str, handler: Callable[[Extender, object], object],
            body: bytes) -> tuple[int, object]:
    started = time.perf_counter()
    outcome = "ok"
    try:
        doc = orjson.loads(body)
        status, answer = 200, handler(extender, doc)
    except (orjson.JSONDecodeError, BadRequest, InvalidNeeds) as exc:
        outcome, (status, answer) = "bad_request", _error(verb, f"netsched: bad {verb} request: {exc}")
    except StaleCache as exc:
        outcome, (status, answer) = "stale_cache", _error(verb, str(exc), stale=True)
    except Exception as exc:
        log.exception("%s failed", verb)
        outcome = "error"
        status, answer = _error(verb, f"netsched: internal error in {verb}: {type(exc).__name__}: {exc}")
    extender.metrics.requests.labels(verb, outcome).inc()
    extender.metrics.latency.labels(verb).observe(time.perf_counter() - started)
    return status, answer


def _error(verb: str, message: str, stale: bool = False) -> tuple[int, object]:
    """How each verb reports a failure within the protocol."""
    if verb == "filter":
        return 200, filter_result([], error=message)
    if verb == "prioritize" and stale:
        return 200, []  # no opinion: kube-scheduler scores with its own plugins
    return 400, {"Error": message}


def _filter(extender: Extender, doc: object) -> dict[str, Any]:
    args = parse_args(doc)
    out = extender.filter(args)
    return filter_result(out.passed, out.failed, out.unresolvable, nodes=args.nodes)


def _prioritize(extender: Extender, doc: object) -> orjson.Fragment:
    answer = extender.prioritize(parse_args(doc))
    return host_priority_list(answer.heads, answer.scores)


def _preempt(extender: Extender, doc: object) -> dict[str, Any]:
    pod, victims = parse_preemption(doc)
    return preemption_result(extender.preempt(pod, victims))


def _gang(extender: Extender, doc: object) -> dict[str, Any]:
    return gang_result(decide_gang(extender, parse_gang(doc)))


async def _read_body(receive: Receive, limit: int, seconds: float) -> bytes:
    """The whole body within `seconds`, however many chunks it comes in (one deadline for all of them)."""
    chunks, size = [], 0
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await receive()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise TooLarge
                chunks.append(chunk)
                if not message.get("more_body"):
                    return b"".join(chunks)
    except TimeoutError:
        raise TooSlow from None


async def _reply(send: Send, status: int, doc: object) -> None:
    await _raw(send, status, orjson.dumps(doc), JSON)


async def _raw(send: Send, status: int, body: bytes, content_type: bytes,
               headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def settle_runtime() -> None:
    """Tune the process for many short requests, once the first sync is done.

    Take what is alive then (modules, the cache) out of the collector's view: otherwise each
    full collection walks it all, a pause inside whichever request it hits. And let glibc keep
    freed memory for the next request: a 5,000-node request allocates a few MB of numpy
    temporaries, and handing them back to the kernel after each request made the next one
    fault them in again (the model's linear screen: 0.78 ms, 0.28 ms with the memory kept).
    """
    gc.collect()
    gc.freeze()
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: its allocator keeps its own habits
        return
    libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def serve(api: ApiClient, settings: ExtenderConfig, sync_timeout: float = 60.0) -> None:
    """Run the extender until SIGINT/SIGTERM: watches first, then the HTTP server."""
    import uvicorn

    from netsched.api.settings import summary
    from netsched.extender.explain import DecisionLog, EventWriter
    from netsched.extender.watcher import WatchProcess, watcher_argv
    from netsched.models.gpus import table as gpu_table

    log.info("netsched extender settings: %s", summary(settings))
    gpus = gpu_table()
    log.info("GPU capability table: %s, %d products", gpus.source, len(gpus.entries))
    metrics, decisions = Metrics(), DecisionLog()
    cache = ReadModel(max_age=settings.max_cache_age, topology=settings.topology,
                      hold_ttl=settings.hold_seconds, dra_gpu_drivers=settings.dra_gpu_drivers)
    count = metrics.events.labels
    writer = EventWriter(api, lambda outcome: count(outcome).inc(),
                         on_written=metrics.event_lag.observe) if settings.explain_events else None

    def on_pod_event(kind: str, pod: KubeObject) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if writer and node and kind != "DELETED":
            decision = decisions.bound(pod["metadata"].get("uid", ""), node)
            if decision is not None:
                writer.submit(decision)

    for kind in cache.watched:
        metrics.sources.labels(kind).set_function(partial(_is_synced, cache, kind))
    # read at each scrape, so an idle extender's gauge still shows its watches falling behind
    metrics.cache_age.set_function(lambda: min(cache.age(), 1e9))
    watches = WatchProcess(cache, watcher_argv(settings.kubeconfig, settings.dra_gpu_drivers), on_pod_event,
                           lambda kind, what, n: metrics.watch_updates.labels(kind, what).inc(n)).start()
    cache.start_publisher()
    if not cache.wait_synced(sync_timeout):
        log.warning("cache not synced after %.0f s; serving anyway (filter answers with Error until it is)",
                    sync_timeout)
    settle_runtime()
    telemetry = _telemetry(metrics, settings.prometheus_url, settings.telemetry_max_age)
    scorer = _scorer(metrics, settings.model, settings.model_reload_seconds)
    extender = Extender(cache, telemetry=telemetry, scorer=scorer, shortlist=settings.shortlist,
                        decisions=decisions, metrics=metrics)
    access = Access(ApiReviewer(api))
    tls = settings.tls_cert_file is not None
    scheme = "https" if tls else "http"
    ca = settings.client_ca_file
    clients = f"client certificates signed by {ca}" if ca else "any client"
    log.info("netsched extender on %s://%s:%d (%s; shortlist %d, cache bound %g s, scorer %s), metrics and "
             "decisions on %s://%s:%d for callers the API server allows", scheme, settings.host,
             settings.port, clients, settings.shortlist, settings.max_cache_age, scorer.name, scheme,
             settings.host, settings.metrics_port)
    if not tls:
        log.warning("serving plain HTTP: bearer tokens sent to the metrics port cross the network in the "
                    "clear")
    scheduling = uvicorn.Config(
        make_app(extender), port=settings.port, ssl_ca_certs=settings.client_ca_file,
        ssl_cert_reqs=ssl.CERT_REQUIRED if settings.client_ca_file else ssl.CERT_NONE, **_uvicorn(settings))
    ops = uvicorn.Config(make_ops_app(extender, access), port=settings.metrics_port, **_uvicorn(settings))
    try:
        asyncio.run(_serve_both(uvicorn.Server(scheduling), uvicorn.Server(ops)))
    finally:
        watches.stop()


def _uvicorn(settings: ExtenderConfig) -> dict[str, Any]:
    """uvicorn settings both ports share."""
    return {"host": settings.host, "loop": "uvloop", "http": "httptools", "lifespan": "off",
            "access_log": False, "log_level": "warning", "proxy_headers": False,
            "ssl_certfile": settings.tls_cert_file, "ssl_keyfile": settings.tls_private_key_file}


async def _serve_both(scheduling: Any, ops: Any) -> None:
    """Both servers on one loop until SIGINT/SIGTERM: the scheduling server takes the signals (uvicorn
    installs one handler per process) and the metrics server stops with it. Either one ending (its port
    taken, say: uvicorn logs it and exits 1) ends the other, never a process half serving."""
    ops.capture_signals = contextlib.nullcontext
    beside = asyncio.create_task(_until_exit(ops))
    beside.add_done_callback(lambda _: setattr(scheduling, "should_exit", True))
    try:
        await scheduling.serve()
    finally:
        ops.should_exit = True
        code = await beside
    if code:
        raise SystemExit(code)


async def _until_exit(server: Any) -> int | str | None:
    """Serve, and hand back the exit code uvicorn raised (a task's SystemExit would escape the loop)."""
    try:
        await server.serve()
    except SystemExit as exc:
        return exc.code
    return None


def check_tls(settings: ExtenderConfig) -> None:
    """Both TLS files or neither, each readable, a client CA only with them, two distinct ports: said before
    anything starts, naming the flag."""
    cert, key = settings.tls_cert_file, settings.tls_private_key_file
    if (cert is None) != (key is None):
        given, missing = ("--tls-cert-file", "--tls-private-key-file") if key is None else (
            "--tls-private-key-file", "--tls-cert-file")
        raise BadTLS(f"{given} needs {missing} too (HTTPS takes both), or give neither")
    ca = settings.client_ca_file
    if ca is not None and cert is None:
        raise BadTLS("--client-ca-file needs --tls-cert-file and --tls-private-key-file (client certificates "
                     "are checked in the TLS handshake)")
    for flag, path in (("--tls-cert-file", cert), ("--tls-private-key-file", key), ("--client-ca-file", ca)):
        if path is not None and not Path(path).is_file():
            raise BadTLS(f"{flag} {path}: no such file")
    if cert is not None and key is not None:  # read as uvicorn will: a bad PEM named here, not in a traceback
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise BadTLS(f"--tls-cert-file {cert} with --tls-private-key-file {key}: not a PEM certificate "
                         f"and its key ({exc})") from None
        try:
            if ca is not None:
                context.load_verify_locations(ca)
        except (ssl.SSLError, OSError) as exc:
            raise BadTLS(f"--client-ca-file {ca}: no PEM CA certificate in it ({exc})") from None
    if settings.metrics_port == settings.port:
        raise BadTLS(f"--metrics-port {settings.metrics_port} is --port's too; give the metrics port one of "
                     "its own")


def _is_synced(cache: ReadModel, kind: str) -> float:
    return float(cache.sources()[kind] == "synced")


def _scorer(metrics: Metrics, model: Path | None, reload_seconds: float) -> NodeScorer:
    """The completion-time model with the topology heuristic as its fallback, or the heuristic alone."""

    if model is None:
        metrics.model_loaded.set(0)
        return TopologyScorer()
    from threadpoolctl import threadpool_limits

    from netsched.extender.learned import ModelScorer, ModelSource

    # One OpenMP thread where scikit-learn serves the model (a kind ONNX Runtime does not take): a
    # request scores a few hundred rows, where a second thread costs more in hand-offs than it
    # saves, and on a busy node its spin-waits took p50 from 5 to 17 ms.
    threadpool_limits(1, user_api="openmp")
    return ModelScorer(ModelSource(model, metrics, reload_seconds).start(), TopologyScorer(), metrics)


def _telemetry(metrics: Metrics, prometheus_url: str | None, max_age: float) -> TelemetryStore:
    """The telemetry store, fed from Prometheus when a URL is given (else it stays empty and
    scoring uses topology alone)."""
    from netsched.telemetry.prometheus import PrometheusFeed

    store = TelemetryStore(max_age=max_age)
    metrics.telemetry_links.set_function(store.fresh_count)
    if not prometheus_url:
        metrics.telemetry_age.set(float("inf"))
        return store
    feed = PrometheusFeed(prometheus_url, store).start()
    metrics.telemetry_age.set_function(
        lambda: store.clock() - feed.last_success if feed.last_success is not None else float("inf"))
    log.info("telemetry from Prometheus at %s (entries older than %g s are not used)",
             prometheus_url, max_age)
    return store
