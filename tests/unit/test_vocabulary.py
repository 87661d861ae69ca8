"""One vocabulary (issue 27 item 2): every surface names the defaults that ship.

The settings, the envelope, the pipeline names, the read path's sets, every command's
``--help``, every docstring in ``osrag/`` and the README are held against ``osrag.vocabulary``.
The checkers are tried on the wrong wordings this repository once had, so they can fail.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import click
import pytest
from click.testing import CliRunner

from osrag import names, vocabulary
from osrag.cli import cli
from osrag.envelope import Envelope, Freshness, LeftOutItem
from osrag.search import budget, gate, query
from osrag.service.auth import JwtVerifier
from osrag.service.http import SearchRequest
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.vocabulary import (
    DEFAULT_FUSION,
    DEFAULT_FUSION_WEIGHTS,
    DEFAULT_POLICY,
    FUSION_LABELS,
    FUSIONS,
    POLICIES,
    describe_fusion,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "osrag"
README = ROOT / "README.md"


def _default(name: str) -> Any:
    return Settings.model_fields[name].get_default(call_default_factory=False)


def _without_none(annotation: Any) -> tuple[Any, ...]:
    """The Literal's values of ``X`` or ``X | None``."""
    args = get_args(annotation)
    if args and all(isinstance(a, str) for a in args):
        return args
    return tuple(v for a in args if a is not type(None) for v in get_args(a))


# ------------------------------------------------------------------------ the checkers
def _words(fusion: str) -> set[str]:
    """The ways a fusion is spelled in prose: ``rrf``/``RRF``, ``minmax``/``min-max``."""
    return {fusion, fusion.upper(), FUSION_LABELS[fusion]}


def wrong_defaults(text: str) -> list[str]:
    """Places in ``text`` that name as the default a fusion, weight pair or policy that does not
    ship: "RRF by default", "default: rrf", "min-max 0.5/0.5 (the default)", ..."""
    text = " ".join(text.split())
    bad: list[str] = []
    others = [w for f in FUSIONS if f != DEFAULT_FUSION for w in _words(f)]
    others += [p for p in POLICIES if p != DEFAULT_POLICY]
    for word in others:
        w = re.escape(word)
        for pattern in (
            rf"\b{w}`? by default",
            rf"\b{w}`?,? \(?(is )?(the )?(shipped )?default\b",
            rf"\bdefaults? (to |is |fusion is |policy is |: |= ?)?`?{w}\b",
            rf"\bshipped( fusion)?( is)?:? `?{w}\b",
        ):
            bad += [m.group(0) for m in re.finditer(pattern, text)]
    shipped = "/".join(f"{w:g}" for w in DEFAULT_FUSION_WEIGHTS)
    for m in re.finditer(
        r"(\bdefault\w*|\bshipped)[^.;|]{0,40}?\b(\d\.\d+)/(\d\.\d+)\b|\b(\d\.\d+)/(\d\.\d+) \(?(the )?default",
        text,
    ):
        pair = "/".join(f"{float(x):g}" for x in (m.groups()[1:3] if m.group(2) else m.groups()[3:5]))
        if pair != shipped:
            bad.append(m.group(0))
    return bad


def fusion_unnamed(text: str) -> bool:
    """A text about the fusion that does not name the shipped one with its weights."""
    text = " ".join(text.split())
    mentions = any(re.search(rf"\b{re.escape(w)}\b", text) for f in FUSIONS for w in _words(f))
    return (mentions or "fus" in text.lower()) and describe_fusion() not in text


@pytest.mark.parametrize(
    "text",
    [
        "osrag: hybrid (BM25 + kNN, RRF) retrieval for Russian RAG on OpenSearch.",
        "Candidates come from the alias's search pipeline (RRF by default): a BM25 head",
        "fusion: `rrf` (the default) or `minmax`",
        "the shipped fusion is min-max 0.5/0.5",
        "Selection policy: minimal by default.",
    ],
)
def test_the_checkers_catch_the_old_wrong_wordings(text: str) -> None:
    assert wrong_defaults(text) or fusion_unnamed(text)


@pytest.mark.parametrize(
    "text",
    [
        "hybrid (BM25 + kNN, fused by min-max 0.6/0.4 unless OSRAG_FUSION says otherwise)",
        "min-max (default) or weighted RRF pipelines",
        "RRF at any weight lost MRR on the dev set (0.9/0.1: 0.796)",
        "**shipped: hybrid, min-max 0.6/0.4** | hybrid, RRF 0.5/0.5",
        "`minimal` keeps only chunks close to the best evidence (leaner, loses answers)",
    ],
)
def test_the_checkers_pass_what_is_true(text: str) -> None:
    assert wrong_defaults(text) == []


# ------------------------------------------------------------------- code defaults
def test_settings_take_their_sets_and_defaults_from_the_vocabulary() -> None:
    assert _default("fusion") == DEFAULT_FUSION == "minmax"
    assert tuple(_default("fusion_weights")) == DEFAULT_FUSION_WEIGHTS == (0.6, 0.4)
    assert _default("selection") == DEFAULT_POLICY == "recall"
    fields = Settings.model_fields
    assert set(_without_none(fields["fusion"].annotation)) == set(FUSIONS)
    assert set(_without_none(fields["selection"].annotation)) == set(POLICIES)
    assert set(_without_none(fields["auth"].annotation)) == set(vocabulary.AUTH_MODES)
    assert set(_without_none(fields["serve_jwt_algorithm"].annotation)) == set(vocabulary.JWT_ALGORITHMS)


