"""Both extender benchmarks, one after the other: latency, then end-to-end throughput.

    python bench/extender_bench.py

extender_latency.py (filter + prioritize p50/p99 at 100, 1,000 and 5,000 node names)
and extender_throughput.py (1,000 GPU pods on 1,000 KWOK nodes, real kube-scheduler
with and without the extender) each write their section of docs/benchmarks-history.md and
can be run alone with their own flags.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    for script in ("extender_latency.py", "extender_throughput.py"):
        print(f"== {script}", file=sys.stderr, flush=True)
        rc = subprocess.call([sys.executable, str(HERE / script)])
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
