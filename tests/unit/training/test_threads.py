import pytest
import sklearn.ensemble  # noqa: F401 - loads scikit-learn's OpenMP runtime, which the limit applies to
from threadpoolctl import threadpool_info

from netsched.cli import main
from netsched.training.threads import fitting_threads, usable_cpus


def openmp_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "openmp"}


@pytest.mark.parametrize(("cpu_max", "cpus"), [
    pytest.param("max 100000\n", 8, id="no quota: the affinity"),
    pytest.param("150000 100000\n", 2, id="a 1.5-CPU limit: 2"),
    pytest.param("50000 100000\n", 1, id="half a CPU: 1"),
    pytest.param(None, 8, id="no cgroup file: the affinity"),
])
def test_usable_cpus_are_the_affinity_or_the_cgroup_quota_rounded_up(tmp_path, monkeypatch, cpu_max, cpus):
    monkeypatch.setattr("os.sched_getaffinity", lambda _: set(range(8)))
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    assert usable_cpus(path) == cpus


def test_the_fits_run_on_the_threads_asked_at_most_the_usable_cpus_and_the_pools_are_restored(monkeypatch):
    before = openmp_threads()
    assert before  # scikit-learn's OpenMP runtime is loaded
    monkeypatch.setattr("netsched.training.threads.usable_cpus", lambda: 3)
    with fitting_threads(2) as threads:
        assert threads == 2 and openmp_threads() == {2}
    with fitting_threads(16) as threads:
        assert threads == 3 and openmp_threads() == {3}
    assert openmp_threads() == before


@pytest.mark.parametrize("command", ["train", "retrain"])
def test_threads_below_one_are_refused_before_any_work(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "x.csv", "--threads", "0"])
    assert "0 is out of range: it must be at least 1" in capsys.readouterr().err
