"""The import graph of osrag/: no circles, and the settings' floor imports nothing above it.

Read from the source (no module is imported), counting imports inside functions too: the old
circle settings -> counting -> embedding -> settings ran through a lazy import in a validator.
Imports under ``if TYPE_CHECKING:`` are left out, they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "osrag"
#: What the settings stand on: the closed word sets, their checks, the errors, the tokenizer path.
SETTINGS_FLOOR = {
    "osrag.errors",
    "osrag.model_defaults",
    "osrag.settings_checks",
    "osrag.tokenizer_files",
    "osrag.vocabulary",
}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except what sits under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith("osrag")
            ):
                base = str(node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    deps.add(sub if sub in modules else base)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_no_import_circles() -> None:
    assert _circles(_graph(_modules())) == []


def test_the_settings_floor_imports_nothing_above_it() -> None:
    graph = _graph(_modules())
    assert _reach(graph, "osrag.settings") <= SETTINGS_FLOOR
    assert _reach(graph, "osrag.tokenizer_files") == set()


def test_a_lazy_import_closing_a_circle_is_found() -> None:
    """The checks see imports inside functions and skip TYPE_CHECKING blocks."""
    graph = {
        "a": {"b"},
        "b": {"a"},  # e.g. an import inside a validator
        "c": set(),
    }
    assert _circles(graph) == [["a", "b"]]
    code = "if TYPE_CHECKING:\n    import x\ndef f():\n    from osrag import settings\n"
    names = [n for n in _runtime_nodes(ast.parse(code)) if isinstance(n, ast.ImportFrom | ast.Import)]
    assert [ast.unparse(n) for n in names] == ["from osrag import settings"]
