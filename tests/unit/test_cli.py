import pytest

from netsched.cli import build_parser, main


def test_help_explains_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("dev-cluster", "demo"):
        assert command in out


@pytest.mark.parametrize("action", ["up", "down", "status", "kubeconfig"])
def test_dev_cluster_actions_parse(action):
    args = build_parser().parse_args(["dev-cluster", action, "--dir", "/tmp/x"])
    assert args.action == action and args.dir == "/tmp/x"


def test_kubeconfig_of_a_missing_cluster_says_how_to_start_one(tmp_path, capsys):
    assert main(["dev-cluster", "kubeconfig", "--dir", str(tmp_path)]) == 1
    assert "netsched dev-cluster up" in capsys.readouterr().err
