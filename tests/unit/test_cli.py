import json
from pathlib import Path

import pytest

from netsched.cli import build_parser, main
from netsched.extender.server import CONNECTIONS


def test_help_explains_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("dev-cluster", "extender", "operator", "agent", "pack", "demo"):
        assert command in out


@pytest.mark.parametrize("action", ["up", "down", "status", "kubeconfig"])
def test_dev_cluster_actions_parse(action):
    args = build_parser().parse_args(["dev-cluster", action, "--dir", "/tmp/x"])
    assert args.action == action and args.dir == "/tmp/x"


def test_kubeconfig_of_a_missing_cluster_says_how_to_start_one(tmp_path, capsys):
    assert main(["dev-cluster", "kubeconfig", "--dir", str(tmp_path)]) == 1
    assert "netsched dev-cluster up" in capsys.readouterr().err


def test_pack_prints_the_example_plan_and_refuses_a_bad_snapshot(tmp_path, capsys):
    example = Path(__file__).parents[2] / "manifests" / "examples" / "packing" / "snapshot.yaml"
    assert main(["pack", str(example), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    [placed] = plan["placements"]
    [move] = plan["moves"]
    assert placed["pod"] == "ml/train-0" and placed["node"] == move["from"] != move["to"]
    assert plan["evictions"] == [] and plan["proven_optimal"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [], "pods": [{"name": "x"}]}')
    assert main(["pack", str(bad)]) == 2
    assert "missing field 'requests'" in capsys.readouterr().err


def test_agent_refuses_a_malformed_peer(capsys):
    assert main(["agent", "--node-name", "a", "--peer", "b"]) == 2
    assert "expected NODE=HOST:PORT" in capsys.readouterr().err


def test_extender_flags_reach_serve_as_one_settings_object(monkeypatch):
    from netsched.extender.config import ExtenderConfig

    served = []
    monkeypatch.setattr("netsched.api.connect.api_client",
                        lambda kubeconfig, connections: f"api({kubeconfig}, {connections})")
    monkeypatch.setattr("netsched.extender.server.serve", lambda *call: served.append(call))
    assert main(["extender", "--kubeconfig=k", "--shortlist=0", "--no-explain-events", "--model=m"]) == 0
    settings = ExtenderConfig(kubeconfig="k", shortlist=0, explain_events=False, model=Path("m"))
    assert served == [(f"api(k, {CONNECTIONS})", settings)]


def test_operator_flags_reach_run_operator_as_one_settings_object(monkeypatch):
    from netsched.operator.config import OperatorConfig
    from netsched.packer.config import PackerConfig

    ran = []
    monkeypatch.setattr("netsched.operator.run.run_operator", ran.append)
    assert main(["operator", "--interval=2", "--no-packer", "--plan-deadline=30", "--records=r.jsonl"]) == 0
    assert ran == [OperatorConfig(interval=2.0, records=Path("r.jsonl"),
                                  packer=PackerConfig(enabled=False, deadline=30))]


SERVING_WITHOUT_DEV_EXTRA = """
import sys
class NoDevExtra:  # the serving image: no cryptography (the dev extra's)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "cryptography":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoDevExtra())
from netsched.cli import main
sys.exit(main([sys.argv[1], "--kubeconfig=/nonexistent"]))
"""


@pytest.mark.parametrize("command", ["extender", "operator"])
def test_serving_commands_run_without_the_dev_extra(command):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", SERVING_WITHOUT_DEV_EXTRA, command],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0  # the kubeconfig is missing ...
    assert "ModuleNotFoundError" not in proc.stderr, proc.stderr[-2000:]  # ... and nothing else
    assert "kube-config" in proc.stderr or "kubeconfig" in proc.stderr.lower(), proc.stderr[-2000:]


def test_training_without_the_train_extra_says_how_to_get_it(tmp_path):
    import subprocess
    import sys

    script = SERVING_WITHOUT_DEV_EXTRA.replace('"cryptography"', '"sklearn"').replace(
        'main([sys.argv[1], "--kubeconfig=/nonexistent"])', 'main(sys.argv[1:])')
    proc = subprocess.run([sys.executable, "-c", script, "train", str(tmp_path / "records.jsonl"),
                           "--out", str(tmp_path / "model")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "pip install 'netsched[train]'" in proc.stderr


def _dead_server_kubeconfig(path: Path) -> Path:
    """A kubeconfig naming an API server on a port nothing listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}]}))
    return path


@pytest.mark.parametrize("command, kubeconfig, said", [
    pytest.param(["why", "train"], None, "no cluster to talk to", id="why-no-kubeconfig"),
    pytest.param(["whatif", "-f", "job.yaml"], None, "no cluster to talk to", id="whatif-no-kubeconfig"),
    pytest.param(["pack", "--from-cluster"], "missing", "no cluster to talk to: ", id="pack-missing-file"),
    pytest.param(["why", "train"], "dead", "the API server did not answer", id="why-server-down"),
    pytest.param(["whatif", "-f", "job.yaml"], "dead", "the API server did not answer",
                 id="whatif-server-down"),
])
def test_a_command_without_a_cluster_says_so_in_one_line(tmp_path, command, kubeconfig, said):
    import os
    import subprocess
    import sys

    (tmp_path / "job.yaml").write_text(json.dumps({
        "apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "j"},
        "spec": {"replicas": 2, "gpusPerReplica": 8,
                 "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
    flags = {None: [], "missing": [f"--kubeconfig={tmp_path / 'nope'}"],
             "dead": [f"--kubeconfig={_dead_server_kubeconfig(tmp_path / 'dead')}"]}[kubeconfig]
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    proc = subprocess.run([sys.executable, "-m", "netsched", *command, *flags], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"netsched: error: {said}"), proc.stderr


@pytest.mark.parametrize("flag", ["--metrics-port", "--health-port"])
def test_the_operator_names_a_port_in_use_and_its_flag_before_it_starts(flag, capsys):
    import socket

    other = "--health-port" if flag == "--metrics-port" else "--metrics-port"
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        free_port = free.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["operator", "--host=127.0.0.1", f"{flag}={port}", f"{other}={free_port}",
                "--kubeconfig=/nonexistent"]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port} ({flag}) is in use" in err and "Traceback" not in err
