"""Settings of the packer: flags of `netsched operator` (the operator runs it), Helm values
operator.packer.*; OperatorConfig holds them as its `packer` field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from netsched.api.settings import SECONDS_OR_ZERO, number, setting


@dataclass(frozen=True)
class PackerConfig:
    enabled: bool = setting(
        True, flag="--no-packer", helm="operator.packer.enabled",
        help="never evict or move pods to make room (no PackingPlans)")
    budget: float = setting(
        1.0, flag="--pack-budget", metavar="SECONDS", parse=number(above=0, at_most=60),
        helm="operator.packer.budgetSeconds",
        help="wall-clock budget of each packer solve, never overrun (default 1)")
    wait: float = setting(
        5.0, flag="--pack-after", metavar="SECONDS", parse=SECONDS_OR_ZERO,
        helm="operator.packer.waitSeconds",
        help="how long a pod must wait (Unschedulable, or a gang at its gate) before the packer "
        "looks for room (default 5)")
    cooldown: float = setting(
        10.0, flag="--pack-cooldown", metavar="SECONDS", parse=SECONDS_OR_ZERO,
        helm="operator.packer.cooldownSeconds",
        help="least time between two packer solves (default 10)")
    policy: Path | None = setting(
        flag="--pack-policy", metavar="FILE",
        fixed="the chart writes operator.packer.policy into a ConfigMap and passes its mounted path",
        help="disruption policy, YAML or JSON: mode priced (the default: moves and evictions priced by "
        "the run time they throw away; for lower-priority work only stateless replicas move) or strict "
        "(a pod is never disturbed for work below its own priority), prices, minimum gain and rules per "
        "priority class (docs/packer.md)")
    deadline: int = setting(
        120, flag="--plan-deadline", metavar="SECONDS", parse=number(at_least=5, at_most=3600, kind=int),
        helm="operator.packer.planDeadlineSeconds",
        help="a PackingPlan not done by then is abandoned and its pins released (default 120)")
