"""Pure query building (``osrag.search.query``) and the lexical relevance gate (``osrag.search.gate``), no server.

The last tests call ``SearchClient.search`` against an address where nothing
listens: bad input must be refused before any request is sent, so they pass
only if validation happens first (a request would raise ClusterUnavailable).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from osrag.access import PUBLIC, Principal, access_clauses
from osrag.errors import InputError
from osrag.names import visibility_filter
from osrag.records import ChunkSource
from osrag.search.candidates import Candidate
from osrag.search.client import SearchClient
from osrag.search.gate import is_relevant
from osrag.search.query import (
    FILTER_KEYS,
    MAX_LEXICAL_TOKENS,
    MAX_QUESTION_CHARS,
    _lexical_cost,
    bm25_head,
    filter_clauses,
    hybrid_body,
    identifier_terms,
    knn_head,
    lexical_text,
    parse_filters,
    validate_question,
)
from osrag.settings import Settings

ALIAS = "unit-alias"
ARCHIVE_EXCLUSION = {"bool": {"must_not": [{"term": {"archived": True}}]}}
SYNTAX = "(title:x) AND *"
SYNTAX_CHARS = '\\ " / ~ ^ : [ ] { }'


def strings_in(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Every string leaf of a query body with the key path leading to it."""
    out: list[tuple[tuple[str, ...], str]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            out += strings_in(v, path + (k,))
    elif isinstance(node, list):
        for v in node:
            out += strings_in(v, path)
    elif isinstance(node, str):
        out.append((path, node))
    return out


def all_keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in all_keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in all_keys(v)}
    return set()


# --------------------------------------------------------------------------- parse_filters
def test_parse_filters_unknown_key_names_it() -> None:
    with pytest.raises(InputError) as err:
        parse_filters({"category": "promo", "colour": "red"})
    assert "'colour'" in str(err.value)
    assert "category" in str(err.value)  # the known keys are listed too


def test_parse_filters_none_and_empty_mean_no_filters() -> None:
    assert parse_filters(None) == {}
    assert parse_filters({}) == {}


def test_parse_filters_refuses_a_non_mapping() -> None:
    with pytest.raises(InputError, match="mapping"):
        parse_filters(["category=promo"])  # type: ignore[arg-type]


def test_parse_filters_lists_from_commas_and_sequences() -> None:
    got = parse_filters({"category": "promo, product", "doc_id": ["a", " b "], "kind": ("table",)})
    assert got == {"category": ["promo", "product"], "doc_id": ["a", "b"], "kind": ["table"]}


def test_parse_filters_empty_value_is_an_error() -> None:
    with pytest.raises(InputError, match="category"):
        parse_filters({"category": " , "})


@pytest.mark.parametrize(
    ("raw", "want"),
    [("2026-01-05", "2026-01-05"), ("2026-01-05T10:30:00", "2026-01-05"), ("2026-02-28 23:59", "2026-02-28")],
)
def test_parse_filters_dates_are_normalised(raw: str, want: str) -> None:
    assert parse_filters({"updated_after": raw}) == {"updated_after": want}
    assert parse_filters({"updated_before": raw}) == {"updated_before": want}


@pytest.mark.parametrize("raw", ["yesterday", "2026-13-01", "01.02.2026", "", "2026-01-05garbage", 20260105])
def test_parse_filters_bad_date_is_an_error_naming_the_filter(raw: str) -> None:
    with pytest.raises(InputError, match="updated_after wants a date YYYY-MM-DD"):
        parse_filters({"updated_after": raw})


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("TRUE", True),
        ("false", False),
        (" False ", False),
    ],
)
def test_parse_filters_include_archived(raw: Any, want: bool) -> None:
    assert parse_filters({"include_archived": raw}) == {"include_archived": want}


def test_parse_filters_is_idempotent() -> None:
    once = parse_filters(
        {"category": "a,b", "updated_before": "2026-03-01T00:00", "include_archived": "true"}
    )
    assert parse_filters(once) == once


