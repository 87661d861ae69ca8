"""The probe of issue 13, kept: access on every head and section(), document ids, a giant word.

A small corpus with public, group-restricted (front matter written several ways) and
archived documents; every retrieval head, ``search()`` and ``section()`` is asked as each
kind of caller, and what comes back must be exactly what that caller may see.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osrag.access import PUBLIC, Principal
from osrag.errors import InputError
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = pytest.mark.integration

QUESTION = "как заварить чайник зелёного чая"
BODY = "# Заварка\n\nЧайник зелёного чая заваривают водой 80 градусов три минуты.\n"
DOCS = {
    "public": "",
    "group-a": "acl: groupA\n",
    "group-b": "acl: [groupB]\n",  # a YAML flow list
    "group-b-upper": "ACL: groupB\n",  # any key case
    "group-b-block": "acl:\n  - groupB\n  - auditors\n",  # a YAML block list
    "archived": "archived: true\n",
    "archived-b": "Archived: true\nacl: [groupB]\n",
    "tenant-acme": "tenant: acme\n",
}
ALL_DOCS = set(DOCS)
LIVE = ALL_DOCS - {"archived", "archived-b"}
VISIBLE = {  # what each caller may see (archived chunks excluded by default for everyone)
    # no tenant in these principals: untenanted chunks only (tenant-acme is acme's; issue 29)
    "public": {"public"},
    "groupA": {"public", "group-a"},
    "groupB": {"public", "group-b", "group-b-upper", "group-b-block"},
    "bypass": LIVE,
}
PRINCIPALS = {
    "public": PUBLIC,
    "groupA": Principal(groups=["groupA"]),
    "groupB": Principal(groups=["groupB"]),
    "bypass": Principal.admin_bypass(),
}
MODES = ("bm25", "knn", "hybrid")


@pytest.fixture(scope="module")
def corpus(opensearch_url: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.integration.conftest import drop_alias

    s = Settings(
        url=opensearch_url,
        alias="t-access-matrix",
        embedding_model="navec:news-300d",
        rerank=False,
        cache_dir=Settings().models_dir.parent,
        _env_file=None,
    )
    admin = AliasStore(s)
    drop_alias(admin.cluster.client, s.alias)
    admin.install()
    root = tmp_path_factory.mktemp("acl")
    for doc_id, front in DOCS.items():
        # Each text its own (equal texts would be collapsed into one candidate by content hash).
        body = f"{BODY}Памятка {doc_id.replace('-', ' ')}.\n"
        (root / f"{doc_id}.md").write_text(f"---\ndoc_id: {doc_id}\n{front}---\n{body}", encoding="utf-8")
    report = Ingester(s).ingest([root])
    assert (report.indexed, report.failed) == (len(DOCS), [])
    yield s
    drop_alias(admin.cluster.client, s.alias)


def docs_of(hits: Any) -> set[str]:
    return {h.source.doc_id for h in hits}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_every_head_returns_exactly_what_the_principal_may_see(corpus: Settings, mode: str, who: str) -> None:
    got = docs_of(
        SearchClient(corpus).retrieve(QUESTION, mode=mode, depth=50, principal=PRINCIPALS[who]).hits
    )
    assert got == VISIBLE[who], (mode, who)


@pytest.mark.parametrize("mode", MODES)
def test_archived_chunks_need_include_archived_and_still_the_right_principal(
    corpus: Settings, mode: str
) -> None:
    sc = SearchClient(corpus)
    arch = {"include_archived": True}
    assert docs_of(sc.retrieve(QUESTION, mode=mode, depth=50, filters=arch, principal=PUBLIC).hits) == (
        VISIBLE["public"] | {"archived"}
    )
    assert "archived-b" in docs_of(
        sc.retrieve(QUESTION, mode=mode, depth=50, filters=arch, principal=PRINCIPALS["groupB"]).hits
    )
    assert (
        docs_of(
            sc.retrieve(QUESTION, mode=mode, depth=50, filters=arch, principal=Principal.admin_bypass()).hits
        )
        == ALL_DOCS
    )


@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_search_never_shows_more_and_says_whom_it_was_for(corpus: Settings, who: str) -> None:
    env = SearchClient(corpus).search(QUESTION, budget_tokens=5000, depth=50, principal=PRINCIPALS[who])
    shown = {p.doc_id for p in env.passages} | {lo.doc_id for lo in env.left_out}
    assert shown <= VISIBLE[who], who
    # every visible chunk was a candidate (one chunk per document); the gate decides what is shown
    assert env.candidates == len(VISIBLE[who]), who
    assert env.access == PRINCIPALS[who].describe()


def test_no_principal_is_refused_by_every_read(corpus: Settings) -> None:
    sc = SearchClient(corpus)
    for mode in MODES:
        with pytest.raises(InputError, match="no principal"):
            sc.retrieve(QUESTION, mode=mode)
    with pytest.raises(InputError, match="no principal"):
        sc.search(QUESTION)
    with pytest.raises(InputError, match="no principal"):
        sc.section("group-b#0")


def _sections(corpus: Settings) -> dict[str, str]:
    hits = SearchClient(corpus, principal=Principal.admin_bypass()).retrieve(
        QUESTION, mode="bm25", depth=50, filters={"include_archived": True}
    )
    return {h.source.doc_id: h.source.section_id for h in hits.hits}


@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_section_is_filtered_like_search(corpus: Settings, who: str) -> None:
    sections = _sections(corpus)
    assert set(sections) == ALL_DOCS
    sc = SearchClient(corpus)
    for doc_id, sid in sections.items():
        got = {p.doc_id for p in sc.section(sid, principal=PRINCIPALS[who])}
        assert got == ({doc_id} if doc_id in VISIBLE[who] else set()), (who, doc_id, sid)


def test_archived_sections_need_include_archived(corpus: Settings) -> None:
    sid = _sections(corpus)["archived"]
    sc = SearchClient(corpus, principal=PUBLIC)
    assert sc.section(sid) == []
    assert {p.doc_id for p in sc.section(sid, filters={"include_archived": True})} == {"archived"}


def test_tenancy(corpus: Settings) -> None:
    sc = SearchClient(corpus)
    other = docs_of(sc.retrieve(QUESTION, mode="bm25", depth=50, principal=Principal(tenant="other")).hits)
    assert other == {"public"}  # a chunk with a tenant is its tenant's; untenanted chunks are shared
    acme = docs_of(sc.retrieve(QUESTION, mode="bm25", depth=50, principal=Principal(tenant="acme")).hits)
    assert acme == {"public", "tenant-acme"}
    strict = SearchClient(corpus.model_copy(update={"require_tenant": True}))
    with pytest.raises(InputError, match="OSRAG_REQUIRE_TENANT=true makes a tenant mandatory"):
        strict.retrieve(QUESTION, principal=PUBLIC)


def test_cli_search_and_section_with_principal_flags(corpus: Settings, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from tests.integration.test_reindex import cli_env

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "osrag.cli", *args],
            cwd=tmp_path,
            env=cli_env(corpus),
            capture_output=True,
            text=True,
            timeout=300,
        )

    for flags, who in (
        (["--public-only"], "public"),
        (["--group", "groupA"], "groupA"),
        (["--group", "groupB", "--group", "nobody"], "groupB"),
        (["--all-access"], "bypass"),
    ):
        p = cli("search", QUESTION, "--budget", "5000", "--depth", "50", "--json", *flags)
        assert p.returncode == 0, p.stderr
        env = json.loads(p.stdout)
        assert {x["doc_id"] for x in env["passages"]} <= VISIBLE[who]
        assert env["access"]["all_access"] is (who == "bypass")
    p = cli("search", QUESTION)
    assert p.returncode == 2 and "no caller: say who is asking with --group" in p.stderr  # the CLI's flags
    assert "Traceback" not in p.stderr
    sid = _sections(corpus)["group-b"]
    p = cli("section", sid, "--public-only")
    assert p.returncode == 1 and "no chunks of section" in p.stdout
    p = cli("section", sid, "--group", "groupB", "--json")
    assert p.returncode == 0 and {x["doc_id"] for x in json.loads(p.stdout)} == {"group-b"}


# ------------------------------------------------------------------ document ids
def test_same_relative_name_under_two_roots_is_two_documents(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    for team in ("teamA", "teamB"):
        (tmp_path / team).mkdir()
        (tmp_path / team / "faq.md").write_text(f"# FAQ {team}\n\nОтвет команды {team} про чайник.\n")
    first = Ingester(settings).ingest([tmp_path / "teamA"])
    second = Ingester(settings).ingest([tmp_path / "teamB"])
    assert (first.indexed, second.indexed, first.failed, second.failed) == (1, 1, [], [])
    hits = SearchClient(settings, principal=PUBLIC).retrieve("чайник", mode="bm25", depth=10).hits
    print(f"teamA/faq.md and teamB/faq.md -> doc ids {sorted(docs_of(hits))}")
    assert docs_of(hits) == {"teamA/faq", "teamB/faq"}


def test_replacing_a_document_from_another_source_needs_replace(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    for d, word in (("x", "первый"), ("y", "второй")):
        (tmp_path / d).mkdir()
        (tmp_path / d / "faq.md").write_text(f"---\ndoc_id: shared\n---\n# FAQ\n\n{word} текст про чайник.\n")
    assert Ingester(settings).ingest([tmp_path / "x"]).indexed == 1
    refused = Ingester(settings).ingest([tmp_path / "y"])
    assert refused.indexed == 0 and len(refused.failed) == 1
    path, reason = refused.failed[0]
    assert path.endswith("y/faq.md") and "doc_id 'shared' is taken by" in reason and "--replace" in reason
    sc = SearchClient(settings, principal=PUBLIC)
    assert "первый" in sc.retrieve("чайник", mode="bm25").hits[0].source.text
    assert Ingester(settings, replace=True).ingest([tmp_path / "y"]).indexed == 1
    assert "второй" in sc.retrieve("чайник", mode="bm25").hits[0].source.text


# ------------------------------------------------------------------ one giant word
def test_a_giant_word_is_charged_what_it_costs(admin: AliasStore, settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "giant.md").write_text("---\ndoc_id: giant\n---\n# Слово\n\n" + "ж" * 2_500_000 + "\n")
    report = Ingester(settings).ingest([tmp_path])
    assert report.indexed == 1, report.failed
    sc = SearchClient(settings, principal=PUBLIC)
    # Every chunk, read directly: the word is cut into bounded chunks (issue 29: never one giant
    # chunk), most of them equal text, which a search collapses into one candidate.
    got = admin.cluster.client.search(
        index=settings.alias,
        body={"size": 2000, "query": {"term": {"doc_id": "giant"}}, "_source": ["token_count", "text"]},
    )["hits"]["hits"]
    stored = sum(int(h["_source"]["token_count"]) for h in got)
    print(f"giant word: {len(got)} chunk(s), {stored} tokens stored for 2,500,000 characters")
    assert stored >= 2_500_000 // 10
    assert len(got) > 1 and max(len(h["_source"]["text"]) for h in got) <= settings.chunk_max_tokens * 20
    env = sc.search("ж", budget_tokens=50, filters={"doc_id": "giant"})
    assert env.spent_tokens <= 50
    assert all(p.tokens <= 50 for p in env.passages)
