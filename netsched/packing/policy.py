"""Disruption policies: what the packer may move or evict to place pending pods, and at what price.

`Policy` is what the solver reads (priorities as integers). `DisruptionPolicy` is what a cluster
admin writes (a YAML or JSON document: the chart's `operator.packer.policy`, or a file given to
`netsched pack --policy`): the mode, the prices, and rules per priority class by name or value,
resolved against the pods of each problem into a `Policy`.

The default (`DisruptionPolicy()`, the chart's `{mode: priced}`, `PRICED`) is priced and never
throws a job's work away for lower- or equal-priority work: only stateless replicas (`Pod.stateless`:
a ReplicaSet's pods, whose restart loses nothing) move for it; a job's pods are disturbed only to
place higher-priority pods, priced by the run time their restart loses, unless a class rule says
otherwise. `{mode: strict}` is the per-tier order that disturbs nothing for lower work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from netsched.packing.problem import Pod, Problem


@dataclass(frozen=True)
class Policy:
    """What the packer may disturb to place pending pods, and at what price.

    `priced=False` is the strict per-tier order (the prices and sets below do not apply).
    Priced: maximise the value of the pods running after the plan minus the price of the
    plan; a pod may always be moved or evicted to place higher-priority pods (and PDBs and
    protected pods hold either way); for lower- or equal-priority work a pod may move only
    when `may_move_for_lower` says so (stateless replicas, and every pod of the classes in
    `move_for_lower`; None: of every class), and be evicted only when its class is in
    `evict_for_lower`. Prices are in points: a move costs `move_price` and an eviction
    `evict_price` (or their class's own, from `prices`), each plus the pod's run time so far at
    `points_per_minute` (what the restart throws away; 0 when its start is unknown and for a
    stateless replica, whose restart loses no work). `values`
    gives the points of one running pod per priority; None: each class is worth more than
    every lower class and every price together, so pods placed come first, highest priority
    first, and prices break ties. A plan must gain at least `min_gain` points over the
    current placement.
    """
    priced: bool = False
    move_for_lower: frozenset[int] | None = frozenset()  # classes whose every pod may move for lower work
    stay_for_lower: frozenset[int] = frozenset()  # classes whose pods, stateless or not, never do
    evict_for_lower: frozenset[int] = frozenset()
    move_price: int = 1
    evict_price: int = 1
    points_per_minute: float = 1.0
    values: tuple[tuple[int, int], ...] | None = None  # (priority, points per running pod)
    prices: tuple[tuple[int, int, int], ...] = ()  # (priority, move price, evict price) of some classes
    min_gain: int = 0
    candidates: int | None = 6  # nodes a pod may go to besides its own and the repair's; None: all
    repair: bool = True  # hint the solver with a greedy repair of the current placement, then `swaps`
    identical: bool = True  # over identical nodes, solve the placements first without node symmetry

    def may_move_for_lower(self, p: Pod) -> bool:
        """May `p` be moved for work of its own priority or below? A stateless replica may (its restart
        loses no work), a job's pod only when the admin lets its class."""
        if p.priority in self.stay_for_lower:
            return False
        return self.move_for_lower is None or p.priority in self.move_for_lower or p.stateless

    def move_price_of(self, priority: int) -> int:
        return next((m for p, m, _ in self.prices if p == priority), self.move_price)

    def evict_price_of(self, priority: int) -> int:
        return next((e for p, _, e in self.prices if p == priority), self.evict_price)


class InvalidPolicy(ValueError):
    """A disruption policy document that cannot be used; the message names the field and the fix."""


STRICT = Policy()
PRICED = Policy(priced=True)  # the default

MODES = ("strict", "priced")
_TOP = {"mode", "minGain", "movePrice", "evictPrice", "pointsPerMinute", "classes"}
_CLASS = {"priorityClassName", "priority", "moveForLower", "evictForLower", "movePrice", "evictPrice"}


@dataclass(frozen=True)
class ClassRule:
    """One priority class's rule; `name` (a PriorityClass) or `priority` (its value) says which.
    `move_for_lower` None: only its stateless replicas move for lower work; True: every pod of it;
    False: none."""
    name: str | None = None
    priority: int | None = None
    move_for_lower: bool | None = None
    evict_for_lower: bool = False
    move_price: int | None = None
    evict_price: int | None = None


@dataclass(frozen=True)
class DisruptionPolicy:
    """A disruption policy as an admin writes it; `resolve` turns it into the solver's `Policy`.
    The default is the priced policy with no class rules (`PRICED`)."""
    mode: str = "priced"
    min_gain: int = 0
    move_price: int = 1
    evict_price: int = 1
    points_per_minute: float = 1.0
    classes: tuple[ClassRule, ...] = ()

    @classmethod
    def from_doc(cls, doc: Any, source: str = "the disruption policy") -> DisruptionPolicy:
        """Read a policy document; anything wrong raises InvalidPolicy naming the field and the fix."""
        if doc is None:
            return cls()
        if not isinstance(doc, Mapping):
            raise InvalidPolicy(f"{source}: expected a mapping with 'mode' (strict or priced), got "
                             f"{type(doc).__name__}")
        _no_unknown(doc, _TOP, source)
        mode = doc.get("mode", "priced")
        if mode not in MODES:
            raise InvalidPolicy(f"{source}: mode is {mode!r}; use 'priced' (the default: moves and "
                             "evictions priced by the run time they throw away, a job's pods disturbed only "
                             "for higher-priority work) or 'strict' (never disturb a pod for work below its "
                             "own priority)")
        rules = doc.get("classes") or []
        if not isinstance(rules, list):
            raise InvalidPolicy(f"{source}: classes must be a list of rules, one per priority class")
        return cls(mode=mode,
                   min_gain=_whole(doc, "minGain", 0, source),
                   move_price=_whole(doc, "movePrice", 1, source),
                   evict_price=_whole(doc, "evictPrice", 1, source),
                   points_per_minute=_number(doc, "pointsPerMinute", 1.0, source),
                   classes=tuple(_rule(r, f"{source}: classes[{i}]") for i, r in enumerate(rules)))

    def resolve(self, problem: Problem) -> Policy:
        """The solver's policy for this problem: class names become the priorities their pods carry
        (a rule whose class no pod has changes nothing)."""
        if self.mode == "strict":
            return STRICT
        by_name = {p.priority_class: p.priority for p in problem.pods if p.priority_class}
        move: set[int] = set()
        stay: set[int] = set()
        evict: set[int] = set()
        prices: list[tuple[int, int, int]] = []
        for rule in self.classes:
            priority = rule.priority if rule.priority is not None else by_name.get(rule.name or "")
            if priority is None:
                continue
            if rule.move_for_lower is not None:
                (move if rule.move_for_lower else stay).add(priority)
            if rule.evict_for_lower:
                evict.add(priority)
            if rule.move_price is not None or rule.evict_price is not None:
                prices.append((priority,
                               self.move_price if rule.move_price is None else rule.move_price,
                               self.evict_price if rule.evict_price is None else rule.evict_price))
        return Policy(priced=True, move_for_lower=frozenset(move), stay_for_lower=frozenset(stay),
                      evict_for_lower=frozenset(evict), move_price=self.move_price,
                      evict_price=self.evict_price, points_per_minute=self.points_per_minute,
                      prices=tuple(prices), min_gain=self.min_gain)


def read_policy(path: Path) -> DisruptionPolicy:
    """A disruption policy file (YAML or JSON); InvalidPolicy names the file and what is wrong."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InvalidPolicy(f"disruption policy {path}: cannot read it: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise InvalidPolicy(f"disruption policy {path}: not YAML or JSON: {exc}") from exc
    return DisruptionPolicy.from_doc(doc, f"disruption policy {path}")


def _rule(doc: Any, where: str) -> ClassRule:
    if not isinstance(doc, Mapping):
        raise InvalidPolicy(f"{where}: expected a mapping such as "
                         "{priorityClassName: batch, moveForLower: true}")
    _no_unknown(doc, _CLASS, where)
    name, priority = doc.get("priorityClassName"), doc.get("priority")
    if (name is None) == (priority is None):
        raise InvalidPolicy(f"{where}: give exactly one of priorityClassName (a PriorityClass's name) and "
                         "priority (its value)")
    if name is not None and not isinstance(name, str):
        raise InvalidPolicy(f"{where}: priorityClassName must be a string")
    for key in ("moveForLower", "evictForLower"):
        if key in doc and not isinstance(doc[key], bool):
            raise InvalidPolicy(f"{where}: {key} must be true or false, got {doc[key]!r}")
    return ClassRule(name=name, priority=_whole(doc, "priority", None, where, low=None),
                     move_for_lower=doc.get("moveForLower"),
                     evict_for_lower=doc.get("evictForLower", False),
                     move_price=_whole(doc, "movePrice", None, where),
                     evict_price=_whole(doc, "evictPrice", None, where))


def _no_unknown(doc: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(doc) - known)
    if unknown:
        raise InvalidPolicy(f"{where}: unknown field(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(known))}")


def _whole(doc: Mapping[str, Any], key: str, default: Any, where: str, low: int | None = 0) -> Any:
    value = doc.get(key, default)
    if value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        bound = f" of at least {low}" if low is not None else ""
        raise InvalidPolicy(f"{where}: {key} must be a whole number{bound}, got {value!r}")
    return value


def _number(doc: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidPolicy(f"{where}: {key} must be a number of at least 0, got {value!r}")
    return float(value)
