"""What the extender decides for filter, prioritize and preempt, independent of HTTP.

Every verb takes one snapshot when it starts (the read model with the reservations ledger and
the telemetry, netsched.extender.read_model) and runs the plugin registry
(netsched.extender.plugins) over it. Filter is one pass: snapshot, the plugins' annotations, then
its stages (filters, scorer, shortlist) give the outcome, and its post-steps, whatever the outcome,
leave what later requests read: the decision with the plugins' `explain` words (/debug/decisions,
the NetworkPlacement event), the scores for prioritize, and, in the reservations ledger, where the
pod is assumed to go (netsched.extender.reservations). Filter removes nodes that a filter plugin
rejects (each with its reason in FailedAndUnresolvableNodes, counted under the plugin's
name) and then, by
default, narrows the rest to a shortlist: the best-scoring nodes of the best network
tier, at most `shortlist` of them. Narrowing is what keeps the extender cheap for
kube-scheduler: its own Score plugins then run on a few nodes instead of all, and with one node left it skips
scoring and prioritize altogether. Nodes narrowed away are feasible, just worse
for the network, so they are not reported as failed. `shortlist=0` turns it off.

Prioritize follows its pod's filter in the same scheduling cycle, on nodes filter passed:
it answers with the scores filter computed (kept per pod for REUSE_SECONDS, used once)
rather than scoring again, which halves the cost of a cycle when the scorer is the model.
Nodes filter did not score, a changed node table or an older filter mean a fresh score.
Scores are kept only when filter passed more than one node: with one, kube-scheduler
binds without scoring, so a shortlist of 1 keeps nothing.

Fallback: when the cache is older than its bound (or not yet synced), filter
answers with `Error` saying so. kube-scheduler then ignores the extender for that
pod if it is `ignorable` (the dev-cluster default) or retries the pod later if not;
prioritize gives no scores. Stale data is never used silently.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from netsched.api.objects import KubeObject
from netsched.extender.explain import PINNED, Candidate, Decision, DecisionLog
from netsched.extender.link_origin import link_notes
from netsched.extender.metrics import Metrics
from netsched.extender.plugin import Filter, InvalidNeeds, Refused, Request, Scorer
from netsched.extender.plugins import FILTERS, SCORERS
from netsched.extender.protocol import ExtenderArgs, PodRef
from netsched.extender.read_model import ReadModel
from netsched.extender.reservations import Placement
from netsched.extender.scorers import NodeScorer, Scored, TopologyScorer
from netsched.extender.snapshot import NodeTable, Snapshot
from netsched.telemetry.store import TelemetryStore

TIER_TOLERANCE = 0.05  # network values this close to the best count as equally good
EXPLAIN_TOP = 5
REJECTED_EXAMPLES = 3
REUSE_SECONDS = 2.0  # kube-scheduler calls prioritize milliseconds after filter, in the same cycle
REUSE_PODS = 64  # filters kept for their prioritize (kube-scheduler runs one cycle at a time)


class StaleCache(RuntimeError):
    pass


@dataclass
class Priorities:
    hosts: list[str]
    scores: np.ndarray  # 0..MAX_SCORE integers
    heads: np.ndarray  # the hosts' HostPriority JSON up to the score (NodeTable.priority_heads)

    def as_dict(self) -> dict[str, int]:
        return dict(zip(self.hosts, self.scores.tolist(), strict=True))


@dataclass
class FilterOutcome:
    passed: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]


@dataclass(frozen=True)
class Filtered:
    """What a filter's stages decided for one pod: the post-steps read it."""

    req: Request
    candidates: int  # nodes kube-scheduler asked about
    idx: np.ndarray  # the table indices of those the snapshot knows
    unresolvable: dict[str, str]  # node -> the reason of the filter that rejected it first
    ok_idx: np.ndarray  # the table indices of those no filter rejected
    scored: Scored
    ints: np.ndarray  # the 0..MAX_SCORE scores of ok_idx
    order: list[int]  # positions in ok_idx best first, as far as the shortlist and explanations look
    passed: list[str]
    failed: dict[str, str]


class PostStep(Protocol):
    def __call__(self, pod: PodRef, done: Filtered | None) -> None:
        """After a filter of `pod`: `done` is what its stages decided, None when they decided nothing
        (bad annotations, a stale cache, an error)."""


