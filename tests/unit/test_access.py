"""Who is asking (osrag.access): principals, the fail-closed default, and the clauses they become."""

from __future__ import annotations

import json
from typing import Any

import pytest

from osrag.access import PUBLIC, Principal, access_clauses, make_principal, require_principal
from osrag.errors import InputError
from osrag.search.client import SearchClient
from osrag.settings import Settings

NO_ACL = {"bool": {"must_not": [{"exists": {"field": "acl"}}]}}
NO_TENANT = {"bool": {"must_not": [{"exists": {"field": "tenant"}}]}}


def test_no_principal_is_an_input_error_naming_what_is_missing() -> None:
    with pytest.raises(InputError, match=r"no principal: say who is asking .*principal=PUBLIC"):
        require_principal(None)
    with pytest.raises(InputError, match="principal must be an osrag.Principal, got dict"):
        require_principal({"groups": ["a"]})


def test_required_tenant() -> None:
    with pytest.raises(InputError, match="OSRAG_REQUIRE_TENANT=true makes a tenant mandatory"):
        require_principal(Principal(groups=["a"]), require_tenant=True)
    with pytest.raises(InputError, match="tenant mandatory"):
        require_principal(PUBLIC, require_tenant=True)
    assert require_principal(Principal(tenant="acme"), require_tenant=True).tenant == "acme"
    # the bypass is explicit and sees everything, tenancy included
    assert require_principal(Principal.admin_bypass(), require_tenant=True).all_access


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"groups": "staff"}, "groups must be a list of group names, got str"),
        ({"groups": [1]}, "group 1 is not a group name"),
        ({"groups": ["a b"]}, "is not a group name"),
        ({"groups": ["a,b"]}, "is not a group name"),
        ({"tenant": "two words"}, "is not a tenant name"),
        ({"public_only": True, "groups": ["a"]}, "public_only takes no groups"),
        ({"all_access": True, "groups": ["a"]}, "all_access sees everything"),
        ({"all_access": True, "tenant": "t"}, "all_access sees everything"),
        ({"role": "admin"}, "role is not a field"),
        # issue 29: each is one InputError line naming the field, never pydantic's multi-line text
        ({"groups": "gA"}, "groups must be a list of group names, got str 'gA'"),
        ({"tenant": ""}, "tenant '' is not a tenant name"),
        ({"tenant": 5}, "tenant 5 is not a tenant name"),
        ({"tenant": "x " * 3000}, r"\(6,002 characters\) is not a tenant name"),
        ({"public_only": "maybe"}, "public_only: Input should be a valid boolean"),
    ],
)
def test_bad_principals_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        Principal(**kwargs)
    assert str(err.value).startswith("invalid Principal: ")
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((("a",), None, False, True), "--all-access sees everything"),
        (((), "t", False, True), "--all-access sees everything"),
        ((("a",), None, True, False), "--public-only takes no --group"),
        ((("a b",), None, False, False), "is not a group name"),
    ],
)
def test_cli_option_mixes_are_input_errors(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(InputError, match=message):
        make_principal(*args)


def test_make_principal_from_options() -> None:
    assert make_principal() is None
    assert make_principal(public_only=True) == PUBLIC
    assert make_principal(all_access=True) == Principal.admin_bypass()
    assert make_principal(("a", "b", "a"), "acme") == Principal(groups=["a", "b"], tenant="acme")


def test_access_clauses() -> None:
    # No tenant in the principal: untenanted chunks only (issue 29: never another tenant's).
    assert access_clauses(PUBLIC) == [NO_ACL, NO_TENANT]
    assert access_clauses(Principal()) == [NO_ACL, NO_TENANT]  # no groups: public chunks only
    g = access_clauses(Principal(groups=["a", "b"]))
    assert g == [
        {"bool": {"should": [{"terms": {"acl": ["a", "b"]}}, NO_ACL], "minimum_should_match": 1}},
        NO_TENANT,
    ]
    t = access_clauses(Principal(groups=["a"], tenant="acme"))
    assert t[1] == {"bool": {"should": [{"term": {"tenant": "acme"}}, NO_TENANT], "minimum_should_match": 1}}
    assert access_clauses(Principal.admin_bypass()) == []


def test_describe_is_what_the_envelope_says() -> None:
    assert PUBLIC.describe() == {"groups": [], "tenant": None, "public_only": True, "all_access": False}
    assert Principal(groups=["a"], tenant="t").describe() == {
        "groups": ["a"],
        "tenant": "t",
        "public_only": False,
        "all_access": False,
    }
    assert Principal.admin_bypass().describe()["all_access"] is True
    json.dumps(Principal(groups=["a"]).describe())


def _client(**kw: Any) -> SearchClient:
    # Port 9 is closed: every check below must fail before any request is sent.
    return SearchClient(Settings(url="http://127.0.0.1:9", timeout_s=1, max_retries=0, _env_file=None, **kw))


@pytest.mark.parametrize("call", ["search", "retrieve", "section"])
def test_every_read_refuses_a_missing_principal_before_any_io(call: str) -> None:
    c = _client()
    with pytest.raises(InputError, match="no principal"):
        if call == "section":
            c.section("groupB#0")
        else:
            getattr(c, call)("чай")


def test_a_client_principal_is_the_default_and_a_call_s_overrides_it() -> None:
    c = SearchClient(Settings(_env_file=None), principal=PUBLIC)
    assert c.principal_for(None) == PUBLIC
    g = Principal(groups=["g"])
    assert c.principal_for(g) == g
    tenanted = SearchClient(Settings(require_tenant=True, _env_file=None), principal=PUBLIC)
    with pytest.raises(InputError, match="tenant mandatory"):
        tenanted.principal_for(None)


def test_acl_filter_key_points_to_the_principal() -> None:
    with pytest.raises(InputError, match="acl is not a filter"):
        _client().search("чай", filters={"acl": "groupB"}, principal=PUBLIC)
