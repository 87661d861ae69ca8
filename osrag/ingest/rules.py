"""The rules file: metadata and exclusion by path, for trees that do not carry front matter in every file.

``osrag.yaml`` at an ingest root (or ``--rules FILE``)::

    exclude: [_includes/, node_modules/, drafts/, "*.draft.md"]
    rules:
      - paths: archive/            # a glob or a list of globs, matched like .gitignore
        archived: true
      - name: internal pages       # optional: how the ingest report names the rule
        paths: [internal/, "hr/*.md"]
        acl: [staff]
        tenant: acme
        category: internal
    vars:                          # {var(cloud)} and the like, substituted by the Markdown reader
      cloud: VK Cloud

Globs are relative to the ingest root and use ``.gitignore`` syntax (``pathspec``). Every rule
whose globs match a file applies, in file order, a later rule overriding an earlier one key by
key; front matter wins over every rule. Rule values are typed exactly as front matter is
(``osrag.ingest.frontmatter``), so ``archived: on`` is refused here too. Any problem in the file is a
``ConfigError`` naming the file and the rule: a rules file that is half read could make
restricted documents public, so the ingest does not start.

Pure apart from reading the one file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
import yaml

from osrag.errors import ConfigError
from osrag.ingest.frontmatter import FrontMatterError, read_block

#: The file looked for at each ingest root.
RULES_FILE = "osrag.yaml"
#: What a rule may set: the access and ranking metadata of the files it matches.
RULE_KEYS = ("archived", "category", "acl", "tenant")
_TOP_KEYS = ("exclude", "rules", "vars")
_RULE_OWN = ("paths", "name")
#: A variable name as ``{var(NAME)}`` / ``--var NAME=VALUE`` write it.
VAR_NAME = re.compile(r"^[A-Za-z_][\w.-]{0,99}$")


@dataclass(frozen=True)
class Rule:
    """One rule: the globs it matches and the typed fields it sets."""

    name: str
    patterns: tuple[str, ...]
    fields: Mapping[str, Any]

    def matches(self, rel: str) -> bool:
        return _spec(self.patterns).match_file(rel)


@dataclass(frozen=True)
class Rules:
    """A parsed rules file (``Rules()`` is the empty one: nothing excluded, nothing set)."""

    source: str = ""
    exclude: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)

    def excluded_by(self, rel: str) -> str | None:
        """The exclusion glob that leaves ``rel`` (a path relative to the root) out, or None."""
        if not self.exclude or not _spec(self.exclude).match_file(rel):
            return None
        return next((p for p in self.exclude if _spec((p,)).match_file(rel)), self.exclude[0])

    def fields_for(self, rel: str) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The fields the rules set on ``rel`` (later rules override earlier ones) and the rules applied."""
        out: dict[str, Any] = {}
        applied: list[str] = []
        for rule in self.rules:
            if rule.matches(rel):
                out.update(rule.fields)
                applied.append(rule.name)
        return out, tuple(applied)

    def with_variables(self, extra: Mapping[str, str]) -> Rules:
        """These rules with ``extra`` variables (``--var``) set over the file's ``vars``."""
        return Rules(self.source, self.exclude, self.rules, {**self.variables, **extra})


_SPECS: dict[tuple[str, ...], pathspec.GitIgnoreSpec] = {}


def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    got = _SPECS.get(patterns)
    if got is None:
        got = _SPECS[patterns] = pathspec.GitIgnoreSpec.from_lines(patterns)
    return got


def load_rules(path: Path) -> Rules:
    """The rules file at ``path``, or a ``ConfigError`` naming the file and what is wrong."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"rules file {name}: cannot read ({getattr(exc, 'strerror', None) or exc})"
        ) from exc
    return parse_rules(text, name)


def rules_at(root: Path) -> Rules | None:
    """The ``osrag.yaml`` at an ingest root, None when there is none."""
    path = root / RULES_FILE
    return load_rules(path) if path.is_file() else None


def parse_rules(text: str, name: str = RULES_FILE) -> Rules:
    """Rules from the file's text; ``name`` is what errors call the file."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"rules file {name} is not valid YAML{where}") from exc
    if node is None:
        return Rules(source=name)
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"rules file {name} must be a mapping with exclude:, rules: and vars:")
    top = _mapping(node, name, "the file")
    for key in top:
        if key not in _TOP_KEYS:
            raise ConfigError(f"rules file {name}: unknown key {key!r}{_did_you_mean(key, _TOP_KEYS)}")
    exclude = _globs(top.get("exclude"), name, "exclude")
    rules_node = top.get("rules")
    rules: list[Rule] = []
    if rules_node is not None:
        if not isinstance(rules_node, yaml.SequenceNode):
            raise ConfigError(f"rules file {name}: 'rules' must be a list of rules")
        for i, item in enumerate(rules_node.value, start=1):
            rules.append(_rule(item, name, i))
    return Rules(source=name, exclude=exclude, rules=tuple(rules), variables=_vars(top.get("vars"), name))


