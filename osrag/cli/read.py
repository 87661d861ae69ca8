"""The read commands: search, section (a whole section in order) and analyze (the analyzers' tokens).

A read names its caller (``--group``/``--tenant``, ``--public-only`` or ``--all-access``):
without one it is refused (fail closed, ``osrag.access``).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from osrag.cli.common import echo_json
from osrag.settings import MAX_BUDGET_TOKENS, load_settings
from osrag.vocabulary import DEFAULT_POLICY, describe_fusion


@click.command()
@click.argument("text")
@click.option(
    "--analyzer", "analyzers", multiple=True, help="Analyzer(s) to show (default: all osrag analyzers)."
)
@click.option("--json", "as_json", is_flag=True)
def analyze(text: str, analyzers: tuple[str, ...], as_json: bool) -> None:
    """Show the tokens the installed analyzers produce for TEXT."""
    from osrag.names import ANALYZERS
    from osrag.store.alias import AliasStore

    if not text.strip():
        raise click.BadParameter("is empty: give the text to analyze", param_hint="TEXT")
    result = AliasStore(load_settings()).analyze(text, analyzers or ANALYZERS)
    if as_json:
        echo_json(result)
        return
    for name, toks in result.items():
        shown = " ".join(
            f"{t['token']}@{t['position']}" + (f"+{t['length']}" if "length" in t else "") for t in toks
        )
        click.echo(f"{name:>10}: {shown}")


#: Filters that take one value: given twice with different values, the CLI refuses rather than guess.
_SINGLE_VALUED = ("include_archived", "updated_after", "updated_before")


def _parse_filter_options(items: tuple[str, ...]) -> dict[str, Any]:
    """``--filter key=value`` options as a filters mapping. A key given twice is combined (any of
    the values, as ``key=a,b``) -- never the last one silently replacing the first; a one-value
    filter given twice with different values is a usage error."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--filter")
        k, v = item.split("=", 1)
        k, v = k.strip(), v.strip()
        if k not in out:
            out[k] = v
        elif k in _SINGLE_VALUED:
            if out[k] != v:
                raise click.BadParameter(
                    f"{k} given twice ({out[k]!r}, {v!r}): give it once", param_hint="--filter"
                )
        else:
            out[k] = f"{out[k]},{v}"  # any of them (OR), as key=a,b says
    return out


def _principal_options(f: Any) -> Any:
    """Who is asking (``osrag.access``): a read without one of these is refused (fail closed)."""
    for opt in reversed(
        [
            click.option("--group", "groups", multiple=True, help="An ACL group of the caller (repeatable)."),
            click.option("--tenant", default=None, help="The caller's tenant."),
            click.option("--public-only", is_flag=True, help="Public chunks only (no ACL groups)."),
            click.option(
                "--all-access",
                is_flag=True,
                help="Admin bypass: every chunk whatever its groups or tenant (said in the answer).",
            ),
        ]
    ):
        f = opt(f)
    return f


def _principal(groups: tuple[str, ...], tenant: str | None, public_only: bool, all_access: bool) -> Any:
    """The caller from the flags; none of them is a usage error in the CLI's words (fail closed)."""
    from osrag.access import make_principal

    got = make_principal(groups, tenant, public_only, all_access)
    if got is None:
        raise click.UsageError(
            "no caller: say who is asking with --group G (repeatable, with --tenant T where tenants are "
            "used), or --public-only, or --all-access (admin); restricted chunks are never shown otherwise"
        )
    return got


@click.command(
    help="Answer QUESTION with what fits the token budget, from what the caller may see: give "
    "--group/--tenant, --public-only or --all-access. Candidates come from the hybrid query "
    f"(fused by {describe_fusion()} by default, OSRAG_FUSION); the selection policy is OSRAG_SELECTION "
    f"({DEFAULT_POLICY} by default)."
)
@click.argument("question")
@click.option(
    "--budget",
    type=click.IntRange(1, MAX_BUDGET_TOKENS),
    default=None,
    help="Token budget (default: OSRAG_BUDGET_TOKENS).",
)
@click.option(
    "--filter", "filters", multiple=True, help="key=value, e.g. category=promo, include_archived=true."
)
@click.option(
    "--depth", type=click.IntRange(1, 1000), default=None, help="Candidate depth for the hybrid query."
)
@click.option("--no-rerank", is_flag=True, help="Skip the cross-encoder.")
@_principal_options
@click.option("--json", "as_json", is_flag=True)
def search(
    question: str,
    budget: int | None,
    filters: tuple[str, ...],
    depth: int | None,
    no_rerank: bool,
    groups: tuple[str, ...],
    tenant: str | None,
    public_only: bool,
    all_access: bool,
    as_json: bool,
) -> None:
    """The ``search`` command: one envelope, as text or JSON."""
    from osrag.envelope import render_text
    from osrag.search.client import SearchClient

    env = SearchClient(load_settings()).search(
        question,
        budget_tokens=budget,
        filters=_parse_filter_options(filters),
        depth=depth,
        rerank=False if no_rerank else None,
        principal=_principal(groups, tenant, public_only, all_access),
    )
    if as_json:
        click.echo(env.model_dump_json(indent=2))
    else:
        click.echo(render_text(env))


@click.command()
@click.argument("section_id")
@click.option("--filter", "filters", multiple=True, help="key=value, e.g. include_archived=true.")
@_principal_options
@click.option("--json", "as_json", is_flag=True)
def section(
    section_id: str,
    filters: tuple[str, ...],
    groups: tuple[str, ...],
    tenant: str | None,
    public_only: bool,
    all_access: bool,
    as_json: bool,
) -> None:
    """Print a whole section (a passage's parent_section_id) in document order, filtered like a search."""
    from osrag.search.client import SearchClient

    parts = SearchClient(load_settings()).section(
        section_id,
        principal=_principal(groups, tenant, public_only, all_access),
        filters=_parse_filter_options(filters),
    )
    if as_json:
        echo_json([p.model_dump() for p in parts])
        if not parts:  # the same exit as the text form: a script can test it either way
            sys.exit(1)
        return
    if not parts:
        click.echo(f"no chunks of section {section_id} visible to this caller")
        sys.exit(1)
    click.echo(" > ".join(parts[0].heading_path) + f"  ({parts[0].source})\n")
    for p in parts:
        click.echo(p.text.strip() + "\n")
