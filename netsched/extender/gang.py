"""A gang placed as one decision: a node for every member, chosen together with the filters, scorer and
model that serve kube-scheduler's filter, on one snapshot (pure: no I/O).

The operator asks as it lifts a gang's gates (POST /gang, netsched.extender.server) and writes each
member's node into its nodeSelector in the same patch, so kube-scheduler filters one node per pinned pod;
`netsched whatif` asks the same question without keeping the answer (`dry_run`).

What the caller knows and the extender does not (node conditions, taints, the pods' nodeSelector and
affinity, CPU and memory) arrives as `room`: how many members each eligible node holds now
(netsched.jobs.capacity.member_room), as kube-scheduler's own filters hand the extender its candidates.

The search: a member at a time, each on the best node the plugins leave it, with the members placed so
far as its peers (the same `Request` a filter builds, on the snapshot with those peers and their GPUs
taken). That greedy walk, once filling the nodes the gang uses first and once by score alone, is run
from several first nodes: one in each of `STARTS` domains at the
narrowest level, the nodes that hold the most of the gang first and the best-scoring among those, and
the best-scoring node of all, so the domain a limited gang goes to is part of the choice. The walks
are compared by members left unplaced, then nodes used, then domains spanned at each level wider than
a node, then the model's predicted time of the slowest member when the model scores, then the sum of
the members' scores. Cost:
at most 2 x (STARTS + 1) walks of a filter-and-score pass per member over the eligible nodes; at 1,000
nodes a 4-member gang took 6 ms at the median (docs/benchmarks.md, "Extender throughput").
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from netsched.api.labels import JOB_GPUS
from netsched.extender.engine import Extender, StaleCache, check_needs, ranking, run_filters
from netsched.extender.plugin import Filter, InvalidNeeds, Refused, Request, Scorer
from netsched.extender.protocol import BadRequest, PodRef, parse_pod
from netsched.extender.reservations import Placement
from netsched.extender.scorers import NodeScorer
from netsched.extender.snapshot import Snapshot

STARTS = 4  # first nodes a search starts from: the best of as many domains at the narrowest level


@dataclass(frozen=True)
class GangRequest:
    """Who asks: the gang's name (its job, for the plugins that read one), its members (same shape) and
    how many members each node may take now."""

    namespace: str
    name: str
    members: tuple[PodRef, ...]
    room: dict[str, int]
    dry_run: bool = False
    peers: tuple[str, ...] = ()  # nodes of its members placed already (bound, or pinned and on their way)


@dataclass(frozen=True)
class GangPlacement:
    nodes: dict[str, str]  # member pod name -> node
    unplaced: tuple[str, ...]  # members no node could take (then `nodes` is empty: all or none)
    message: str
    score: float = 0.0  # the sum of the members' 0..1 values where they were placed
    seconds: float = 0.0  # how long the search took
    why: dict[str, str] = field(default_factory=dict)  # node -> the first reason a filter gave, a few

    @property
    def placed(self) -> bool:
        return not self.unplaced and bool(self.nodes)


@dataclass
class _Walk:
    nodes: list[int]  # table index per member placed, in member order
    value: float
    unplaced: int
    # the model's predicted seconds of its slowest member (the gang ends with it); inf when a member was
    # scored without a prediction
    seconds: float = math.inf


def decide_gang(extender: Extender, req: GangRequest) -> GangPlacement:
    """The gang's placement on the extender's snapshot now; unless a dry run, each member is assumed on its
    node (netsched.extender.reservations) until it binds, so pods filtered meanwhile leave its room."""
    job = req.members[0].job
    # its members' own assumptions (a release of the gang cut short, asked again) do not take its room
    members = frozenset(p.uid for p in req.members if p.uid)
    snap = extender.cluster.snapshot(req.namespace, job or req.name, members, extender.telemetry)
    if snap.stale:
        raise StaleCache(f"netsched: cluster cache is {snap.age:.0f} s old or not synced; no gang placement "
                         "on stale data")
    if req.peers:
        snap = replace(snap, peers=tuple(sorted((*snap.peers, *req.peers))))
    placed = place_gang(req, snap, extender.filters, extender.scorer, extender.plugins)
    extender.metrics.gangs.labels("placed" if placed.placed else "unplaced").inc()
    if placed.placed and not req.dry_run:
        for pod in req.members:
            if pod.uid:
                key = f"{req.namespace}/{job}" if job else None
                extender.cluster.settle(pod.uid, Placement(key, placed.nodes[pod.name], pod.gpus,
                                                           since=extender.cluster.clock()))
    return placed


def place_gang(req: GangRequest, snap: Snapshot, filters: Sequence[Filter], scorer: NodeScorer,
               plugins: Sequence[Filter | Scorer]) -> GangPlacement:
    """Every member's node, chosen together; all or none (a gang half placed is no use)."""
    started = time.perf_counter()
    if not req.members:
        return GangPlacement({}, (), "no members to place")
    table = snap.table
    room = np.zeros(len(table.names), dtype=np.int64)
    for node, n in req.room.items():
        if node in table.index and n > 0:
            room[table.index[node]] = n
    members = [_as_gang_member(p, req) for p in req.members]
    first = Request(members[0], snap)
    try:
        check_needs(first, plugins)
    except InvalidNeeds as exc:
        return GangPlacement({}, tuple(p.name for p in members), f"its annotations are invalid: {exc}")
    walks: list[_Walk] = []
    why: dict[str, str] = {}
    for start in _starts(first, room, len(members), filters, scorer, why):
        for fill in (True, False):
            walks.append(_walk(members, snap, room, filters, scorer, start, fill))
    if not walks:
        return GangPlacement({}, tuple(p.name for p in members), _nowhere(req, why), 0.0,
                             time.perf_counter() - started, why)
    best = min(walks, key=lambda w: _rank(w, snap))
    seconds = time.perf_counter() - started
    if best.unplaced:
        short = f"{best.unplaced} of {len(members)} members find no node beside the others within its limits"
        return GangPlacement({}, tuple(p.name for p in members), short, best.value, seconds, why)
    names = [table.names[i] for i in best.nodes]
    placed = dict(zip((p.name for p in members), names, strict=True))
    said = (f"{len(members)} members on {len(set(names))} node(s) ({_count(names)}), chosen together from "
            f"{len(walks)} start(s)")
    return GangPlacement(placed, (), said, best.value, seconds, why)


