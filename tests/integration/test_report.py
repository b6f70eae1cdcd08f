"""`netsched report` on the records the operator wrote for jobs run on the real control plane, and the
operator's report gauges on /metrics."""

from __future__ import annotations

import json
import subprocess
import sys

from netsched.api.conditions import find
from netsched.api.gpujob import GROUP, PLURAL, VERSION
from netsched.devcluster.wait import poll
from netsched.records.reader import read_rows
from netsched.records.weekly import week_of
from netsched.testing.builders import make_gpujob
from netsched.testing.cluster import operator_metric


def test_report_sums_up_the_jobs_the_operator_recorded(dev_cluster, jobs, namespace):
    for name in ("report-a", "report-b"):
        jobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, make_gpujob(
            name, replicas=1, gpus=2, duration="2s", manifest=True))
    for name in ("report-a", "report-b"):
        poll(lambda n=name: find(jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, n)
                                 .get("status", {}).get("conditions", []), "Recorded") or None,
             90, f"GPUJob {name} to be recorded")
    ours = [r for r in read_rows(dev_cluster.records_file) if r["namespace"] == namespace]
    assert len(ours) == 2
    done = subprocess.run([sys.executable, "-m", "netsched", "report", str(dev_cluster.records_file), "-o",
                           "json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    weeks = {week_of(r["completion_time"]) for r in ours}
    rows = [w for w in json.loads(done.stdout)["weeks"] if w["week"] in weeks]
    assert sum(w["jobs"] for w in rows) >= 2 and sum(w["gpu_hours"] for w in rows) > 0
    # both jobs Succeeded on recorded nodes: the shipped model estimates their gain over the default
    assert sum(w["gain"]["jobs"] for w in rows if w["gain"]) >= 2
    assert json.loads(done.stdout)["gain"]["model"].endswith("models/default")
    plot = dev_cluster.records_file.parent / "report-gain.svg"
    table = subprocess.run([sys.executable, "-m", "netsched", "report", str(dev_cluster.records_file),
                            "--plot", str(plot)], capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and table.stdout.splitlines()[0].startswith("WEEK")
    assert "GAIN (95% CI)" in table.stdout.splitlines()[0] and plot.read_text().startswith("<svg")
    # the operator's /metrics says the same of this week and the last (refreshed at most once a minute)
    poll(lambda: operator_metric(dev_cluster, "netsched_report_jobs") >= len(ours) or None, 90,
         "the operator's report gauges to count the recorded jobs")
