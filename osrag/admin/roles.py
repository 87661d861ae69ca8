"""Least-privilege roles for one alias, enforced by the server (the ``opensearch-security`` plugin).

``osrag install --roles`` creates, through the security REST API:

* ``{alias}-reader`` -- search the alias through osrag's own read path (mapping of the alias,
  ``_search`` with the search pipelines, ``_analyze`` of the question's words) and read the state
  index the visibility filter looks up. No writes, no other index.
* ``{alias}-writer`` -- the reader's rights plus what ``osrag ingest`` does: bulk writes,
  delete-by-query of old versions, ``_meta`` and refresh-interval updates, the state index
  (created on the first ingest; locks, hidden versions), and for a model in the cluster its
  ingest pipeline (get, put) and the model's predict.
* ``{alias}-admin`` -- templates, search pipelines, index create/delete, alias moves and
  reindex, for this alias's names only.
* ``{alias}-dls-{group}`` (optional, one per ACL group) -- the reader's rights with a
  document-level-security query on the chunk indices: a user mapped to it sees public chunks
  and the group's chunks, whatever the app asks for (an app that forgets the principal, or
  asks for the admin bypass, still gets nothing restricted to other groups). The query is
  the very clause osrag's own filter uses (``osrag.access.access_clauses``), so the two never
  disagree about what "may see" means.

Why Python and not JSON files: every body is a function of the alias (and of a group), and
the DLS query must be osrag's access clause itself, not a copy of it; the bodies are pure
functions here (unit-tested) and only ``install_roles`` talks to the cluster.

The chunk indices are named by a regular expression (``osrag.names.index_regex``), not
``{alias}-*``: that wildcard also matches the indices of an alias that extends this one
(``docs-light-…`` for ``docs``), which this alias's roles must not reach.

Mapping users or backend roles to these roles is the cluster admin's job;
``--map-user ROLE=USER`` adds one principal to one of them: a user name (basic auth), a
client certificate's DN (``OSRAG_AUTH=cert``), a token's subject (``OSRAG_AUTH=header`` with a
JWT domain) or ``backend:NAME`` for a backend role. SigV4 principals (IAM) are not mapped here:
on an OpenSearch Service domain with fine-grained access control an IAM role ARN is mapped as a
backend role (``backend:arn:aws:iam::…:role/…``); Serverless has no roles at all, only data
access policies (docs/auth.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from osrag.access import Principal, access_clauses
from osrag.connection import Cluster, translate_errors
from osrag.errors import ClusterError, ConfigError, InputError
from osrag.names import index_regex, pipeline_name, state_index, template_name

#: The role kinds ``--map-user`` accepts besides full role names.
KINDS = ("reader", "writer", "admin")
API = "/_plugins/_security/api"

# -- what each side of osrag sends (one list per need, so a role reads as the sum of its needs)

#: Cluster-level actions of a read: ``GET /`` (the version, for ``osrag.capabilities``),
#: health for ``osrag status``.
_READ_CLUSTER = ("cluster:monitor/main", "cluster:monitor/health")
#: ``osrag.capabilities`` lists plugins with ``_cat/plugins`` before the first search, which the
#: server runs as a cluster-state read plus a nodes-info read. ``cluster:monitor/state`` also lets
#: the holder read ``GET /_cluster/state``: every index name and mapping of the cluster (not
#: documents). Kept apart so it goes as soon as the probe asks ``_nodes/plugins`` instead
#: (``cluster:monitor/nodes/info`` only).
_CAPABILITIES_CLUSTER = ("cluster:monitor/state", "cluster:monitor/nodes/info")
#: On the alias and its chunk indices: the alias's mapping (``_meta``: the pinned model),
#: ``_search`` (every head, ``section()``), ``_analyze`` of the question's words for the gate
#: (the index's analyzer; no documents are read).
_READ_INDEX = ("indices:admin/mappings/get", "indices:data/read/search*", "indices:admin/analyze")
#: On the state index: the visibility filter's terms lookup is a GET of its ``hidden`` document.
_READ_STATE = ("indices:data/read/get",)

#: ``_bulk`` is checked at cluster level; its items on the index.
_WRITE_CLUSTER = ("indices:data/write/bulk",)
#: What ingest does to the live index besides searching it: the alias lookup, bulk items,
#: delete-by-query of replaced versions, ``_meta`` (last ingest, saved refresh interval),
#: refresh interval off/on, explicit refreshes.
_WRITE_INDEX = (
    "indices:admin/aliases/get",
    "indices:data/write/*",
    "indices:admin/mapping/put",
    "indices:monitor/settings/get",
    "indices:admin/settings/update",
    "indices:admin/refresh*",
)
#: An index whose model is a local ml-commons model is written through its ingest pipeline
#: (``osrag.mlcommons.pipelines``): ingest reads it and puts it when missing (pipelines are
#: cluster-level, not scoped by name), finds the model (by id, or by name through a model search)
#: and has it embed -- the ``text_embedding`` processor predicts as the bulk's caller, as
#: ``_predict`` does for a remote model.
_WRITE_CLUSTER_MODEL = (
    "cluster:admin/ingest/pipeline/get",
    "cluster:admin/ingest/pipeline/put",
    "cluster:admin/opensearch/ml/models/get",
    "cluster:admin/opensearch/ml/models/search",
    "cluster:admin/opensearch/ml/predict",
)
#: The state index: created by the first ingest (exists check, create, mapping), then
#: documents read and written (lock, writers register, hidden versions).
_WRITE_STATE = (
    "indices:admin/get",
    "indices:admin/create",
    "indices:admin/mapping/put",
    "indices:admin/mappings/get",
    "indices:data/read/*",
    "indices:data/write/*",
    "indices:admin/refresh*",
)

#: Templates and search pipelines are cluster-level objects; the security plugin cannot scope
#: them by name, so the admin role may change any template or pipeline (its index rights stay
#: this alias's). ``_reindex`` (and its scroll) and ``cat plugins``/``nodes`` (status) are
#: cluster-level too.
_ADMIN_CLUSTER = (
    "cluster:admin/component_template/*",
    "indices:admin/index_template/*",
    "cluster:admin/search/pipeline/*",
    "cluster:admin/ingest/pipeline/*",  # install puts the embed pipeline, drop deletes it
    "indices:data/write/reindex",
    "indices:data/read/scroll*",  # _reindex reads the source by scroll (scroll, scroll/clear)
    "cluster:monitor/*",
)


def role_names(alias: str) -> dict[str, str]:
    """Kind -> role name for the three fixed roles of ``alias``."""
    return {kind: f"{alias}-{kind}" for kind in KINDS}


def dls_role_name(alias: str, group: str) -> str:
    return f"{alias}-dls-{group}"


def _chunk_patterns(alias: str) -> list[str]:
    """The alias and its chunk indices (a regex, ``/…/`` in the security plugin's syntax)."""
    return [alias, f"/{index_regex(alias)}/"]


def _perm(patterns: Sequence[str], actions: Iterable[str], dls: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index_patterns": list(patterns),
        "allowed_actions": sorted(set(actions)),
        "fls": [],
        "masked_fields": [],
    }
    if dls is not None:
        out["dls"] = dls
    return out


def reader_role(alias: str) -> dict[str, Any]:
    """Search the alias through osrag's read path; nothing else."""
    return {
        "description": f"osrag: search alias {alias} (read-only)",
        "cluster_permissions": sorted({*_READ_CLUSTER, *_CAPABILITIES_CLUSTER}),
        "index_permissions": [
            _perm(_chunk_patterns(alias), _READ_INDEX),
            _perm([state_index(alias)], _READ_STATE),
        ],
    }


def writer_role(alias: str) -> dict[str, Any]:
    """The reader's rights plus ``osrag ingest`` into the alias's live index."""
    return {
        "description": f"osrag: search and ingest alias {alias}",
        "cluster_permissions": sorted(
            {*_READ_CLUSTER, *_CAPABILITIES_CLUSTER, *_WRITE_CLUSTER, *_WRITE_CLUSTER_MODEL}
        ),
        "index_permissions": [
            _perm(_chunk_patterns(alias), (*_READ_INDEX, *_WRITE_INDEX)),
            _perm([state_index(alias)], _WRITE_STATE),
        ],
    }


def admin_role(alias: str) -> dict[str, Any]:
    """Install, reindex, move the alias, clean up: every index action on this alias's names."""
    return {
        "description": (
            f"osrag: administer alias {alias} (templates {template_name(alias)}, pipelines "
            f"{pipeline_name(alias, 'rrf')}…, indices, reindex)"
        ),
        "cluster_permissions": sorted(
            {*_READ_CLUSTER, *_CAPABILITIES_CLUSTER, *_WRITE_CLUSTER, *_WRITE_CLUSTER_MODEL, *_ADMIN_CLUSTER}
        ),
        "index_permissions": [
            _perm([*_chunk_patterns(alias), state_index(alias)], ("indices_all",)),
        ],
    }


def dls_query(group: str) -> str:
    """The DLS query (a JSON string, as the security API takes it): public chunks and ``group``'s.

    It is ``access_clauses`` of a principal holding only ``group``: the server applies the
    same rule osrag's own filter does. A user mapped to several group roles sees the union.
    """
    try:
        principal = Principal(groups=[group])
    except ValueError as exc:
        raise InputError(f"ACL group {group!r} is not a group name (text without spaces or commas)") from exc
    clauses = access_clauses(principal)  # the ACL clause, and the tenant one (no tenant: untenanted only)
    clause = clauses[0] if len(clauses) == 1 else {"bool": {"filter": clauses}}
    return json.dumps(clause, ensure_ascii=False, sort_keys=True)


def dls_role(alias: str, group: str) -> dict[str, Any]:
    """The reader's rights, with the chunks restricted by the server to public + ``group``."""
    body = reader_role(alias)
    body["description"] = f"osrag: search alias {alias}, server-side restricted to public and {group} chunks"
    body["index_permissions"][0]["dls"] = dls_query(group)
    return body


def desired_roles(alias: str, groups: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """Role name -> body: the three fixed roles and one DLS role per group."""
    names = role_names(alias)
    out = {
        names["reader"]: reader_role(alias),
        names["writer"]: writer_role(alias),
        names["admin"]: admin_role(alias),
    }
    for g in dict.fromkeys(groups):
        out[dls_role_name(alias, g)] = dls_role(alias, g)
    return out


def parse_groups(text: str | None) -> list[str]:
    """``"G1,G2"`` -> ``["G1", "G2"]``; an empty item or a bad name is an ``InputError``."""
    if text is None:
        return []
    groups = [g.strip() for g in text.split(",")]
    for g in groups:
        if not g:
            raise InputError(f"--dls-groups {text!r}: an empty group name")
        dls_query(g)  # validates the name
    return list(dict.fromkeys(groups))


def parse_mapping(text: str, alias: str, known: Iterable[str]) -> tuple[str, str]:
    """``ROLE=USER`` -> (role name, user). ROLE is a kind (reader, writer, admin), ``dls:GROUP``,
    or a full role name, and must be one of the roles this install creates. USER is split at
    the first ``=``, so a certificate DN (``reader=CN=app,O=org``) is taken whole; ``backend:NAME``
    maps a backend role (a JWT roles claim, an LDAP group)."""
    role, sep, user = text.partition("=")
    role, user = role.strip(), user.strip()
    if not sep or not role or not user:
        raise InputError(f"--map-user {text!r}: expected ROLE=USER (e.g. reader=alice)")
    if role in KINDS:
        role = role_names(alias)[role]
    elif role.startswith("dls:"):
        role = dls_role_name(alias, role.removeprefix("dls:"))
    known = list(known)
    if role not in known:
        raise InputError(f"--map-user {text!r}: role {role} is not one of {', '.join(known)}")
    return role, user


# -- the edge: the security REST API


@dataclass
class RolesReport:
    """What ``install_roles`` did (no secrets: role names and user names only)."""

    roles: dict[str, str] = field(default_factory=dict)  # role name -> "created" / "updated"
    mapped: list[tuple[str, str]] = field(default_factory=list)  # (role, user)
    groups: list[str] = field(default_factory=list)


def security_request(
    cluster: Cluster, method: str, path: str, what: str, body: Any = None, ok_404: bool = False
) -> dict[str, Any] | None:
    """One security-API call; a refusal is one ``ClusterError`` line naming ``what``."""
    from opensearchpy import exceptions as ose

    with translate_errors(cluster.settings.url, what):  # unreachable cluster: the usual line
        try:
            return cluster.client.transport.perform_request(method, path, body=body)
        except ose.ConnectionError:
            raise
        except ose.NotFoundError as exc:
            if ok_404:
                return None
            raise ClusterError(f"{what}: {_security_reason(exc)}") from exc
        except ose.TransportError as exc:
            raise ClusterError(f"{what}: {_security_reason(exc)}") from exc


def _security_reason(exc: Any) -> str:
    """The plugin answers ``{"status": ..., "message"|"reason": ...}``; the core, ``{"error": ...}``."""
    status = getattr(exc, "status_code", "?")
    info = getattr(exc, "info", None)
    if isinstance(info, dict):
        text = info.get("message") or info.get("reason")
        err = info.get("error")
        if not text and isinstance(err, dict):
            root = (err.get("root_cause") or [err])[0]
            text = f"{root.get('type')}: {root.get('reason')}"
        elif not text and err:
            text = str(err)
        if text:
            if status == 400 and "no handler found" in str(text):
                text = "the cluster has no security REST API (is the opensearch-security plugin installed?)"
            return f"{status} {' '.join(str(text).split())}"
    if status == 401:
        return "401 the credentials were refused"
    if status == 403:
        return "403 this user may not use the security REST API (needs security_rest_api_access)"
    return f"{status} {' '.join(str(getattr(exc, 'error', exc)).split())}"


def groups_in_index(cluster: Cluster, alias: str, limit: int = 1000) -> list[str]:
    """The ACL groups the alias's chunks name (a terms aggregation; run as an admin)."""
    got = cluster.call(
        f"list ACL groups of {alias}",
        cluster.client.search,
        index=alias,
        body={"size": 0, "aggs": {"acl": {"terms": {"field": "acl", "size": limit}}}},
    )
    return sorted(b["key"] for b in got.get("aggregations", {}).get("acl", {}).get("buckets", []))


def put_role(cluster: Cluster, name: str, body: dict[str, Any]) -> str:
    """Create or replace one role; "created" or "updated"."""
    got = security_request(cluster, "PUT", f"{API}/roles/{quote(name, safe='')}", f"role {name}", body)
    return "created" if (got or {}).get("status") == "CREATED" else "updated"


#: ``--map-user ROLE=backend:NAME`` maps a backend role instead of a user name.
BACKEND_PREFIX = "backend:"


def mapping_body(current: dict[str, Any], principal: str) -> dict[str, Any]:
    """The role mapping with ``principal`` added, keeping what it had.

    Who a principal is depends on how the client authenticates (docs/auth.md):
    basic -- the user name; cert -- the certificate's DN as the ``clientcert`` authenticator
    reports it (``CN=app,O=org``; or one of its attributes when the domain sets
    ``username_attribute``); header (JWT) -- the claim the ``jwt`` domain's ``subject_key``
    names, or, with ``backend:NAME``, a backend role from its ``roles_key`` claim (also how
    LDAP groups and SAML roles are mapped)."""
    users = list(current.get("users", []))
    backend = list(current.get("backend_roles", []))
    if principal.startswith(BACKEND_PREFIX):
        backend = sorted({*backend, principal.removeprefix(BACKEND_PREFIX)})
    else:
        users = sorted({*users, principal})
    return {"users": users, "backend_roles": backend, "hosts": list(current.get("hosts", []))}


def map_user(cluster: Cluster, role: str, user: str) -> None:
    """Add ``user`` (a user name, a certificate DN, or ``backend:NAME``) to the mapping of ``role``,
    keeping the users and backend roles it had."""
    path = f"{API}/rolesmapping/{quote(role, safe='')}"
    got = security_request(cluster, "GET", path, f"mapping of role {role}", ok_404=True) or {}
    body = mapping_body(got.get(role) or {}, user)
    security_request(cluster, "PUT", path, f"mapping of role {role}", body)


def install_roles(
    cluster: Cluster,
    alias: str,
    groups: Iterable[str] = (),
    groups_from_index: bool = False,
    mappings: Iterable[str] = (),
) -> RolesReport:
    """Create or update the alias's roles (and DLS roles), then the asked-for user mappings.

    Every ``--map-user`` is parsed before anything is written, so a typo changes nothing.
    """
    if cluster.settings.serverless:
        from osrag.capabilities import SERVERLESS_ROLES

        raise ConfigError(SERVERLESS_ROLES)
    wanted = list(groups)
    if groups_from_index:
        wanted += groups_in_index(cluster, alias)
    for g in wanted:
        dls_query(g)
    roles = desired_roles(alias, wanted)
    pairs = [parse_mapping(m, alias, roles) for m in mappings]
    report = RolesReport(groups=list(dict.fromkeys(wanted)))
    for name, body in roles.items():
        report.roles[name] = put_role(cluster, name, body)
    for role, user in pairs:
        map_user(cluster, role, user)
        report.mapped.append((role, user))
    return report


__all__ = [
    "KINDS",
    "RolesReport",
    "admin_role",
    "desired_roles",
    "dls_query",
    "dls_role",
    "dls_role_name",
    "groups_in_index",
    "install_roles",
    "map_user",
    "mapping_body",
    "parse_groups",
    "parse_mapping",
    "put_role",
    "reader_role",
    "role_names",
    "security_request",
    "writer_role",
]