def test_envelope_defaults_are_the_settings_defaults() -> None:
    env = Envelope(
        question="q",
        status="complete",
        message="",
        budget_tokens=1,
        spent_tokens=0,
        freshness=Freshness(alias="a", index="i"),
    )
    assert env.fusion == _default("fusion")
    assert env.selection == _default("selection")
    fields = Envelope.model_fields
    assert set(get_args(fields["status"].annotation)) == set(vocabulary.STATUSES)
    assert set(get_args(LeftOutItem.model_fields["reason"].annotation)) == set(vocabulary.LEFT_OUT_REASONS)
    assert set(_without_none(SearchRequest.model_fields["selection"].annotation)) == set(POLICIES)


def test_pipeline_names_default_to_the_shipped_fusion() -> None:
    assert names.pipeline_name("a") == names.pipeline_name("a", _default("fusion")) == "a-hybrid-minmax"
    assert inspect.signature(AliasStore.pipeline_name).parameters["variant"].default == _default("fusion")


def test_pipeline_files_are_the_vocabulary_s() -> None:
    shipped = {p.stem for p in (PACKAGE / "pipelines").glob("*.json")}
    named = set(vocabulary.PIPELINES.values()) | set(vocabulary.EQUAL_WEIGHT_PIPELINES.values())
    assert shipped == named
    assert set(FUSIONS) <= set(vocabulary.PIPELINES)
    for variant, stem in vocabulary.PIPELINES.items():
        body = json.loads((PACKAGE / "pipelines" / f"{stem}.json").read_text(encoding="utf-8"))
        processor = "score-ranker-processor" if variant.startswith("rrf") else "normalization-processor"
        assert processor in json.dumps(body), stem


def test_the_read_path_uses_the_vocabulary_s_sets() -> None:
    assert gate.POLICIES == POLICIES
    assert query.MODES == vocabulary.RETRIEVAL_MODES
    assert set(vocabulary.CHUNK_KINDS) == budget.KINDS
    assert set(vocabulary.LEFT_OUT_REASONS) == budget.LEFT_OUT_REASONS
    assert vocabulary.DEFAULT_RETRIEVAL_MODE in vocabulary.RETRIEVAL_MODES


def test_a_jwt_algorithm_outside_the_set_is_refused() -> None:
    from osrag.errors import ConfigError

    with pytest.raises(ConfigError, match="not one of"):
        JwtVerifier.from_key("k" * 64, "none")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- help texts
def _commands(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, [*path, name])


def _helps() -> list[tuple[str, str]]:
    runner = CliRunner()
    out = []
    for path, _ in _commands(cli, []):
        got = runner.invoke(cli, [*path, "--help"], terminal_width=400, max_content_width=400)
        assert got.exit_code == 0, (path, got.output)
        out.append((" ".join(["osrag", *path]), got.output))
    return out


HELPS = _helps()


def test_every_command_has_a_help() -> None:
    assert len(HELPS) > 15
    assert any("serve" in name for name, _ in HELPS)


@pytest.mark.parametrize(("command", "text"), HELPS, ids=[c for c, _ in HELPS])
def test_help_names_the_shipped_defaults(command: str, text: str) -> None:
    assert wrong_defaults(text) == [], command
    if fusion_unnamed(text):
        pytest.fail(f"{command} --help speaks of fusion without naming {describe_fusion()}")
    if "OSRAG_SELECTION" in text:
        assert f"{DEFAULT_POLICY} by default" in text or f"OSRAG_SELECTION, {DEFAULT_POLICY}" in text
    # "(default OSRAG_NAME, VALUE)": the setting exists and VALUE is its default.
    for var, value in re.findall(r"default:? (OSRAG_[A-Z_]+)(?:, ([^)]+))?\)", text):
        name = var.removeprefix("OSRAG_").lower()
        assert name in Settings.model_fields, (command, var)
        if value and " " not in value.strip():  # a value, not prose ("else the index's own")
            assert value.strip() == f"{_default(name)}", (command, var, value)


def test_root_help_names_the_fusion() -> None:
    root = " ".join(dict(HELPS)["osrag"].split())
    assert describe_fusion() == "min-max 0.6/0.4"
    assert describe_fusion() in root


# ---------------------------------------------------------------------- docstrings
def _docstrings() -> Iterator[tuple[str, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}"
                    yield where, doc


def test_no_docstring_names_a_default_that_does_not_ship() -> None:
    docs = list(_docstrings())
    assert len(docs) > 200
    bad = [(where, wrong) for where, doc in docs for wrong in wrong_defaults(doc)]
    assert bad == []


# --------------------------------------------------------------------------- README and docs/
DOC_PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def _settings_rows() -> dict[str, list[str]]:
    """The generated settings page (docs/settings.md): ``OSRAG_NAME`` -> its cells (type, default, what)."""
    rows = {}
    for line in (ROOT / "docs" / "settings.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `OSRAG_"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_settings_page_names_the_shipped_defaults() -> None:
    rows = _settings_rows()
    assert rows["OSRAG_FUSION"][1] == f"`{DEFAULT_FUSION}`"
    assert rows["OSRAG_FUSION_WEIGHTS"][1] == "`" + ", ".join(str(w) for w in DEFAULT_FUSION_WEIGHTS) + "`"
    assert rows["OSRAG_SELECTION"][1] == f"`{DEFAULT_POLICY}`"
    for fusion in FUSIONS:
        assert fusion in rows["OSRAG_FUSION"][0]
    for policy in POLICIES:
        assert policy in rows["OSRAG_SELECTION"][0]
    for mode in vocabulary.AUTH_MODES:
        assert mode in rows["OSRAG_AUTH"][0]


def test_the_readme_and_the_docs_pages_name_the_shipped_defaults() -> None:
    texts = {page.name: page.read_text(encoding="utf-8") for page in DOC_PAGES}
    assert {name: wrong_defaults(text) for name, text in texts.items() if wrong_defaults(text)} == {}
    assert describe_fusion() in "\n".join(texts.values())
