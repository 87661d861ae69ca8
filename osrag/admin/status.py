"""Status: everything an admin asks first about one alias, as data (the CLI prints it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from osrag import templates
from osrag.admin.reindex import Reindexer
from osrag.capabilities import fusion_in_use
from osrag.names import age_seconds
from osrag.records import IndexMeta
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import lock_state, read_lock
from osrag.vocabulary import PIPELINES


@dataclass
class Status:
    """The same keys whether or not the alias has an index (None where there is nothing to report)."""

    cluster: dict[str, Any]
    alias: str
    index: str | None = None
    embedding_model: str | None = None
    dimension: int | None = None
    documents: int | None = None
    chunks: int | None = None
    last_ingest_at: str | None = None
    last_ingest_age_s: float | None = None
    previous_index: str | None = None
    reindex_lock: dict[str, Any] | None = None
    pipelines: dict[str, str] | None = None
    fusion: str | None = None
    # shards/replicas: the index's own (None without an index) and the settings' (OSRAG_SHARDS/REPLICAS)
    layout: dict[str, Any] = field(default_factory=dict)
    # What the server supports and what osrag adapted to it (osrag.capabilities)
    capabilities: dict[str, Any] = field(default_factory=dict)
    drift: list[str] = field(default_factory=list)
    template_version: dict[str, Any] = field(default_factory=dict)
    #: Which models run (``osrag.model_defaults``): "embedding" (the index's, or what a new index
    #: would get), "embedding_source" (how it was chosen) and "reranker" (None: no cross-encoder),
    #: "reranker_source" (one line: configured, default or fallback and why). Local facts only.
    models: dict[str, Any] = field(default_factory=dict)
    # Where the index's embedding model runs: this process ("client"), or ml-commons (its id and state)
    model_location: dict[str, Any] | None = None


def status(settings: Settings) -> dict[str, Any]:
    """Everything an admin asks first, as one JSON-ready dict (the CLI prints it)."""
    return asdict(read_status(settings))


def read_status(settings: Settings) -> Status:
    admin = AliasStore(settings)
    cluster = admin.cluster
    info = cluster.info()
    health = cluster.health()
    st = Status(
        cluster={
            "url": settings.display_url,
            "version": info.get("version", {}).get("number"),
            "health": health.get("status"),
            "plugins": sorted({p["component"] for p in cluster.plugins()}),
        },
        alias=settings.alias,
    )
    caps = admin.capabilities()
    st.capabilities = {
        "in_use": caps.in_use,
        "adapted": list(caps.adapted),
        "fusion": fusion_in_use(settings.fusion, admin.fusion_weights(), caps),
    }
    st.layout = {"settings": {"shards": settings.shards, "replicas": settings.replicas}, "index": None}
    index = admin.current_index()
    st.drift = [str(d) for d in admin.check()]
    installed = admin.installed("index template", admin.template_name)
    st.template_version = {
        "files": templates.TEMPLATE_VERSION,
        "cluster": installed.get("version") if installed else None,
    }
    meta = admin.meta(index) if index else None
    if index and meta is not None:
        st.documents, st.chunks = Reindexer(settings, admin).counts(index)
        lock = read_lock(admin.cluster, settings.alias)
        st.index = index
        st.layout["index"] = admin.layout(index)
        st.embedding_model = meta.embedding_model
        st.model_location = model_location(admin, meta.embedding_model)
        st.dimension = meta.dimension
        st.last_ingest_at = meta.last_ingest_at
        st.last_ingest_age_s = age_seconds(st.last_ingest_at)
        st.previous_index = meta.previous_index
        st.reindex_lock = {**lock.as_dict(), "state": lock_state(lock)} if lock else None
        st.pipelines = {v: admin.pipeline_name(v) for v in PIPELINES}
        st.fusion = settings.fusion
    st.models = models_in_use(settings, meta)
    return st


def model_location(admin: AliasStore, model: str | None) -> dict[str, Any] | None:
    """``{"where": "client"}``, or for an ml-commons model where it runs, its id and whether it is
    deployed; a model the cluster does not have is reported with the one-line reason."""
    from osrag.mlcommons.blueprints import is_cluster_model, parse_ref
    from osrag.mlcommons.client import MLCommons
    from osrag.mlcommons.errors import MLCommonsError

    if model is None:
        return None
    if not is_cluster_model(model):
        return {"where": "client"}
    try:
        info = MLCommons(admin.cluster.client).find(parse_ref(model))
    except (MLCommonsError, ValueError) as exc:
        return {
            "where": "cluster",
            "model_id": None,
            "state": "missing",
            "deployed": False,
            "error": str(exc),
        }
    return {
        "where": info.where,
        "model_id": info.model_id,
        "version": info.version,
        "state": info.state,
        "deployed": info.deployed,
    }


def models_in_use(settings: Settings, meta: IndexMeta | None) -> dict[str, Any]:
    """The embedding model (the index's when there is one) and the reranker, each with its reason."""
    rerank = settings.reranker_choice
    if meta is not None and meta.embedding_model:
        source = meta.embedding_model_source or "the index's pinned model"
        embedding: dict[str, str | None] = {"embedding": meta.embedding_model, "embedding_source": source}
    else:
        choice = settings.embedding_choice
        embedding = {"embedding": choice.name, "embedding_source": choice.line("a new index's model")}
    return {**embedding, "reranker": rerank.name, "reranker_source": rerank.line("reranker")}
