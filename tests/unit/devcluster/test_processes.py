import socket
import sys
import time

import pytest

from netsched.devcluster import processes
from netsched.devcluster.wait import Timeout, poll


def test_a_component_that_exits_is_named_with_its_log_tail(tmp_path):
    log = tmp_path / "etcd.log"
    proc = processes.start("etcd", ["sh", "-c", "echo 'listen tcp: address in use'; exit 3"],
                           log, cwd=tmp_path)
    with pytest.raises(processes.ComponentFailed) as err:
        processes.wait_until(proc, lambda: False, timeout=10)
    assert "etcd exited during start-up" in str(err.value)
    assert "address in use" in str(err.value)
    assert str(log) in str(err.value)


def test_a_component_that_never_gets_ready_times_out_by_name(tmp_path):
    proc = processes.start("kwok", ["sleep", "30"], tmp_path / "kwok.log", cwd=tmp_path)
    try:
        with pytest.raises(processes.ComponentFailed, match="kwok was not ready after 1 s"):
            processes.wait_until(proc, lambda: False, timeout=1)
    finally:
        processes.stop(proc.pid)
    assert not processes.pid_alive(proc.pid)


def test_stop_kills_the_whole_process_group_even_if_sigterm_is_ignored(tmp_path):
    script = "trap '' TERM; sleep 60 & wait"
    proc = processes.start("stubborn", ["sh", "-c", script], tmp_path / "s.log", cwd=tmp_path)
    time.sleep(0.3)
    processes.stop(proc.pid, grace=0.5)
    assert not processes.pid_alive(proc.pid)


def test_poll_reports_what_it_waited_for_and_the_last_error():
    def failing():
        raise ConnectionError("refused")

    with pytest.raises(Timeout, match=r"waiting for the apiserver \(last error: refused\)"):
        poll(failing, timeout=0.3, what="the apiserver", interval=0.05)


LISTENER = ("import socket, sys, time\n"
            "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "print(s.getsockname()[1], flush=True); time.sleep(60)\n")


def test_listens_names_the_process_or_its_child_that_holds_the_port(tmp_path):
    # the listener is a child of the shell started: a component's port may be held by a process it started
    proc = processes.start("listener", ["sh", "-c", f"{sys.executable} -c \"{LISTENER}\""],
                           tmp_path / "l.log", cwd=tmp_path)
    other = processes.start("other", ["sleep", "60"], tmp_path / "o.log", cwd=tmp_path)
    try:
        port = int(poll(lambda: (tmp_path / "l.log").read_text().strip(), 10, "the listener's port"))
        assert processes.listens(proc.pid, port)
        assert not processes.listens(other.pid, port)
        assert not processes.listens(proc.pid, port + 1 if port < 65535 else port - 1)
    finally:
        processes.stop(proc.pid)
        processes.stop(other.pid)


def test_a_port_that_answers_for_another_process_is_not_the_component_ready(tmp_path):
    # this test holds the port and answers the check; the component then fails to bind it
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = processes.start("kube-scheduler", ["sh", "-c", "sleep 0.5; echo 'listen tcp 127.0.0.1: bind: "
                                                  "address already in use'; exit 1"], tmp_path / "s.log",
                               cwd=tmp_path)
        with pytest.raises(processes.ComponentFailed, match="kube-scheduler exited during start-up") as err:
            processes.wait_until(proc, lambda: True, timeout=10, port=port)
    assert err.value.port_taken()
