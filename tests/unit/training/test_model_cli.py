import json

import pytest

from netsched.cli import main
from netsched.testing.models import copy_of, trained
from netsched.training.dataset import read_dataset


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_help_lists_the_model_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("simulate", "train", "evaluate", "predict", "retrain"):
        assert f"\n  {command} " in out


def test_evaluate_with_a_missing_model_says_so_and_exits_2(tmp_path, capsys):
    data = tmp_path / "later.csv"
    assert main(["simulate", "--jobs", "5", "--nodes", "16", "--out", str(data)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "no-model"), str(data)]) == 2
    assert error_line(capsys) == (f"netsched: error: evaluate: {tmp_path / 'no-model'}: no such model "
                                  "artifact or manifest; train one with `netsched train`\n")


def test_evaluate_a_corrupt_artifact_and_train_on_a_missing_file_exit_2(tmp_path, capsys):
    artifact = copy_of(trained()[0], tmp_path)
    (artifact / "model.joblib").write_bytes(b"\0")
    assert main(["evaluate", "--model", str(artifact), str(trained()[1])]) == 2
    assert "model.joblib: sha256 differs from meta.json's artifact_sha256" in error_line(capsys)
    assert main(["train", str(tmp_path / "none.csv"), "--out", str(tmp_path)]) == 2
    assert error_line(capsys) == f"netsched: error: train: {tmp_path / 'none.csv'}: no such dataset file\n"
    (tmp_path / "v3.csv").write_text("schema_version,x\n3,0\n")
    assert main(["retrain", str(tmp_path / "v3.csv"), "--models", str(tmp_path / "m")]) == 2
    assert "v3.csv: line 2: schema_version '3', this netsched reads version 2" in error_line(capsys)


def test_simulate_then_evaluate_prints_the_table_and_writes_the_report(tmp_path, capsys):
    later = tmp_path / "later.csv"
    assert main(["simulate", "--jobs", "30", "--nodes", "16", "--seed", "4", "--start", "2027-01-01",
                 "--out", str(later)]) == 0
    out, err = capsys.readouterr()
    assert out == f"wrote 240 rows (30 jobs x 8 candidates) to {later}\n"
    assert "simulate: 27/30 jobs" in err and read_dataset(later).start.min() > 1_798_761_600  # 2027-01-01
    assert main(["evaluate", "--model", str(trained()[0]), str(later), "--out", str(tmp_path / "ev")]) == 0
    out = capsys.readouterr().out
    assert "| learned model |" in out and "30 held-out jobs (240 candidate rows)" in out
    report = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert report["held_out"]["jobs"] == 30 and report["policies"]["oracle"]["top1"] == 1.0
    assert {p.name for p in (tmp_path / "ev").iterdir()} == {
        "evaluation.md", "evaluation.json", "predicted_vs_actual.png", "accuracy.png", "regret.png",
        "regret_cdf.png"}


def test_a_bad_holdout_is_refused_before_any_work(capsys):
    with pytest.raises(SystemExit):
        main(["train", "x.csv", "--holdout", "1.5"])
    assert "1.5 is not a share in [0, 1)" in capsys.readouterr().err
    assert main(["retrain", "x.csv", "--holdout", "0"]) == 2
    assert "--holdout must be above 0" in error_line(capsys)
