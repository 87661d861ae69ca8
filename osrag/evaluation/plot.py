"""Recall within budget against the token budget, one PNG per set."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_budget_curve(s: dict[str, Any], model: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Left: recall at each budget. Right: the same points against the tokens each method really
    # delivered (per answered question), so that a method that spends less for the same recall
    # sits to the left of the other -- the comparison the budget exists for.
    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(11.0, 4.0), dpi=110, sharey=True)
    for method, rows in s["budget"].items():
        xs = sorted(int(b) for b in rows)
        recall = [rows[str(x)]["recall_in_budget"] for x in xs]
        ax.plot(xs, recall, marker="o", label=method)
        spent = [rows[str(x)]["tokens_per_answered"] for x in xs]
        ax_t.plot(spent, recall, marker="o", label=method)
        for b, t, r in zip(xs, spent, recall):
            ax_t.annotate(str(b), (t, r), textcoords="offset points", xytext=(3, -10), fontsize=6)
    ax.set_xlabel("token budget")
    ax.set_ylabel("recall within budget (answerable questions)")
    ax.set_ylim(0, 1)
    ax_t.set_xlabel("tokens delivered per answered question (labels: the budget)")
    for a in (ax, ax_t):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    ax.set_title(f"{s['name']}, {model}")
    ax_t.set_title("recall against the tokens spent")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
