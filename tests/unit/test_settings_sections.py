"""Settings come in sections: each is a small model with its own checks, readable on its own, and
``Settings`` is exactly their union (no setting outside a section, none in two)."""

from __future__ import annotations

import pytest

from osrag.errors import InvalidSetting
from osrag.settings import (
    ConnectionSettings,
    IngestSettings,
    SearchSettings,
    SelectionSettings,
    ServeSettings,
    Settings,
)


def test_every_setting_is_in_exactly_one_section() -> None:
    seen: dict[str, str] = {}
    for section in Settings.SECTIONS:
        for name in section.model_fields:
            assert name not in seen, f"{name} is in {seen[name]} and {section.__name__}"
            seen[name] = section.__name__
    assert set(seen) == set(Settings.model_fields)
    assert Settings.section_of("serve_port") is ServeSettings
    assert Settings.section_of("gate_cosine_floor") is SelectionSettings
    with pytest.raises(KeyError):
        Settings.section_of("no_such_setting")


def test_settings_is_every_section() -> None:
    s = Settings()
    for section in Settings.SECTIONS:
        assert isinstance(s, section)


def test_a_section_reads_only_its_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bad value of another section is not this section's business...
    monkeypatch.setenv("OSRAG_URL", "not a url")
    monkeypatch.setenv("OSRAG_SERVE_PORT", "9090")
    assert ServeSettings().serve_port == 9090
    assert not hasattr(ServeSettings(), "url")
    # ...but the whole is refused, naming the variable.
    with pytest.raises(InvalidSetting, match="OSRAG_URL"):
        Settings()


def test_a_section_applies_its_own_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_SERVE_PORT", "0")
    with pytest.raises(InvalidSetting, match="OSRAG_SERVE_PORT"):
        ServeSettings()
    monkeypatch.delenv("OSRAG_SERVE_PORT")
    with pytest.raises(InvalidSetting, match="OSRAG_CHUNK_MAX_TOKENS"):
        IngestSettings(chunk_max_tokens=100, chunk_min_tokens=100)
    # The cross-field credential check lives with the connection, and holds there alone.
    with pytest.raises(InvalidSetting):
        ConnectionSettings(url="http://u:p@127.0.0.1:9200", user="other")


def test_section_values_equal_the_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_BUDGET_TOKENS", "777")
    monkeypatch.setenv("OSRAG_CANDIDATE_DEPTH", "55")
    whole, part = Settings(), SearchSettings()
    for name in SearchSettings.model_fields:
        assert getattr(whole, name) == getattr(part, name), name
    assert part.budget_tokens == 777 and part.candidate_depth == 55


def test_a_section_never_shows_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_SERVE_JWT_KEY", "s3cret-value-0123456789abcdef0123")
    text = repr(ServeSettings()) + str(ServeSettings().model_dump())
    assert "s3cret" not in text
    c = ConnectionSettings(url="http://alice:pw-9x@127.0.0.1:9200")
    assert "pw-9x" not in repr(c) and "pw-9x" not in c.model_dump_json()
