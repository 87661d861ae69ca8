"""``osrag study …``: the measurements behind the shipped defaults, beside ``osrag eval``.

Each command runs against the indices ``osrag eval`` builds (or builds its own) and writes a report;
none of them changes a default. They were separate ``python -m`` scripts with their own parsers.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

_DATASET = click.option(
    "--dataset",
    "datasets",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="A BEIR-layout set or a docs tree in that layout; repeatable.",
)
_LIMIT = click.option(
    "--limit", type=click.IntRange(1), default=None, help="Sample at most N questions per set."
)
_DEPTH = click.option("--depth", type=click.IntRange(1, 10_000), default=40, show_default=True)


def _command() -> str:
    """The command line as run, for the report's provenance line."""
    return shlex.join(["osrag", *sys.argv[1:]])


@click.group("study")
def study() -> None:
    """Measurements behind the shipped defaults (perturbations, gate floors, context)."""


@study.command("perturb")
@click.argument("golden", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@_DATASET
@_LIMIT
@click.option("--seed", type=int, default=7, show_default=True)
@_DEPTH
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("golden/report/variants.md"),
    show_default=True,
)
def perturb_cmd(
    golden: Path | None, datasets: tuple[str, ...], limit: int | None, seed: int, depth: int, out: Path
) -> None:
    """Recall on perturbed copies of the questions (layout, translit, typos) beside the clean ones."""
    from osrag.evaluation import perturb

    perturb.main(
        golden, [Path(d) for d in datasets], limit=limit, seed=seed, depth=depth, out=out, command=_command()
    )


@study.command("floors")
@click.argument("models", nargs=-1, required=True)
def floors_cmd(models: tuple[str, ...]) -> None:
    """Each model's cosines on the shipped off-topic text: the gate's floor (osrag.search.gate)."""
    from osrag.evaluation import floors

    floors.main(models)


@study.command("contextual")
@click.option("--model", default="navec:news-300d", show_default=True, help="The embedding model.")
@click.option(
    "--contextualizer", type=click.Choice(["outline", "chat"]), default="outline", show_default=True
)
@click.option(
    "--golden", type=click.Path(exists=True, dir_okay=False), default="golden/golden.jsonl", show_default=True
)
@_DATASET
@_LIMIT
@_DEPTH
@click.option("--prefix", default="osrag-ctx", show_default=True, help="The aliases' prefix.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Also write the table here.")
def contextual_cmd(
    model: str,
    contextualizer: str,
    golden: str,
    datasets: tuple[str, ...],
    limit: int | None,
    depth: int,
    prefix: str,
    out: str | None,
) -> None:
    """Each set indexed without and with a contextualizer, every head side by side."""
    from osrag.evaluation import contextual

    contextual.main(
        model=model,
        contextualizer=contextualizer,
        golden=golden,
        datasets=list(datasets) or ["../shared/datasets/xquad-ru-dev", "../shared/datasets/vkdocs-ru-dev"],
        limit=limit,
        depth=depth,
        prefix=prefix,
        out=out,
        command=_command(),
    )


@study.command("gatesweep")
@click.argument("golden", type=click.Path(exists=True, dir_okay=False), required=False)
@_DATASET
@click.option(
    "--prefix", default="osrag-eval", show_default=True, help="The aliases' prefix of the `osrag eval` run."
)
@_DEPTH
@_LIMIT
@click.option("--floors", default="0.5,0.6,0.7,0.75,0.78,0.8,0.82,0.84,0.86,0.88,0.9,1.01", show_default=True)
@click.option(
    "--perturb",
    multiple=True,
    type=click.Choice(["layout", "translit", "typos", "mistyped", "task"]),
    help="Also a copy with broken questions; repeatable.",
)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the rows as JSON here.")
@click.option(
    "--dump", type=click.Path(dir_okay=False), default=None, help="Write every question's evidence here."
)
def gatesweep_cmd(
    golden: str | None,
    datasets: tuple[str, ...],
    prefix: str,
    depth: int,
    limit: int | None,
    floors: str,
    perturb: tuple[str, ...],
    out: str | None,
    dump: str | None,
) -> None:
    """Replay the relevance gate over every question's candidates for a grid of cosine floors."""
    from osrag.evaluation import gatesweep

    try:
        grid = [float(x) for x in floors.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"not a comma-separated list of numbers: {floors!r}", param_hint="--floors"
        ) from None
    if not grid:
        raise click.BadParameter("no floor given", param_hint="--floors")
    gatesweep.main(
        golden,
        datasets,
        prefix=prefix,
        depth=depth,
        limit=limit,
        floors=grid,
        perturb=perturb,
        out=out,
        dump=dump,
    )
