"""The read path's named steps and its one candidate record, driven through the step protocol
without a cluster: the moved-alias retry, the search before the first ingest, the candidates'
attributes, the selection policy read once from the settings, and selection walking the same
candidate objects (no copy per chunk)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from opensearchpy.exceptions import NotFoundError

from osrag.access import PUBLIC
from osrag.errors import ClusterError, InputError
from osrag.names import state_index
from osrag.records import ChunkSource, IndexMeta
from osrag.search import gate
from osrag.search.budget import SelectionConfig, select
from osrag.search.candidates import Candidate, hits_of
from osrag.search.client import SearchClient
from osrag.search.ranking import SelectionPolicy
from osrag.search.retrieval import NO_EVIDENCE, QuestionEvidence, checked_ask
from osrag.settings import Settings
from osrag.steps import Call, Inline, Work, drive
from osrag.store.alias import resolve_mapping

ALIAS = "t-unit"


def missing(index: str) -> ClusterError:
    """What the driver throws into the path when ``index`` does not exist."""
    try:
        raise ClusterError("OpenSearch search failed: 404") from NotFoundError(
            404,
            "index_not_found_exception",
            {"error": {"type": "index_not_found_exception", "reason": f"no such index [{index}]"}},
        )
    except ClusterError as exc:
        return exc


def _mapping(index: str, **meta: Any) -> dict[str, Any]:
    return {index: {"mappings": {"_meta": {"osrag": meta}, "properties": {}}}}


class Node:
    """Answers the path's steps like a node whose alias points at ``indices[0]``, then the next."""

    def __init__(self, *indices: str, gone: set[str] | None = None) -> None:
        self.indices = list(indices)
        self.gone = gone or set()
        self.searched: list[str] = []

    def __call__(self, step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        if step.method == "info":
            return {"version": {"number": "3.6.0"}}
        if step.method == "cat.plugins":
            return [{"component": "opensearch-knn"}, {"component": "opensearch-neural-search"}]
        if step.method == "indices.get_mapping":
            return _mapping(self.indices.pop(0), embedding_model="m", dimension=2, last_ingest_at="t")
        assert step.method == "search", step
        index = step.kwargs["index"]
        self.searched.append(index)
        if index in self.gone:
            raise missing(index)
        src = {"chunk_id": "d:0", "doc_id": "d", "text": "возврат", "token_count": 3, "acl": ["g"]}
        return {"hits": {"hits": [{"_id": "d:0", "_score": 2.0, "_source": src}]}}


def client(**kw: Any) -> SearchClient:
    return SearchClient(
        Settings(url="http://127.0.0.1:1", alias=ALIAS, _env_file=None, **kw), principal=PUBLIC
    )


def test_a_deleted_index_behind_the_cached_alias_is_resolved_afresh_once() -> None:
    sc = client(collapse_duplicates=False)
    node = Node(f"{ALIAS}-old", f"{ALIAS}-new", gone={f"{ALIAS}-old"})
    got = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(node))
    assert node.searched == [f"{ALIAS}-old", f"{ALIAS}-new"]
    assert got.index == f"{ALIAS}-new" and isinstance(got.meta, IndexMeta) and got.meta.dimension == 2
    assert [h.chunk_id for h in got.hits] == ["d:0"]
    # Gone again after the fresh resolve: raised, not asked a third time.
    sc = client(collapse_duplicates=False)
    node = Node(f"{ALIAS}-a", f"{ALIAS}-b", gone={f"{ALIAS}-a", f"{ALIAS}-b"})
    with pytest.raises(ClusterError):
        drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(node))
    assert node.searched == [f"{ALIAS}-a", f"{ALIAS}-b"]


def test_before_the_first_ingest_a_search_finds_nothing_and_says_why() -> None:
    sc = client(collapse_duplicates=False)
    node = Node(f"{ALIAS}-1", gone={f"{ALIAS}-1"})

    def no_state(step: Call | Work) -> Any:
        if isinstance(step, Call) and step.method == "search":
            raise missing(state_index(ALIAS))
        return node(step)

    got = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(no_state))
    assert got.hits == [] and got.notes == [f"nothing has been ingested into {ALIAS} yet"]


def test_candidates_carry_their_stored_chunk_and_scores_as_attributes() -> None:
    resp = {
        "hits": {
            "hits": [
                {
                    "_id": "d:1",
                    "_score": None,
                    "_source": {"doc_id": "d", "text": "т", "token_count": 7, "acl": "g", "page": 2},
                    "matched_queries": ["osrag.term:т"],
                }
            ]
        }
    }
    (c,) = hits_of(resp)
    assert (c.chunk_id, c.doc_id, c.text, c.token_count, c.kind) == ("d:1", "d", "т", 7, "text")
    assert (c.fused, c.rank, c.rerank, c.relevance) == (0.0, 1, None, 0.0)
    assert c.source.acl == ("g",) and c.source.location == {"page": 2} and c.embedding is None
    assert gate.matched_terms(c) == {"т"}


