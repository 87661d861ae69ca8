"""``osrag study``: the measurement commands that were ``python -m`` scripts with their own parsers."""

from __future__ import annotations

import re

from click.testing import CliRunner

from osrag.cli import cli
from osrag.search import gate


def test_study_lists_its_commands() -> None:
    r = CliRunner().invoke(cli, ["study", "--help"])
    assert r.exit_code == 0, r.output
    for name in ("perturb", "floors", "contextual", "gatesweep"):
        assert re.search(rf"^\s+{name}\s", r.output, re.M), name


def test_floors_reproduces_the_shipped_navec_floor() -> None:
    """The floor shipped for navec is what ``study floors`` measures on the shipped off-topic text."""
    r = CliRunner().invoke(cli, ["study", "floors", "navec:news-300d"])
    assert r.exit_code == 0, r.output
    q95 = float(re.search(r"0\.95: ([0-9.]+)", r.output).group(1))  # type: ignore[union-attr]
    assert abs(q95 - gate.COSINE_FLOORS["navec"]) < 0.001


def test_a_bad_floor_grid_is_one_line_naming_the_option() -> None:
    r = CliRunner().invoke(cli, ["study", "gatesweep", "--floors", "0.5,high"])
    assert r.exit_code == 2
    assert "--floors" in r.output and "high" in r.output
    assert "Traceback" not in r.output


def test_floors_needs_a_model() -> None:
    r = CliRunner().invoke(cli, ["study", "floors"])
    assert r.exit_code == 2 and "MODELS" in r.output