@dataclass
class _Scores:
    """One filter's integer scores for the candidates at table indices `idx`."""

    at: float
    table: NodeTable
    idx: np.ndarray
    scores: np.ndarray
    names: list[str] | None  # the names of idx in order, when filter passed them all (no shortlist)

    def usable(self, table: NodeTable, now: float) -> bool:
        return table is self.table and now - self.at <= REUSE_SECONDS

    def at_nodes(self, idx: np.ndarray) -> np.ndarray | None:
        """The scores at table indices idx; None if filter did not score one of them."""
        position = np.full(len(self.table.names), -1)
        position[self.idx] = np.arange(len(self.idx))
        at = position[idx]
        return None if (at < 0).any() else self.scores[at]


class Extender:
    def __init__(self, cluster: ReadModel, telemetry: TelemetryStore | None = None,
                 scorer: NodeScorer | None = None, shortlist: int = 1,
                 decisions: DecisionLog | None = None, metrics: Metrics | None = None,
                 filters: Sequence[Filter] = FILTERS):
        self.cluster = cluster
        self.telemetry = telemetry if telemetry is not None else TelemetryStore()
        store = self.telemetry
        cluster.on_table.append(lambda table: store.follow(table.index, table.domains))
        self.scorer = scorer or TopologyScorer()
        self.filters = filters
        self.plugins: tuple[Filter | Scorer, ...] = (*filters, *SCORERS)  # whose annotations a pod gets right
        self.shortlist = shortlist
        self.decisions = decisions if decisions is not None else DecisionLog()
        self.metrics = metrics or Metrics()
        self._filtered: OrderedDict[str, _Scores] = OrderedDict()
        # in this order: a step that fails makes the answer an error, so the ones after it see no outcome
        self.post_steps: tuple[PostStep, ...] = (self._explain, self._keep_scores, self._reserve)

    def filter(self, args: ExtenderArgs) -> FilterOutcome:
        pod, names = args.pod, args.node_names
        self.metrics.candidates.observe(len(names))
        done: Filtered | None = None
        try:
            req = Request(pod, self._snapshot(pod, leave_out=pod.uid))
            try:
                check_needs(req, self.plugins)
            except InvalidNeeds as exc:
                self.metrics.filtered.labels("invalid_annotation").inc(len(names))
                return FilterOutcome([], {}, dict.fromkeys(names, f"netsched: pod {pod.key}: {exc}"))
            done = self._stages(req, names)
            return FilterOutcome(done.passed, done.failed, done.unresolvable)
        finally:  # whatever the outcome: a pod filtered again is no longer where it was assumed
            _run(self.post_steps, pod, done)

    def prioritize(self, args: ExtenderArgs) -> Priorities:
        pod, names = args.pod, args.node_names
        snap = self._snapshot(pod)
        kept = self._filtered.pop(pod.uid, None) if pod.uid else None
        if kept is not None and not kept.usable(snap.table, self.cluster.clock()):
            kept = None
        if kept is not None and kept.names == names:  # the usual cycle: the very nodes filter passed
            return self._prioritized("reused", snap.table, names, kept.idx, kept.scores)
        idx, known, _ = snap.table.positions(names)
        hosts = names if len(known) == len(names) else [names[k] for k in known]
        scores = kept.at_nodes(idx) if kept is not None else None
        if scores is not None:
            return self._prioritized("reused", snap.table, hosts, idx, scores)
        req = Request(pod, snap)
        try:
            check_needs(req, self.plugins)
        except InvalidNeeds:
            req = Request(pod, snap, annotations={})  # filter already told the user; score on topology alone
        scored = self.scorer.score(req, idx)  # filter recorded the why
        return self._prioritized("fresh", snap.table, hosts, idx, scored.scores())

    def _prioritized(self, source: str, table: NodeTable, hosts: list[str], idx: np.ndarray,
                     scores: np.ndarray) -> Priorities:
        self.metrics.prioritized.labels(source).inc()
        return Priorities(hosts, scores, table.priority_heads[idx])

    def preempt(self, pod: PodRef, victims: dict[str, KubeObject]) -> dict[str, KubeObject]:
        """Keep only the preemption candidates on nodes the pod's network needs and the active
        PackingPlans allow: evicting pods from a node the filter would reject frees nothing
        useful, and a planned pod must not evict its way onto a node its plan did not choose.
        On a stale cache it has no opinion and keeps every candidate."""
        try:
            snap = self._snapshot(pod)
        except StaleCache:
            return victims
        req = Request(pod, snap, preempting=True)
        check_needs(req, self.plugins)
        names = list(victims)
        idx, known, unknown = snap.table.positions(names)
        reasons = self._reject(req, idx)
        keep = {names[k] for pos, k in enumerate(known) if pos not in reasons}
        if not any(f.binds(req) for f in self.filters):
            keep.update(names[k] for k in unknown)
        return {n: v for n, v in victims.items() if n in keep}

    # ---- filter's stages and post-steps -------------------------------------------
    def _stages(self, req: Request, names: list[str]) -> Filtered:
        """The filters, then the scorer over the candidates they left, then the shortlist."""
        snap = req.snapshot
        idx, known, unknown = snap.table.positions(names)
        reasons = self._reject(req, idx, count=True)
        unresolvable = {names[known[pos]]: why for pos, why in reasons.items()}
        unknown_names = [names[pos] for pos in unknown]
        ok_idx = np.delete(idx, list(reasons)) if reasons else idx
        scored = _as_pinned(req, ok_idx) or self.scorer.score(req, ok_idx)
        order = ranking(scored, ok_idx, max(self.shortlist, EXPLAIN_TOP))
        strict = any(f.binds(req) for f in self.filters)
        passed, failed = self._narrow(snap, ok_idx, scored, order, unknown_names, strict)
        return Filtered(req, len(names), idx, unresolvable, ok_idx, scored, scored.scores(), order, passed,
                        failed)

    def _explain(self, pod: PodRef, done: Filtered | None) -> None:
        """Record the decision: the top candidates with their scores, factors and the links they read,
        a few rejections, and what each plugin's `explain` adds."""
        if done is None or not pod.uid:
            return
        words = (plugin.explain(done.req, done.ok_idx, len(done.idx)) for plugin in self.plugins)
        room = "; ".join(w for w in words if w)
        snap, idx, scored, ints = done.req.snapshot, done.ok_idx, done.scored, done.ints
        names, read = snap.table.names, snap.links_read()
        top = [
            Candidate(names[idx[o]], int(ints[o]),
                      {k: round(float(v[o]), 3) for k, v in scored.factors.items()},
                      link_notes(snap.table, read, int(idx[o])))
            for o in done.order[:EXPLAIN_TOP]
        ]
        examples = dict(list(done.unresolvable.items())[:REJECTED_EXAMPLES])
        self.decisions.record(Decision(pod.namespace, pod.name, pod.uid, pod.job, scored.scorer,
                                       done.candidates, examples, len(done.unresolvable), top, room=room))

    def _keep_scores(self, pod: PodRef, done: Filtered | None) -> None:
        """Keep the scores for the prioritize of the same cycle, where kube-scheduler will call it (more
        than one node passed)."""
        if done is None:
            return
        self._filtered.pop(pod.uid, None)
        if len(done.passed) > 1 and pod.uid:
            passed = None if self.shortlist else done.passed[: len(done.ok_idx)]
            self._filtered[pod.uid] = _Scores(self.cluster.clock(), done.req.snapshot.table, done.ok_idx,
                                              done.ints, passed)
            while len(self._filtered) > REUSE_PODS:
                self._filtered.popitem(last=False)

    def _reserve(self, pod: PodRef, done: Filtered | None) -> None:
        """Assume the pod on the node it was handed when it was handed one; otherwise assumed nowhere."""
        if not pod.uid:
            return
        assumed = None
        if done is not None and len(done.passed) == 1:
            assumed = Placement(f"{pod.namespace}/{pod.job}" if pod.job else None, done.passed[0], pod.gpus)
        self.cluster.settle(pod.uid, assumed)

    # ---- steps -------------------------------------------------------------------
    def _snapshot(self, pod: PodRef, leave_out: str = "") -> Snapshot:
        """The one snapshot this request reads: the cluster as the read model and the reservations
        hold it (without pod `leave_out`'s own assumption), with the pod's job's peers, and the
        telemetry store as it is now."""
        snap = self.cluster.snapshot(pod.namespace, pod.job, leave_out, self.telemetry)
        if snap.stale:
            state = (f"{snap.age:.0f} s old (bound {self.cluster.max_age:g} s)" if snap.synced
                     else "not synced with the apiserver yet")
            raise StaleCache(f"netsched: cluster cache is {state}; not filtering on stale data")
        return snap

    def _reject(self, req: Request, idx: np.ndarray, count: bool = False) -> dict[int, str]:
        if not count:
            return run_filters(self.filters, req, idx)
        return run_filters(self.filters, req, idx, lambda name, n: self.metrics.filtered.labels(name).inc(n))

    def _narrow(self, snap: Snapshot, ok_idx: np.ndarray, scored: Scored, order: list[int],
                unknown: list[str], strict: bool) -> tuple[list[str], dict[str, str]]:
        """The nodes to hand back (a shortlist best first; without one, in the request's order, as
        kube-scheduler ranks them itself) and the unknown ones that fail (all of them when the pod
        has network needs or a pin: a node missing from the cache cannot be checked)."""
        names = snap.table.names
        if self.shortlist > 0 and len(order):
            best = scored.network[order[0]]
            passed = [names[ok_idx[o]] for o in order[: self.shortlist]
                      if scored.network[o] >= best - TIER_TOLERANCE]
        else:
            passed = [names[i] for i in ok_idx.tolist()]
        if strict:
            return passed, {n: f"netsched: node {n} is not in the extender's cache yet; "
                               "it is considered once the node watch catches up" for n in unknown}
        if self.shortlist == 0 or not passed:
            passed += unknown
        return passed, {}


