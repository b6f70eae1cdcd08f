"""How well a policy picks nodes, and how close a model's predictions are, over candidate sets.

For each candidate set (two candidates or more) a policy picks its lowest-cost row (the
first on a tie); that pick is judged against the set's true completion times:

- top-1 / top-3: the pick's true time is the best / among the three best of the set;
- regret: pick's time / best time - 1 (mean, median, p95);
- mean JCT: the mean true time of the picks.

Records of one row per job (the operator's: no counterfactual candidates) have no set to
pick from, so none of these is defined for them. What is: pairwise accuracy, the share of
pairs of jobs of comparable size (`job_sizes`) whose true times a model's predicted times
order the same way (a tie in prediction counts half; 0.5 is chance). Each job counts once,
by its own row: the candidate it really ran on (`chosen`), or the only row of its set.

Pairwise accuracy between jobs rewards a model for knowing how long a job is, which ranks no
node: on a world whose node effects the physics kind got wrong it still led by pair accuracy while
it placed worse (bench/selection_rule.py). Node-pair accuracy asks the placement question of the
same records: for pairs of comparable jobs of one workload kind, each by its own row, the model
predicts the first job on its own node and on the second job's node (the second row with the first
job's job columns); the share of pairs whose true order those two predictions give is
`node_pair_accuracy` (a tie counts half). The job part of the prediction is the same on both
sides, so only what the model says of the nodes is judged. `node_pair_weighted`, the score kinds
are compared by, weighs each pair by how far apart the two true times are (|log ratio|): regret
is about the large mistakes, and a pair of nearly equal times is mostly noise. On the nine simulated
worlds the kinds it picked placed closer to the best kind than those pairwise accuracy or unweighted
node pairs picked (docs/benchmarks-history.md, "Selection rule against placement regret"); none of
the three picks the best kind every time.

MAE and MAPE compare predicted with true seconds, row by row: diagnostics, never a
criterion. `better` is the one rule by which `train` selects among kinds and `retrain` promotes a
challenger over the model in service, by `judged_by`: where there are candidate sets to pick from,
top-1 higher or mean regret lower by more than the noise of the comparison; weighted node-pair
accuracy where there are none but node pairs were judged; pairwise accuracy where only it was. The
`judged_by` labels name the rule as applied, and are what `meta.json` (validation.selected_by) and
retrain's log record.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from netsched.models.features import FEATURES, INDEX, WORKLOAD_KINDS
from netsched.training.dataset import Dataset

TOP1_TIE = 0.005  # a top-1 lead must be above its noise and above 0.5 percentage point,
REGRET_TIE = 0.001  # a lead in mean regret above its noise and above 0.1 point
PAIR_TIE = 0.005  # (node-)pair accuracies closer than 0.5 point are a tie
BY_RANKING = "top1 or mean regret, a lead beyond its standard error"
BY_PAIRS = "pair_accuracy"
BY_NODE_PAIRS = "node_pair_accuracy, weighted"
NODE_PAIRS = 20_000  # node pairs judged at most per call (sampled): each costs one predicted row
JOB_COLUMNS = [INDEX[f.name] for f in FEATURES if f.group == "job"]
PAIR_BLOCK = 2048  # rows compared with their whole size class at once (memory: block x class)


@dataclass(frozen=True)
class Scores:
    sets: int  # candidate sets of two or more candidates judged
    top1: float = math.nan
    top3: float = math.nan
    regret_mean: float = math.nan
    regret_median: float = math.nan
    regret_p95: float = math.nan
    mean_jct: float = math.nan
    mae: float = math.nan  # seconds; NaN for a policy that predicts no times
    mape: float = math.nan
    rows: int = 0
    pair_accuracy: float = math.nan  # NaN where no two comparable jobs took different times
    pairs: int = 0  # pairs of comparable jobs with different true times
    node_pair_accuracy: float = math.nan  # NaN where no node pair was judged
    node_pairs: int = 0  # pairs of comparable jobs of one kind with different true times, judged by node
    node_pair_weighted: float = math.nan  # node_pair_accuracy, each pair weighed by |true log ratio|
    regret_std: float = math.nan  # standard deviation of the sets' regrets: the noise of regret_mean

    def to_json(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict) -> Scores:
        return cls(**{k: (math.nan if v is None else v) for k, v in data.items()})


def score(y: np.ndarray, cost: np.ndarray, sets: list[np.ndarray],
          predicted: np.ndarray | None = None) -> Scores:
    """Scores of the policy whose cost per row is `cost`; MAE/MAPE if it predicts seconds."""
    picks, best, ranks = _picks(y, cost, sets)
    errors = {} if predicted is None else _errors(y, predicted)
    if not len(picks):
        return Scores(sets=0, rows=len(y), **errors)
    regret = picks / best - 1
    return Scores(sets=len(picks), top1=float(np.mean(ranks == 0)), top3=float(np.mean(ranks < 3)),
                  regret_mean=float(regret.mean()), regret_median=float(np.median(regret)),
                  regret_p95=float(np.quantile(regret, 0.95)), mean_jct=float(np.mean(picks)),
                  regret_std=float(regret.std()),
                  rows=len(y), **errors)


def regrets(y: np.ndarray, cost: np.ndarray, sets: list[np.ndarray]) -> np.ndarray:
    """Each candidate set's regret (two candidates or more): the pick's true time / the best - 1."""
    picks, best, _ = _picks(y, cost, sets)
    return picks / best - 1


def _picks(y: np.ndarray, cost: np.ndarray,
           sets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per set of two or more: the true time of the lowest-cost row (the first on a tie), the set's best
    time, and how many of the set's rows were truly faster than the pick."""
    picks, best, ranks = [], [], []
    for rows in sets:
        if len(rows) < 2:
            continue
        pick = rows[np.argmin(cost[rows])]
        picks.append(y[pick])
        best.append(y[rows].min())
        ranks.append(int((y[rows] < y[pick]).sum()))
    return np.array(picks, dtype=np.float64), np.array(best, dtype=np.float64), np.array(ranks, dtype=int)


