"""The Russian analysis chain, checked through the installed template on a live node.

Every test installs its own alias (``AliasStore(settings).install()``), so what is
checked is exactly what ``index_templates/osrag-analysis.json`` puts in the
cluster: tokens come from ``_analyze`` on the concrete index (``AliasStore.analyze``),
rankings from the real ingest path (``Ingester``) and the real query path
(``SearchClient.retrieve``). Nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from osrag.access import Principal
from osrag.connection import make_client
from osrag.ingest.indexing import Ingester
from osrag.names import visibility_filter
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias as shared_drop_alias

#: These tests are about other things than access: they read as the admin bypass (no ACL clause).
ALL = Principal.admin_bypass()

pytestmark = pytest.mark.integration


# --------------------------------------------------------------------------- helpers and fixtures
def drop_alias(client: Any, settings: Settings, alias: str) -> None:
    """Everything osrag keeps in the cluster for ``alias``: indices, state, templates, pipelines."""
    shared_drop_alias(client, alias)


@pytest.fixture
def osrag_cleanup(settings: Settings) -> Iterator[Callable[[str], None]]:
    """Removes what a test installed, for ``settings.alias`` and every alias passed to the callable."""
    aliases = [settings.alias]
    yield aliases.append
    client = make_client(settings)
    for alias in reversed(aliases):
        drop_alias(client, settings, alias)


@pytest.fixture
def admin(settings: Settings, osrag_cleanup: Callable[[str], None]) -> AliasStore:
    """This test's alias, installed from the template files (first index + alias created)."""
    adm = AliasStore(settings)
    result = adm.install()
    assert result["created_index"] and result["index"] == result["created_index"]
    return adm