def _as_gang_member(pod: PodRef, req: GangRequest) -> PodRef:
    """The member as the plugins read a job's pod: of the gang's job, with the gang's GPUs when its pods
    do not say them (a pod gang's pods carry neither until they are released)."""
    annotations = dict(pod.annotations)
    annotations.setdefault(JOB_GPUS, str(pod.gpus * len(req.members)))
    return replace(pod, job=pod.job or req.name, annotations=annotations)


def _starts(req: Request, room: np.ndarray, members: int, filters: Sequence[Filter], scorer: NodeScorer,
            why: dict[str, str]) -> list[int]:
    """The first member's candidate nodes to start from: the best of each of the best STARTS domains at
    the narrowest level wider than a node (the best nodes themselves without such a level), nodes that
    hold more of the gang first (a start on a node that holds it all is a walk on one node), then by
    score; and the best-scoring node itself."""
    snap = req.snapshot
    idx = _open(snap, room, req.pod)
    left = _filtered(req, idx, filters, why)
    if not len(left):
        return []
    scored = ranking(scorer.score(req, left), left)
    holds = np.minimum(np.minimum(room[left], snap.free[left] // max(req.pod.gpus, 1)), members)
    order = sorted(scored, key=lambda o: -int(holds[o]))  # stable: by score among equal holds
    depth = snap.table.domains.shape[0]
    if depth == 0:
        return [int(left[o]) for o in order[:STARTS]]
    domains = snap.table.domains[depth - 1]
    starts: list[int] = []
    seen: set[int] = set()
    for o in order:
        d = int(domains[left[o]])
        if d not in seen:
            seen.add(d)
            starts.append(int(left[o]))
            if len(starts) == STARTS:
                break
    best = int(left[scored[0]])
    return starts if best in starts else [*starts, best]


def _walk(members: list[PodRef], snap: Snapshot, room: np.ndarray, filters: Sequence[Filter],
          scorer: NodeScorer, start: int, fill: bool) -> _Walk:
    """Members in order, the first on `start`, each next on the best node left beside those before it;
    with `fill`, on a node the gang already uses while one still takes it (the scorer may rank another
    node a little higher for one member, and the gang would then span more nodes than it has to)."""
    room = room.copy()
    free = snap.free.copy()
    placed: list[int] = []
    value, slowest = 0.0, 0.0
    for k, pod in enumerate(members):
        here = _with_peers(snap, placed, free)
        req = Request(pod, here)
        if k == 0:
            node, best, scored = start, 0, scorer.score(req, np.array([start]))
        else:
            left = _filtered(req, _open(here, room, pod), filters, {})
            used = left[np.isin(left, placed)] if fill else left[:0]
            left = used if len(used) else left
            if not len(left):
                return _Walk(placed, value, len(members) - k)
            scored = scorer.score(req, left)
            best = ranking(scored, left, 1)[0]
            node = int(left[best])
        value += float(np.nan_to_num(scored.value[best], nan=0.0))
        predicted = scored.factors.get("predicted_seconds")
        slowest = max(slowest, float(predicted[best]) if predicted is not None else math.inf)
        placed.append(node)
        room[node] -= 1
        free[node] -= pod.gpus
    return _Walk(placed, value, 0, slowest)


def _open(snap: Snapshot, room: np.ndarray, pod: PodRef) -> np.ndarray:
    """Table indices of the nodes that may take one more member: room by the caller's count and free
    GPUs by the extender's own (which has seen bindings and assumptions the caller may not have)."""
    return np.flatnonzero((room > 0) & (snap.free >= pod.gpus))


def _filtered(req: Request, idx: np.ndarray, filters: Sequence[Filter], why: dict[str, str]) -> np.ndarray:
    try:
        reasons = run_filters(filters, req, idx)
    except Refused as exc:
        why.setdefault("*", str(exc))
        return idx[:0]
    for pos, reason in list(reasons.items())[:3]:
        why.setdefault(req.snapshot.table.names[int(idx[pos])], reason)
    return np.delete(idx, list(reasons)) if reasons else idx


def _with_peers(snap: Snapshot, placed: list[int], free: np.ndarray) -> Snapshot:
    """The snapshot as the next member sees it: the members placed so far are its peers, their GPUs taken."""
    if not placed:
        return snap
    names = snap.table.names
    peers = tuple(sorted((*snap.peers, *(names[i] for i in placed))))
    return replace(snap, free=np.maximum(free, 0), peers=peers)


def _rank(walk: _Walk, snap: Snapshot) -> tuple[float, ...]:
    """Fewer unplaced, then fewer nodes, then fewer domains per level (narrowest first), then the model's
    predicted time of the slowest member, then more value. Predicted seconds, not values, compare walks:
    a value is relative to the best candidate of its own scoring call, and each walk's calls see other
    candidates (a walk of slow GPUs scores near 1 per member among slow GPUs alone)."""
    nodes = sorted(set(walk.nodes))
    domains = snap.table.domains
    spans = [len({int(domains[k, i]) for i in nodes}) for k in reversed(range(domains.shape[0]))]
    return (walk.unplaced, len(nodes), *spans, walk.seconds, -walk.value)


def _count(names: list[str]) -> str:
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{n} x{k}" if k > 1 else n for n, k in counts.items())


def _nowhere(req: GangRequest, why: Mapping[str, str]) -> str:
    if "*" in why:
        return why["*"]
    if not any(n > 0 for n in req.room.values()):
        return "no node has room for a member now"
    example = next(iter(why.values()), "")
    return "no node the gang may use passes the extender's filters" + (f" ({example})" if example else "")


def parse_gang(doc: object) -> GangRequest:
    """A POST /gang body: {"namespace", "name", "pods": [Pod, ...], "room": {node: members}, "peers":
    [node, ...], "dryRun"}."""
    if not isinstance(doc, dict):
        raise BadRequest("request body must be a JSON object with namespace, name, pods and room")
    pods = doc.get("pods")
    if not isinstance(pods, list) or not pods:
        raise BadRequest("field pods must be a non-empty list of the gang's member pods")
    room = doc.get("room")
    if not isinstance(room, dict) or not all(isinstance(v, int) for v in room.values()):
        raise BadRequest("field room must map node names to the members each may take (integers)")
    members = tuple(parse_pod(p) for p in pods)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest("field name (the gang's name) is missing")
    namespace = str(doc.get("namespace") or members[0].namespace)
    peers = doc.get("peers") or []
    if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
        raise BadRequest("field peers must list the nodes of the gang's members placed already")
    return GangRequest(namespace, name, members, dict(room), bool(doc.get("dryRun")), tuple(peers))


def gang_result(placed: GangPlacement) -> dict[str, object]:
    """The POST /gang answer."""
    return {"nodes": placed.nodes, "unplaced": list(placed.unplaced), "message": placed.message,
            "score": round(placed.score, 4), "seconds": round(placed.seconds, 4), "rejected": placed.why}