# --------------------------------------------------------------------------- filter_clauses
def test_filter_clauses_default_visibility_and_archive_exclusion() -> None:
    clauses = filter_clauses(ALIAS, {}, ALL)
    assert clauses == [visibility_filter(ALIAS), ARCHIVE_EXCLUSION]
    # the visibility clause hides the versions listed in this alias's state index
    lookup = clauses[0]["bool"]["must_not"][0]["terms"]["version_key"]
    assert lookup["index"] == f"{ALIAS}.state"


def test_filter_clauses_include_archived_drops_only_the_archive_clause() -> None:
    clauses = filter_clauses(ALIAS, {"include_archived": True}, ALL)
    assert clauses == [visibility_filter(ALIAS)]
    assert filter_clauses(ALIAS, {"include_archived": False}, ALL) == [
        visibility_filter(ALIAS),
        ARCHIVE_EXCLUSION,
    ]


ALL = Principal.admin_bypass()
NO_ACL = {"bool": {"must_not": [{"exists": {"field": "acl"}}]}}


def test_filter_clauses_visibility_is_always_present() -> None:
    every = parse_filters(
        {
            "category": "x",
            "tenant": "t",
            "doc_id": "d",
            "kind": "table",
            "updated_after": "2026-01-01",
            "updated_before": "2026-02-01",
            "include_archived": True,
        }
    )
    assert set(every) == set(FILTER_KEYS)
    assert visibility_filter(ALIAS) in filter_clauses(ALIAS, every, PUBLIC)


def test_filter_clauses_terms_and_range() -> None:
    clauses = filter_clauses(
        ALIAS,
        parse_filters(
            {
                "category": "promo,product",
                "tenant": "public",
                "kind": "table",
                "doc_id": "d1",
                "updated_after": "2026-01-01",
                "updated_before": "2026-02-01",
            }
        ),
        ALL,
    )
    assert {"terms": {"category": ["promo", "product"]}} in clauses
    assert {"terms": {"tenant": ["public"]}} in clauses
    assert {"terms": {"kind": ["table"]}} in clauses
    assert {"terms": {"doc_id": ["d1"]}} in clauses
    assert {"range": {"updated_at": {"gte": "2026-01-01", "lte": "2026-02-01"}}} in clauses


def test_filter_clauses_carry_the_principal_s_access_clauses() -> None:
    groups = Principal(groups=["staff", "partners"])
    clauses = filter_clauses(ALIAS, {}, groups)
    assert clauses == [visibility_filter(ALIAS), *access_clauses(groups), ARCHIVE_EXCLUSION]
    acl = [c for c in clauses if "should" in c.get("bool", {})]
    assert len(acl) == 1
    b = acl[0]["bool"]
    assert b["minimum_should_match"] == 1
    assert {"terms": {"acl": ["staff", "partners"]}} in b["should"]
    # a chunk without ACL groups is public: it stays visible to any principal
    assert {"bool": {"must_not": [{"exists": {"field": "acl"}}]}} in b["should"]
    assert len(b["should"]) == 2
    # public only: chunks without groups, nothing else
    assert NO_ACL in filter_clauses(ALIAS, {}, PUBLIC)
    # the admin bypass adds no access clause at all
    assert not any("acl" in json.dumps(c) for c in filter_clauses(ALIAS, {}, ALL))


def test_acl_is_not_a_filter_but_a_principal() -> None:
    with pytest.raises(InputError, match="acl is not a filter: pass the caller's groups as principal="):
        parse_filters({"acl": "staff"})


# --------------------------------------------------------------------------- bm25_head
def test_bm25_head_is_bool_should_of_per_field_matches() -> None:
    flt = filter_clauses(ALIAS, {}, ALL)
    head = bm25_head("гарантия на лампу", flt)
    b = head["bool"]
    assert b["minimum_should_match"] == 1
    assert b["filter"] == flt
    fields = [next(iter(c["match"])) for c in b["should"]]
    # No identifier in the question: the exact-form subfield is not asked at all.
    assert fields == ["text", "breadcrumb", "title", "context"]
    for c in b["should"]:
        assert list(c) == ["match"]
        assert next(iter(c["match"].values()))["query"] == "гарантия на лампу"


def test_bm25_head_asks_the_ident_subfield_for_the_codes_only() -> None:
    head = bm25_head("гарантия на LAMP-LIGHT-MINI и TEA15?", [])
    should = head["bool"]["should"]
    assert [next(iter(c["match"])) for c in should] == [
        "text",
        "breadcrumb",
        "title",
        "context",
        "text.ident",
    ]
    ident = should[-1]["match"]["text.ident"]
    assert ident["query"] == "lamp-light-mini tea15"
    assert ident["boost"] > 1