def write_doc(
    root: Path,
    doc_id: str,
    body: str,
    *,
    title: str = "Справка",
    category: str = "faq",
    archived: bool = False,
    tenant: str = "public",
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    front = (
        f"---\ndoc_id: {doc_id}\ntitle: {title}\ncategory: {category}\n"
        f"archived: {str(archived).lower()}\ntenant: {tenant}\nupdated_at: 2026-01-01\n---\n"
    )
    (root / f"{doc_id}.md").write_text(front + body + "\n", encoding="utf-8")


def ingest(settings: Settings, root: Path, docs: dict[str, str], **front: Any) -> None:
    """Write ``doc_id -> body`` as Markdown files and ingest them through the real path."""
    for doc_id, body in docs.items():
        write_doc(root, doc_id, body, **front)
    report = Ingester(settings).ingest([root])
    assert report.failed == [], report.failed
    assert report.indexed == len(list(root.glob("*.md")))


def bm25_docs(settings: Settings, question: str, **kw: Any) -> list[str]:
    """doc_ids in BM25 rank order (the lexical head osrag queries with)."""
    return [
        h.source.doc_id
        for h in SearchClient(settings, principal=ALL).retrieve(question, mode="bm25", **kw).hits
    ]


def phrase_docs(settings: Settings, phrase: str) -> set[str]:
    """doc_ids whose chunk text matches ``phrase`` as a phrase (search_quote_analyzer = ru_quote)."""
    client = make_client(settings)
    resp = client.search(
        index=settings.alias,
        body={
            "size": 50,
            "query": {
                "bool": {
                    "must": [{"match_phrase": {"text": phrase}}],
                    "filter": [visibility_filter(settings.alias)],
                }
            },
        },
    )
    return {h["_source"]["doc_id"] for h in resp["hits"]["hits"]}


# --------------------------------------------------------------------------- stems, ё
def test_inflections_share_a_stem(admin: AliasStore) -> None:
    assert admin.tokens("Возврата") == admin.tokens("возврат") == ["возврат"]
    # The verb keeps more of its root than the noun: Snowball does not bring it to "возврат".
    assert admin.tokens("возвращать") == ["возвраща"]
    # Search side agrees with index side (otherwise a query form could never meet an indexed form).
    assert admin.tokens("Возврата", "ru_search") == ["возврат"]


def test_yo_folds_to_ye(admin: AliasStore) -> None:
    assert admin.tokens("Ёлка") == admin.tokens("елка") == ["елк"]
    assert admin.tokens("Ёлка", "ru_search") == ["елк"]
    assert admin.tokens("Ёлка", "ident") == admin.tokens("елка", "ident") == ["елка"]


# --------------------------------------------------------------------------- article numbers
def test_hyphenated_code_yields_whole_and_parts(admin: AliasStore) -> None:
    toks = admin.analyze("LAMP-LIGHT-MINI")
    assert [(t["token"], t["position"]) for t in toks["ru_index"]] == [
        ("lamp-light-mini", 0),
        ("lamplightmini", 0),
        ("lamp", 0),
        ("light", 1),
        ("mini", 2),
    ]
    assert [t["token"] for t in toks["ru_search"]] == ["lamp-light-mini", "lamp", "light", "mini"]
    assert [t["token"] for t in toks["ru_quote"]] == ["lamp", "light", "mini"]
    assert [t["token"] for t in toks["ident"]] == ["lamp-light-mini"]


def test_tea15_is_one_token_and_does_not_match_tea10(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    for analyzer in ("ru_index", "ru_search", "ru_quote", "ident"):
        assert admin.tokens("TEA15", analyzer) == ["tea15"], analyzer
    ingest(
        settings,
        tmp_path / "docs",
        {
            "tea10": "Артикул TEA10: чёрный чай в пачке 100 г.",
            "lamp": "Лампа LAMP-LIGHT: настольный светильник.",
        },
    )
    assert bm25_docs(settings, "TEA10") == ["tea10"]  # control: the chunk is there and findable
    assert bm25_docs(settings, "TEA15") == []


# --------------------------------------------------------------------------- identifier table
#: What each analyzer makes of common identifier shapes (observed on OpenSearch 3.6
#: with the installed template), and the queries that must find a chunk containing
#: the identifier in a corpus with look-alike distractors (BM25 head).
#:
#: (identifier, ru_index tokens, ru_search tokens, ident tokens, queries that find it)
#:
#: * ru_index keeps the whole identifier, its catenated words (``econflict``,
#:   ``calculatetotal``) and its parts; numbers stay whole (split_on_numerics off),
#:   so ``v2`` stays one token and ``v2.3.1`` is also indexed as ``2.3.1``.
#: * ru_search keeps the whole identifier and its parts but does not catenate.
#: * ident (the ``text.ident`` subfield) keeps the identifier whole, lowercased (and a
#:   version ``v2.3.1`` also as ``2.3.1``, so "версия 2.3.1" meets it there too).
IDENTIFIERS: list[tuple[str, list[str], list[str], list[str], tuple[str, ...]]] = [
    (
        "E_CONFLICT_1042",
        ["e_conflict_1042", "econflict", "e", "conflict", "1042"],
        ["e_conflict_1042", "e", "conflict", "1042"],
        ["e_conflict_1042"],
        ("E_CONFLICT_1042", "1042", "ошибка 1042", "E_CONFLICT"),
    ),
    (
        "v2.3.1",
        ["v2.3.1", "2.3.1", "v2", "3", "1"],
        ["v2.3.1", "v2", "3", "1"],
        ["v2.3.1", "2.3.1"],
        ("v2.3.1", "2.3.1", "версия 2.3.1"),
    ),
    (
        "calculateTotal",
        ["calculatetotal", "calculate", "total"],
        ["calculatetotal", "calculate", "total"],
        ["calculatetotal"],
        ("calculateTotal", "calculate_total", "calculatetotal"),
    ),
    (
        "calculate_total",
        ["calculate_total", "calculatetotal", "calculate", "total"],
        ["calculate_total", "calculate", "total"],
        ["calculate_total"],
        ("calculate_total", "calculateTotal", "calculatetotal"),
    ),
]

#: The chunk each identifier lives in, and distractors that share parts with them.
IDENT_CORPUS = {
    "E_CONFLICT_1042": "Ошибка E_CONFLICT_1042 возникает, когда два оператора одновременно меняют заказ.",
    "v2.3.1": "В версии v2.3.1 исправлена синхронизация корзины.",
    "calculateTotal": "Функция calculateTotal считает сумму заказа со скидкой.",
    "calculate_total": "Метод calculate_total пересчитывает итог корзины.",
    "d-timeout": "Ошибка E_TIMEOUT_2001 значит, что сервер не ответил вовремя.",
    "d-1043": "Код 1043 означает, что заказ уже оплачен.",
    "d-v240": "В релизе v2.4.0 появился экспорт отчётов.",
    "d-version": "Версия приложения показана в настройках.",
    "d-tax": "Функция calculateTax считает налог с заказа.",
    "d-total": "Поле total в отчёте показывает итоговую сумму.",
}

#: Chunks that may rank above each other for these queries (they name the same function).
SAME_THING = {"calculateTotal": {"calculate_total"}, "calculate_total": {"calculateTotal"}}


def _doc_id(identifier: str) -> str:
    return identifier.replace(".", "-")


@pytest.mark.parametrize(
    ("identifier", "ru_index", "ru_search", "ident", "queries"),
    IDENTIFIERS,
    ids=[row[0] for row in IDENTIFIERS],
)
def test_identifier_tokens(
    admin: AliasStore,
    identifier: str,
    ru_index: list[str],
    ru_search: list[str],
    ident: list[str],
    queries: tuple[str, ...],
) -> None:
    got = admin.analyze(identifier, ("ru_index", "ru_search", "ident"))
    assert [t["token"] for t in got["ru_index"]] == ru_index
    assert [t["token"] for t in got["ru_search"]] == ru_search
    assert [t["token"] for t in got["ident"]] == ident


@pytest.mark.parametrize(
    ("identifier", "ru_index", "ru_search", "ident", "queries"),
    IDENTIFIERS,
    ids=[row[0] for row in IDENTIFIERS],
)
def test_identifier_findable_by_exact_string_and_parts(
    admin: AliasStore,
    settings: Settings,
    tmp_path: Path,
    identifier: str,
    ru_index: list[str],
    ru_search: list[str],
    ident: list[str],
    queries: tuple[str, ...],
) -> None:
    ingest(settings, tmp_path / "docs", {_doc_id(k): v for k, v in IDENT_CORPUS.items()})
    target = _doc_id(identifier)
    allowed_above = {_doc_id(x) for x in SAME_THING.get(identifier, set())}
    for query in queries:
        ranked = bm25_docs(settings, query)
        assert target in ranked, f"{query!r} does not find {identifier!r}: {ranked}"
        above = set(ranked[: ranked.index(target)])
        assert above <= allowed_above, f"{query!r}: {above - allowed_above} outrank {identifier!r}: {ranked}"


# --------------------------------------------------------------------------- phrases
def test_phrase_across_identifier_and_negation(admin: AliasStore, settings: Settings, tmp_path: Path) -> None:
    ingest(
        settings,
        tmp_path / "docs",
        {
            "lamp-phrase": "Как заказ LAMP-LIGHT-MINI оформить без регистрации: нажмите «Купить».",
            "lamp-reordered": "Оформить заказ LAMP-LIGHT-MINI можно в приложении.",
            "neg-phrase": "В журнале: ошибка не на лампу, а на блок питания.",
            "neg-reordered": "Ошибка на лампу не влияет на гарантию.",
            "neg-missing": "Это ошибка на лампу в каталоге.",
        },
    )
    assert phrase_docs(settings, "заказ LAMP-LIGHT-MINI оформить") == {"lamp-phrase"}
    # The negation is part of the phrase: "ошибка на лампу" (no "не") must not match.
    assert phrase_docs(settings, "ошибка не на лампу") == {"neg-phrase"}
    # Control: without "не" the phrase does match the chunks that have it.
    assert phrase_docs(settings, "ошибка на лампу") == {"neg-reordered", "neg-missing"}


def test_negation_and_modality_are_not_stop_words(admin: AliasStore) -> None:
    assert admin.tokens("не нет нельзя можно") == ["не", "нет", "нельз", "можн"]
    assert admin.tokens("не нет нельзя можно", "ru_search") == ["не", "нет", "нельз", "можн"]
    # Control: the stop filter is active (ordinary function words do go).
    assert admin.tokens("и на в лампа") == ["ламп"]


# --------------------------------------------------------------------------- BM25 ranking
def test_bm25_ranking(admin: AliasStore, settings: Settings, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_doc(docs, "tea15", "Артикул TEA15: зелёный чай в пачке 100 г.", title="Чай")
    write_doc(docs, "tea10", "Артикул TEA10: чёрный чай в пачке 100 г.", title="Чай")
    write_doc(
        docs,
        "tea-set",
        "Подарочный набор: TEA10, TEA15 и TEA20 в одной коробке со скидкой к празднику.",
        title="Наборы",
    )
    write_doc(docs, "lamp", "Лампа LAMP-LIGHT: настольный светильник.", title="Свет")
    write_doc(docs, "lamp-mini", "Лампа LAMP-LIGHT-MINI: маленький настольный светильник.", title="Свет мини")
    write_doc(
        docs,
        "tea-return",
        "Открытые пачки чая принимаем обратно: вернуть их можно в течение 14 дней.",
        title="Возврат вскрытого чая",
    )
    write_doc(docs, "pay", "Оплатить заказ можно картой или наличными.", title="Оплата")
    ingest(settings, docs, {})

    ranked = bm25_docs(settings, "TEA15")
    assert ranked[0] == "tea15" and "tea10" not in ranked, ranked

    ranked = bm25_docs(settings, "LAMP-LIGHT")
    assert "lamp" in ranked and "lamp-mini" in ranked, ranked
    assert ranked.index("lamp") < ranked.index("lamp-mini"), ranked

    question = "можно ли вернуть открытую пачку чая"
    # Found by stems: открытую/открытые, пачку/пачки share one; "вернуть" is in the chunk.
    assert admin.tokens("открытую") == admin.tokens("открытые")
    assert admin.tokens("пачку") == admin.tokens("пачки") == admin.tokens("пачке")
    ranked = bm25_docs(settings, question)
    assert ranked[0] == "tea-return", ranked
    assert {"tea15", "tea10", "pay"} <= set(ranked[1:]), ranked  # the distractors do match, lower


# --------------------------------------------------------------------------- filters on both heads
ARCHIVED_TEXT = "Вскрытую пачку зелёного чая можно вернуть в течение 14 дней, сохранив чек."


def test_filters_apply_to_both_heads(admin: AliasStore, settings: Settings, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_doc(docs, "archived-return", ARCHIVED_TEXT, title="Возврат чая", category="returns", archived=True)
    write_doc(
        docs,
        "live-return",
        "Возврат товара: чек нужен, срок возврата 14 дней.",
        title="Возврат",
        category="returns",
    )
    write_doc(
        docs,
        "promo-tea",
        "Скидка 10% на зелёный чай в пачках до конца месяца.",
        title="Акции",
        category="promo",
    )
    write_doc(docs, "promo-lamp", "Вторая лампа LAMP-LIGHT в подарок.", title="Акции", category="promo")
    write_doc(
        docs, "delivery", "Доставка по городу занимает один день.", title="Доставка", category="delivery"
    )
    ingest(settings, docs, {})
    sc = SearchClient(settings, principal=ALL)
    live = {"live-return", "promo-tea", "promo-lamp", "delivery"}

    # Unfiltered by archive, the archived chunk is the best match on both heads.
    with_archived = [
        h.source.doc_id
        for h in sc.retrieve(ARCHIVED_TEXT, mode="hybrid", filters={"include_archived": True}).hits
    ]
    assert with_archived[0] == "archived-return", with_archived
    for mode in ("bm25", "knn"):
        top = sc.retrieve(ARCHIVED_TEXT, mode=mode, filters={"include_archived": True}).hits[0]
        assert top.source.doc_id == "archived-return", mode

    # Default: the archive filter is on both heads, so the fused list never has it.
    hits = sc.retrieve(ARCHIVED_TEXT, mode="hybrid").hits
    assert hits, "the hybrid query returned nothing"
    assert all(not h.source.archived for h in hits)
    assert "archived-return" not in {h.source.doc_id for h in hits}

    # A category filter, on both heads: only that category comes back.
    hits = sc.retrieve(ARCHIVED_TEXT, mode="hybrid", filters={"category": "promo"}).hits
    assert {h.source.doc_id for h in hits} == {"promo-tea", "promo-lamp"}
    hits = sc.retrieve(ARCHIVED_TEXT, mode="hybrid", filters={"category": "returns"}).hits
    assert {h.source.doc_id for h in hits} == {"live-return"}
    hits = sc.retrieve(
        ARCHIVED_TEXT, mode="hybrid", filters={"category": "returns", "include_archived": True}
    ).hits
    assert [h.source.doc_id for h in hits][0] == "archived-return"

    # The kNN head alone, k larger than the corpus: every live chunk, never the archived one.
    knn = [h.source.doc_id for h in sc.retrieve(ARCHIVED_TEXT, mode="knn", depth=50).hits]
    assert set(knn) == live, knn
    knn_all = [
        h.source.doc_id
        for h in sc.retrieve(ARCHIVED_TEXT, mode="knn", depth=50, filters={"include_archived": True}).hits
    ]
    assert set(knn_all) == live | {"archived-return"}, knn_all


# --------------------------------------------------------------------------- russian vs light_russian
#: (word, Snowball "russian", "light_russian") as observed on OpenSearch 3.6.
#: light_russian strips less: it keeps чай/чая/чаю apart and оформить/оформил apart,
#: which "russian" conflates; on most nouns (возврата, доставкой, лампу) they agree.
#: Neither relates the genitive plural "ошибок" to "ошибка" (→ ошибк).
STEMMERS = [
    ("возврата", "возврат", "возврат"),
    ("возвращать", "возвраща", "возвращат"),
    ("оформить", "оформ", "оформит"),
    ("оформил", "оформ", "оформил"),
    ("чай", "ча", "чай"),
    ("чая", "ча", "чая"),
    ("чаю", "ча", "чаю"),
    ("доставкой", "доставк", "доставк"),
    ("лампу", "ламп", "ламп"),
    ("ошибка", "ошибк", "ошибк"),
    ("ошибок", "ошибок", "ошибок"),
]


def test_russian_vs_light_russian(
    admin: AliasStore, settings: Settings, unique_name: str, osrag_cleanup: Callable[[str], None]
) -> None:
    light_settings = settings.model_copy(update={"stemmer": "light_russian", "alias": unique_name + "-light"})
    osrag_cleanup(light_settings.alias)
    light = AliasStore(light_settings)
    light.install()
    assert light.meta().stemmer == "light_russian" and admin.meta().stemmer == "russian"
    # The aliases are separate: each one's template (and stemmer) is on its own index.
    assert light.require_index() != admin.require_index()

    observed = [(w, admin.tokens(w)[0], light.tokens(w)[0]) for w, _, _ in STEMMERS]
    assert observed == STEMMERS

    differ = {w for w, r, lr in observed if r != lr}
    assert differ == {"возвращать", "оформить", "оформил", "чай", "чая", "чаю"}
    # What that means for recall: forms "russian" brings together, light_russian keeps apart.
    assert admin.tokens("чай") == admin.tokens("чая") and light.tokens("чай") != light.tokens("чая")
    assert admin.tokens("оформить") == admin.tokens("оформил")
    assert light.tokens("оформить") != light.tokens("оформил")
