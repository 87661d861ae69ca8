from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from osrag.settings import PRODUCTION_EMBEDDING_MODEL, Settings


def test_defaults_point_at_a_local_cluster_and_production_models(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(__import__("os").environ):
        if k.startswith("OSRAG_"):
            monkeypatch.delenv(k)
    s = Settings(_env_file=None)
    assert s.url == "http://127.0.0.1:9200"
    assert s.alias == "osrag-chunks"
    assert s.embedding_model is None and s.effective_embedding_model == PRODUCTION_EMBEDDING_MODEL
    assert s.tls_verify is False  # plain http
    assert s.budget_tokens > 0


def test_env_prefix_and_tls_default_on_for_https(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_URL", "https://search.example:9200/")
    monkeypatch.setenv("OSRAG_ALIAS", "kb")
    s = Settings(_env_file=None)
    assert s.url == "https://search.example:9200"
    assert s.alias == "kb"
    assert s.tls_verify is True
    monkeypatch.setenv("OSRAG_VERIFY_CERTS", "false")
    assert Settings(_env_file=None).tls_verify is False


def test_dotenv_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OSRAG_ALIAS", raising=False)
    env = tmp_path / ".env"
    env.write_text("OSRAG_ALIAS=from-dotenv\nOSRAG_BUDGET_TOKENS=777\n")
    s = Settings(_env_file=str(env))
    assert (s.alias, s.budget_tokens) == ("from-dotenv", 777)


def test_password_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_USER", "admin")
    monkeypatch.setenv("OSRAG_PASSWORD", "hunter2-secret")
    s = Settings(_env_file=None)
    assert "hunter2-secret" not in repr(s)
    assert "hunter2-secret" not in str(s.model_dump())
    assert s.redacted()["password"] == "***"
    assert s.password is not None and s.password.get_secret_value() == "hunter2-secret"


def test_bad_url_names_the_setting() -> None:
    with pytest.raises(ValidationError) as err:
        Settings(url="localhost:9200", _env_file=None)
    assert "OSRAG_URL" in str(err.value)
