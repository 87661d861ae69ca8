"""Query variants on a live node: a question in the wrong layout, in translit or misspelt finds what
the clean question finds (osrag.search.variants riding on the one search request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osrag.access import Principal
from osrag.evaluation import perturb
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings

pytestmark = pytest.mark.integration

ALL = Principal.admin_bypass()

DOCS = {
    "delivery": "# Доставка\n\nДоставка по Москве стоит 300 рублей, бесплатно при заказе от 3000 рублей. "
    "Курьер привозит заказ на следующий день после оплаты.\n",
    "returns": "# Возврат товара\n\nВернуть товар можно в течение 14 дней с момента покупки. "
    "Деньги возвращаются на карту за пять рабочих дней.\n",
    "payment": "# Оплата\n\nОплатить заказ можно картой на сайте или наличными курьеру. "
    "Юридические лица платят по счёту.\n",
    "tea": "# Зелёный чай TEA15\n\nЯпонский зелёный чай сенча первого сбора. Заваривать водой "
    "75 градусов две минуты.\n",
    "security": "# Группа безопасности\n\nГруппа безопасности ограничивает входящий трафик "
    "виртуальной машины: правила разрешают порты и адреса.\n",
}
QUESTIONS = {
    "delivery": "Сколько стоит доставка по Москве?",
    "returns": "В течение скольких дней можно вернуть товар?",
    "security": "Как группа безопасности ограничивает трафик виртуальной машины?",
}


@pytest.fixture
def client(admin: Any, settings: Settings, tmp_path: Path) -> SearchClient:
    for name, text in DOCS.items():
        (tmp_path / f"{name}.md").write_text(text, encoding="utf-8")
    report = Ingester(settings, admin=admin).ingest([tmp_path])
    assert report.indexed == len(DOCS)
    return SearchClient(settings, principal=ALL)


def top_doc(client: SearchClient, question: str, mode: str) -> str:
    hits = client.retrieve(question, mode=mode, depth=5).hits
    assert hits, f"nothing found for {question!r} ({mode})"
    return str(hits[0].source.doc_id).rsplit("/", 1)[-1]


def test_broken_questions_find_the_clean_ones_top_document(client: SearchClient) -> None:
    # One ingest for every case (a live node shared by the suite): each kind, each head.
    for mode in ("bm25", "hybrid"):
        for name, clean in QUESTIONS.items():
            assert top_doc(client, clean, mode) == name
            for kind in ("layout", "translit", "typos"):
                broken = perturb.perturb(clean, kind, seed=3, qid=name)
                assert broken != clean
                assert top_doc(client, broken, mode) == name, (mode, kind, broken)
    # The whole search: the gate lets the re-read question through, the right passage leads.
    answer = client.search("crjkmrj cnjbn ljcnfdrf gj vjcrdt?", budget_tokens=400)
    assert answer.status != "nothing_relevant"
    assert answer.passages and answer.passages[0].doc_id.endswith("delivery")
