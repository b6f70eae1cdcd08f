import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from netsched.cli import main
from netsched.models.artifact import MANIFEST, promote
from netsched.testing.models import copy_of, trained
from netsched.testing.records import operator_record, young_cluster_records
from netsched.training.dataset import read_dataset
from netsched.training.enough_jobs import MIN_JOBS
from netsched.training.fitting import MODEL_KINDS

ROOT = Path(__file__).parents[3]


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
    assert "1.5 is out of range: it must be at least 0 and less than 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # retrain judges both models on held-out jobs: it needs some
        main(["retrain", "x.csv", "--holdout", "0"])
    assert "0 is out of range: it must be more than 0 and less than 1" in capsys.readouterr().err


# ---- a young cluster's records: too few jobs to train on ----------------------------------------

def netsched(*argv) -> subprocess.CompletedProcess:
    """The CLI as a user runs it."""
    return subprocess.run([sys.executable, "-m", "netsched", *map(str, argv)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def current_model(tmp_path_factory) -> Path:
    """A models directory whose current.json names a trained artifact."""
    models = tmp_path_factory.mktemp("served") / "models"
    artifact = copy_of(trained()[0], models)
    promote(models / MANIFEST, artifact, models / "promotions.jsonl", {"decision": "promoted"})
    return models


def records(tmp_path: Path, jobs: int | None) -> Path:
    """An operator records file of `jobs` Succeeded jobs; None: not written yet; 0: a Failed job only."""
    path = tmp_path / "job-records.jsonl"
    if jobs == 0:
        path.write_text(json.dumps(operator_record(["a1-0"], phase="Failed")) + "\n")
    elif jobs is not None:
        young_cluster_records(path, jobs)
    return path


@pytest.mark.parametrize("jobs", [None, 0, 1, 2, 5, MIN_JOBS - 1], ids=lambda n: f"{n}-jobs")
def test_retrain_on_too_few_jobs_keeps_the_current_model_in_one_line(tmp_path, current_model, jobs):
    data, before = records(tmp_path, jobs), snapshot(current_model)
    done = netsched("retrain", data, "--models", current_model)
    unwritten = " (not written yet)" if jobs is None else ""
    assert (done.returncode, done.stdout, done.stderr) == (
        0, f"kept: only {jobs or 0} jobs, at least {MIN_JOBS} needed; read {data}{unwritten}; "
        f"{current_model / MANIFEST} unchanged\n", "")
    assert snapshot(current_model) == before


@pytest.mark.parametrize("jobs", [1, MIN_JOBS - 1], ids=lambda n: f"{n}-jobs")
def test_train_on_too_few_jobs_writes_nothing_and_says_so(tmp_path, jobs):
    data = records(tmp_path, jobs)
    done = netsched("train", data, "--out", tmp_path / "models")
    assert (done.returncode, done.stdout, done.stderr) == (
        0, f"kept: only {jobs} jobs, at least {MIN_JOBS} needed; read {data}; no model written\n", "")
    assert not (tmp_path / "models").exists()


def test_the_minimum_is_in_the_help():
    done = netsched("retrain", "--help")
    assert done.returncode == 0 and f"at least {MIN_JOBS} usable jobs" in " ".join(done.stdout.split())


@pytest.mark.parametrize("command", ["train", "retrain"])
def test_with_the_minimum_it_trains_and_tells_cross_validation_progress_on_stderr(tmp_path, command):
    data = records(tmp_path, MIN_JOBS)
    models = tmp_path / "models"
    done = netsched(command, data, "--models" if command == "retrain" else "--out", models)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    groups = 2 * len(MODEL_KINDS)  # by time and by site (two zones) for each kind
    assert [line.split(":")[0] for line in lines] == [f"cross-validating {k}/{groups}"
                                                      for k in range(1, groups + 1)]
    assert all(re.search(r": \w+ by (time|site), \d folds \(\d+ s so far\)$", line) for line in lines), lines
    if command == "retrain":
        assert done.stdout.splitlines()[-1].startswith("promoted: no current model")
        assert (models / MANIFEST).exists()
    else:
        assert len(list(models.glob("*/meta.json"))) == 1


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_training_twice_into_one_name_is_refused_unless_forced(tmp_path):
    data = records(tmp_path, MIN_JOBS)
    models = tmp_path / "models"
    first = netsched("train", data, "--out", models, "--name", "mine")
    assert first.returncode == 0, first.stderr[-3000:]
    before = snapshot(models)
    again = netsched("train", data, "--out", models, "--name", "mine")
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr == (f"netsched: error: train: {models / 'mine'} exists already; give another --name, "
                            "or --force to replace it\n")
    assert snapshot(models) == before
    (models / "mine" / "stale.onnx").write_bytes(b"from a model trained before")
    forced = netsched("train", data, "--out", models, "--name", "mine", "--force", "--seed", "1")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert not (models / "mine" / "stale.onnx").exists()
    assert json.loads((models / "mine" / "meta.json").read_text())["seed"] == 1
