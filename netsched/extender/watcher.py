"""The extender's watches, in a process of their own that relays only what changes an answer.

A 5,000-node cluster sends some 200 node updates a second (status heartbeats), and every pod's
status changes several times; none of that changes what a filter reads. Decoded in the serving
process, each update took CPU and the interpreter lock from the requests waiting behind it. So
`netsched extender` runs `python -m netsched.extender.watcher` in a session of its own (the kernel
schedules it as a group apart from the server): it lists and watches nodes, pods, PackingPlans and,
with DRA drivers configured, ResourceSlices and ResourceClaims (netsched.api.watch), cuts each object
to what the cache reads (cache.essentials), and writes a line to the server only when that changes.
Otherwise it says at most once a second that the watch is alive and how many updates it let go.

One orjson array per line on the watcher's stdout:
    ["replace", kind, [object, ...]]      a fresh LIST
    ["apply", kind, event type, object]   a change the cache reads
    ["heard", kind, unchanged]            the apiserver was heard from; updates let go since the last line
    ["absent", kind]                      an optional kind is not served (netsched.api.watch)

In the server, `WatchProcess` applies the lines to its ReadModel from one thread and starts the
watcher again (backing off) when it exits; meanwhile the cache ages, and past its bound filter
answers Error (engine.StaleCache) rather than use stale data. The watcher ends with the server
(PR_SET_PDEATHSIG, and a closed pipe).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import IO, Any

import orjson

from netsched.api import dra
from netsched.api.objects import KubeObject
from netsched.api.watch import Sink
from netsched.extender.read_model import WATCHED, essentials

log = logging.getLogger(__name__)
HEARD_EVERY = 1.0  # seconds between "heard" lines while nothing a request reads changes
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 30.0  # before starting a watcher that exited, doubling
STEADY_SECONDS = 60.0  # a watcher that ran this long starts again after the first backoff
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


class Relay:
    """A Reflector's Sink in the watcher: writes to `out` what the cache reads, when it changes."""

    def __init__(self, out: IO[bytes], clock: Callable[[], float] = time.monotonic,
                 heard_every: float = HEARD_EVERY):
        self.out, self.clock, self.heard_every = out, clock, heard_every
        self._lock = threading.Lock()  # one writer at a time: a Reflector thread per kind
        self._last: dict[str, dict[str, KubeObject]] = {kind: {} for kind in WATCHED}
        self._unchanged: Counter[str] = Counter()
        self._said: dict[str, float] = {}  # kind -> when a line about it was last written

    def replace(self, kind: str, objects: list[KubeObject]) -> None:
        kept = {_key(o): essentials(kind, o) for o in objects}
        self._last[kind] = kept
        self._send(["replace", kind, list(kept.values())])

    def apply(self, kind: str, event_type: str, obj: KubeObject) -> None:
        key, slim = _key(obj), essentials(kind, obj)
        known = self._last[kind]
        if event_type == "DELETED":
            known.pop(key, None)
        elif known.get(key) == slim:
            self._unchanged[kind] += 1
            self.heard(kind)
            return
        else:
            known[key] = slim
        self._send(["apply", kind, event_type, slim])

    def heard(self, kind: str) -> None:
        if self.clock() - self._said.get(kind, float("-inf")) >= self.heard_every:
            self._send(["heard", kind, self._unchanged.pop(kind, 0)])

    def absent(self, kind: str) -> None:
        self._last[kind] = {}
        self._send(["absent", kind])

    def _send(self, message: list[Any]) -> None:
        line = orjson.dumps(message) + b"\n"
        with self._lock:
            try:
                self.out.write(line)
                self.out.flush()
            except (BrokenPipeError, ValueError):  # the server is gone (or closed our end): so are we
                os._exit(0)
            self._said[message[1]] = self.clock()


def _key(obj: KubeObject) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


