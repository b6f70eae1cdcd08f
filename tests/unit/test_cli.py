import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from netsched.cli import build_parser, main
from netsched.extender.server import CONNECTIONS

EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"


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
    example = EXAMPLES / "packing" / "snapshot.yaml"
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
    monkeypatch.setattr("netsched.api.connect.reachable", lambda api: api)
    monkeypatch.setattr("netsched.extender.server.serve", lambda *call: served.append(call))
    assert main(["extender", "--kubeconfig=k", "--shortlist=0", "--no-explain-events", "--model=m"]) == 0
    settings = ExtenderConfig(kubeconfig="k", shortlist=0, explain_events=False, model=Path("m"))
    assert served == [(f"api(k, {CONNECTIONS})", settings)]


def test_operator_flags_reach_run_operator_as_one_settings_object(monkeypatch):
    from netsched.operator.config import OperatorConfig
    from netsched.packer.config import PackerConfig

    ran = []
    monkeypatch.setattr("netsched.operator.manager.run_operator", ran.append)
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
    proc = subprocess.run([sys.executable, "-c", SERVING_WITHOUT_DEV_EXTRA, command],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0  # the kubeconfig is missing ...
    assert "ModuleNotFoundError" not in proc.stderr, proc.stderr[-2000:]  # ... and nothing else
    assert "kube-config" in proc.stderr or "kubeconfig" in proc.stderr.lower(), proc.stderr[-2000:]


def test_training_without_the_train_extra_says_how_to_get_it(tmp_path):
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


KUBECONFIGS = {  # kind -> (what the file holds, or None for no file; the start of the one line)
    "none": (None, "no cluster to talk to: not in a pod, and no kubeconfig"),
    "garbage": ("clusters: [\n", "no cluster to talk to: kubeconfig {path}: not YAML: "),
    "not-a-kubeconfig": ("hello\n", "no cluster to talk to: kubeconfig {path}: not a kubeconfig"),
    "server-down": ("dead", "the API server at https://127.0.0.1:"),
    "bad-context": ("dead", "context 'nope' is not in kubeconfig {path}; its contexts: dead, other"),
    "no-current-context": ("dead-no-current", "kubeconfig {path} has no current context (its contexts: dead, "
                           "other)"),
}
COMMANDS = {
    "why": ["why", "train"],
    "whatif": ["whatif", "-f", "job.yaml"],
    "pack": ["pack", "--from-cluster"],
    "extender": ["extender"],
    "operator": ["operator", "--metrics-port=0", "--health-port=0"],
    "plugin-why": ["kubectl-netsched", "why", "train"],
    "plugin-whatif": ["kubectl-netsched", "whatif", "-f", "job.yaml"],
}


def _dead_server_kubeconfig(path: Path, current: bool = True) -> Path:
    """A kubeconfig naming an API server on a port nothing listens on, with contexts dead and other."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", **({"current-context": "dead"} if current else {}),
        "clusters": [{"name": "dead", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u", "namespace": "ns"}},
                     {"name": "other", "context": {"cluster": "dead", "user": "u"}}]}))
    return path


def _netsched(tmp_path: Path, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """`netsched ARGV` (or the plugin, `kubectl-netsched ARGV`) as a user runs it, with no cluster about:
    no kubeconfig in $KUBECONFIG or ~/.kube, not in a pod."""
    from netsched.testing.plugin import install_plugin

    if argv[0] == "kubectl-netsched":
        command = [str(install_plugin(tmp_path / "bin")), *argv[1:]]
    else:
        command = [sys.executable, "-m", "netsched", *argv]
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run(command, cwd=tmp_path, env=env, text=True, timeout=120, **kwargs)


@pytest.mark.parametrize("command, kind", [  # every case for `why`; the three that differ most for all
    *(("why", kind) for kind in KUBECONFIGS),
    *((command, kind) for command in COMMANDS if command != "why"
      for kind in ("none", "garbage", "server-down")),
    *((command, "bad-context") for command in ("whatif", "pack", "plugin-why")),  # services: no --context
])
def test_a_command_without_a_cluster_says_so_in_one_line(tmp_path, command, kind):
    content, said = KUBECONFIGS[kind]
    (tmp_path / "job.yaml").write_text(json.dumps({
        "apiVersion": "netsched.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "j"},
        "spec": {"replicas": 2, "gpusPerReplica": 8,
                 "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
    path = tmp_path / "kubeconfig"
    if content in ("dead", "dead-no-current"):
        _dead_server_kubeconfig(path, current=content == "dead")
    elif content is not None:
        path.write_text(content)
    flags = [f"--kubeconfig={path}"] if content else []
    flags += ["--context=nope"] if kind == "bad-context" else []
    proc = _netsched(tmp_path, [*COMMANDS[command], *flags], capture_output=True)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"netsched: error: {said.format(path=path)}"), proc.stderr


@pytest.mark.parametrize("argv, said", [
    (["extender", "--hold-seconds", "0"],
     "argument --hold-seconds: 0 is out of range: it must be more than 0"),
    (["operator", "--plan-deadline=2"],
     "argument --plan-deadline: 2 is out of range: it must be at least 5 and at most 3600"),
    (["agent", "--max-links", "1O"], "argument --max-links: '1O' is not a whole number"),
    (["agent", "--nic-speed-mbps=-25000"],
     "argument --nic-speed-mbps: -25000 is out of range: it must be more than 0"),
])
def test_a_number_out_of_range_is_one_line_and_exit_2_before_anything_starts(tmp_path, argv, said):
    proc = _netsched(tmp_path, argv, capture_output=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == f"netsched {argv[0]}: error: {said}", proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("argv", [
    pytest.param(["pack", str(EXAMPLES / "packing" / "snapshot.yaml"), "--json"], id="pack"),
    pytest.param(["simulate", "--jobs=20", "--out=/dev/stdout"], id="simulate-to-stdout"),
    pytest.param(["kubectl-netsched", "version"], id="plugin-version"),
])
def test_a_reader_that_goes_away_ends_the_command_as_sigpipe_ends_a_unix_tool(tmp_path, argv):
    reader, writer = os.pipe()
    os.close(reader)  # `| head -1` that has read its line and gone: every write now fails
    try:
        proc = _netsched(tmp_path, argv, stdout=writer, stderr=subprocess.PIPE)
    finally:
        os.close(writer)
    assert proc.returncode == 141, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv", [["--help"], ["why", "--help"], ["whatif", "--help"]])
def test_the_plugins_help_offers_only_its_verbs_and_kubectls_flags(tmp_path, argv):
    proc = _netsched(tmp_path, ["kubectl-netsched", *argv], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: kubectl netsched")
    if argv == ["--help"]:
        assert re.findall(r"^    (\S+) ", proc.stdout, re.MULTILINE) == ["whatif", "why", "version"]
    else:
        for flag in ("-n NAMESPACE, --namespace", "--context", "--kubeconfig", "-o {text,json,yaml}"):
            assert flag in proc.stdout


def test_the_namespace_is_the_kubeconfig_contexts_as_kubectl_takes_it(tmp_path, monkeypatch):
    from netsched.api.connect import default_namespace

    kubeconfig = str(_dead_server_kubeconfig(tmp_path / "kubeconfig"))
    assert default_namespace(kubeconfig) == "ns"  # the current context's
    assert default_namespace(kubeconfig, "other") == "default"  # a context without one
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    assert default_namespace() == "ns"


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


def test_the_operator_refuses_a_webhook_port_without_its_certificate_before_it_starts(capsys):
    assert main(["operator", "--webhook-port=9443", "--webhook-cert-file=/tmp/tls.crt",
                 "--kubeconfig=/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "--webhook-port needs --webhook-cert-file and --webhook-key-file" in err and "Traceback" not in err


def test_the_operator_names_a_webhook_certificate_it_cannot_read(capsys, tmp_path):
    (tmp_path / "tls.key").write_text("key")
    assert main(["operator", "--webhook-port=9443", f"--webhook-cert-file={tmp_path / 'tls.crt'}",
                 f"--webhook-key-file={tmp_path / 'tls.key'}", "--kubeconfig=/nonexistent"]) == 2
    assert f"--webhook-cert-file={tmp_path / 'tls.crt'} cannot be read" in capsys.readouterr().err


def test_the_operator_names_a_webhook_port_in_use_and_its_flag(capsys, tmp_path):
    import socket

    for name in ("c", "k"):
        (tmp_path / name).write_text("pem")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["operator", "--host=127.0.0.1", "--health-port=0", "--metrics-port=0",
                f"--webhook-port={port}", f"--webhook-cert-file={tmp_path / 'c'}",
                f"--webhook-key-file={tmp_path / 'k'}", "--kubeconfig=/nonexistent"]
        assert main(argv) == 2
    assert f"127.0.0.1:{port} (--webhook-port) is in use" in capsys.readouterr().err


def test_the_krew_manifest_has_what_krew_requires_and_the_archives_sha256(tmp_path):
    """krew itself is not at hand: the manifest is checked against the fields krew's validation requires
    (apiVersion, kind, name, a v-prefixed semver, shortDescription, platforms with selector, uri,
    sha256 and bin), and its archive is built and run."""
    import hashlib
    import importlib.util
    import tarfile

    import yaml

    from netsched import __version__

    root = Path(__file__).parents[2]
    manifest = yaml.safe_load((root / "plugins" / "krew" / "netsched.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "netsched"
    spec = manifest["spec"]
    assert spec["version"] == f"v{__version__}" and spec["shortDescription"] and spec["homepage"]
    spec_module = importlib.util.spec_from_file_location("krew_archive", root / "hack" / "krew-archive.py")
    builder = importlib.util.module_from_spec(spec_module)
    spec_module.loader.exec_module(builder)
    archive = builder.archive()
    [platform] = spec["platforms"]
    assert platform["selector"]["matchExpressions"] and platform["uri"].endswith(".tar.gz")
    assert platform["sha256"] == hashlib.sha256(archive).hexdigest(), "run hack/krew-archive.py"
    assert platform["bin"] == "kubectl-netsched"
    (tmp_path / "a.tar.gz").write_bytes(archive)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        assert {f["from"] for f in platform["files"]} == set(tar.getnames())
        tar.extractall(tmp_path / "plugin", filter="data")
    env = {**os.environ, "NETSCHED_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    launcher = [str(tmp_path / "plugin" / platform["bin"]), "version"]
    ran = subprocess.run(launcher, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout == f"kubectl-netsched (netsched) {__version__}\n", ran.stderr
    env["NETSCHED_PYTHON"] = "/bin/false"  # a Python without the package: one line, exit 1
    ran = subprocess.run(launcher, env=env, capture_output=True, text=True, timeout=120)
    said = "make wheel, then /bin/false -m pip install dist/netsched-*.whl"
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1 and said in ran.stderr


@pytest.mark.parametrize("flags, said", [
    pytest.param(["--tls-cert-file={d}/c.pem", "--tls-private-key-file={d}/k.pem",
                  "--client-ca-file={d}/gone.pem"], "--client-ca-file {d}/gone.pem: no such file",
                 id="client-ca-missing"),
    pytest.param(["--client-ca-file={d}/c.pem"], "--client-ca-file needs --tls-cert-file",
                 id="client-ca-alone"),
    pytest.param(["--tls-cert-file={d}/gone.pem", "--tls-private-key-file={d}/k.pem"],
                 "--tls-cert-file {d}/gone.pem: no such file", id="cert-missing"),
])
def test_the_extender_names_a_certificate_flag_that_cannot_work_in_one_line_and_exit_2(tmp_path, flags, said):
    for name in ("c.pem", "k.pem"):
        (tmp_path / name).write_text("pem")
    proc = _netsched(tmp_path, ["extender", *(f.format(d=tmp_path) for f in flags)], capture_output=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"netsched: error: extender: {said.format(d=tmp_path)}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_an_unknown_extender_flag_is_one_line_and_exit_2(tmp_path):
    proc = _netsched(tmp_path, ["extender", "--client-cert=x"], capture_output=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("netsched: error: unrecognized arguments: --client-cert=x")


@pytest.mark.parametrize(("argv", "expected"), [
    (["-n", "ml", "why", "x"], ["why", "-n", "ml", "x"]),
    (["--namespace=ml", "-ojson", "--context", "c", "whatif", "-f", "j.yaml"],
     ["whatif", "--namespace=ml", "-ojson", "--context", "c", "-f", "j.yaml"]),
    (["why", "-n", "ml", "x"], ["why", "-n", "ml", "x"]),  # kubectl's own order, as it is
    (["--help"], ["--help"]),
    (["-n", "ml", "--version"], ["-n", "ml", "--version"]),  # not a global flag first: the parser's say
    (["-n"], ["-n"]),
    (["-n", "ml"], ["-n", "ml"]),
], ids=["short", "forms", "after", "help", "other-flag", "no-value", "no-verb"])
def test_kubectls_global_flags_are_taken_before_the_verb_too(argv, expected):
    from netsched.cli import verb_first

    assert verb_first(argv) == expected


@pytest.mark.parametrize("plugin", ["kubectl-netsched", "netsched"])
def test_a_namespace_before_the_verb_reaches_why_as_kubectl_users_write_it(tmp_path, plugin):
    path = _dead_server_kubeconfig(tmp_path / "kubeconfig")
    argv = [plugin] if plugin == "kubectl-netsched" else []
    proc = _netsched(tmp_path, [*argv, "-n", "ml", f"--kubeconfig={path}", "why", "x"], capture_output=True)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("netsched: error: the API server at https://127.0.0.1:"), proc.stderr
    missing = _netsched(tmp_path, [*argv, "-n"], capture_output=True)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr


def test_dev_cluster_up_refuses_a_topology_that_is_none_in_one_line_before_starting(tmp_path):
    proc = _netsched(tmp_path, ["dev-cluster", "up", "--dir", str(tmp_path / "c"), "--topology", "gcp"],
                     capture_output=True)
    assert proc.returncode == 2 and not (tmp_path / "c").exists(), proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "netsched dev-cluster up: error: argument --topology: topology 'gcp': name a preset (netsched, gke, "
        "eks, nvidia) or write levels widest first as NAME=LABEL,..., "
        "e.g. zone=topology.kubernetes.io/zone,rack=netsched.io/rack"), proc.stderr
