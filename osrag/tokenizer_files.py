"""Where a configured budget tokenizer lives (``OSRAG_BUDGET_TOKENIZER``), found without loading it.

Standard library only. The settings check the path when they are read (a stat,
no import), and ``osrag.counting`` loads the tokenizer from the same answer on the first search.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE_PREFIX = "package:"
_PACKAGE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:/(.+))?$")


@dataclass(frozen=True)
class Location:
    """Where a configured tokenizer lives: a ``tokenizer.json`` file, or a directory for transformers."""

    spec: str  # the setting as written
    kind: str  # "file" | "directory" | "package"
    path: Path
    json_file: bool  # True: tokenizers.Tokenizer.from_file(path); False: AutoTokenizer on a directory


def locate(spec: str) -> Location:
    """Resolve the setting to files (no tokenizer is loaded). ``ValueError`` says what is wrong."""
    text = spec.strip()
    if not text:
        raise ValueError("is empty (unset it to count in the embedding model's tokenizer)")
    if text.startswith(PACKAGE_PREFIX):
        return _locate_package(text)
    path = Path(text).expanduser()
    if path.is_file():
        return Location(text, "file", path, json_file=True)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return Location(text, "directory", path / "tokenizer.json", json_file=True)
        if any((path / f).is_file() for f in ("tokenizer_config.json", "vocab.txt", "tokenizer.model")):
            return Location(text, "directory", path, json_file=False)
        raise ValueError(f"directory {path} holds no tokenizer.json, tokenizer_config.json or vocab")
    raise ValueError(f"no such file or directory: {path} (or name a package as package:NAME)")


def _locate_package(text: str) -> Location:
    m = _PACKAGE.match(text[len(PACKAGE_PREFIX) :])
    if not m:
        raise ValueError("wants package:NAME or package:NAME/sub/dir (NAME a top-level package)")
    name, sub = m.group(1), m.group(2)
    try:
        spec = importlib.util.find_spec(name)  # a top-level name: found, not imported
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ValueError(f"no installed package {name!r}")
    roots = list(spec.submodule_search_locations or [])
    if not roots:
        raise ValueError(f"{name!r} is a module, not a package that could carry tokenizer files")
    base = Path(roots[0])
    target = (base / sub) if sub else base
    if sub and not target.resolve().is_relative_to(base.resolve()):
        raise ValueError(f"{sub!r} is outside package {name!r}")
    if target.is_file():
        return Location(text, "package", target, json_file=True)
    if not target.is_dir():
        raise ValueError(f"package {name!r} has no {sub!r}")
    found = sorted(p for p in target.rglob("tokenizer.json") if "__pycache__" not in p.parts)
    if len(found) == 1:
        return Location(text, "package", found[0], json_file=True)
    if len(found) > 1:
        subs = ", ".join(f"package:{name}/{p.parent.relative_to(base).as_posix()}" for p in found[:5])
        raise ValueError(f"package {name!r} carries {len(found)} tokenizers; name one: {subs}")
    if sub and any((target / f).is_file() for f in ("tokenizer_config.json", "vocab.txt")):
        return Location(text, "package", target, json_file=False)
    raise ValueError(f"package {name!r} ships no tokenizer.json")
