"""Where nodes sit in the network, read from the labels the cluster already carries.

A topology is an ordered list of levels, widest first: each a name users write (`maxPeerDistance:
rack`, `netsched.io/data-source: block:b-7`) and the node label that says which domain of that level a
node is in. The default is netsched's own scheme (zone, then rack); presets name the schemes of
common clouds and an admin may write any list of 1 to 6 levels (`--topology`, the chart's
`topology` values).

Distance, the one scale every component compares with: 0 the same node, k when the narrowest level
two nodes share is the k-th narrowest, depth + 1 (`far`) when they share none. With the default
levels that is today's scale: node 0, rack 1, zone 2, far 3.

A domain is named by the labels of its level and of every wider one, so two racks called `r1` in
different zones are different racks. A node lacking a level's label is alone at that level: it shares
no domain there with any other node. A wider label missing reads as empty, so nodes labelled with a
rack and no zone still share their rack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from netsched.api.labels import RACK_LABEL, ZONE_LABEL

NODE = "node"  # distance 0: the level below every configured one
FAR = "far"  # past the widest level
RESERVED = (NODE, FAR, "endpoint")  # names that mean something else in annotations and specs
MAX_LEVELS = 6
_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
# a label key as Kubernetes takes it: an optional DNS subdomain prefix and a name of at most 63 characters
_LABEL = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class BadTopology(ValueError):
    """A topology setting that cannot be used; the message names the part and the fix."""


class UnknownLevel(ValueError):
    """A level name the configured topology does not have; the message names the levels it has."""


@dataclass(frozen=True)
class Level:
    name: str  # what users write: "rack", "block"
    label: str  # the node label holding a node's domain at this level


PRESETS: dict[str, tuple[Level, ...]] = {
    "netsched": (Level("zone", ZONE_LABEL), Level("rack", RACK_LABEL)),
    "gke": (Level("block", "cloud.google.com/gce-topology-block"),
            Level("subblock", "cloud.google.com/gce-topology-subblock"),
            Level("host", "cloud.google.com/gce-topology-host")),
    "eks": (Level("layer1", "topology.k8s.aws/network-node-layer-1"),
            Level("layer2", "topology.k8s.aws/network-node-layer-2"),
            Level("layer3", "topology.k8s.aws/network-node-layer-3")),
    "nvidia": (Level("zone", ZONE_LABEL), Level("clique", "nvidia.com/gpu.clique")),
}
DEFAULT_PRESET = "netsched"


@dataclass(frozen=True)
class Topology:
    levels: tuple[Level, ...]  # widest first

    def __post_init__(self) -> None:
        if not 1 <= len(self.levels) <= MAX_LEVELS:
            raise BadTopology(f"topology has {len(self.levels)} levels: give 1 to {MAX_LEVELS}, widest first")
        for level in self.levels:
            if level.name in RESERVED or not _NAME.match(level.name):
                raise BadTopology(f"topology level name {level.name!r}: use lowercase letters, digits "
                                  f"and '-' (at most 32), not one of {', '.join(RESERVED)}")
            if not _LABEL.match(level.label):
                raise BadTopology(f"topology level {level.name}: {level.label!r} is not a node label key, "
                                  "e.g. topology.kubernetes.io/zone")
        for what, values in (("name", list(self.names)), ("label", list(self.labels))):
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise BadTopology(f"topology level {what} {twice[0]!r} appears twice: "
                                  "each level needs its own")

    # ---- reading a setting -------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Topology:
        """A preset's name ("gke") or levels widest first as NAME=LABEL pairs separated by commas
        ("block=example.com/block,rack=example.com/rack")."""
        text = text.strip()
        if text in PRESETS:
            return cls(PRESETS[text])
        if "=" not in text:
            raise BadTopology(f"topology {text!r}: name a preset ({', '.join(PRESETS)}) or write levels "
                              "widest first as NAME=LABEL,..., "
                              "e.g. zone=topology.kubernetes.io/zone,rack=netsched.io/rack")
        levels = []
        for part in text.split(","):
            name, sep, label = (p.strip() for p in part.partition("="))
            if not sep or not name or not label:
                raise BadTopology(f"topology level {part.strip()!r}: write NAME=LABEL, "
                                  "e.g. rack=example.com/rack")
            levels.append(Level(name, label))
        return cls(tuple(levels))

    def __str__(self) -> str:
        """The setting that parses back to this topology."""
        return ",".join(f"{lv.name}={lv.label}" for lv in self.levels)

    # ---- the scale ---------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def names(self) -> tuple[str, ...]:
        """Level names, widest first."""
        return tuple(lv.name for lv in self.levels)

    @property
    def labels(self) -> tuple[str, ...]:
        """Node label keys, widest first."""
        return tuple(lv.label for lv in self.levels)

    @property
    def far(self) -> int:
        return self.depth + 1

    @cached_property
    def limits(self) -> tuple[str, ...]:
        """The distances a job may ask to stay within, nearest first: node, then narrowest to widest."""
        return (NODE, *reversed(self.names))

    @cached_property
    def distances(self) -> dict[str, int]:
        """Distance of each name: node 0, the narrowest level 1, ..., the widest depth, far depth + 1."""
        return {name: d for d, name in enumerate((*self.limits, FAR))}

    def distance_of(self, name: str) -> int:
        """The distance a level name stands for; UnknownLevel naming the configured levels if none."""
        found = self.distances.get(name)
        if found is None:
            raise self.unknown(name)
        return found

    def label_of(self, name: str) -> str:
        """The node label of a level ("kubernetes.io/hostname" for node)."""
        if name == NODE:
            return "kubernetes.io/hostname"
        for lv in self.levels:
            if lv.name == name:
                return lv.label
        raise self.unknown(name)

    def model_scale(self, distance: int) -> float:
        """A distance on the completion-time model's fixed scale, whatever the depth: node 0, the
        narrowest level 1, the widest 2, far 3, levels between spread evenly from 1 to 2. Models learn
        across clusters configured differently, so they read what the distance means, not its rank."""
        if distance <= 0:
            return 0.0
        if distance > self.depth:
            return 3.0
        return 1.0 if self.depth == 1 else 1.0 + (distance - 1) / (self.depth - 1)

    # ---- where a node is ----------------------------------------------------------------
    def path(self, labels: Mapping[str, str] | None) -> tuple[tuple[str, ...] | None, ...]:
        """The node's domain at each level, widest first: the label values down to that level, or None
        where the node is alone (that level's label missing)."""
        labels = labels or {}
        values = tuple(labels.get(lv.label) or "" for lv in self.levels)
        return tuple(values[:k + 1] if values[k] else None for k in range(self.depth))

    def domain(self, labels: Mapping[str, str] | None, name: str) -> str | None:
        """The node's domain at a level, as users name it (the level's label value), None when alone."""
        if name == NODE:
            raise UnknownLevel("a node's domain at level node is the node itself")
        if name not in self.names:
            raise self.unknown(name)
        found = self.path(labels)[self.names.index(name)]
        return found[-1] if found else None

    def distance(self, a: tuple[str, Mapping[str, str] | None],
                 b: tuple[str, Mapping[str, str] | None]) -> int:
        """Distance between two nodes, each given as (name, labels)."""
        if a[0] == b[0]:
            return 0
        pa, pb = self.path(a[1]), self.path(b[1])
        for k in range(self.depth - 1, -1, -1):  # narrowest first
            if pa[k] is not None and pa[k] == pb[k]:
                return self.depth - k
        return self.far

    def unknown(self, name: str) -> UnknownLevel:
        """The error for a level name this topology lacks, naming the ones it has."""
        return UnknownLevel(f"{name!r} is not a topology level of this cluster: write one of "
                            f"{', '.join(self.limits)}")


DEFAULT = Topology(PRESETS[DEFAULT_PRESET])

# Where the cluster publishes the levels its operator and extender run with, so `netsched whatif` and
# `why` use the same ones: a ConfigMap the chart (and the dev-cluster) writes from the same setting as
# their --topology, readable by every authenticated user, in netsched's namespace.
PUBLISHED_CONFIGMAP = "netsched-topology"
PUBLISHED_KEY = "topology"  # its value: the setting, as `Topology.parse` reads it
PUBLISHED_NAMESPACE = "netsched-system"  # the namespace the docs install netsched into
