"""bench/report.py: a bench ended by SIGTERM still runs its cleanup (the dev-cluster it started)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_sigterm_runs_the_bench_finally_blocks(tmp_path):
    cleaned = tmp_path / "cleaned"
    script = (f"import os, signal, sys, time; sys.path.insert(0, {str(BENCH)!r})\n"
              "from report import exit_on_sigterm\n"
              "exit_on_sigterm()\n"
              "try:\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    time.sleep(30)\n"
              "finally:\n"
              f"    open({str(cleaned)!r}, 'w').write('down')\n")
    done = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert done.returncode == 128 + signal.SIGTERM
    assert cleaned.read_text() == "down"
