"""`netsched demo`: its settings, the demo on the dev-cluster they describe, its entry in the CLI."""

from __future__ import annotations

from dataclasses import dataclass

from netsched.api.settings import option
from netsched.api.subcommand import Command
from netsched.devcluster.commands import ClusterShape, scored_by


@dataclass(frozen=True)
class DemoSettings(ClusterShape):
    model: str | None = option(flag="--model", metavar="PATH",
                               help="the extender scores by this completion-time model "
                               "(artifact directory or current.json; default: the topology heuristic)")
    keep_cluster: bool = option(False, flag="--keep-cluster",
                                help="leave a cluster this command started running afterwards")


def main(settings: DemoSettings) -> int:
    from netsched.demo.demo import run_demo
    from netsched.devcluster.binaries import kueue_cached

    # Kueue only when its binary is built already: the demo never starts its 14-minute build
    kueue = kueue_cached() is not None
    return run_demo(settings.cluster(kueue=kueue, **scored_by(settings.model)), keep=settings.keep_cluster)


COMMAND = Command("demo", "run the demo GPU workload and print placements", DemoSettings, main,
                  "Bring up the dev-cluster (unless one is running), run the demo workload and print where "
                  "each pod went.")
