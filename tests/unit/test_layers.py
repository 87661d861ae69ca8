"""The package's layering, read from the imports in the source (nothing is imported to check it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "osrag"


def _imports(folder: str) -> dict[str, set[str]]:
    """Each module under ``osrag/<folder>`` -> the ``osrag.*`` modules it imports (any depth, lazy ones too)."""
    out: dict[str, set[str]] = {}
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("osrag"):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("osrag"))
        out[str(path.relative_to(PACKAGE))] = found
    return out


@pytest.mark.parametrize(
    ("folder", "never"),
    [
        ("store", ("osrag.ingest", "osrag.admin", "osrag.search", "osrag.cli", "osrag.service")),
        ("ingest", ("osrag.admin", "osrag.search", "osrag.cli", "osrag.service")),
        ("admin", ("osrag.ingest", "osrag.search", "osrag.cli", "osrag.service")),
        ("search", ("osrag.admin", "osrag.ingest", "osrag.cli", "osrag.service")),
    ],
)
def test_a_layer_imports_nothing_it_must_not(folder: str, never: tuple[str, ...]) -> None:
    bad = {
        module: sorted(name for name in names if name.startswith(never))
        for module, names in _imports(folder).items()
        if any(name.startswith(never) for name in names)
    }
    assert bad == {}