def _mapping(node: yaml.MappingNode, name: str, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode):
            raise ConfigError(f"rules file {name}: keys of {what} must be plain names")
        key = str(k.value).strip()
        if key.lower() in out:
            raise ConfigError(f"rules file {name}: {what} gives {key!r} twice")
        out[key.lower()] = v
    return out


def _globs(node: Any, name: str, what: str) -> tuple[str, ...]:
    if node is None:
        return ()
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    out: list[str] = []
    for item in items:
        if not isinstance(item, yaml.ScalarNode) or not str(item.value).strip():
            raise ConfigError(f"rules file {name}: {what} must be a glob or a list of globs")
        out.append(str(item.value).strip())
    try:
        _spec(tuple(out))
    except (ValueError, TypeError) as exc:  # pathspec refuses e.g. a lone '!'
        raise ConfigError(f"rules file {name}: {what} has a bad glob: {exc}") from exc
    return tuple(out)


def _rule(node: Any, name: str, number: int) -> Rule:
    where = f"rule {number}"
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"rules file {name}: {where} must be a mapping (paths: and what to set)")
    items = _mapping(node, name, where)
    label_node = items.get("name")
    if label_node is not None:
        if not isinstance(label_node, yaml.ScalarNode) or not str(label_node.value).strip():
            raise ConfigError(f"rules file {name}: {where}: 'name' must be text")
        where = f"rule {str(label_node.value).strip()!r}"
    patterns = _globs(items.get("paths"), name, f"{where}: 'paths'")
    if not patterns:
        raise ConfigError(f"rules file {name}: {where} has no 'paths' (the globs it applies to)")
    for key in items:
        if key not in RULE_KEYS and key not in _RULE_OWN:
            raise ConfigError(
                f"rules file {name}: {where}: unknown key {key!r}{_did_you_mean(key, RULE_KEYS + _RULE_OWN)} "
                f"(a rule sets {', '.join(RULE_KEYS)})"
            )
    sets = yaml.MappingNode(
        "tag:yaml.org,2002:map", [(k, v) for k, v in node.value if str(k.value).strip().lower() in RULE_KEYS]
    )
    if not sets.value:
        raise ConfigError(f"rules file {name}: {where} sets nothing ({', '.join(RULE_KEYS)})")
    try:
        fields = read_block(yaml.serialize(sets, Dumper=yaml.SafeDumper)).fields
    except FrontMatterError as exc:
        raise ConfigError(f"rules file {name}: {where}: {str(exc).replace('front matter ', '')}") from exc
    label = str(label_node.value).strip() if label_node is not None else ", ".join(patterns)
    return Rule(name=label, patterns=patterns, fields=fields)


def _vars(node: Any, name: str) -> dict[str, str]:
    if node is None:
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"rules file {name}: 'vars' must be 'NAME: value' lines")
    out: dict[str, str] = {}
    for k, v in node.value:
        key = str(k.value).strip() if isinstance(k, yaml.ScalarNode) else ""
        if not VAR_NAME.match(key):
            raise ConfigError(f"rules file {name}: vars: {key!r} is not a variable name")
        if key in out:
            raise ConfigError(f"rules file {name}: vars: {key!r} is given twice")
        if not isinstance(v, yaml.ScalarNode) or v.tag == "tag:yaml.org,2002:null":
            raise ConfigError(f"rules file {name}: vars: {key!r} must be text")
        out[key] = str(v.value)  # as written: a variable is substituted text, never a number or a date
    return out


def parse_var(item: str) -> tuple[str, str]:
    """``NAME=VALUE`` (``--var``) as a pair, or a ``ConfigError`` naming the option."""
    key, sep, value = item.partition("=")
    if not sep or not VAR_NAME.match(key.strip()):
        raise ConfigError(f"--var {item!r} is not NAME=VALUE")
    return key.strip(), value


def _did_you_mean(key: str, known: tuple[str, ...]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


__all__ = ["RULES_FILE", "RULE_KEYS", "Rule", "Rules", "load_rules", "parse_rules", "parse_var", "rules_at"]