def test_bm25_text_only_is_the_baseline_head() -> None:
    head = bm25_head("чай TEA15", [], field="text-only")
    assert head["bool"]["should"] == [{"match": {"text": {"query": "чай TEA15"}}}]


def test_bm25_head_std_mode_matches_only_the_standard_subfield() -> None:
    head = bm25_head("чай", [])
    std = bm25_head("чай", [], field="text.std")
    assert std["bool"]["should"] == [{"match": {"text.std": {"query": "чай"}}}]
    assert std != head


@pytest.mark.parametrize("question", [SYNTAX, SYNTAX_CHARS, 'TEA15 OR title:"чай"~2^3 [a TO b] {c} \\*'])
def test_query_syntax_goes_verbatim_into_match_queries_only(question: str) -> None:
    body = hybrid_body(question, [0.1, 0.2], 10, filter_clauses(ALIAS, {}, ALL))
    hits = [(path, s) for path, s in strings_in(body) if s == question]
    assert len(hits) == 4  # once per matched text field, verbatim (codes alone go to text.ident)
    for path, _ in hits:
        assert path[-1] == "query" and path[-3] == "match", path
    # nothing that parses query syntax is ever built
    keys = all_keys(body)
    assert not keys & {"query_string", "simple_query_string", "regexp", "wildcard", "prefix", "fuzzy"}


# --------------------------------------------------------------------------- hybrid_body
def test_hybrid_body_knn_depth_and_filters_on_both_heads() -> None:
    flt = filter_clauses(ALIAS, parse_filters({"category": "promo"}), ALL)
    body = hybrid_body("TEA15", [1, 0.5, 0.25], 37, flt)
    assert body["size"] == 37
    hybrid = body["query"]["hybrid"]
    assert hybrid["pagination_depth"] == 37
    bm25, knn = hybrid["queries"]
    assert bm25 == bm25_head("TEA15", flt)
    assert bm25["bool"]["filter"] == flt
    k = knn["knn"]["embedding"]
    assert k["k"] >= hybrid["pagination_depth"]
    assert k["vector"] == [1.0, 0.5, 0.25] and all(isinstance(x, float) for x in k["vector"])
    # an efficient filter inside the knn query, not a post-filter around it
    assert k["filter"] == {"bool": {"filter": flt}}
    assert "post_filter" not in body
    assert body["_source"] == {"excludes": ["body"]}


def test_knn_head_alone_carries_the_filter() -> None:
    flt = [{"terms": {"category": ["x"]}}]
    assert knn_head([0.0, 1.0], 5, flt) == {
        "knn": {"embedding": {"vector": [0.0, 1.0], "k": 5, "filter": {"bool": {"filter": flt}}}}
    }


# --------------------------------------------------------------------------- lexical_text (clause limit)
def test_lexical_text_keeps_ordinary_questions_verbatim() -> None:
    for q in ["TEA15", SYNTAX, SYNTAX_CHARS, "какая гарантия на LAMP-LIGHT-MINI и отдельно на батарею"]:
        assert lexical_text(q) == q


def test_lexical_text_bounds_a_long_question() -> None:
    words = [f"слово{i}" for i in range(600)] + ["слово1"] * 100
    q = " ".join(words)
    assert len(q) <= MAX_QUESTION_CHARS * 2
    got = lexical_text(q)
    assert got != q
    kept = got.split()
    assert sum(_lexical_cost(w) for w in kept) <= MAX_LEXICAL_TOKENS
    assert len(kept) == len(set(kept))  # repeats are dropped first
    assert kept == words[: len(kept)]  # the beginning of the question is what stays


def test_lexical_text_skips_a_single_monster_word() -> None:
    monster = "-".join(["а"] * 1500)
    assert lexical_text(monster) == ""
    assert lexical_text(f"чай {monster} лампа") == "чай лампа"


def test_lexical_cost_counts_delimiter_parts_and_case_changes() -> None:
    assert _lexical_cost("чай") == 2
    assert _lexical_cost("LAMP-LIGHT-MINI") == 4
    assert _lexical_cost("camelCaseWord") == 4


