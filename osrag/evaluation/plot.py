"""Recall within budget against the token budget, one PNG per set."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_budget_curve(s: dict[str, Any], model: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    for method, rows in s["budget"].items():
        xs = sorted(int(b) for b in rows)
        ax.plot(xs, [rows[str(x)]["recall_in_budget"] for x in xs], marker="o", label=method)
    ax.set_xlabel("token budget")
    ax.set_ylabel("recall within budget (answerable questions)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{s['name']}, {model}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