def _errors(y: np.ndarray, predicted: np.ndarray) -> dict:
    err = np.abs(predicted - y)
    return {"mae": float(err.mean()), "mape": float((err / y).mean())}


def model_scores(ds: Dataset, predicted: np.ndarray,
                 predict: Callable[[np.ndarray], np.ndarray] | None = None) -> Scores:
    """A model's scores on `ds` from its predicted seconds per row: `score`, pairwise accuracy, and with
    `predict` (rows -> seconds) node-pair accuracy."""
    accuracy, pairs = pair_accuracy(ds.y, predicted, job_sizes(ds))
    scores = replace(score(ds.y, predicted, ds.sets(), predicted), pair_accuracy=accuracy, pairs=pairs)
    if predict is None:
        return scores
    return with_node_pairs(scores, node_pair_counts(ds, predicted, predict))


def with_node_pairs(scores: Scores, counts: NodePairCounts) -> Scores:
    """`scores` with the node-pair scores of `counts` (unchanged where no pair was judged)."""
    if not counts.judged:
        return scores
    return replace(scores, node_pair_accuracy=counts.right / counts.judged, node_pairs=counts.judged,
                   node_pair_weighted=counts.weighted_right / counts.weight)


def node_pairs(ds: Dataset, seed: int = 0, limit: int = NODE_PAIRS) -> tuple[np.ndarray, np.ndarray]:
    """(first rows, second rows): pairs of jobs of one size class (`job_sizes`) and workload kind with
    different true times, each job by its own row; at most `limit`, drawn at random (`seed`)."""
    size = job_sizes(ds)
    kind = ds.X[:, [INDEX[f"kind_{k}"] for k in WORKLOAD_KINDS]].argmax(axis=1)
    group = np.where(size >= 0, size * len(WORKLOAD_KINDS) + kind, -1)
    first, second = [], []
    for g in np.unique(group[group >= 0]):
        rows = np.flatnonzero(group == g)
        a, b = np.triu_indices(len(rows), 1)
        first.append(rows[a])
        second.append(rows[b])
    if not first:
        return np.empty(0, dtype=int), np.empty(0, dtype=int)
    a, b = np.concatenate(first), np.concatenate(second)
    differ = ds.y[a] != ds.y[b]
    a, b = a[differ], b[differ]
    if len(a) > limit:
        keep = np.sort(np.random.default_rng(seed).choice(len(a), limit, replace=False))
        a, b = a[keep], b[keep]
    return a, b


@dataclass(frozen=True)
class NodePairCounts:
    """Sums over node pairs, which add up over cross-validation folds."""
    right: float = 0.0  # pairs ordered right, a tie counting half
    judged: int = 0
    weighted_right: float = 0.0  # the same, each pair weighed by |true log ratio|
    weight: float = 0.0

    def __add__(self, other: NodePairCounts) -> NodePairCounts:
        return NodePairCounts(self.right + other.right, self.judged + other.judged,
                              self.weighted_right + other.weighted_right, self.weight + other.weight)


def node_pair_counts(ds: Dataset, predicted: np.ndarray,
                     predict: Callable[[np.ndarray], np.ndarray]) -> NodePairCounts:
    """NodePairCounts of `node_pairs`: the first job predicted on its own node (`predicted`, seconds per
    row of ds) against it on the second job's node."""
    a, b = node_pairs(ds)
    if not len(a):
        return NodePairCounts()
    swapped = ds.X[b].copy()
    swapped[:, JOB_COLUMNS] = ds.X[a][:, JOB_COLUMNS]
    right = (1 + np.sign(ds.y[b] - ds.y[a]) * np.sign(predict(swapped) - predicted[a])) / 2
    weight = np.abs(np.log(ds.y[b] / ds.y[a]))
    return NodePairCounts(float(right.sum()), len(a), float((weight * right).sum()), float(weight.sum()))


