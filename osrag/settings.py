"""Settings from ``OSRAG_*`` environment variables and an optional ``.env`` file.

Model names default to production multilingual models; the offline models that
ship inside packages are named with the ``navec:`` / ``minilm:`` schemes (see
``osrag.embedding``). The password is a ``SecretStr`` so it never lands in a
log line or a ``repr``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: Production defaults. multilingual-e5-base: strong Russian retrieval quality
#: at 768 dimensions and a CPU-friendly size; bge-reranker-v2-m3: a multilingual
#: cross-encoder trained on many languages, Russian included.
PRODUCTION_EMBEDDING_MODEL = "intfloat/multilingual-e5-base"
PRODUCTION_RERANKER_MODEL = "BAAI/bge-reranker-v2-m3"

#: The offline model the demo, tests and eval use on machines with no model hub.
LOCAL_EMBEDDING_MODEL = "navec:news-300d"


def default_dev_home() -> Path:
    """Where the local node lives.

    OpenSearch refuses to run as root, so as root the node runs as an
    unprivileged user that cannot enter ``/root``; a system cache dir is used then.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/cache/osrag")
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("osrag"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="OSRAG_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # --- cluster -----------------------------------------------------------------
    url: str = "http://127.0.0.1:9200"
    user: str | None = None
    password: SecretStr | None = None
    verify_certs: bool | None = Field(default=None, description="TLS verification; None means on for https.")
    ca_certs: Path | None = None
    timeout_s: float = 30.0
    max_retries: int = 3

    # --- index -------------------------------------------------------------------
    alias: str = "osrag-chunks"
    shards: int = 1
    replicas: int = 0
    knn_engine: str = "lucene"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 128
    # Per-query HNSW breadth (lucene reads it from the query's method_parameters). Measured on the
    # 100K-chunk bench index: score-recall@10 vs exact 0.24 at 100, 0.28 at 200, 0.32 at 400, with
    # p50 latency flat (about 3 ms); that synthetic corpus is hundreds of near-identical copies per
    # chunk, the worst case for HNSW, and the misses were other copies of the same chunk.
    hnsw_ef_search: int = 400
    rrf_rank_constant: int = 60
    # (BM25 head, kNN head). Chosen on golden/ with the offline navec model, whose dense head is
    # weak: equal weights lost hit@5 0.778 -> 0.667 against stemmed BM25; 0.9/0.1 keeps most of
    # BM25's precision and has the best recall@20 (0.845) of all fusions tried. Re-measure with
    # `osrag eval` when a trained encoder is used.
    rrf_weights: tuple[float, float] = (0.9, 0.1)
    fusion: str = "rrf"  # "rrf" | "minmax"
    stemmer: str = "russian"  # Snowball "russian" or "light_russian"

    # --- models ------------------------------------------------------------------
    # None: use the model the index is pinned to (from its _meta); a new index
    # then gets the production default. Set it to choose the model of a new index.
    embedding_model: str | None = None
    embedding_query_prefix: str | None = None  # None: chosen by model (e5 → "query: ")
    embedding_passage_prefix: str | None = None
    embedding_batch_size: int = 32
    device: str = "cpu"
    reranker_model: str = PRODUCTION_RERANKER_MODEL
    rerank: bool = True
    rerank_batch_size: int = 16

    # --- chunking and query --------------------------------------------------------
    chunk_max_tokens: int = 350
    chunk_min_tokens: int = 40
    chunk_overlap: float = 0.12
    budget_tokens: int = 1500
    max_file_mb: float = 20.0
    bulk_chunk_size: int = 200
    ingest_batch_docs: int = 16
    candidate_depth: int = 40
    dedup_cosine: float = 0.95
    dedup_overlap: float = 0.8
    # Relevance gate and evidence order (used when no reranker scores the candidates);
    # values from the eval on golden/ with navec:news-300d — cosine thresholds are per model.
    gate_min_coverage: float = 0.5
    gate_min_cosine: float = 0.65
    gate_relative_coverage: float = 0.6
    gate_relative_cosine: float = 0.95
    evidence_order: bool = True

    # --- local development node ---------------------------------------------------
    dev_home: Path = Field(default_factory=default_dev_home)
    dev_opensearch_version: str = "3.6.0"
    dev_java_home: Path | None = None
    dev_port: int = 9200
    dev_heap: str = "1g"
    cache_dir: Path | None = None  # built models; defaults under dev_home

    @field_validator("url")
    @classmethod
    def _url_has_scheme(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"OSRAG_URL must start with http:// or https://, got {v!r}")
        return v.rstrip("/")

    @property
    def tls_verify(self) -> bool:
        if self.verify_certs is not None:
            return self.verify_certs
        return self.url.startswith("https://")

    @property
    def effective_embedding_model(self) -> str:
        return self.embedding_model or PRODUCTION_EMBEDDING_MODEL

    @property
    def models_dir(self) -> Path:
        return (self.cache_dir or self.dev_home) / "models"

    def redacted(self) -> dict[str, object]:
        """Settings as a dict that is safe to print."""
        data = self.model_dump()
        if data.get("password") is not None:
            data["password"] = "***"
        return data