class WatchProcess:
    """Runs the watcher (`argv`) and applies its lines to `cache`, from a thread of its own; pod changes
    also go to `on_pod_event` (type, pod), and how many updates were relayed or let go to `count`
    (kind, "changed" or "unchanged", n)."""

    def __init__(self, cache: Sink, argv: Sequence[str],
                 on_pod_event: Callable[[str, KubeObject], None] = lambda t, o: None,
                 count: Callable[[str, str, int], None] = lambda kind, what, n: None,
                 first_backoff: float = FIRST_BACKOFF):
        self.cache, self.argv, self.on_pod_event, self.count = cache, list(argv), on_pod_event, count
        self.first_backoff = first_backoff
        self.starts = 0
        self._stopped = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WatchProcess:
        threading.Thread(target=self._run, name="watch-process", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()

    def _run(self) -> None:
        backoff = self.first_backoff
        while not self._stopped.is_set():
            started = time.monotonic()
            code = self._follow()
            if self._stopped.is_set():
                return
            if time.monotonic() - started >= STEADY_SECONDS:
                backoff = self.first_backoff
            log.warning("the watch process exited (status %s); starting another in %.1f s (until it "
                        "lists again, the cache ages and filter answers Error past its bound)", code, backoff)
            self._stopped.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _follow(self) -> int | None:
        """Start the watcher and apply its lines until it exits; its exit status."""
        self.starts += 1
        try:
            self._proc = proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            log.error("cannot start the watch process %s: %s", self.argv[0], exc)
            return None
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                self._apply(orjson.loads(line))
        except Exception:  # a line the watcher should never write: say so, and start it afresh
            log.exception("the watch process wrote a line this extender cannot apply")
            proc.kill()
        finally:
            proc.stdout.close()
        return proc.wait()

    def _apply(self, message: list[Any]) -> None:
        verb, kind = message[0], message[1]
        if verb == "apply":
            event_type, obj = message[2], message[3]
            self.cache.apply(kind, event_type, obj)
            self.count(kind, "changed", 1)
            if kind == "pods":
                self.on_pod_event(event_type, obj)
        elif verb == "heard":
            self.cache.heard(kind)
            if message[2]:
                self.count(kind, "unchanged", message[2])
        elif verb == "replace":
            self.cache.replace(kind, message[2])
            if kind == "pods":
                for obj in message[2]:  # a change a broken watch missed is heard here: a binding to explain
                    self.on_pod_event("ADDED", obj)
        elif verb == "absent":
            self.cache.absent(kind)
        else:
            raise ValueError(f"unknown verb {verb!r}")


def watcher_argv(kubeconfig: str | None, dra_gpu_drivers: Sequence[str] = ()) -> list[str]:
    """How the server starts its watcher: this interpreter, this module, the server's kubeconfig and the
    DRA drivers whose slices and claims it watches (none: it watches neither)."""
    return [sys.executable, "-m", __name__, *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []),
            *(f"--dra-gpu-driver={d}" for d in dra_gpu_drivers)]


def main(argv: Sequence[str] | None = None) -> int:
    from netsched.api.connect import api_client
    from netsched.api.watch import UNFINISHED_PODS, Reflector

    parser = argparse.ArgumentParser(description="netsched extender's watch process (started by "
                                     "`netsched extender`; writes to its stdout)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--dra-gpu-driver", action="append", default=[],
                        help="watch ResourceSlices and ResourceClaims too (netsched.api.dra)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _end_with_parent()
    api = api_client(args.kubeconfig, connections=len(WATCHED) + 1)
    relay = Relay(sys.stdout.buffer)
    Reflector(api, relay, "nodes").start()
    Reflector(api, relay, "pods", field_selector=UNFINISHED_PODS).start()
    Reflector(api, relay, "packingplans").start()
    if args.dra_gpu_driver:  # every driver's: a few objects per node, cut to what the cache reads
        for kind in dra.KINDS:
            Reflector(api, relay, kind).start()
    threading.Event().wait()  # the Reflectors' threads do the work; SIGTERM ends the process
    return 0


def _end_with_parent() -> None:
    """SIGTERM when the server that started us ends, however it ends (Linux; elsewhere the closed pipe
    ends us at the next line written)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


if __name__ == "__main__":
    raise SystemExit(main())
