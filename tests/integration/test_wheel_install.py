"""The install docs/kubectl-plugin.md gives, as a user follows it: the wheel `make wheel` builds (pip wheel
of the repository, no dependencies), pip-installed into a fresh virtualenv, whose `kubectl-netsched
--help` then runs from there.

netsched's own code is what is tested, not PyPI: the fresh virtualenv sees the test virtualenv's
packages through a path line in a .pth file (a plain path, not a site directory, so the test
virtualenv's editable netsched is not found there) and pip installs with --no-index, resolving the
wheel's dependencies from them. Building the wheel takes setuptools>=77 from pip's build isolation, as
`make install` does. No cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what was installed is found
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done


def test_the_wheel_installs_into_a_fresh_virtualenv_and_the_plugin_runs_from_there(tmp_path):
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", dist, ROOT)
    [wheel] = dist.glob("netsched-*-py3-none-any.whl")
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index", wheel)

    helped = run(venv / "bin" / "kubectl-netsched", "--help", cwd=tmp_path)
    assert helped.stdout.startswith("usage: kubectl netsched"), helped.stdout
    where = run(python, "-c", "import netsched; print(netsched.__file__)", cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(venv), where  # the wheel's netsched, not the repository's
    assert run(venv / "bin" / "netsched", "--version", cwd=tmp_path).stdout.startswith("netsched ")
