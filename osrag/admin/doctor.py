"""``osrag doctor``: what is wrong between this machine, its settings and the cluster, with a fix each.

One ``Check`` per question a user would otherwise guess at -- reachable, authenticated, which
server and plugins, which k-NN engines it can serve (and which indices need one it may not),
templates and pipelines in sync, alias -> index, the pinned model loadable here (or the model a new
index would get), the reranker a search would run (``osrag.model_defaults``), the analyzer,
health, disk watermarks, shard allocation. Each is a line with a status and, when not ok, a
hint. Nothing here writes to the cluster; no k-NN index is ever created to probe an engine.

On Serverless the cluster-level checks are ``skip``: it has no such APIs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from osrag.capabilities import (
    NATIVE_ENGINES,
    engines_from_stats,
    from_responses,
    index_engines,
    parse_version,
)
from osrag.connection import Cluster
from osrag.errors import ClusterError, ClusterUnavailable, OsragError
from osrag.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from osrag.store.alias import AliasStore

Status = Literal["ok", "warn", "fail", "skip"]

# Every index but the dot-named (system) ones: naming a system index through a wildcard makes
# OpenSearch answer with a deprecation warning header, which the client prints as a Python warning.
_USER_INDICES = "*,-.*"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    hint: str = ""

    def line(self) -> str:
        mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}[self.status]
        hint = f"  -> {self.hint}" if self.hint and self.status != "ok" else ""
        return f"{mark} {self.name}: {self.detail}{hint}"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


AUTH_HINTS = {
    "none": "the cluster wants credentials: set OSRAG_AUTH (basic, sigv4, cert or header) and its settings",
    "basic": "check OSRAG_USER/OSRAG_PASSWORD (or user:password@ in OSRAG_URL) and the user's role mapping",
    "sigv4": (
        "check the AWS credentials (aws sts get-caller-identity), OSRAG_AWS_REGION, OSRAG_AWS_SERVICE "
        "(es for a domain, aoss for Serverless) and the IAM / data access policy (docs/auth.md)"
    ),
    "cert": "check OSRAG_CLIENT_CERT/KEY, that the cluster's CA signed them and that their DN is mapped to a role",
    "header": "check OSRAG_AUTH_HEADER (expired token?) and OSRAG_AUTH_HEADER_NAME",
}


def diagnose(settings: Settings, cluster: Cluster | None = None) -> list[Check]:
    """Every check, in order; stops after ``reachable``/``auth`` fail (nothing else can be asked)."""
    cluster = cluster or Cluster(settings)
    checks: list[Check] = []
    serverless = settings.serverless
    where = settings.display_url

    # -- reachable and authenticated
    try:
        info = cluster.info()
    except ClusterUnavailable as exc:
        fix = exc.fix or "start it (`osrag dev up` for a local node) or fix OSRAG_URL / OSRAG_HOSTS"
        return [Check("reachable", "fail", exc.problem, fix)]
    except ClusterError as exc:
        checks.append(Check("reachable", "ok", f"{where} answers"))
        checks.append(Check("auth", "fail", f"{settings.auth_mode}: {exc}", AUTH_HINTS[settings.auth_mode]))
        return checks
    except OsragError as exc:  # e.g. no AWS credentials found, boto3 missing
        return [Check("auth", "fail", str(exc), AUTH_HINTS[settings.auth_mode])]
    checks.append(Check("reachable", "ok", f"{where} answers"))
    checks.append(_auth(cluster, settings))

    # -- server line, plugins, k-NN engines
    version = str((info.get("version") or {}).get("number") or "")
    plugins: list[dict[str, Any]] = []
    if serverless:
        checks.append(Check("server", "skip", "OpenSearch Serverless: no version or plugin list to read"))
    else:
        plugins = cluster.plugins()
        names = sorted({str(p.get("component")) for p in plugins})
        try:
            caps = from_responses(info, plugins)
            versions = sorted({f"{p.get('component')} {p.get('version')}" for p in plugins})
            checks.append(
                Check("server", "ok", f"OpenSearch {caps.version}; plugins: {', '.join(versions) or '-'}")
            )
        except ClusterError as exc:
            checks.append(
                Check(
                    "server",
                    "fail",
                    f"{exc} (plugins: {', '.join(names) or 'none'})",
                    "use OpenSearch 2.19+ with k-NN and neural-search",
                )
            )
        checks.extend(_engines(cluster, version))

    # -- what osrag installed: drift, alias, model, analyzer; the reranker a search would run
    checks.extend(_install_state(settings, cluster))
    checks.append(_reranker(settings))

    # -- cluster: health, disk, allocation
    if serverless:
        checks.append(Check("cluster", "skip", "Serverless manages health, disk and shards itself"))
    else:
        checks.extend(_cluster_state(cluster))
    return checks


def _auth(cluster: Cluster, settings: Settings) -> Check:
    mode = settings.auth_mode
    try:
        who = cluster.call(
            "authinfo", cluster.client.transport.perform_request, "GET", "/_plugins/_security/authinfo"
        )
    except OsragError:
        who = None  # no security plugin (or not allowed to ask): the request above was accepted anyway
    if isinstance(who, dict) and who.get("user_name"):
        roles = ", ".join(who.get("roles") or []) or "no roles"
        return Check("auth", "ok", f"{mode}: accepted as {who['user_name']} ({roles})")
    return Check("auth", "ok", f"{mode}: accepted")


def _engines(cluster: Cluster, version: str) -> list[Check]:
    out: list[Check] = []
    try:
        stats = cluster.call(
            "k-NN stats", cluster.client.transport.perform_request, "GET", "/_plugins/_knn/stats"
        )
    except OsragError as exc:
        return [
            Check("k-NN engines", "warn", f"cannot read k-NN stats: {exc}", "needs cluster:monitor/* rights")
        ]
    engines = engines_from_stats(stats)
    text = ", ".join(f"{e} {s}" for e, s in engines.items())
    unknown = [e for e in NATIVE_ENGINES if engines[e] != "yes"]
    out.append(
        Check(
            "k-NN engines",
            "ok",
            text
            + (
                f" ({', '.join(unknown)}: not loaded on every node yet; never probed by creating an index)"
                if unknown
                else ""
            ),
        )
    )
    try:
        mappings = cluster.call(
            "mappings", cluster.client.indices.get_mapping, index=_USER_INDICES, expand_wildcards="open"
        )
        settings = cluster.call(
            "index settings",
            cluster.client.indices.get_settings,
            index=_USER_INDICES,
            name="index.knn",
            expand_wildcards="open",
        )
    except OsragError as exc:
        return [*out, Check("k-NN indices", "warn", f"cannot list index mappings: {exc}")]
    knn = {
        i: str(((b.get("settings") or {}).get("index") or {}).get("knn", "false")).lower() == "true"
        for i, b in settings.items()
    }
    try:
        v = parse_version(version)
    except ClusterError:
        v = (3, 0, 0)
    needing = {i: e for i, e in index_engines(mappings, knn, v).items() if e & set(NATIVE_ENGINES)}
    risky = {i: sorted(e) for i, e in needing.items() if any(engines.get(x) != "yes" for x in e)}
    if not risky:
        out.append(Check("k-NN indices", "ok", f"{len(needing)} index(es) use a native engine, all served"))
    else:
        shown = "; ".join(f"{i} ({'/'.join(e)})" for i, e in sorted(risky.items())[:5])
        more = f" and {len(risky) - 5} more" if len(risky) > 5 else ""
        out.append(
            Check(
                "k-NN indices",
                "warn",
                f"{shown}{more} need an engine no node has loaded yet",
                "if the nodes lack the native library (Maven zips carry none), opening them crashes a node: "
                "reindex into a lucene field or install the official distribution",
            )
        )
    return out


def _install_state(settings: Settings, cluster: Cluster) -> list[Check]:
    from osrag.store.alias import AliasStore

    admin = AliasStore(settings, cluster=cluster)
    out: list[Check] = []
    try:
        drifts = admin.check()
        if drifts:
            out.append(
                Check(
                    "templates/pipelines",
                    "fail",
                    "; ".join(str(d) for d in drifts)[:400],
                    "run `osrag install`",
                )
            )
        else:
            out.append(Check("templates/pipelines", "ok", f"in sync for alias {settings.alias}"))
    except OsragError as exc:
        out.append(Check("templates/pipelines", "fail", str(exc), "run `osrag install` (as an admin)"))
    try:
        index = admin.current_index()
    except OsragError as exc:
        return [*out, Check("alias", "fail", str(exc), "run `osrag install`")]
    if index is None:
        return [
            *out,
            Check("alias", "fail", f"{settings.alias} points nowhere", "run `osrag install`"),
            _new_index_model(settings),
        ]
    out.append(Check("alias", "ok", f"{settings.alias} -> {index}"))
    out.append(_model(settings, admin, index))
    out.append(_analyzer(cluster, settings.alias))
    return out


def _model(settings: Settings, admin: AliasStore, index: str) -> Check:
    from osrag.embedding import embedder_for, require_same_model

    name: str | None = None
    try:
        meta = admin.meta(index)
        name = meta.embedding_model
        if not name:
            return Check(
                "model", "fail", f"{index} has no osrag _meta", "was it created by osrag? reindex it"
            )
        emb = embedder_for(settings, meta=meta)
        require_same_model(meta, emb)
        if emb.backend == "ml-commons":  # the model is in the cluster: say where and that it answers
            info = emb.model.info
            where = f"runs in the {info.where} as {info.label}, {info.state.lower()}"
            return Check("model", "ok", f"{name} (dim {emb.dimension}) {where}, matches {index}")
        return Check("model", "ok", f"{name} (dim {emb.dimension}) loads here and matches {index}")
    except OsragError as exc:
        hint = "install the model's package/files here, or `osrag reindex`"
        if name and name.startswith(("ml:", "ml-id:")):
            hint = "`osrag model list` / `osrag model deploy`, or `osrag reindex` to another model"
        return Check("model", "fail", str(exc), hint)
    except Exception as exc:  # a model loader's own error (no hub, bad files): named, not a traceback
        return Check("model", "fail", f"{type(exc).__name__}: {str(exc)[:200]}", "install the model here")


def _new_index_model(settings: Settings) -> Check:
    """The model `osrag install` would pin a new index to, loaded here as install would."""
    from osrag.embedding import embedder_for

    choice = settings.embedding_choice
    try:
        dim = embedder_for(settings).dimension
    except Exception as exc:  # OsragError or a loader's own: named, one line
        return Check(
            "model",
            "fail",
            f"{choice.name} cannot load here: {(str(exc).splitlines() or [''])[0][:200]}",
            "set OSRAG_EMBEDDING_MODEL to a model this machine has (docs/models.md)",
        )
    return Check("model", "ok", f"{choice.line('a new index gets')}; loads here (dim {dim})")


def _reranker(settings: Settings) -> Check:
    """The cross-encoder a search runs: off, not here (said why), or loaded once as a search would."""
    from osrag.reranker_loading import load_reranker_model

    choice = settings.reranker_choice
    if not settings.rerank:
        return Check("reranker", "ok", "off (OSRAG_RERANK=false): results keep the fused order")
    if choice.name is None:
        configured = "reranker_model" in settings.model_fields_set
        return Check(
            "reranker",
            "fail" if configured else "warn",
            f"none here, searches keep the fused order: {choice.reason}",
            f"pip install 'osrag[local-models]' and put {settings.reranker_model} in the model cache, "
            "or OSRAG_RERANK=false to say it is meant",
        )
    try:
        load_reranker_model(
            choice.name,
            settings.device,
            settings.rerank_backend,
            settings.rerank_quantize,
            str(settings.models_dir),
        )
    except OsragError as exc:
        return Check("reranker", "fail", str(exc), "fix the model files, or OSRAG_RERANK=false")
    return Check("reranker", "ok", f"{choice.line('reranker')}; loads here ({settings.rerank_backend})")


def _analyzer(cluster: Cluster, alias: str) -> Check:
    try:
        got = cluster.call(
            "analyze",
            cluster.client.indices.analyze,
            index=alias,
            body={"analyzer": "ru_search", "text": "Ёлки"},
        )
        tokens = [t["token"] for t in got.get("tokens", [])]
        return Check("analyzer", "ok", f"ru_search on {alias}: Ёлки -> {' '.join(tokens)}")
    except OsragError as exc:
        return Check("analyzer", "fail", str(exc), "the index predates the template: `osrag reindex`")


_PCT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _cluster_state(cluster: Cluster) -> list[Check]:
    out: list[Check] = []
    try:
        health = cluster.health()
    except OsragError as exc:
        return [Check("health", "warn", f"cannot read cluster health: {exc}", "needs cluster:monitor/health")]
    status = health.get("status")
    unassigned = int(health.get("unassigned_shards") or 0)
    level: Status = "ok" if status == "green" else "warn" if status == "yellow" else "fail"
    out.append(
        Check(
            "health",
            level,
            f"{status}, {health.get('number_of_nodes')} node(s), {unassigned} unassigned shard(s)",
            "replicas on a single node stay unassigned: OSRAG_REPLICAS=0, or add nodes",
        )
    )
    out.append(_disk(cluster))
    if unassigned:
        out.append(_allocation(cluster))
    else:
        out.append(Check("allocation", "ok", "every shard assigned"))
    return out


def _disk(cluster: Cluster) -> Check:
    try:
        got = cluster.call(
            "cluster settings",
            cluster.client.cluster.get_settings,
            include_defaults=True,
            filter_path="**.disk.*",
        )
        rows = cluster.call("cat allocation", cluster.client.cat.allocation, format="json")
    except OsragError as exc:
        return Check("disk", "warn", f"cannot read disk use: {exc}")
    disk: dict[str, Any] = {}
    for part in ("defaults", "persistent", "transient"):  # later ones override
        flat = _flatten(got.get(part) or {})
        disk.update({k.rsplit("disk.", 1)[-1]: v for k, v in flat.items() if "disk." in k})
    if str(disk.get("threshold_enabled", "true")).lower() == "false":
        return Check("disk", "ok", "watermarks disabled (cluster.routing.allocation.disk.threshold_enabled)")
    marks = {k: _pct(disk.get(f"watermark.{k}")) for k in ("low", "high", "flood_stage")}
    used = {
        str(r.get("node")): float(r["disk.percent"]) for r in rows if r.get("disk.percent") not in (None, "")
    }
    if not used:
        return Check("disk", "ok", "no data node reports disk use")
    worst_node, worst = max(used.items(), key=lambda kv: kv[1])
    text = f"fullest node {worst_node} at {worst:g}% (watermarks low {marks['low']}, high {marks['high']}, flood {marks['flood_stage']})"
    hint = "free disk or add nodes: at the flood stage indices turn read-only and ingest fails"
    for key, level in (("flood_stage", "fail"), ("high", "warn"), ("low", "warn")):
        mark = marks[key]
        if mark is not None and worst >= mark:
            return Check("disk", level, f"{text}: past the {key.replace('_', ' ')} watermark", hint)  # type: ignore[arg-type]
    return Check("disk", "ok", text)


def _pct(value: Any) -> float | None:
    m = _PCT.match(str(value or ""))
    return float(m.group(1)) if m else None  # absolute sizes ("10gb") are not compared here


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _allocation(cluster: Cluster) -> Check:
    try:
        got = cluster.call(
            "allocation explain", cluster.client.cluster.allocation_explain, body={}, include_disk_info=True
        )
        reason = (got.get("unassigned_info") or {}).get("reason", "?")
        why = got.get("allocate_explanation") or got.get("explanation") or ""
        shard = f"{got.get('index')}[{got.get('shard')}] {'primary' if got.get('primary') else 'replica'}"
        return Check(
            "allocation",
            "warn",
            f"{shard} unassigned ({reason}): {why}"[:400],
            "see GET _cluster/allocation/explain",
        )
    except OsragError as exc:
        return Check("allocation", "warn", f"unassigned shards; cannot explain: {exc}")


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0


def render(checks: list[Check], echo: Callable[[str], None]) -> None:
    for c in checks:
        echo(c.line())


__all__ = ["Check", "diagnose", "exit_code", "render"]
