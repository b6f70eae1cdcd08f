"""bench/packing_bench.py's grid with another policy or pod kind as its "priced" column: the default's choice.

    python bench/packing_policy_variants.py default|everything-moves|jobs [packing_bench options]

default: the grid as bench/packing_bench.py runs it (the shipped default, priced, in the "priced"
column, over the scenarios' ReplicaSet pods: stateless replicas, which it may move for any work).
everything-moves: every pod a job's pod, and the priced policy that lets every class be moved for
lower- or equal-priority work, restarting jobs. jobs: the shipped default over the same scenarios
with every pod a job's pod (disturbed only for higher-priority work). Prints the section; writes
nothing.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import packing_bench as bench  # noqa: E402

from netsched.packing.policy import Policy  # noqa: E402

VARIANTS = ("default", "everything-moves", "jobs")


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in VARIANTS:
        print(f"usage: packing_policy_variants.py {'|'.join(VARIANTS)} [packing_bench options]",
              file=sys.stderr)
        return 2
    variant = sys.argv[1]
    bench.publish = print  # docs/benchmarks-history.md is packing_bench.py's to write
    if variant == "everything-moves":
        bench.POLICIES["priced"] = Policy(priced=True, move_for_lower=None)
    if variant in ("everything-moves", "jobs"):
        seeds = bench.failing_seeds
        bench.failing_seeds = lambda *a: [
            replace(p, pods=tuple(replace(q, stateless=False) for q in p.pods)) for p in seeds(*a)]
    sys.argv = ["packing_bench.py", *sys.argv[2:]]
    return bench.main()


if __name__ == "__main__":
    raise SystemExit(main())
