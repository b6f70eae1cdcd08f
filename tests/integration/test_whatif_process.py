"""`netsched whatif` as a user runs it, in a process of its own against the real dev-cluster: it answers
through plain requests (the server check, its dry runs, the lists), so the process never imports an API
class of the kubernetes client, each of which costs up to seconds of a short command."""

from __future__ import annotations

import json
import subprocess
import sys

from netsched.testing.builders import make_gpujob

# the CLI's own entry, then what the process loaded, on stderr's last line
SCRIPT = """
import json, sys
from netsched.cli import main
code = main(sys.argv[1:])
print(json.dumps([m for m in sorted(sys.modules) if m.startswith("kubernetes.client.api.")]), file=sys.stderr)
sys.exit(code)
"""


def test_whatif_answers_without_loading_a_client_api_class(dev_cluster, namespace, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(make_gpujob("small", replicas=1, gpus=1, manifest=True)))
    done = subprocess.run([sys.executable, "-c", SCRIPT, "whatif", "-f", str(path), "-n", namespace, "-o",
                           "json", f"--kubeconfig={dev_cluster.kubeconfig}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["job"] == f"{namespace}/small" and answer["schedulable"]["fits"] is True
    assert json.loads(done.stderr.splitlines()[-1]) == []
