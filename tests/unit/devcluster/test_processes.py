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