def _as_pinned(req: Request, idx: np.ndarray) -> Scored | None:
    """A pod pinned to its node by its gang's placement, offered that node alone: nothing to score (its
    node was chosen with the model as the gang was released); None for any other pod."""
    pinned = req.pod.pinned
    names = req.snapshot.table.names
    if pinned is None or len(idx) != 1 or names[int(idx[0])] != pinned:
        return None
    return Scored(np.ones(1), np.ones(1), {}, PINNED)


def _run(steps: Sequence[PostStep], pod: PodRef, done: Filtered | None) -> None:
    """Each post-step in order; after one fails (the answer is then an error) the rest see no outcome,
    and the first failure is raised once all have run."""
    failure: Exception | None = None
    for step in steps:
        try:
            step(pod, done)
        except Exception as exc:
            done, failure = None, failure or exc
    if failure is not None:
        raise failure


def check_needs(req: Request, plugins: Sequence[Filter | Scorer]) -> None:
    """Parse every annotation the plugins read, in their order: InvalidNeeds names the first bad one."""
    for plugin in plugins:
        for parse in plugin.reads:
            req.need(parse)


def run_filters(filters: Sequence[Filter], req: Request, idx: np.ndarray,
                on_reject: Callable[[str, int], object] = lambda name, n: None) -> dict[int, str]:
    """Reasons by position in idx, by filter in registry order: the first filter to reject a node names it
    (and its rejections come first among the examples an explanation shows). Each filter sees only the
    candidates the ones before it left: a preference among candidates (gang_hold, whole_job) must not
    count a node a limit already rejected as somewhere else to go.
    `on_reject(filter name, nodes)` hears how many nodes each filter was first to reject."""
    reasons: dict[int, str] = {}
    left = np.arange(len(idx))
    for f in filters:
        if not len(left):
            break
        try:
            found = f.reject(req, idx[left])
        except Refused as refused:
            on_reject(f.name, len(idx))
            return dict.fromkeys(range(len(idx)), str(refused))
        if found:
            for pos, why in found.items():
                reasons[int(left[pos])] = why
            on_reject(f.name, len(found))
            left = np.delete(left, list(found))
    return reasons


def ranking(scored: Scored, idx: np.ndarray, top: int = 0) -> list[int]:
    """Positions best first: by value, then by name (table order) so equal inputs give equal answers.
    With `top`, the first `top` of that order only, without sorting all the candidates. NaN ranks last."""
    value = np.nan_to_num(scored.value, nan=-np.inf)
    if 0 < top < len(value):
        cut = np.partition(value, len(value) - top)[len(value) - top]  # the top-th best value
        best = np.flatnonzero(value >= cut)  # ties at the cut too: the order among them is by name
        order: list[int] = best[np.lexsort((idx[best], -value[best]))][:top].tolist()
        return order
    order = np.lexsort((idx, -value)).tolist()
    return order
