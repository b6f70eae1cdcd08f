"""Pending pods added by moving and swapping pods between nodes: the priced packer's first packing.

In a nearly full cluster of pods that are large next to their nodes (four to a node), placing one
more pod takes a chain of moves that frees room where it is needed: a model searched by CP-SAT with
two workers tries a handful of such chains in a second, and greedy rules (first fit, best fit,
decreasing sizes) pack worse than the default scheduler already did. Here each unplaced pod (or
gang), highest priority and largest first, is put where it overloads a node the least, and the
overload is then driven to zero by local search: a pod on an overloaded node moves to another node,
or swaps places with a pod there, whichever removes the most overload (now and then a random
swap that adds little, to leave a dead end). A pod whose overload is not gone within `STEPS`
changes nothing, and the next is tried. No placed pod ever stops, so every answer places at least
what it started from, within every node's capacity.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from netsched.packing.problem import Pod, Problem

STEPS = 400  # moves or swaps one pod may take to fit: most that fit at all do in a few dozen
SEARCH_SHARE = 0.85  # of the time given, for adding pods; the rest brings moved pods home (`_home`)
AWAY = 0.01  # overload (in shares of a node) worth taking one running pod from its node: fewer restarts


def add_pending(problem: Problem, start: dict[str, str | None], mobile: set[str],
                deadline: float, seed: int = 0) -> dict[str, str | None]:
    """`start` with as many unplaced pods added as the search finds room for by the deadline. Only
    pods in `mobile` (and pods not running) are moved; a gang is added whole, a gang bound to a
    domain is not tried. PodDisruptionBudgets are not counted: the caller passes no pod they cover."""
    kinds = sorted({r for n in problem.nodes for r in n.capacity}
                   | {r for p in problem.pods for r in p.requests})
    pods = list(problem.pods)
    cap = np.array([[n.capacity.get(r, 0) for r in kinds] for n in problem.nodes], dtype=np.int64)
    need = np.array([[p.requests.get(r, 0) for r in kinds] for p in pods], dtype=np.int64)
    scale = 1.0 / np.maximum(cap.max(axis=0), 1)  # overload measured in shares of the largest node
    index = {n.name: b for b, n in enumerate(problem.nodes)}
    where = np.array([index[n] if (n := start.get(p.name)) is not None else -1 for p in pods])
    # pod x node: it fits there alone and may go there
    ok = np.asarray((need[:, None, :] <= cap[None, :, :]).all(axis=2))
    for i, p in enumerate(pods):
        if p.allowed is not None:
            ok[i] &= np.isin([n.name for n in problem.nodes], p.allowed)
    moves = np.array([not p.running or p.name in mobile for p in pods])
    home = np.array([index[p.node] if p.node is not None else -1 for p in pods])
    rng = np.random.default_rng(seed)
    search_until = time.monotonic() + SEARCH_SHARE * max(0.0, deadline - time.monotonic())
    failed: list[np.ndarray] = []  # what lone pods that found no room asked for
    for group in _unplaced(pods, where, need, scale):
        if time.monotonic() > search_until:
            break
        lone = len(group) == 1 and pods[group[0]].allowed is None
        if lone and any((need[group[0]] >= f).all() for f in failed):
            continue  # as large as one that found no room: the time goes to smaller pods
        if all(ok[i].any() for i in group):
            found = _fit(group, where, home, cap, need, scale, ok, moves, rng, search_until)
            if found is not None:
                where = found
            elif lone:
                failed.append(need[group[0]])
    where = _home(where, home, cap, need, ok, moves, deadline)
    return {p.name: problem.nodes[b].name if b >= 0 else None for p, b in zip(pods, where, strict=True)}


def _home(where: np.ndarray, home: np.ndarray, cap: np.ndarray, need: np.ndarray, ok: np.ndarray,
          moves: np.ndarray, deadline: float) -> np.ndarray:
    """Running pods the search moved go back to their own node where it has room for them again, or
    by swapping with a pod there that is not at home: the search's swaps out of dead ends leave
    pods moved for nothing, each a restart. Every step brings one more pod home, so it ends; the
    deadline ends it sooner, with every node still within its capacity."""
    load = np.zeros_like(cap)
    on = where >= 0
    np.add.at(load, where[on], need[on])
    back = True
    while back and time.monotonic() < deadline:
        back = False
        for i in np.flatnonzero((home >= 0) & (where >= 0) & (where != home)):
            h, d = int(home[i]), int(where[i])
            if (load[h] + need[i] <= cap[h]).all():
                load[d] -= need[i]
                load[h] += need[i]
                where[i], back = h, True
                continue
            there = np.flatnonzero((where == h) & (home != h) & moves & ok[:, d])
            fit = ((load[h] - need[there] + need[i] <= cap[h]).all(axis=1)
                   & (load[d] - need[i] + need[there] <= cap[d]).all(axis=1))
            if fit.any():
                j = int(there[np.argmax(fit)])
                load[h] += need[i] - need[j]
                load[d] += need[j] - need[i]
                where[i], where[j], back = h, d, True
    return where


def _unplaced(pods: list[Pod], where: np.ndarray, need: np.ndarray, scale: np.ndarray) -> list[list[int]]:
    """The unplaced pods, a gang's together, highest priority first, then largest."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pods):
        if where[i] < 0:
            groups[p.gang or p.name].append(i)
    out = [g for g in groups.values() if not (pods[g[0]].domain and len(g) > 1)]
    return sorted(out, key=lambda g: (-pods[g[0]].priority, -float((need[g] * scale).sum())))


