"""Start, watch and stop the dev-cluster's processes.

Each component runs in its own session (so Ctrl-C in the terminal reaches only
netsched, which then stops them in order) with stdout and stderr in a log file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class ComponentFailed(RuntimeError):
    """A component exited or never became ready; the message names it and shows its log."""

    def __init__(self, name: str, reason: str, log: Path):
        self.name, self.log = name, log
        super().__init__(f"{name} {reason}; last lines of {log}:\n{log_tail(log)}")

    def port_taken(self) -> bool:
        """Whether the component stopped because a port it was given was bound by another process."""
        return "address already in use" in str(self).lower()


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "  (no log written)"
    return "\n".join("  " + line for line in text[-lines:]) or "  (log is empty)"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Process:
    name: str
    pid: int
    log: Path
    popen: subprocess.Popen | None = None  # only in the process that started it

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid)


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def signals_deferred():
    """Hold Ctrl-C and SIGTERM until the block ends, e.g. between starting a process
    and recording its pid, so an interrupt can never leave an unrecorded process."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _unblock_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def start(name: str, argv: list[str], log: Path, cwd: Path) -> Process:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=cwd, start_new_session=True,
            preexec_fn=_unblock_stop_signals,  # the child must not inherit a deferred mask
        )
    return Process(name, popen.pid, log, popen)


def wait_until(proc: Process, ready: Callable[[], bool], timeout: float, port: int | None = None) -> None:
    """Poll `ready` until true, and with `port` until the process (or one it started) listens on
    it: a port picked free can be taken by another process before the component binds it, and then
    that process answers `ready` while the component fails. Fail naming the component if it dies
    or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise ComponentFailed(proc.name, "exited during start-up", proc.log)
        try:
            if ready() and (port is None or listens(proc.pid, port)):
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.2)
    raise ComponentFailed(proc.name, f"was not ready after {timeout:.0f} s", proc.log)


def listens(pid: int, port: int) -> bool:
    """Whether `pid` or a process it started holds a listening TCP socket on `port` (this network
    namespace's /proc/net/tcp and tcp6)."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    sockets.add(f"socket:[{fields[9]}]")
    if not sockets:
        return False
    for p in tree(pid):
        with contextlib.suppress(OSError):  # a process that has gone is left out
            if any(os.readlink(fd) in sockets for fd in Path(f"/proc/{p}/fd").iterdir()):
                return True
    return False


LISTEN = "0A"  # a socket's state in /proc/net/tcp


def children(pid: int) -> list[int]:
    """The running processes `pid` started (e.g. an extender's watch process)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # a process that has gone is left out
            if int(stat.read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def tree(pid: int) -> list[int]:
    """A process and every process it started, at any depth."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def stop(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it outlives `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            if not pid_alive(pid):
                return
            time.sleep(0.1)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # not our child: init reaps it
        os.waitpid(pid, os.WNOHANG)
