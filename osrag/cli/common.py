"""What the command modules share: JSON output."""

from __future__ import annotations

import json
from typing import Any

import click


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON, Cyrillic as is."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
