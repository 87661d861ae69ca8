"""The role bodies ``osrag install --roles`` sends: pure functions, checked without a cluster."""

from __future__ import annotations

import json
import re

import pytest

from osrag.access import Principal, access_clauses
from osrag.admin.roles import (
    admin_role,
    desired_roles,
    dls_query,
    dls_role,
    parse_groups,
    parse_mapping,
    reader_role,
    role_names,
    writer_role,
)
from osrag.errors import InputError

ALIAS = "kb.docs"


def actions(body: dict, pattern: str) -> set[str]:
    return {
        a for p in body["index_permissions"] if pattern in p["index_patterns"] for a in p["allowed_actions"]
    }


def chunk_regex(body: dict) -> re.Pattern[str]:
    (pattern,) = {
        p for perm in body["index_permissions"] for p in perm["index_patterns"] if p.startswith("/")
    }
    return re.compile(pattern.strip("/"))


def test_the_three_roles_and_one_per_group() -> None:
    roles = desired_roles(ALIAS, ["groupA", "groupB", "groupA"])
    assert list(roles) == [
        "kb.docs-reader",
        "kb.docs-writer",
        "kb.docs-admin",
        "kb.docs-dls-groupA",
        "kb.docs-dls-groupB",
    ]
    assert role_names(ALIAS)["writer"] == "kb.docs-writer"


@pytest.mark.parametrize("make", [reader_role, writer_role, admin_role, lambda a: dls_role(a, "g")])
def test_index_rights_are_this_alias_only(make) -> None:
    body = make(ALIAS)
    rx = chunk_regex(body)
    assert rx.fullmatch("kb.docs-0123456789-20260101120000123")
    # an alias that extends this one, a dot taken as any character, another index: not matched
    for other in (
        "kb.docs-light-0123456789-20260101120000123",
        "kbXdocs-0123456789-20260101120000123",
        "other",
    ):
        assert not rx.fullmatch(other)
    patterns = {p for perm in body["index_permissions"] for p in perm["index_patterns"]}
    assert patterns <= {ALIAS, f"/{rx.pattern}/", "kb.docs.state"}
    assert not any("*" in p for p in patterns)


def test_reader_may_search_and_never_write() -> None:
    body = reader_role(ALIAS)
    chunk = actions(body, ALIAS)
    assert "indices:data/read/search*" in chunk and "indices:admin/mappings/get" in chunk
    every = chunk | actions(body, "kb.docs.state") | set(body["cluster_permissions"])
    assert not [a for a in every if "write" in a or a.startswith("indices:admin/create") or "delete" in a]
    assert actions(body, "kb.docs.state") == {"indices:data/read/get"}  # the visibility filter's lookup
    assert not any(a.startswith("cluster:admin") for a in body["cluster_permissions"])


def test_writer_adds_ingest_rights_to_the_readers() -> None:
    reader, writer = reader_role(ALIAS), writer_role(ALIAS)
    assert actions(reader, ALIAS) < actions(writer, ALIAS)
    assert set(reader["cluster_permissions"]) < set(writer["cluster_permissions"])
    assert "indices:data/write/bulk" in writer["cluster_permissions"]
    assert {"indices:data/write/*", "indices:admin/mapping/put"} <= actions(writer, ALIAS)
    assert "indices:admin/create" in actions(writer, "kb.docs.state")  # the first ingest creates it
    assert "indices:admin/create" not in actions(writer, ALIAS)  # a new index is the admin's
    # cluster:admin: only what ingest through a cluster model's pipeline needs (no delete, no deploy)
    assert {a for a in writer["cluster_permissions"] if a.startswith("cluster:admin")} == {
        "cluster:admin/ingest/pipeline/get",
        "cluster:admin/ingest/pipeline/put",
        "cluster:admin/opensearch/ml/models/get",
        "cluster:admin/opensearch/ml/models/search",
        "cluster:admin/opensearch/ml/predict",
    }


def test_admin_manages_templates_pipelines_and_its_indices() -> None:
    body = admin_role(ALIAS)
    assert {
        "cluster:admin/component_template/*",
        "indices:admin/index_template/*",
        "cluster:admin/search/pipeline/*",
        "cluster:admin/ingest/pipeline/*",
        "indices:data/write/reindex",
    } <= set(body["cluster_permissions"])
    assert actions(body, ALIAS) == {"indices_all"} and actions(body, "kb.docs.state") == {"indices_all"}
    assert not any("security" in a for a in body["cluster_permissions"])