# --------------------------------------------------------------------------- gate terms
# Term coverage comes from the index's own analysis now (osrag.search.gate; tests/unit/test_gate.py).
def test_identifier_terms() -> None:
    assert identifier_terms("сколько стоит TEA15?") == ["tea15"]
    assert identifier_terms("гарантия на LAMP-LIGHT-MINI, v2.3.1, E_PROMO_3004") == [
        "e_promo_3004",
        "lamp-light-mini",
        "v2.3.1",
    ]
    assert identifier_terms("как заваривать зелёный чай") == []


def test_gate_passes_on_a_shared_term_a_cosine_over_the_floor_or_exact_code() -> None:
    floor = 0.8

    def hit(**kw: Any) -> Candidate:
        return Candidate(ChunkSource(chunk_id="c"), fused=0.01, rank=1, **kw)

    assert is_relevant(hit(shares_term=True), floor)
    assert is_relevant(hit(cosine=floor), floor)
    assert is_relevant(hit(ident_match=True), floor)
    assert not is_relevant(hit(coverage=0.9, cosine=floor - 0.01), floor)  # coverage alone is no term
    assert not is_relevant(hit(), floor)


# --------------------------------------------------------------------------- validate_question
@pytest.mark.parametrize(
    ("question", "message"),
    [
        ("", "question is empty"),
        ("   \n\t ", "question is empty"),
        ("x" * 100_000, f"question is 100000 characters long; the limit is {MAX_QUESTION_CHARS}"),
        (None, "question must be text, got NoneType"),
        (42, "question must be text, got int"),
        (
            "\ud800",
            "question is not valid Unicode text: lone surrogate U+D800 at position 0 (a non-UTF-8 byte?)",
        ),
        (
            "чай \udcff",
            "question is not valid Unicode text: lone surrogate U+DCFF at position 4 (a non-UTF-8 byte?)",
        ),
    ],
)
def test_validate_question_refuses_bad_questions(question: Any, message: str) -> None:
    with pytest.raises(InputError) as err:
        validate_question(question)
    assert str(err.value) == message


def test_validate_question_strips_and_accepts_the_limit() -> None:
    assert validate_question("  TEA15 \n") == "TEA15"
    assert validate_question("я" * MAX_QUESTION_CHARS) == "я" * MAX_QUESTION_CHARS
    with pytest.raises(InputError):
        validate_question("я" * (MAX_QUESTION_CHARS + 1))


# --------------------------------------------------------------------------- refused before any request
@pytest.fixture
def offline_client() -> SearchClient:
    return SearchClient(
        Settings(url="http://127.0.0.1:9", alias="nowhere", rerank=False, _env_file=None), principal=PUBLIC
    )


@pytest.mark.parametrize("budget", [0, -1, -1500, True, 1.5, "100"])
def test_search_refuses_a_bad_budget_before_any_request(offline_client: SearchClient, budget: Any) -> None:
    with pytest.raises(InputError, match="token budget must be a positive integer"):
        offline_client.search("TEA15", budget_tokens=budget)


def test_search_refuses_an_unknown_filter_before_any_request(offline_client: SearchClient) -> None:
    with pytest.raises(InputError, match="unknown filter 'colour'"):
        offline_client.search("TEA15", budget_tokens=100, filters={"colour": "red"})


@pytest.mark.parametrize("question", ["", "  ", "я" * 100_000])
def test_search_refuses_a_bad_question_before_any_request(
    offline_client: SearchClient, question: str
) -> None:
    with pytest.raises(InputError, match="question is"):
        offline_client.search(question, budget_tokens=100)


@pytest.mark.parametrize("depth", [0, -3, 1001, True])
def test_retrieve_refuses_a_bad_depth_before_any_request(offline_client: SearchClient, depth: Any) -> None:
    with pytest.raises(InputError, match="candidate depth"):
        offline_client.retrieve("TEA15", depth=depth)


def test_retrieve_refuses_an_unknown_mode(offline_client: SearchClient) -> None:
    with pytest.raises(InputError, match="unknown retrieval mode 'fuzzy'"):
        offline_client.retrieve("TEA15", mode="fuzzy")
