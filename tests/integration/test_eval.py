"""`osrag eval` end to end on a slice of golden and a tiny BEIR set, against the live node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from osrag import evaluation as ev
from osrag.evaluation import runs
from osrag.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

DOCS = {
    "t1": "Чай улун заваривают водой температурой около девяноста градусов.",
    "t2": "Зелёный чай не любит кипятка: хватит семидесяти пяти градусов.",
    "t3": "Лампа «Свет» работает от аккумулятора до двенадцати часов.",
    "t4": "Доставка по Москве занимает один день, по области два дня.",
    "t5": "Возврат товара возможен в течение четырнадцати дней после покупки.",
    "t6": "Гарантия на лампу составляет двадцать четыре месяца.",
}
QUERIES = {
    "a1": ("Какой температуры вода нужна для улуна?", "t1", "high"),
    "a2": ("Сколько часов работает лампа Свет без сети?", "t3", "mid"),
    "a3": ("Сколько дней можно вернуть покупку?", "t5", "low"),
    "a4": ("Какая гарантия на лампу?", "t6", "high"),
}


def _tiny_beir(root: Path) -> Path:
    d = root / "tiny-ru"
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": k, "title": "", "text": v}, ensure_ascii=False) + "\n" for k, v in DOCS.items()
        )
    )
    rows = [{"_id": q, "text": t, "metadata": {"overlap_bucket": b}} for q, (t, _, b) in QUERIES.items()]
    rows.append({"_id": "n1", "text": "Какой курс биткоина сегодня?", "metadata": {"overlap_bucket": "low"}})
    (d / "queries.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{doc}\t1\n" for q, (_, doc, _) in QUERIES.items())
    (d / "qrels" / "test.tsv").write_text(qrels + "n1\tt4\t0\n")
    return d


@pytest.fixture
def prefix(unique_name: str, os_client) -> Iterator[str]:
    yield unique_name
    os_client.indices.delete(index=f"{unique_name}-*", ignore_unavailable=True, expand_wildcards="all")
    for kind in ("_index_template", "_component_template"):
        got = (
            os_client.transport.perform_request("GET", f"/{kind}/{unique_name}-*", params={"ignore": 404})
            or {}
        )
        key = "index_templates" if kind == "_index_template" else "component_templates"
        for item in got.get(key, []):
            os_client.transport.perform_request("DELETE", f"/{kind}/{item['name']}")
    pipes = os_client.transport.perform_request("GET", "/_search/pipeline", params={"ignore": 404}) or {}
    for name in pipes:
        if name.startswith(unique_name):
            os_client.transport.perform_request("DELETE", f"/_search/pipeline/{name}")


def test_eval_golden_slice_and_tiny_beir_write_one_report(
    opensearch_url: str, prefix: str, tmp_path: Path
) -> None:
    base = Settings(url=opensearch_url, embedding_model="navec:news-300d", rerank=False, _env_file=None)
    cfg = ev.EvalConfig(
        golden=REPO / "golden" / "golden.jsonl",
        datasets=(_tiny_beir(tmp_path),),
        out_dir=tmp_path / "report",
        budget=600,
        budgets=(150, 600),
        prefix=prefix,
        limit=10,
        chunking_variants=False,
        workers=2,
        command="test",
    )
    report = ev.run(base, cfg)
    golden, beir = report["sets"]
    assert (golden["name"], beir["name"]) == ("golden", "tiny-ru")
    assert golden["questions"] == 10 and beir["questions"] == 5 and beir["no_answer"] == 1
    assert beir["documents"] == 6 and beir["chunks"] == 6  # one BEIR row, one document, one chunk here
    for s in (golden, beir):
        names = [r["config"] for r in s["retrieval"]]
        assert names[0] == s["shipped"] and runs.BASELINE in names and "knn" in names
        for row in s["retrieval"]:
            for metric in ("recall@10", "recall@20", "mrr@10", "ndcg@10", "hit@5"):
                assert 0.0 <= row[metric] <= 1.0, (s["name"], row["config"], metric)
            assert row["recall@10"] <= row["recall@20"]
            assert (row["config"] == runs.BASELINE) == (row["significance"] == {})
        for method, rows in s["budget"].items():
            assert rows["150"]["tokens_per_answered"] <= 150 or rows["150"]["answered"] == 0, method
            assert (
                rows["600"]["recall_in_budget"] >= rows["150"]["recall_in_budget"] - 1e-9
                or method != runs.TOPK
            )
        assert set(s["nothing_found"]) == {runs.TOPK, runs.SELECTION}
    # Lexical retrieval finds every answer of the tiny set: they share words with their question.
    base_row = next(r for r in beir["retrieval"] if r["config"] == runs.BASELINE)
    assert base_row["recall@10"] == 1.0
    assert set(beir["by_bucket"]["overlap_bucket"]) == {"high", "mid", "low"}
    assert beir["bucket_sizes"]["overlap_bucket"]["low"] == 1  # the no-answer question is not a bucket member
    assert set(golden["by_bucket"]["type"]) <= {
        "exact_id",
        "paraphrase",
        "two_conditions",
        "table",
        "code",
        "multi_doc",
    }
    out = tmp_path / "report"
    saved = json.loads((out / "results.json").read_text())
    assert [s["name"] for s in saved["sets"]] == ["golden", "tiny-ru"]
    md = (out / "REPORT.md").read_text()
    assert "## golden" in md and "## tiny-ru" in md and "### By overlap_bucket" in md
    assert "navec:news-300d" in md and "no rerank gain is claimed" in md
    for name in ("recall_vs_budget_golden.png", "recall_vs_budget_tiny-ru.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_settings_scores_an_override_against_the_baseline(
    opensearch_url: str, prefix: str, tmp_path: Path
) -> None:
    base = Settings(url=opensearch_url, embedding_model="navec:news-300d", rerank=False, _env_file=None)
    got = ev.compare_settings(
        {"fusion_weights": (0.5, 0.5), "fusion": "minmax"},
        golden=None,
        datasets=[_tiny_beir(tmp_path)],
        base=base,
        budgets=(300,),
        prefix=prefix,
    )
    res = got["tiny-ru"]
    assert res["shipped"]["config"] == "shipped default · hybrid minmax 0.5/0.5"
    assert res["baseline"]["config"] == runs.BASELINE and res["baseline"]["recall@10"] == 1.0
    assert set(res["shipped"]["significance"]) == {"recall@10", "mrr@10", "hit@5"}
    assert set(res["budget"]) == {runs.TOPK, runs.SELECTION} and "300" in res["budget"][runs.SELECTION]
    assert res["nothing_found"][runs.SELECTION]["300"]["no_answer"] in (0.0, 1.0)


def _tiny_tree(root: Path) -> Path:
    """A docs tree in vkdocs-ru-dev's layout: Markdown files under corpus/, judged per file."""
    pages = {
        "network/vpn/vpn.md": "# VPN-шлюз\n\nVPN-шлюз соединяет облачную сеть с офисной по защищённому туннелю.\n",
        "network/firewall/firewall.md": "# Файрвол\n\nПравила файрвола разрешают или запрещают входящий трафик.\n",
        "compute/disks/disks.md": "# Диски\n\nДиск можно расширить без остановки виртуальной машины.\n",
        "compute/index.md": "# Вычисления\n",  # a heading-only landing page: skipped, not a failure
    }
    for rel, text in pages.items():
        f = root / "corpus" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    queries = [
        ("t1", "как соединить облачную сеть с офисом", "network/vpn/vpn.md"),
        ("t2", "правила для входящего трафика", "network/firewall/firewall.md"),
        ("t3", "расширить диск виртуальной машины", "compute/disks/disks.md"),
    ]
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in queries), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": t, "title_overlap": 0.0}, ensure_ascii=False) + "\n"
            for q, t, _ in queries
        ),
        encoding="utf-8",
    )
    return root