def _fit(group: list[int], where: np.ndarray, home: np.ndarray, cap: np.ndarray, need: np.ndarray,
         scale: np.ndarray, ok: np.ndarray, moves: np.ndarray, rng: np.random.Generator,
         deadline: float) -> np.ndarray | None:
    """`where` with `group` placed and no node overloaded, or None. A step's gain is the overload it
    removes less `AWAY` for each running pod it takes from its own node (plus for each it brings back)."""
    w = where.copy()
    load = np.zeros_like(cap)
    on = w >= 0
    np.add.at(load, w[on], need[on])
    for i in group:  # where it overloads least
        over = np.where(ok[i], (np.maximum(0, load + need[i] - cap) * scale).sum(axis=1), np.inf)
        w[i] = int(np.argmin(over))
        load[w[i]] += need[i]
    members = np.flatnonzero((w >= 0) & moves)
    for step in range(STEPS):
        over = (np.maximum(0, load - cap) * scale).sum(axis=1)
        if not over.any():
            return w
        if step % 32 == 0 and time.monotonic() > deadline:
            return None
        src = int(rng.choice(np.flatnonzero(over > 0)))
        here = members[w[members] == src]
        if not len(here):
            return None
        i = int(rng.choice(here))
        # move i to another node: overload removed at the source minus overload added there
        left = (np.maximum(0, load[src] - need[i] - cap[src]) * scale).sum()
        gain_move = over[src] - left + over - (np.maximum(0, load + need[i] - cap) * scale).sum(axis=1)
        if home[i] >= 0:
            gain_move -= AWAY * ((np.arange(len(cap)) != home[i]).astype(float) - (src != home[i]))
        gain_move[~ok[i]] = -np.inf
        gain_move[src] = -np.inf
        # swap i with a pod j on another node
        others = members[(w[members] != src) & ok[members, src]]
        others = others[ok[i, w[others]]]
        gain_swap = np.array([])
        if len(others):
            dst = w[others]
            after_src = (np.maximum(0, load[src] - need[i] + need[others] - cap[src]) * scale).sum(axis=1)
            after_dst = (np.maximum(0, load[dst] - need[others] + need[i] - cap[dst]) * scale).sum(axis=1)
            gain_swap = over[src] - after_src + over[dst] - after_dst
            hj = home[others]
            gain_swap -= AWAY * ((home[i] >= 0) * ((dst != home[i]).astype(float) - (src != home[i]))
                                 + (hj >= 0) * ((src != hj).astype(float) - (dst != hj)))
        if len(gain_swap) and rng.random() < 0.1:  # a random swap that adds little overload, out of dead ends
            near = np.flatnonzero(gain_swap > -0.05)
            if len(near):
                gain_swap = np.where(np.arange(len(gain_swap)) == rng.choice(near), np.inf, gain_swap)
        best_move = int(np.argmax(gain_move))
        if len(gain_swap) and gain_swap.max() >= gain_move[best_move]:
            j = int(others[int(np.argmax(gain_swap))])
            dst = int(w[j])
            load[src] += need[j] - need[i]
            load[dst] += need[i] - need[j]
            w[i], w[j] = dst, src
        elif np.isfinite(gain_move[best_move]):
            load[src] -= need[i]
            load[best_move] += need[i]
            w[i] = best_move
        else:
            return None
    return None
