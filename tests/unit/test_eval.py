"""Eval sets and report rendering: the golden and BEIR loaders, judging, configurations, the report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from osrag.errors import ConfigError
from osrag.evaluation import datasets as ds
from osrag.evaluation import report, runs
from osrag.records import ChunkSource
from osrag.settings import Settings

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "golden.jsonl"


# ------------------------------------------------------------------ golden
def test_golden_set_is_complete_and_every_reference_resolves() -> None:
    g = ds.load_golden(GOLDEN)  # raises on an unknown doc or section
    qs = g.queries
    assert len(qs) >= 40 and len({q.qid for q in qs}) == len(qs)
    types = Counter(q.buckets["type"] for q in qs)
    for t in ("exact_id", "paraphrase", "two_conditions", "table", "code", "multi_doc", "no_answer"):
        assert types[t] >= 5, t
    spans = ds.SectionSpans(g.corpus)
    assert len(spans.docs) >= 30
    for q in qs:
        assert q.answerable == (q.buckets["type"] != "no_answer")
        assert set(g.spans[q.qid]) == set(q.relevant)
        for doc, s, e in g.spans[q.qid].values():
            assert 0 <= s < e <= len(spans.docs[doc].text)


def test_bad_golden_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    p = tmp_path / "g.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "q", "type": "t"}) + "\n{broken\n")
    with pytest.raises(ConfigError, match=r"g.jsonl:2"):
        ds.load_golden(p)


def test_golden_chunk_is_judged_by_span_overlap() -> None:
    spans = {"d#A": ("d", 100, 200)}
    assert ds.judge(ChunkSource("d:0", doc_id="d", start=150, end=400), spans) == "d#A"
    assert (
        ds.judge(ChunkSource("d:1", doc_id="d", start=200, end=300), spans) is None
    )  # touching is not overlapping
    assert ds.judge(ChunkSource("x:0", doc_id="x", start=150, end=160), spans) is None
    assert ds.judge(ChunkSource("d:2", doc_id="d"), spans) is None
    g = ds.GoldenSet(name="g", queries=[], spans={"q": spans})
    q = ds.Query("q", "?", {"d#A": 1})
    assert g.key(q, ChunkSource.of({"doc_id": "d", "start": 120, "end": 130, "chunk_id": "d:1"})) == "d#A"
    assert g.key(q, ChunkSource.of({"doc_id": "d", "start": 0, "end": 50, "chunk_id": "d:0"})) == "~d:0"


# ------------------------------------------------------------------ BEIR
def _beir(tmp_path: Path, qrels: str | None = None, **extra: str) -> Path:
    d = tmp_path / "tiny"
    (d / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "p1", "title": "", "text": "Кошка сидит на окне."},
        {"_id": "p2", "title": "Собаки", "text": "Собака лает во дворе."},
        {"_id": "p3", "text": "Чай заваривают кипятком."},
    ]
    queries = [
        {"_id": "q1", "text": "Где сидит кошка?", "metadata": {"overlap_bucket": "high", "type": "entity"}},
        {"_id": "q2", "text": "Кто лает?", "metadata": {"overlap_bucket": "low", "overlap": 0.2}},
        {"_id": "q3", "text": "Как заваривать кофе?"},
        {"_id": "q9", "text": "не в этом сплите"},
    ]
    (d / "corpus.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in corpus) + "\n")
    (d / "queries.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in queries) + "\n")
    (d / "qrels" / "test.tsv").write_text(
        qrels
        if qrels is not None
        else "query-id\tcorpus-id\tscore\nq1\tp1\t1\nq2\tp2\t2\nq2\tp1\t1\nq3\tp3\t0\n"
    )
    for name, text in extra.items():
        (d / name).write_text(text)
    return d


def test_beir_loader_reads_docs_queries_qrels_and_buckets(tmp_path: Path) -> None:
    s = ds.load_beir(_beir(tmp_path))
    assert s.name == "tiny" and not s.chunking_matters
    assert [d.doc_id for d in s.docs] == ["p1", "p2", "p3"]
    assert [d.title for d in s.docs] == ["", "Собаки", ""]  # an empty title stays empty
    assert s.docs[0].text == "Кошка сидит на окне."
    by = {q.qid: q for q in s.queries}
    assert set(by) == {"q1", "q2", "q3"}  # q9 is not in the qrels split
    assert by["q1"].relevant == {"p1": 1} and by["q2"].relevant == {"p2": 2, "p1": 1}
    assert by["q3"].relevant == {} and not by["q3"].answerable  # a score-0 judgement is not relevant
    assert by["q1"].buckets == {"overlap_bucket": "high", "type": "entity"}
    assert by["q2"].buckets == {"overlap_bucket": "low"}  # numbers are not buckets
    assert ds.bucket_facets(s.queries) == {"overlap_bucket": ["low", "high"], "type": ["entity"]}
    # A chunk is judged by the document it came from.
    assert s.key(by["q2"], ChunkSource("p2:0", doc_id="p2")) == "p2"


def test_beir_loader_refuses_what_it_cannot_judge(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown document 'p7'"):
        ds.load_beir(_beir(tmp_path / "a", "q1\tp7\t1\n"))
    with pytest.raises(ConfigError, match="query 'qX' is not in queries.jsonl"):
        ds.load_beir(_beir(tmp_path / "b", "qX\tp1\t1\n"))
    with pytest.raises(ConfigError, match=r"test.tsv:1: score 'yes'"):
        ds.load_beir(_beir(tmp_path / "c", "q1\tp1\tyes\n"))
    with pytest.raises(ConfigError, match="separated by tabs"):
        ds.load_beir(_beir(tmp_path / "d", "q1 p1 1\n"))
    d = _beir(tmp_path / "e")
    (d / "corpus.jsonl").write_text('{"_id": "p1", "text": "x"}\n{"_id": "p1", "text": "y"}\n')
    with pytest.raises(ConfigError, match=r"corpus.jsonl:2: duplicate _id 'p1'"):
        ds.load_beir(d)
    (d / "corpus.jsonl").unlink()
    with pytest.raises(ConfigError, match="missing corpus.jsonl"):
        ds.load_beir(d)
    with pytest.raises(ConfigError, match="not a directory"):
        ds.load_beir(tmp_path / "nowhere")


def test_beir_split_choice(tmp_path: Path) -> None:
    d = _beir(tmp_path)
    (d / "qrels" / "dev.tsv").write_text("q1\tp2\t1\n")
    assert {q.qid for q in ds.load_beir(d).queries} == {"q1", "q2", "q3"}  # test.tsv by default
    assert [q.relevant for q in ds.load_beir(d, split="dev").queries] == [{"p2": 1}]
    with pytest.raises(ConfigError, match="no train.tsv"):
        ds.load_beir(d, split="train")
    (d / "qrels" / "test.tsv").unlink()
    (d / "qrels" / "train.tsv").write_text("q1\tp2\t1\n")
    with pytest.raises(ConfigError, match="several splits"):
        ds.load_beir(d)


def test_sample_is_seeded_and_keeps_file_order(tmp_path: Path) -> None:
    s = ds.load_beir(_beir(tmp_path))
    a, b = s.sample(2), s.sample(2)
    assert [q.qid for q in a.queries] == [q.qid for q in b.queries]
    assert len(a.queries) == 2 and len(s.queries) == 3  # the original is untouched
    ids = [q.qid for q in s.queries]
    assert [ids.index(q.qid) for q in a.queries] == sorted(ids.index(q.qid) for q in a.queries)
    assert s.sample(None) is s and s.sample(10) is s


# ------------------------------------------------------------------ configurations
def test_core_configs_hold_the_rows_issue_11_names() -> None:
    s = Settings(_env_file=None)
    labels = [c.label for c in runs.core_configs(s)]
    assert labels[0] == runs.shipped_label(s)
    assert runs.BASELINE in labels and "knn" in labels
    assert any(lbl.startswith("bm25 · as shipped") for lbl in labels)
    assert any("min-max" in lbl for lbl in labels)
    assert len(labels) == len(set(labels))  # the fusion variant equal to the shipped one is not repeated
    name = "min-max" if s.fusion == "minmax" else "rrf"
    shipped_row = f"hybrid {name} {s.effective_fusion_weights[0]:g}/{s.effective_fusion_weights[1]:g}"
    assert shipped_row not in labels
    other = s.model_copy(update={"fusion_weights": (0.7, 0.3)})
    assert shipped_row in [c.label for c in runs.core_configs(other)]


def test_baseline_row_runs_the_products_text_only_mode() -> None:
    from osrag.search.query import MODES, candidates_body

    base = next(c for c in runs.core_configs(Settings(_env_file=None)) if c.label == runs.BASELINE)
    assert base.mode == "bm25-text" and base.mode in MODES
    body = json.dumps(candidates_body(base.mode, "чай", None, 7, []))
    assert '"text"' in body and "breadcrumb" not in body and "ident" not in body and "title" not in body


def test_alias_depends_on_index_shaping_settings_only() -> None:
    s = Settings(_env_file=None)
    a = runs.alias_for("p", "XQuAD ru/dev", "main", s)
    assert a.startswith("p-xquad-ru-dev-main-") and a == a.lower()
    assert (
        runs.alias_for("p", "XQuAD ru/dev", "main", s.model_copy(update={"fusion_weights": (0.5, 0.5)})) == a
    )
    assert runs.alias_for("p", "XQuAD ru/dev", "main", s.model_copy(update={"stemmer": "light_russian"})) != a


# ------------------------------------------------------------------ report
def _results() -> dict:
    def row(config: str, r10: float, mark: str = "", p: float = 0.5) -> dict:
        sig = (
            {}
            if config == runs.BASELINE
            else {m: {"p": p, "mark": mark} for m in ("recall@10", "mrr@10", "hit@5")}
        )
        return {
            "config": config,
            "recall@10": r10,
            "recall@20": r10,
            "mrr@10": r10 / 2,
            "ndcg@10": r10 / 2,
            "hit@5": r10,
            "p50_ms": 3.0,
            "p95_ms": 5.0,
            "significance": sig,
        }

    budget = {
        "150": {
            "recall_in_budget": 0.4,
            "answered": 0.5,
            "tokens_per_answered": 120.0,
            "off_topic_share": 0.3,
        }
    }
    nothing = {"150": {"answerable": 0.02, "no_answer": float("nan")}}
    s = {
        "name": "tiny set",
        "questions": 3,
        "answerable": 3,
        "no_answer": 0,
        "documents": 3,
        "chunks": 3,
        "depth": 40,
        "baseline": runs.BASELINE,
        "shipped": "shipped",
        "retrieval": [row("shipped", 0.7, "▼", 0.01), row(runs.BASELINE, 0.9)],
        "by_bucket": {
            "overlap_bucket": {
                "low": {c: {"recall@10": 0.5, "mrr@10": 0.25} for c in ("shipped", runs.BASELINE)}
            }
        },
        "bucket_sizes": {"overlap_bucket": {"low": 2}},
        "budgets": [150],
        "budget": {runs.TOPK: budget, runs.SELECTION: budget},
        "nothing_found": {runs.TOPK: nothing, runs.SELECTION: nothing},
        "stage_latency_ms": {"total": {"p50": 10.0, "p95": 20.0}},
        "seconds": 1.0,
    }
    return {
        "when": "now",
        "command": "osrag eval x",
        "machine": {"cores": 2, "cpu": "cpu", "memory": "1 GiB", "python": "3"},
        "opensearch": "3.6.0",
        "embedding_model": "navec:news-300d",
        "embedding_dimension": 300,
        "reranker": "not measured",
        "stat_test_name": "Fisher's randomization test",
        "baseline": runs.BASELINE,
        "limit": None,
        "stage_budget": 150,
        "sets": [s],
        "seconds": 2.0,
    }


def test_markdown_report_states_marks_buckets_budget_and_the_rule() -> None:
    md = report.markdown_report(_results())
    assert "| shipped | 0.700▼ |" in md  # significance mark beside the value
    assert "### By overlap_bucket (recall@10 / mrr@10)" in md and "low (n=2)" in md
    assert f"| 150 | {runs.SELECTION} | 0.400 | 0.500 | 120.0 | 0.300 | 0.020 | – |" in md
    assert "**Fails** the rule on this set" in md and "p = 0.010, significantly worse" in md
    assert "(p < 0.001" not in md
    assert "recall_vs_budget_tiny-set.png" in md
    assert "`osrag eval x`" in md


def test_terminal_table_lists_every_config_and_budget_row() -> None:
    txt = report.format_table(_results())
    assert "== tiny set" in txt and runs.BASELINE in txt and runs.SELECTION in txt
    assert "0.700▼" in txt


def test_compare_settings_refuses_an_unknown_setting_before_any_io() -> None:
    from osrag.evaluation import compare_settings

    with pytest.raises(ConfigError, match="unknown setting.*rrf_weight\\b"):
        compare_settings({"rrf_weight": (0.5, 0.5)}, golden=None, datasets=())


def test_outputs_are_strict_json_report_and_one_plot_per_set(tmp_path: Path) -> None:
    report.write_outputs(_results(), tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())  # no NaN tokens: strict JSON
    assert saved["sets"][0]["nothing_found"][runs.SELECTION]["150"]["no_answer"] is None
    assert (tmp_path / "recall_vs_budget_tiny-set.png").read_bytes()[:4] == b"\x89PNG"
    assert report.markdown_report(saved) == (tmp_path / "REPORT.md").read_text()  # re-renders the same


# ------------------------------------------------------------------ a documentation tree
def _tree(root: Path, qrels: str, queries: list[dict[str, object]], split: str = "test") -> Path:
    for rel, text in {
        "computing/about/about.md": "# О сервисе\n\nВиртуальные машины.\n",
        "networks/vpn/vpn.md": "# VPN\n\nНастройка VPN-шлюза.\n",
        "_includes/_note.md": "Примечание.\n",
    }.items():
        f = root / "corpus" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    name = "queries.jsonl" if split == "test" else f"queries-{split}.jsonl"
    (root / name).write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in queries), encoding="utf-8")
    return root


def test_a_docs_tree_is_judged_per_file_by_the_readers_doc_ids(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "docs-dev",
        "a1\tnetworks/vpn/vpn.md\t1\na2\tcomputing/about/about.md\t1\n",
        [
            {"_id": "a1", "text": "настроить шлюз VPN", "title_overlap": 1.0},
            {"_id": "a2", "text": "что такое виртуальная машина", "title_overlap": 0.0},
        ],
    )
    t = ds.load_dataset(root)
    assert isinstance(t, ds.TreeSet) and t.name == "docs-dev" and t.tolerates_failed_files
    assert t.pages["corpus/networks/vpn/vpn"] == "networks/vpn/vpn.md"
    q1 = t.queries[0]
    assert q1.relevant == {"networks/vpn/vpn.md": 1} and q1.buckets == {"title_overlap": ">= 0.8"}
    assert t.queries[1].buckets == {"title_overlap": "< 0.8"}
    # Two chunks of one file are one key; an unknown doc id stays itself (never relevant).
    src = {"doc_id": "corpus/networks/vpn/vpn", "chunk_id": "corpus/networks/vpn/vpn:3"}
    assert (
        t.key(q1, ChunkSource.of(src))
        == "networks/vpn/vpn.md"
        == t.key(q1, ChunkSource.of({**src, "chunk_id": "x:1"}))
    )
    assert t.key(q1, ChunkSource("x:2", doc_id="elsewhere/page")) == "elsewhere/page"


def test_a_docs_tree_split_reads_its_own_queries_and_refuses_unknown_files(tmp_path: Path) -> None:
    root = _tree(tmp_path / "d", "c1\tnetworks/vpn/vpn.md\t1\n", [{"_id": "c1", "text": "шлюз"}], "context")
    t = ds.load_dataset(root, "context")
    assert t.name == "d-context" and [q.qid for q in t.queries] == ["c1"]
    _tree(tmp_path / "bad", "a1\tnetworks/gone.md\t1\n", [{"_id": "a1", "text": "шлюз"}])
    with pytest.raises(ConfigError, match="judges 'networks/gone.md', not a file under"):
        ds.load_dataset(tmp_path / "bad")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="neither corpus.jsonl nor a corpus/ folder"):
        ds.load_dataset(tmp_path / "empty")


def test_stdlib_snowball_bm25_stems_folds_yo_and_ranks_by_lucene_bm25() -> None:
    from osrag.evaluation.lexical import SnowballBM25

    docs = [
        {"chunk_id": "a", "text": "Настройка VPN-шлюза для сети"},
        {"chunk_id": "b", "text": "Ёлка и ёжик. Ёлки зелёные"},
        {"chunk_id": "c", "text": "Сеть, сети, сетей: настройки сети"},
    ]
    bm = SnowballBM25(docs)
    assert bm.terms("Ёлки VPN-шлюза") == ["елк", "vpn", "шлюз"]
    assert [d["chunk_id"] for d in bm.search("елка", 5)] == ["b"]
    assert [d["chunk_id"] for d in bm.search("настроить сеть", 5)] == ["c", "a"]  # tf of сеть is higher in c
    assert bm.search("кот", 5) == [] and bm.search("сеть", 1)[0]["chunk_id"] == "c"
