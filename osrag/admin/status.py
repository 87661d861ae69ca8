"""Status: everything an admin asks first about one alias, as data (the CLI prints it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from osrag import templates
from osrag.admin.installer import Admin
from osrag.admin.locking import lock_state, read_lock
from osrag.admin.reindex import Reindexer
from osrag.capabilities import fusion_in_use
from osrag.names import age_seconds
from osrag.settings import Settings
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


def status(settings: Settings) -> dict[str, Any]:
    """Everything an admin asks first, as one JSON-ready dict (the CLI prints it)."""
    return asdict(read_status(settings))


def read_status(settings: Settings) -> Status:
    admin = Admin(settings)
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
        "fusion": fusion_in_use(settings.fusion, settings.effective_fusion_weights, caps),
    }
    st.layout = {"settings": {"shards": settings.shards, "replicas": settings.replicas}, "index": None}
    index = admin.current_index()
    st.drift = [str(d) for d in admin.check()]
    installed = admin.installed("index template", admin.template_name)
    st.template_version = {
        "files": templates.TEMPLATE_VERSION,
        "cluster": installed.get("version") if installed else None,
    }
    if index:
        meta = admin.meta(index)
        st.documents, st.chunks = Reindexer(settings, admin).counts(index)
        lock = read_lock(admin.cluster, settings.alias)
        st.index = index
        st.layout["index"] = admin.layout(index)
        st.embedding_model = meta.embedding_model
        st.dimension = meta.dimension
        st.last_ingest_at = meta.last_ingest_at
        st.last_ingest_age_s = age_seconds(st.last_ingest_at)
        st.previous_index = meta.previous_index
        st.reindex_lock = {**lock.as_dict(), "state": lock_state(lock)} if lock else None
        st.pipelines = {v: admin.pipeline_name(v) for v in PIPELINES}
        st.fusion = settings.fusion
    return st
