"""The rules file (issue 23): metadata and exclusion by path, variables, front matter wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.errors import ConfigError, DocumentError
from osrag.ingest.documents import ReadOptions, ReadReport, read_tree
from osrag.ingest.rules import RULES_FILE, parse_rules, parse_var

TEXT = "# Глава\n\nТекст главы.\n"

RULES = """
exclude: [_includes/, node_modules/, "*.draft.md"]
rules:
  - paths: archive/
    archived: true
  - name: internal
    paths: [internal/, "hr/*.md"]
    acl: [staff]
    tenant: acme
    category: internal
  - paths: internal/public-*.md
    category: open
vars:
  cloud: VK Cloud
  port: 8080
"""


def tree(root: Path) -> Path:
    for rel in (
        "intro.md",
        "archive/old.md",
        "internal/secret.md",
        "internal/public-faq.md",
        "hr/leave.md",
        "_includes/snippet.md",
        "node_modules/pkg/README.md",
        "guide/chapter.draft.md",
        "internal/own.md",
    ):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        front = "---\nacl: [board]\narchived: true\n---\n" if rel == "internal/own.md" else ""
        p.write_text(front + TEXT, encoding="utf-8")
    (root / RULES_FILE).write_text(RULES, encoding="utf-8")
    return root


def docs(root: Path, **kw: object) -> tuple[dict[str, object], ReadReport]:
    report = ReadReport()
    out = {}
    for _, d in read_tree([root], ReadOptions(**kw), report):  # type: ignore[arg-type]
        assert not isinstance(d, DocumentError), d
        out[d.doc_id.split("/", 1)[1]] = d
    return out, report


def test_rules_set_metadata_by_path_and_exclude(tmp_path: Path) -> None:
    got, report = docs(tree(tmp_path / "kb"))
    assert set(got) == {
        "intro",
        "archive/old",
        "internal/secret",
        "internal/public-faq",
        "hr/leave",
        "internal/own",
    }
    md = {k: dict(v.metadata) for k, v in got.items()}  # type: ignore[attr-defined]
    assert md["archive/old"]["archived"] is True and md["intro"]["archived"] is False
    assert md["internal/secret"]["acl"] == ["staff"] and md["internal/secret"]["tenant"] == "acme"
    assert md["hr/leave"]["acl"] == ["staff"]
    assert md["internal/public-faq"]["category"] == "open"  # a later rule overrides an earlier one
    assert md["internal/public-faq"]["acl"] == ["staff"]  # ... key by key
    # front matter wins over a rule, key by key
    assert md["internal/own"]["acl"] == ["board"] and md["internal/own"]["archived"] is True
    assert md["internal/own"]["tenant"] == "acme"
    assert report.excluded == {"_includes/": 1, "node_modules/": 1, "*.draft.md": 1}
    assert report.rules == {"archive/": 1, "internal": 4, "internal/public-*.md": 1}
    assert report.rules_files == [str(tmp_path / "kb" / RULES_FILE)]


def test_variables_from_the_rules_file_and_var_options(tmp_path: Path) -> None:
    root = tree(tmp_path / "kb")
    got, _ = docs(root)
    assert got["intro"].variables == {"cloud": "VK Cloud", "port": "8080"}  # type: ignore[attr-defined]
    got, _ = docs(root, variables={"cloud": "Облако"})
    assert got["intro"].variables == {"cloud": "Облако", "port": "8080"}  # type: ignore[attr-defined]
    assert parse_var("cloud=VK Cloud") == ("cloud", "VK Cloud")
    with pytest.raises(ConfigError, match="--var 'nope' is not NAME=VALUE"):
        parse_var("nope")


def test_a_rules_file_given_explicitly_applies_to_every_root(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    (root / "archive").mkdir(parents=True)
    (root / "archive" / "x.md").write_text(TEXT, encoding="utf-8")
    got, _ = docs(root, rules=parse_rules("rules:\n  - paths: archive/\n    archived: true\n"))
    assert got["archive/x"].metadata["archived"] is True  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules:\n  - paths: a/\n    archived: on\n",
            "rule 1: field 'archived' must be true or false, got 'on'",
        ),
        ("rules:\n  - paths: a/\n    acl: [a b]\n", "bad group name 'a b'"),
        ("rules:\n  - paths: a/\n    acls: [x]\n", "unknown key 'acls' (did you mean 'acl'?)"),
        ("rules:\n  - archived: true\n", "rule 1 has no 'paths'"),
        ("rules:\n  - paths: a/\n", "rule 1 sets nothing"),
        ("rule:\n  - paths: a/\n", "unknown key 'rule' (did you mean 'rules'?)"),
        ("rules: a/\n", "'rules' must be a list of rules"),
        ("exclude: [[a]]\n", "exclude must be a glob or a list of globs"),
        ("vars:\n  cloud: [a]\n", "vars: 'cloud' must be text"),
        ("vars:\n  'a b': x\n", "vars: 'a b' is not a variable name"),
        ("rules: [\n", "is not valid YAML"),
        ("- a\n", "must be a mapping"),
        ("rules:\n  - name: n\n    paths: a/\n    tenant: ''\n", "rule 'n': field 'tenant' is empty"),
    ],
)
def test_a_bad_rules_file_is_one_config_error_naming_the_rule(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_rules(text, "osrag.yaml")
    assert message in str(err.value) and str(err.value).startswith("rules file osrag.yaml")
    assert "\n" not in str(err.value)
