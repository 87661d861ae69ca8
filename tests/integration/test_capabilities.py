"""What osrag detects on the node and adapts to it: any server line (part of the compat subset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.access import Principal
from osrag.capabilities import detect
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = [pytest.mark.integration, pytest.mark.compat]


def test_installed_rrf_pipeline_is_what_the_line_takes(admin: AliasStore) -> None:
    caps = detect(admin.cluster)
    body = admin.installed("search pipeline", admin.pipeline_name("rrf"))
    assert body is not None
    combination = body["phase_results_processors"][0]["score-ranker-processor"]["combination"]
    assert ("parameters" in combination) is caps.weighted_rrf
    assert admin.check() == []  # the adapted pipeline is not drift


def test_copies_of_one_text_take_one_candidate_on_every_line(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    text = "# Гарантия\n\nНа настольную лампу LAMP-LIGHT-MINI действует гарантия два года с даты покупки.\n"
    kb = tmp_path / "kb"
    kb.mkdir()
    for n in range(4):
        (kb / f"copy{n}.md").write_text(text, encoding="utf-8")
    (kb / "other.md").write_text("# Чай\n\nЗелёный чай заваривают водой 80 градусов.\n", encoding="utf-8")
    assert Ingester(settings).ingest([kb]).failed == []
    sc = SearchClient(settings, principal=Principal.admin_bypass())
    hits = sc.retrieve("гарантия на лампу LAMP-LIGHT-MINI", mode="hybrid", depth=5).hits
    hashes = [h.source.content_hash for h in hits]
    assert len(hashes) == len(set(hashes)) >= 1
    assert sum("LAMP-LIGHT-MINI" in h.source.text for h in hits) == 1