def job_sizes(ds: Dataset) -> np.ndarray:
    """Per row, its job's size class: equal for jobs of the same GPU count whose expected seconds
    (the job's own hint) are within the same power of two, or are both unknown; -1 for a row that is
    not its job's own (a counterfactual candidate)."""
    _, in_set, set_rows = np.unique(ds.candidate_set, return_inverse=True, return_counts=True)
    own = ds.chosen | (set_rows[in_set] == 1)
    expected = ds.X[:, INDEX["expected_seconds"]]
    octave = np.where(expected > 0, np.floor(np.log2(np.where(expected > 0, expected, 1))), -1)
    gpus = np.nan_to_num(ds.X[:, INDEX["job_gpus"]], nan=-1)
    _, size = np.unique(np.column_stack([gpus, octave]), axis=0, return_inverse=True)
    return np.where(own, size.ravel(), -1)


def pair_accuracy(y: np.ndarray, predicted: np.ndarray, size: np.ndarray) -> tuple[float, int]:
    """(share of pairs of rows of one `size` class (>= 0) with different `y` that `predicted`
    orders the same way, a tie counting half; the number of such pairs). (NaN, 0) without any."""
    right = ordered_pairs = 0.0
    for cls in np.unique(size[size >= 0]):
        rows = np.flatnonzero(size == cls)
        for first in range(0, len(rows), PAIR_BLOCK):
            block = rows[first:first + PAIR_BLOCK]
            true = np.sign(y[block, None] - y[None, rows])
            agree = true * np.sign(predicted[block, None] - predicted[None, rows])  # 1 right, 0 tie, -1 wrong
            ordered_pairs += np.count_nonzero(true)
            right += (np.count_nonzero(true) + agree.sum()) / 2
    if not ordered_pairs:
        return math.nan, 0
    return float(right / ordered_pairs), int(ordered_pairs) // 2  # each pair was counted both ways


def judged_by(a: Scores, b: Scores | None = None) -> str | None:
    """What `better` compares a and b (or a alone) by: BY_RANKING where both have candidate sets of
    two or more; BY_NODE_PAIRS where both had node pairs judged; BY_PAIRS where both have comparable
    jobs; None where there is nothing to rank."""
    both = (a,) if b is None else (a, b)
    if all(s.sets for s in both):
        return BY_RANKING
    if all(s.node_pairs for s in both):
        return BY_NODE_PAIRS
    if all(s.pairs for s in both):
        return BY_PAIRS
    return None


def better(a: Scores, b: Scores) -> bool:
    """a beats b by more than the noise of the comparison, by `judged_by`: on candidate sets, top-1
    higher by more than the standard error of the difference of the two shares and by more than
    TOP1_TIE, or mean regret lower by more than the standard error of the difference of the two
    means and by more than REGRET_TIE; weighted node-pair accuracy, or else pairwise accuracy, higher
    by more than PAIR_TIE; never when there is nothing to rank. MAPE and p95 regret take no part.
    Cross-validation on a few hundred jobs puts kinds within a few points of each other by chance,
    and following such a lead picked kinds that placed worse on the newer jobs (bench/loco.py, within
    each world); mean regret is what a pick's completion time pays, which top-1 alone does not see
    (a kind as often right but with smaller mistakes)."""
    by = judged_by(a, b)
    if by == BY_RANKING:
        noise = math.sqrt(a.top1 * (1 - a.top1) / a.sets + b.top1 * (1 - b.top1) / b.sets)
        spread = math.sqrt(a.regret_std ** 2 / a.sets + b.regret_std ** 2 / b.sets)  # NaN: scores without it
        return (a.top1 > b.top1 + max(TOP1_TIE, noise)
                or (math.isfinite(spread) and a.regret_mean < b.regret_mean - max(REGRET_TIE, spread)))
    if by == BY_NODE_PAIRS:
        return a.node_pair_weighted > b.node_pair_weighted + PAIR_TIE
    if by == BY_PAIRS:
        return a.pair_accuracy > b.pair_accuracy + PAIR_TIE
    return False


def describe(s: Scores) -> str:
    """The scores `better` reads, then MAPE as a diagnostic, on one line."""
    by = judged_by(s)
    if by == BY_RANKING:
        ranks = f"top-1 {s.top1:.3f}  regret p95 {s.regret_p95:.4f}  mean {s.regret_mean:.4f}"
    elif by == BY_NODE_PAIRS:
        ranks = (f"node-pair accuracy, weighted {s.node_pair_weighted:.3f} ({s.node_pairs:,} pairs)  "
                 f"unweighted {s.node_pair_accuracy:.3f}  pair accuracy {s.pair_accuracy:.3f}")
    elif by == BY_PAIRS:
        ranks = f"pair accuracy {s.pair_accuracy:.3f} ({s.pairs:,} pairs)"
    else:
        ranks = "nothing to rank"
    return f"{ranks}  (MAPE {s.mape:.3f}, diagnostic)"
