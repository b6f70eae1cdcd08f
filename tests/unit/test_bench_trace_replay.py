"""bench/trace_replay.py as a user runs it: on tiny trace files written here, and without the trace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from netsched.datagen.openb import NODE_FILE, POD_FILE

BENCH = Path(__file__).resolve().parents[2] / "bench" / "trace_replay.py"
POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
              "deletion_time,scheduled_time\n")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=60)


def test_prints_both_tables_on_a_tiny_trace(tmp_path):
    (tmp_path / NODE_FILE).write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                                      "n0,8000,1000,2,G2\nn1,8000,1000,4,G2\n")
    (tmp_path / POD_FILE).write_text(POD_HEADER + "a,1000,10,1,1000,,LS,Running,0,,\n"
                                     "b,1000,10,1,500,,BE,Running,1,,\nc,1000,10,2,1000,,BE,Running,2,,\n")
    done = run("--trace-dir", str(tmp_path), "--seeds", "1", "--budget", "0.5", "--no-publish")
    assert done.returncode == 0, done.stderr
    assert "**Whole-GPU subset (pods sharing no GPU)**, 2 pods in the file:" in done.stdout
    assert "**Full default trace (shares of one GPU included)**, 3 pods in the file:" in done.stdout
    assert "| netsched (scoring + packer) |" in done.stdout and "| FGD |" in done.stdout


def test_without_the_trace_one_line_and_exit_2(tmp_path):
    done = run("--trace-dir", str(tmp_path), "--no-publish")
    assert done.returncode == 2
    assert done.stderr == (f"trace_replay: {tmp_path / NODE_FILE}: no such file; put the openb trace's CSV "
                           "files there (alibaba/clusterdata, cluster-trace-gpu-v2023) or give --trace-dir\n")


def test_the_packer_scale_bench_prints_a_row_per_size_and_priority_setting(tmp_path):
    (tmp_path / NODE_FILE).write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                                      "n0,8000,1000,2,G2\nn1,8000,1000,2,G2\n")
    (tmp_path / POD_FILE).write_text(POD_HEADER + "a,1000,10,1,1000,,LS,Running,0,,\n"
                                     "b,1000,10,2,1000,,BE,Running,2,,\n")
    done = subprocess.run([sys.executable, str(BENCH.parent / "trace_packer_scale.py"), "--trace-dir",
                           str(tmp_path), "--sizes", "2", "--budget", "0.3", "--no-publish"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "| from qos | 2 |" in done.stdout and "| one, stateless | 2 |" in done.stdout


def test_the_online_bench_prints_both_settings_on_a_tiny_trace(tmp_path):
    (tmp_path / NODE_FILE).write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                                      "n0,8000,1000,2,G2\nn1,8000,1000,4,G2\n")
    (tmp_path / POD_FILE).write_text(POD_HEADER + "a,1000,10,2,1000,,LS,Running,0,100,0\n"
                                     "b,1000,10,1,500,,BE,Running,10,50,10\nc,1000,10,4,1000,,BE,Running,20,90,20\n"
                                     "d,1000,10,1,1000,,BE,Pending,30,,\n")
    online = Path(__file__).resolve().parents[2] / "bench" / "trace_online.py"
    done = subprocess.run([sys.executable, str(online), "--trace-dir", str(tmp_path), "--seeds", "1",
                           "--fraction", "0.5", "--compress", "10", "--no-publish"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert ("**the trace's 2 GPU nodes, the trace's own times** (6 GPUs), GPU pods sharing no GPU: 2 pods"
            in done.stdout)
    assert "**0.5 of the nodes (1 samples), arrivals 10x faster**" in done.stdout
    assert "| netsched scoring |" in done.stdout and "| kube default |" in done.stdout