def test_dls_is_the_access_clause_of_the_group() -> None:
    body = dls_role(ALIAS, "groupA")
    chunk_perm, state_perm = body["index_permissions"]
    assert json.loads(chunk_perm["dls"]) == {"bool": {"filter": access_clauses(Principal(groups=["groupA"]))}}
    assert "dls" not in state_perm
    # same rights as the reader otherwise
    plain = reader_role(ALIAS)
    assert body["cluster_permissions"] == plain["cluster_permissions"]
    assert chunk_perm["allowed_actions"] == plain["index_permissions"][0]["allowed_actions"]


def test_dls_query_admits_public_and_the_group() -> None:
    acl, tenant = json.loads(dls_query("groupA"))["bool"]["filter"]
    should = acl["bool"]["should"]
    assert {"terms": {"acl": ["groupA"]}} in should
    assert {"bool": {"must_not": [{"exists": {"field": "acl"}}]}} in should
    assert acl["bool"]["minimum_should_match"] == 1
    # a group role names no tenant: shared (untenanted) chunks only, as osrag's own filter
    assert tenant == {"bool": {"must_not": [{"exists": {"field": "tenant"}}]}}


@pytest.mark.parametrize("bad", ["two words", "a,b", ""])
def test_a_bad_group_is_an_input_error(bad: str) -> None:
    with pytest.raises(InputError, match="group"):
        dls_query(bad)


def test_parse_groups() -> None:
    assert parse_groups(None) == []
    assert parse_groups(" groupA, groupB ,groupA") == ["groupA", "groupB"]
    with pytest.raises(InputError, match="empty group"):
        parse_groups("groupA,,groupB")


def test_parse_mapping() -> None:
    known = desired_roles(ALIAS, ["groupA"])
    assert parse_mapping("reader=alice", ALIAS, known) == ("kb.docs-reader", "alice")
    assert parse_mapping("dls:groupA=bob", ALIAS, known) == ("kb.docs-dls-groupA", "bob")
    assert parse_mapping("kb.docs-admin=carol", ALIAS, known) == ("kb.docs-admin", "carol")
    for bad, needle in [
        ("reader", "expected ROLE=USER"),
        ("=alice", "expected ROLE=USER"),
        ("superuser=alice", "is not one of"),
        ("dls:groupB=bob", "is not one of"),
    ]:
        with pytest.raises(InputError, match=needle):
            parse_mapping(bad, ALIAS, known)


def test_cli_role_options_need_roles() -> None:
    from click.testing import CliRunner

    from osrag.cli import cli

    res = CliRunner().invoke(cli, ["install", "--dls-groups", "groupA"])
    assert res.exit_code == 2 and "go with --roles" in res.output
    res = CliRunner().invoke(cli, ["install", "--check", "--roles"])
    assert res.exit_code == 2 and "does not take --roles" in res.output
    res = CliRunner().invoke(cli, ["install", "--roles", "--dls-groups", "groupA,,x"])
    assert isinstance(res.exception, InputError) and "empty group name" in str(res.exception)


def test_a_mapping_takes_a_dn_whole_and_backend_roles_apart() -> None:
    from osrag.admin.roles import mapping_body, parse_mapping, role_names

    roles = role_names("kb").values()
    assert parse_mapping("reader=CN=osrag-app,O=osrag dev", "kb", roles) == (
        "kb-reader",
        "CN=osrag-app,O=osrag dev",
    )
    current = {"users": ["alice"], "backend_roles": ["ops"], "hosts": []}
    assert mapping_body(current, "CN=app,O=org") == {
        "users": ["CN=app,O=org", "alice"],
        "backend_roles": ["ops"],
        "hosts": [],
    }
    arn = "arn:aws:iam::123456789012:role/osrag-reader"
    assert mapping_body(current, f"backend:{arn}") == {
        "users": ["alice"],
        "backend_roles": [arn, "ops"],
        "hosts": [],
    }
    assert mapping_body({}, "backend:readers")["backend_roles"] == ["readers"]
