"""What the command modules share: JSON output, and the shipped defaults help texts name."""

from __future__ import annotations

import json
from typing import Any

import click

from osrag.settings import Settings


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON, Cyrillic as is."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def default_of(name: str) -> Any:
    """The shipped default of setting ``name``: a help text names it from here, never by hand,
    so ``--help`` cannot drift from what runs (tests/unit/test_vocabulary.py checks it)."""
    return Settings.model_fields[name].get_default(call_default_factory=False)
