"""`osrag ingest` of a mixed folder against the real node: every format indexed, with its location.

The files are generated here (tests/fixtures_gen.py): Markdown, a three-page PDF,
a DOCX, an HTML help page and a PPTX deck, all in Russian, plus an encrypted, a
broken and an image-only PDF and an explicitly named ``.exe``. The good files
must be found by search with page / slide / anchor in their passages; each bad
one must be a single line naming the file and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from osrag.access import Principal
from osrag.cli import cli
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests import fixtures_gen as gen
from tests.integration.conftest import drop_alias

#: These tests are about other things than access: they read as the admin bypass (no ACL clause).
ALL = Principal.admin_bypass()

pytestmark = pytest.mark.integration


@pytest.fixture
def small_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"chunk_max_tokens": 30, "chunk_min_tokens": 3, "chunk_overlap": 0.0})


@pytest.fixture
def admin(small_settings: Settings) -> Iterator[AliasStore]:
    adm = AliasStore(small_settings)
    try:
        adm.install()
        yield adm
    finally:
        drop_alias(adm.cluster.client, small_settings.alias)


def _env(s: Settings) -> dict[str, str]:
    return {
        "OSRAG_URL": s.url,
        "OSRAG_ALIAS": s.alias,
        "OSRAG_CACHE_DIR": str(s.models_dir.parent),
        "OSRAG_EMBEDDING_MODEL": "navec:news-300d",
        "OSRAG_RERANK": "false",
        "OSRAG_CHUNK_MAX_TOKENS": str(s.chunk_max_tokens),
        "OSRAG_CHUNK_MIN_TOKENS": str(s.chunk_min_tokens),
        "OSRAG_CHUNK_OVERLAP": str(s.chunk_overlap),
    }


def _corpus(root: Path) -> Path:
    kb = root / "kb"
    kb.mkdir(parents=True)
    (kb / "faq.md").write_text(
        "# Часто задаваемые вопросы\n\n## Смена пароля\n\n"
        "Пароль личного кабинета меняется в разделе «Безопасность» за одну минуту.\n",
        encoding="utf-8",
    )
    gen.make_pdf(kb / "warranty.pdf")
    gen.make_docx(kb / "loyalty.docx")
    gen.make_html(kb / "payment.html")
    gen.make_pptx(kb / "training.pptx")
    gen.make_encrypted_pdf(kb / "bad" / "secret.pdf")
    gen.make_broken_pdf(kb / "bad" / "broken.pdf")
    gen.make_image_pdf(kb / "bad" / "scan.pdf")
    (kb / "bad" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))  # not a document: not listed
    return kb


def _found(client: SearchClient, question: str, doc_id: str, phrase: str) -> dict[str, object]:
    """The passage of ``doc_id`` holding ``phrase`` among the answers to ``question``."""
    env = client.search(question, budget_tokens=2000, rerank=False)
    for p in env.passages:
        if p.doc_id == doc_id and phrase in p.text:
            return p.model_dump()
    got = [(p.doc_id, p.text[:60]) for p in env.passages]
    raise AssertionError(f"no passage of {doc_id} with {phrase!r} for {question!r}: {got}")


def test_mixed_folder_is_indexed_with_locations_and_bad_files_reported(
    admin: AliasStore, small_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    kb = _corpus(tmp_path)
    tool = tmp_path / "installer.exe"
    tool.write_bytes(b"MZ\x90\x00" + bytes(200))
    runner = CliRunner()

    res = runner.invoke(cli, ["ingest", str(kb), str(tool)], env=_env(small_settings))
    assert res.exit_code == 1, res.output  # some files failed: the exit code says so
    failed = [ln for ln in res.stderr.splitlines() if ln.startswith("failed: ")]
    reasons = {Path(ln.split(": ", 2)[1]).name: ln.split(": ", 2)[2] for ln in failed}
    assert set(reasons) == {"secret.pdf", "broken.pdf", "scan.pdf", "installer.exe"}, res.stderr
    assert reasons["secret.pdf"].startswith("encrypted PDF")
    assert reasons["broken.pdf"].startswith("broken PDF")
    assert reasons["scan.pdf"].startswith("no text layer")
    assert reasons["installer.exe"].startswith("unsupported format .exe")
    assert "indexed 5" in res.stdout and "failed 4" in res.stdout, res.stdout
    assert "\x1b[" not in res.stderr and "doc/s" not in res.stderr  # no progress bar off a terminal

    client = SearchClient(small_settings, principal=ALL)
    pdf = _found(
        client,
        "гарантийный ремонт чайника ТЕА15 в сервисном центре",
        f"{kb.name}/warranty",
        "сервисный центр",
    )
    assert (pdf["source_format"], pdf["page"], pdf["page_end"]) == ("pdf", 2, 2)
    delivery = _found(
        client, "самовывоз из пункта выдачи или почта России", f"{kb.name}/warranty", "почта России"
    )
    assert delivery["page_end"] == 3  # the passage may begin on page 2: its range says so
    refund = _found(client, "вернуть товар надлежащего качества", f"{kb.name}/warranty", "четырнадцати")
    assert refund["page"] == 1

    html = _found(client, "рассрочка на шесть месяцев", f"{kb.name}/payment", "шесть месяцев")
    assert (html["source_format"], html["anchor"]) == ("html", "rassrochka")
    assert html["title"] == "Справка: оплата"

    pptx = _found(client, "время ответа в чате и по почте", f"{kb.name}/training", "4 часа")
    assert (pptx["source_format"], pptx["slide"]) == ("pptx", 3)

    docx = _found(client, "уровни участников золотой кешбэк", f"{kb.name}/loyalty", "Золотой")
    assert docx["source_format"] == "docx" and docx["page"] is None and docx["anchor"] is None
    assert docx["heading_path"][-1] == "Уровни участников"

    md = _found(client, "как сменить пароль личного кабинета", f"{kb.name}/faq", "Безопасность")
    assert md["source_format"] is None and md["page"] is None

    # The readable view cites the location; a second ingest skips what did not change.
    shown = runner.invoke(
        cli,
        ["search", "рассрочка на шесть месяцев", "--no-rerank", "--public-only"],
        env=_env(small_settings),
    )
    assert shown.exit_code == 0, shown.output
    # The source is relative to the ingest root within its collection: no local absolute path.
    assert "kb/payment.html#rassrochka" in shown.stdout and str(kb) not in shown.stdout
    again = runner.invoke(cli, ["ingest", str(kb), "--json"], env=_env(small_settings))
    summary = json.loads(again.stdout)
    assert (summary["indexed"], summary["skipped"], summary["failed"]) == (0, 5, 3), summary
    assert again.stderr == ""  # --json: no bar, no per-file lines on stderr
