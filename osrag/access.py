"""Who is asking: the principal every read must name, and the clauses it turns into.

Fail closed. A read (every retrieval head, ``search()``, ``section()``) must be told
whose eyes the text is for -- a ``Principal`` with the caller's ACL groups (and tenant,
where tenancy is used) -- or explicitly ``PUBLIC`` (public chunks only). Neither is an
``InputError``, never a silent "show everything". ``Principal.admin_bypass()`` is the
one way to see every chunk; it is an explicit value, shown in the answer's envelope.

What a principal sees:

* a chunk without ``acl`` groups is public: everyone sees it;
* a chunk with groups is seen by a principal holding at least one of them;
* a chunk with a ``tenant`` is seen only by a principal of that tenant; a chunk without a
  tenant is shared. A principal without a tenant sees shared (untenanted) chunks only --
  an app that forgets the tenant reads less, never across tenants. ``OSRAG_REQUIRE_TENANT=true``
  makes a tenant mandatory (a read without one is refused);
* the bypass sees everything (archived chunks still follow ``include_archived``).

Pure: no client, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from osrag.errors import InputError

#: A group or tenant name: what ``acl``/``tenant`` hold in front matter (no commas, no spaces inside).
_NAME = re.compile(r"^[^\s,]{1,200}$")


class Principal(BaseModel):
    """The caller a read is filtered for: groups, an optional tenant, or one of two explicit modes.

    ``Principal(groups=["support"], tenant="acme")`` -- a user; ``PUBLIC`` -- public
    chunks only; ``Principal.admin_bypass()`` -- every chunk (admin tools, evaluation).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    groups: tuple[str, ...] = ()
    tenant: str | None = None
    public_only: bool = False
    all_access: bool = False

    def __init__(self, **values: Any) -> None:
        """A bad field is one ``InputError`` line naming it (never pydantic's multi-line text)."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise InputError(f"invalid Principal: {_first_error(exc)}") from None

    @field_validator("groups", mode="before")
    @classmethod
    def _groups_are_names(cls, v: Any) -> tuple[str, ...]:
        if isinstance(v, str) or not isinstance(v, Iterable):
            raise ValueError(f"groups must be a list of group names, got {type(v).__name__} {_short(v)}")
        out = []
        for g in v:
            if not isinstance(g, str) or not _NAME.match(g.strip()):
                raise ValueError(f"group {_short(g)} is not a group name (text without spaces or commas)")
            out.append(g.strip())
        return tuple(dict.fromkeys(out))

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant_is_a_name(cls, v: Any) -> str | None:
        if v is not None and (not isinstance(v, str) or not _NAME.match(v.strip())):
            raise ValueError(
                f"tenant {_short(v)} is not a tenant name (text without spaces or commas; None for no tenant)"
            )
        return v.strip() if v is not None else None

    @model_validator(mode="after")
    def _one_mode(self) -> Principal:
        if self.public_only and (self.groups or self.all_access):
            raise ValueError("public_only takes no groups and no all_access")
        if self.all_access and (self.groups or self.tenant):
            raise ValueError("all_access sees everything: it takes no groups or tenant")
        return self

    @classmethod
    def public(cls, tenant: str | None = None) -> Principal:
        """Public chunks only (of ``tenant`` and shared ones, when given)."""
        return cls(public_only=True, tenant=tenant)

    @classmethod
    def admin_bypass(cls) -> Principal:
        """Every chunk, whatever its groups or tenant: for admin tools, stated in the envelope."""
        return cls(all_access=True)

    def describe(self) -> dict[str, Any]:
        """What the envelope says the answer was filtered for."""
        return {
            "groups": list(self.groups),
            "tenant": self.tenant,
            "public_only": self.public_only or (not self.groups and not self.all_access),
            "all_access": self.all_access,
        }


#: Public chunks only.
PUBLIC = Principal(public_only=True)

#: A read without a principal, in the API's words (the CLI says it with its own flags).
NO_PRINCIPAL = (
    "no principal: say who is asking (principal=Principal(groups=[...], tenant=...)), "
    "or ask for public content only (principal=PUBLIC); restricted chunks are never returned otherwise"
)


def require_principal(principal: Any, *, require_tenant: bool = False) -> Principal:
    """The principal a read runs for, or an ``InputError`` naming what is missing (fail closed)."""
    if principal is None:
        raise InputError(NO_PRINCIPAL)
    if not isinstance(principal, Principal):
        raise InputError(f"principal must be an osrag.Principal, got {type(principal).__name__}")
    if require_tenant and not principal.all_access and principal.tenant is None:
        raise InputError("no tenant in the principal: OSRAG_REQUIRE_TENANT=true makes a tenant mandatory")
    return principal


def make_principal(
    groups: Iterable[str] = (),
    tenant: str | None = None,
    public_only: bool = False,
    all_access: bool = False,
) -> Principal | None:
    """A principal from CLI-style options, None when none was given; a bad mix is an ``InputError``."""
    groups = tuple(groups)
    if not (groups or tenant or public_only or all_access):
        return None
    if all_access and (groups or tenant or public_only):
        raise InputError("--all-access sees everything: it takes no --group, --tenant or --public-only")
    if public_only and groups:
        raise InputError("--public-only takes no --group")
    try:
        return Principal(groups=groups, tenant=tenant, public_only=public_only, all_access=all_access)
    except InputError as exc:  # in the CLI's words: its flags, not the model's fields
        msg = str(exc).removeprefix("invalid Principal: ").replace("; None for no tenant", "")
        raise InputError(
            msg.replace("groups must", "--group must").replace("group ", "--group ", 1)
            if msg.startswith("group")
            else msg.replace("tenant ", "--tenant ", 1)
        ) from None


def access_clauses(principal: Principal) -> list[dict[str, Any]]:
    """The filter clauses that keep what ``principal`` may not see out of every head."""
    if principal.all_access:
        return []
    no_acl = {"bool": {"must_not": [{"exists": {"field": "acl"}}]}}
    if principal.groups:
        acl: dict[str, Any] = {
            "bool": {
                "should": [{"terms": {"acl": list(principal.groups)}}, no_acl],
                "minimum_should_match": 1,
            }
        }
    else:
        acl = no_acl
    clauses = [acl]
    no_tenant = {"bool": {"must_not": [{"exists": {"field": "tenant"}}]}}
    if principal.tenant is None:
        clauses.append(no_tenant)  # no tenant: shared chunks only, never another tenant's
    else:
        clauses.append(
            {
                "bool": {
                    "should": [{"term": {"tenant": principal.tenant}}, no_tenant],
                    "minimum_should_match": 1,
                }
            }
        )
    return clauses


def _first_error(exc: ValueError) -> str:
    """The first problem of a validation error, on one line, naming the field."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors(include_url=False)[0]
        msg = str(first.get("msg", exc)).removeprefix("Value error, ")
        loc = ".".join(str(x) for x in first.get("loc") or ())
        if first.get("type") == "extra_forbidden":
            return f"{loc} is not a field (fields: groups, tenant, public_only, all_access)"
        if loc and loc.split(".")[0] not in msg.split(" ")[0] and not msg.startswith(("group", "tenant")):
            return f"{loc}: {msg}"
        return msg
    return str(exc)


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` within ``limit`` characters (a 5,000-character name is not echoed whole)."""
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[: limit - 1]}… ({len(shown):,} characters)"


__all__ = ["PUBLIC", "Principal", "access_clauses", "make_principal", "require_principal"]
