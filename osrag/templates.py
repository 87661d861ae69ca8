"""Load the JSON that OpenSearch reads from ``index_templates/`` and ``pipelines/``.

The files stay plain JSON an admin can read; values that depend on settings are
written as ``"{{name}}"`` placeholders and substituted here with typed values
(a placeholder that is a whole string becomes the parameter itself, so numbers
stay numbers and lists stay lists). Keys starting with ``_meta`` inside a
component are documentation for admins and are kept.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from osrag.errors import ConfigError

TEMPLATE_VERSION = 3  # 3: content_hash keyword
PIPELINE_VERSION = 1

# Shipped inside the wheel as package data (see pyproject.toml); in a checkout they are the
# top-level folders of the same names. Resolved lazily: no I/O at import.
TEMPLATES_FOLDER = "index_templates"
PIPELINES_FOLDER = "pipelines"

_WHOLE = re.compile(r"^\{\{(\w+)\}\}$")
_INLINE = re.compile(r"\{\{(\w+)\}\}")


def render(node: Any, params: dict[str, Any]) -> Any:
    """Substitute placeholders recursively; an unknown placeholder is an error."""
    if isinstance(node, dict):
        return {k: render(v, params) for k, v in node.items()}
    if isinstance(node, list):
        return [render(v, params) for v in node]
    if isinstance(node, str):
        m = _WHOLE.match(node)
        if m:
            return _param(params, m.group(1))
        return _INLINE.sub(lambda mm: str(_param(params, mm.group(1))), node)
    return node


def _param(params: dict[str, Any], name: str) -> Any:
    if name not in params:
        raise ConfigError(f"template placeholder {{{{{name}}}}} has no value")
    return params[name]


def read(path: Traversable) -> dict[str, Any]:
    """One shipped JSON file as it stands (placeholders not substituted)."""
    try:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read JSON ({exc})") from exc
    return raw


def load(path: Traversable, params: dict[str, Any]) -> dict[str, Any]:
    return render(read(path), params)


def resource(folder: str, name: str) -> Traversable:
    """One JSON file shipped with osrag (``index_templates/`` or ``pipelines/``)."""
    return resources.files("osrag").joinpath(folder, f"{name}.json")


def load_template(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return load(resource(TEMPLATES_FOLDER, name), params)


def load_pipeline(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return load(resource(PIPELINES_FOLDER, name), params)


def chunk_properties() -> dict[str, Any]:
    """The chunk fields of the strict mapping (``osrag-chunks.json``), as shipped (they take no
    parameters); the vector field is added per index (``knn-field.json``)."""
    properties = read(resource(TEMPLATES_FOLDER, "osrag-chunks"))["template"]["mappings"]["properties"]
    return render(properties, {})  # a placeholder there would be an error


def fingerprint(*parts: Any) -> str:
    """A short stable hash of model identity and template content, for index names."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:10]
