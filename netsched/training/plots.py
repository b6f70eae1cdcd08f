"""PNG figures of an evaluation (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_all(ev, out: Path, labels: dict[str, str]) -> list[Path]:
    return [_predicted_vs_actual(ev, out / "predicted_vs_actual.png", labels),
            _bars(ev, out / "accuracy.png", labels, ("top1", "top3"), "share of jobs",
                  "Picking the fastest node"),
            _bars(ev, out / "regret.png", labels, ("regret_median", "regret_p95"),
                  "chosen JCT / best JCT - 1", "Regret"),
            _regret_cdf(ev, out / "regret_cdf.png", labels)]


def _regret_cdf(ev, path: Path, labels: dict[str, str]) -> Path:
    """Per policy, the share of jobs whose pick took at most x more than their best candidate: the
    whole distribution the median and p95 in the table are two points of."""
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    for policy, regret in ev.regret.items():
        if not len(regret):
            continue
        x = np.sort(regret) * 100
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=labels[policy])
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set(xlabel="regret: chosen JCT / best JCT - 1 (%)", ylabel="share of jobs", ylim=(0, 1.01),
           title="Regret CDF, held-out jobs")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the curves, never over them
    return _save(fig, path)


def _predicted_vs_actual(ev, path: Path, labels: dict[str, str]) -> Path:
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for policy, seconds in ev.predicted.items():
        ax.scatter(ev.actual, seconds, s=3, alpha=0.3, label=labels[policy])
    low, high = float(ev.actual.min()), float(ev.actual.max())
    ax.plot([low, high], [low, high], color="black", linewidth=0.8, label="predicted = actual")
    ax.set(xscale="log", yscale="log", xlabel="actual completion time (s)", ylabel="predicted (s)",
           title="Predicted vs actual, held-out jobs")
    ax.legend(markerscale=4)
    return _save(fig, path)


def _bars(ev, path: Path, labels: dict[str, str], fields: tuple[str, str], ylabel: str, title: str) -> Path:
    policies = list(ev.scores)
    x = np.arange(len(policies))
    fig, ax = plt.subplots(figsize=(8, 4))
    for k, field in enumerate(fields):
        values = [getattr(ev.scores[p], field) for p in policies]
        ax.bar(x + (k - 0.5) * 0.38, values, width=0.38, label=field.replace("_", " "))
    ax.set_xticks(x, [labels[p] for p in policies], rotation=20, ha="right")
    ax.set(ylabel=ylabel, title=title)
    ax.legend()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
