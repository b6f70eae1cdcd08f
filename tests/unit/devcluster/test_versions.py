"""The Kubernetes minors hack/controlplane pins: which one runs, how one is named, and the chart saying
the same tested versions."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netsched.devcluster.binaries import (
    BuildError,
    default_minor,
    known_minors,
    kubernetes_minor,
    normalise_minor,
    read_versions,
)
from netsched.devcluster.features import component_flags, native_gangs

CHART = Path(__file__).resolve().parents[3] / "charts" / "netsched" / "Chart.yaml"


@pytest.mark.parametrize("text, minor", [
    pytest.param("1.34", "1.34", id="minor"), pytest.param("v1.34", "1.34", id="with-v"),
    pytest.param("1.37.2", "1.37", id="patch"), pytest.param(" 1.37 ", "1.37", id="spaces"),
])
def test_a_minor_is_named_as_people_write_it(text, minor):
    assert normalise_minor(text) == minor


def test_an_unpinned_minor_names_the_pinned_ones():
    with pytest.raises(BuildError, match=r"'1\.36'.*1\.37, 1\.34"):
        normalise_minor("1.36")


def test_the_environment_picks_the_minor(monkeypatch):
    monkeypatch.delenv("NETSCHED_KUBERNETES", raising=False)
    assert kubernetes_minor() == default_minor() == known_minors()[0] == "1.37"
    monkeypatch.setenv("NETSCHED_KUBERNETES", "1.34")
    assert kubernetes_minor() == "1.34"
    assert read_versions()["KUBERNETES_VERSION"].startswith("v1.34.")


def test_each_minor_has_its_module_and_pins():
    for minor in known_minors():
        versions = read_versions(kubernetes=minor)
        assert versions["KUBERNETES_VERSION"].startswith(f"v{minor}.")
        assert {"ETCD_VERSION", "KWOK_VERSION", "HELM_VERSION"} <= versions.keys()


def test_the_chart_names_the_tested_versions():
    tested = yaml.safe_load(CHART.read_text())["annotations"]["netsched.io/tested-kubernetes"]
    assert tested.split(", ") == [read_versions(kubernetes=m)["KUBERNETES_VERSION"] for m in known_minors()]


def test_native_gangs_are_served_from_1_37_and_kube_schedulers_gangs_only_when_asked():
    assert not native_gangs("1.34") and component_flags("1.34", True) == {}
    off, on = component_flags("1.37"), component_flags("1.37", kube_gang_scheduling=True)
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in off["kube-apiserver"]
    assert "kube-scheduler" not in off
    assert on["kube-scheduler"] == ["--feature-gates=GenericWorkload=true"]


def test_dev_cluster_up_on_an_unpinned_minor_says_which_are_pinned(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "netsched", "dev-cluster", "up", "--kubernetes", "1.36",
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip() == ("netsched: error: Kubernetes '1.36' is not pinned in hack/controlplane; "
                                   "use one of 1.37, 1.34 (--kubernetes or NETSCHED_KUBERNETES)")
