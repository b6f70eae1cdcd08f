"""A packing plan as people read it (`netsched pack`) and as JSON."""

from __future__ import annotations

from typing import Any

from netsched.packing.objective import score, tiers
from netsched.packing.problem import Problem, current
from netsched.packing.solver import Plan


def plan_json(problem: Problem, plan: Plan) -> dict[str, Any]:
    changes = plan.changes(problem)
    return {
        "source": plan.source, "proven_optimal": plan.proven_optimal, "seconds": round(plan.seconds, 3),
        "moves": [{"pod": p, "from": a, "to": b} for p, a, b in changes["moves"]],
        "evictions": [{"pod": p, "from": a} for p, a in changes["evictions"]],
        "placements": [{"pod": p, "node": n} for p, n in changes["placements"]],
        "tiers": tier_gains(problem, plan), "stages": plan.stages,
    }


def tier_gains(problem: Problem, plan: Plan) -> list[dict[str, Any]]:
    """Pods placed and disruption per tier, read the strict way whatever the plan's policy."""
    before, after = score(problem, current(problem)), score(problem, plan.placement)
    return [{"priority_at_least": t, "placed_before": before[2 * k], "placed_after": after[2 * k],
             "disruption": -after[2 * k + 1]} for k, t in enumerate(tiers(problem))]


def plan_text(problem: Problem, plan: Plan) -> str:
    doc = plan_json(problem, plan)
    proof = "proven optimal" if plan.proven_optimal else "best found in the budget, not proven optimal"
    lines = [f"plan from {plan.source} in {plan.seconds:.2f} s ({proof})"]
    if plan.source == "current":
        lines.append("no placement better than the current one was found: nothing to do")
    for t in doc["tiers"]:
        lines.append(f"  priority >= {t['priority_at_least']}: {t['placed_before']} -> {t['placed_after']} "
                     f"pods placed, disruption {t['disruption']}")
    lines += [f"  place {m['pod']} on {m['node']}" for m in doc["placements"]]
    lines += [f"  move  {m['pod']}: {m['from']} -> {m['to']}" for m in doc["moves"]]
    lines += [f"  evict {m['pod']} from {m['from']}" for m in doc["evictions"]]
    return "\n".join(lines)