def test_checked_ask_refuses_before_any_request_and_keeps_the_lexical_text() -> None:
    ask = checked_ask("  возврат  ", "knn", None, [], default_depth=40)
    assert (ask.question, ask.lexical, ask.depth, ask.embeds) == ("возврат", "возврат", 40, True)
    for bad in ({"mode": "fuzzy"}, {"depth": 0}, {"depth": True}):
        with pytest.raises(InputError):
            checked_ask("q", bad.get("mode", "bm25"), bad.get("depth"), [], default_depth=40)  # type: ignore[arg-type]
    assert NO_EVIDENCE.probes("q") == [] and NO_EVIDENCE.aggs() is None
    on = QuestionEvidence(("возврат",), {}, None, ("tea15",), "g", on=True)
    assert on.asked == ["возврат"] and set(on.aggs() or {}) == {gate.DF_AGG, "osrag_codes"}
    held = QuestionEvidence(("возврат",), {"возврат": 3}, 10, (), "g", on=True)
    assert held.asked == [] and held.aggs() is None and held.probes("возврат")


def test_resolve_mapping_gives_the_index_record() -> None:
    index, meta, props = resolve_mapping(ALIAS, _mapping("i-1", embedding_model="m", content_hash=True))
    assert index == "i-1" and meta.embedding_model == "m" and meta.content_hash and props == {}


def test_the_selection_policy_is_read_once_from_the_settings_and_overridden_per_call() -> None:
    s = Settings(_env_file=None, gate_cosine_floor=0.3)
    p = SelectionPolicy.from_settings(s)
    assert (p.name, p.cosine_floor, p.walk, p.fusion) == (s.selection, 0.3, SelectionConfig(), str(s.fusion))
    assert p.with_overrides() is p
    lean = p.with_overrides("minimal", SelectionConfig(reserve_fraction=0.0))
    assert lean.name == "minimal" and lean.walk.reserve_fraction == 0.0 and p.name == s.selection
    assert lean.gate(None).policy == "minimal"
    with pytest.raises(InputError, match="unknown selection policy"):
        p.with_overrides("lean")
    assert SearchClient(s, principal=PUBLIC).policy == p


def test_selection_walks_the_candidates_themselves() -> None:
    def cand(
        cid: str, text: str, tokens: int, score: float, vec: tuple[float, float] = (1.0, 0.0)
    ) -> Candidate:
        c = Candidate(ChunkSource(cid, doc_id=cid, text=text, embedding=np.array(vec, np.float32)), 1.0, 1)
        c.tokens, c.score = tokens, score
        return c

    a, b, dup = (
        cand("a", "один два три", 5, 3.0),
        cand("b", "четыре пять", 5, 2.0, (0.0, 1.0)),
        cand("c", "Один два ТРИ", 1, 1.0),
    )
    sel = select([a, b, dup], 100, SelectionConfig(dup_overlap=0.99))
    assert sel.selected == (a, b) and sel.selected[0] is a and sel.selected[1] is b
    assert sel.duplicates[0].candidate is dup and sel.duplicates[0].duplicate_of == "a" and sel.spent == 10
    bad = cand("n", "t", -1, 1.0)
    with pytest.raises(ValueError, match="tokens must be an integer"):
        select([bad], 10)


@pytest.mark.parametrize("vectors", [True, False])
def test_retrieve_leaves_the_vectors_on_the_server_only_when_asked(vectors: bool) -> None:
    bodies: list[dict[str, Any]] = []
    node = Node(f"{ALIAS}-1")

    def answer(step: Call | Work) -> Any:
        if isinstance(step, Call) and step.method == "search":
            bodies.append(step.kwargs["body"])
        return node(step)

    sc = client(collapse_duplicates=False)
    sc._transport = Inline(answer)  # type: ignore[method-assign]
    got = sc.retrieve("возврат", mode="bm25", principal=PUBLIC, vectors=vectors)
    assert [h.chunk_id for h in got.hits] == ["d:0"]
    (body,) = bodies
    assert "embedding" in body["_source"]["excludes"]
    assert ("script_fields" in body) is vectors
    with pytest.raises(InputError, match="vectors must be true or false"):
        sc.retrieve("возврат", mode="bm25", principal=PUBLIC, vectors="no")  # type: ignore[arg-type]
