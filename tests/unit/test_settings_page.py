"""docs/settings.md is the page tools/settings_table.py makes from the code (no hand-kept copy)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from osrag.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "tools" / "settings_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_settings_page_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == _tool().page(), "docs/settings.md is stale: run python tools/settings_table.py"


def test_every_setting_has_its_row() -> None:
    text = _tool().page()
    for name in Settings.model_fields:
        assert f"| `OSRAG_{name.upper()}` |" in text, name
