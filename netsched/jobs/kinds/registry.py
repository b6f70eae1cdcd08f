"""Every pod-gang kind, found by importing each module of netsched.jobs.kinds and keeping the `GangKind`s
it declares: a new kind is one file there (and its tests), and everything that differs by kind reads
it here: which gang a pod is in (netsched.jobs.pod_gangs), the operator's RBAC for the kinds
(netsched.devcluster.rbac, and the chart's template generated from it), and the kinds `netsched whatif`
and `why` answer for (netsched.foresight).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace

from netsched.jobs import kinds as package
from netsched.jobs.kinds.kind import Access, Answered, GangKind


def _declared() -> tuple[GangKind, ...]:
    found: dict[str, GangKind] = {}
    for module in pkgutil.iter_modules(package.__path__):
        if module.name == __name__.rpartition(".")[2]:
            continue
        for value in vars(importlib.import_module(f"{package.__name__}.{module.name}")).values():
            if isinstance(value, GangKind) and found.setdefault(value.kind, value) is not value:
                raise ValueError(f"two pod-gang kinds are named {value.kind}")
    ordered = tuple(sorted(found.values(), key=lambda k: k.precedence))
    if len({k.precedence for k in ordered}) != len(ordered):
        raise ValueError("two pod-gang kinds share a precedence: which one names a pod's gang would be "
                         "left to chance")
    return ordered


# in the order gang_of tries them (GangKind.precedence)
KINDS: tuple[GangKind, ...] = _declared()


def kind_named(kind: str) -> GangKind | None:
    return next((k for k in KINDS if k.kind == kind), None)


def answered() -> dict[str, Answered]:
    """What whatif and why need of the kinds they answer for, by API kind (each of a gang kind's
    `api_kinds`), in the order of the kinds' names (the order their messages list them in)."""
    found: dict[str, Answered] = {}
    for k in KINDS:
        a = k.answered
        if a is None:
            continue
        for kind, plural, gangs in a.api_kinds:
            found[kind] = replace(a, plural=plural, gangs=gangs, api_kinds=())
        if not a.api_kinds:
            found[k.kind] = a
    return dict(sorted(found.items()))


def access() -> list[Access]:
    """The operator's ClusterRole rules the kinds need, each once (a JobSet's Jobs are a batch Job's), in
    KINDS order."""
    found: list[Access] = []
    for a in (a for k in KINDS for a in k.access):
        if a.rule() not in [b.rule() for b in found]:
            found.append(a)
    return found