def test_eval_ingests_a_docs_tree_and_scores_it_per_file_beside_the_stdlib_bm25(
    opensearch_url: str, prefix: str, tmp_path: Path
) -> None:
    base = Settings(url=opensearch_url, embedding_model="navec:news-300d", rerank=False, _env_file=None)
    cfg = ev.EvalConfig(
        datasets=(_tiny_tree(tmp_path / "docs-dev"),),
        out_dir=tmp_path / "report",
        budget=300,
        budgets=(300,),
        prefix=prefix,
        workers=1,
        command="test",
    )
    (tree,) = ev.run(base, cfg)["sets"]
    assert (tree["name"], tree["questions"], tree["documents"]) == ("docs-dev", 3, 4)
    assert tree["ingest_failed"] == []  # the landing page is skipped, not failed
    rows = {r["config"]: r for r in tree["retrieval"]}
    stdlib = next(r for name, r in rows.items() if "stdlib" in name)
    assert stdlib["recall@10"] == 1.0  # each question shares a stem with its page only
    assert rows[runs.BASELINE]["recall@10"] == 1.0
    # The shipped hybrid and the BM25 head are tested against the stdlib reference too.
    assert set(rows[tree["shipped"]]["vs_stdlib"]) == {"recall@10", "mrr@10", "hit@5"}
    assert "vs_stdlib" in rows[runs.BM25_HEAD] and "vs_stdlib" not in rows[runs.BASELINE]
    sel = tree["budget"][runs.SELECTION]["300"]
    assert (
        sel["recall_in_budget"] == 1.0 and tree["nothing_found"][runs.SELECTION]["300"]["answerable"] == 0.0
    )
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert "against the stdlib Snowball BM25 over the same chunks" in md and "### By title_overlap" in md
